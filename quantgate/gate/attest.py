"""A signed verdict: ``quantgate gate --sign KEY`` writes an in-toto Statement v1 in a DSSE
envelope signed with an Ed25519 key; ``quantgate verify`` checks it offline. docs/security.md says what that
signature does and does not promise.

The statement is built and validated with the ``in-toto-attestation`` package, the envelope signed and verified
by ``securesystemslib.dsse`` (DSSE's pre-authentication encoding) through ``cryptography``. Each subject is one
variant folder, hashed as OpenSSF model-signing v1.0 hashes a model (its "files" serialization): every file
under the folder but git's, sha256 each, sorted by path; the subject's digest is the sha256 of the files' raw
digests in that order, its name the folder's name. A model-signing signature of the same folder names the same
digest. The predicate holds the gate's outcome and verdicts, the per-file digests (model-signing's resource
descriptors) and the digest of the study's summary.json, which binds every score file and page set by hash."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from pydantic import ValidationError

from quantgate.errors import QuantgateError, VerificationError
from quantgate.io.fileio import atomic_write_bytes, safe_join, sha256_file
from quantgate.schema.attestation import GIT_PATHS, Resource, Scope, VariantOutcome, VerdictPredicate

if TYPE_CHECKING:
    from in_toto_attestation.v1.statement import Statement

PREDICATE_TYPE = "https://quantgate/verdict/v1"  # a type name in model-signing's style (https://model_signing/...)
PAYLOAD_TYPE = "application/vnd.in-toto+json"
ATTESTATION = "attestation.intoto.json"
PASSWORD_ENV = "QUANTGATE_SIGNING_KEY_PASSWORD"  # for an encrypted private key
SERIALIZATION = {"method": "files", "hash_type": "sha256", "allow_symlinks": False, "ignore_paths": sorted(GIT_PATHS)}
OUTCOME = {0: "PASS", 1: "FAIL: regression", 2: "UNDECIDED"}
MAX_ATTESTATION_BYTES = 64 << 20


class AttestationError(VerificationError):
    """A key, attestation or study folder that does not check out (exit 3)."""


# --- keys ------------------------------------------------------------------------------------------------


MAX_KEY_BYTES = 1 << 20  # a PEM key is a few hundred bytes


def _pem(path: Path, what: str) -> tuple[bytes, int]:
    """The key file's bytes and mode: a regular file (a FIFO is refused, not waited on) of at most a MiB."""
    from quantgate.schema.load import open_regular

    try:
        fd = open_regular(path, what)
    except QuantgateError as e:
        raise AttestationError(f"{path}: cannot read the {what} ({str(e).removeprefix(f'{path}: ')})") from None
    with os.fdopen(fd, "rb") as fh:
        mode = os.fstat(fh.fileno()).st_mode
        data = fh.read(MAX_KEY_BYTES + 1)
    if len(data) > MAX_KEY_BYTES or b"-----BEGIN" not in data[:4096]:
        raise AttestationError(f"{path}: not a PEM {what} (make one with `quantgate keygen -o KEY`)")
    return data, mode


def load_private_key(path: Path, allow_readable: bool = False):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    data, mode = _pem(path, "Ed25519 private key")
    password = os.environ.get(PASSWORD_ENV)
    try:
        key = load_pem_private_key(data, password.encode() if password else None)
    except TypeError:
        raise AttestationError(f"{path}: the private key is encrypted; put its password in ${PASSWORD_ENV}") from None
    except ValueError:
        raise AttestationError(f"{path}: not a PEM private key (a public key, a certificate, a wrong password, or "
                               "damaged); sign with the private key `quantgate keygen` wrote") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise AttestationError(f"{path}: a {type(key).__name__.lstrip('_')}, not an Ed25519 private key")
    # as ssh refuses an unprotected key: a secret anyone on the machine can read signs for them too
    if mode & 0o077 and not allow_readable:
        raise AttestationError(f"{path}: the private key is readable by others (mode {stat.S_IMODE(mode):04o}); "
                               f"`chmod 600 {path}` (or pass --allow-readable-key)")
    return key


def load_public_key(path: Path):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    data, _ = _pem(path, "Ed25519 public key")
    if b"PRIVATE KEY" in data:
        raise AttestationError(f"{path}: a private key; verify with the public key (KEY.pub), never share the private one")
    try:
        key = load_pem_public_key(data)
    except ValueError:
        raise AttestationError(f"{path}: not a PEM public key (damaged, or another kind of file)") from None
    if not isinstance(key, Ed25519PublicKey):
        raise AttestationError(f"{path}: a {type(key).__name__.lstrip('_')}, not an Ed25519 public key")
    return key


def keygen(path: Path) -> tuple[Path, Path]:
    """A new Ed25519 key pair: PATH (private, PKCS#8 PEM, mode 0600, unencrypted) and PATH.pub. Refuses to
    replace either file."""
    from cryptography.hazmat.primitives import serialization as ser
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    path = Path(path)
    pub = path.with_name(path.name + ".pub")
    for p in (path, pub):
        if p.exists() or p.is_symlink():
            raise AttestationError(f"{p} exists; choose another -o (a key is never overwritten)")
    key = Ed25519PrivateKey.generate()
    priv = key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8, ser.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # never readable by others, not even briefly
    with os.fdopen(fd, "wb") as fh:
        fh.write(priv)
    atomic_write_bytes(pub, key.public_key().public_bytes(ser.Encoding.PEM, ser.PublicFormat.SubjectPublicKeyInfo))
    os.chmod(pub, 0o644)  # the public half is for verifiers
    return path, pub


def key_id(public_key) -> str:
    from securesystemslib.signer import SSlibKey

    return SSlibKey.from_crypto(public_key).keyid


# --- subjects: a variant folder hashed as model-signing hashes a model ------------------------------------


def folder_resources(folder: Path) -> list[Resource]:
    """model-signing's resource descriptors of ``folder``: every file but git's, sorted as model-signing sorts
    them (by path components), each a name, an algorithm and a digest. A symbolic link is refused (as
    model-signing does unless told otherwise)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise AttestationError(f"{folder}: the variant folder is missing")
    found = []
    for p in folder.rglob("*"):
        rel = PurePosixPath(p.relative_to(folder).as_posix())
        if rel.parts[0] in GIT_PATHS:
            continue
        if p.is_symlink():
            raise AttestationError(f"{p}: a symbolic link in a variant folder; signed folders hold plain files")
        if p.is_file():
            found.append(rel)
    return [Resource(name=str(r), algorithm="sha256", digest=sha256_file(folder / r)) for r in sorted(found)]


def root_digest(resources: list[Resource]) -> str:
    return hashlib.sha256(b"".join(bytes.fromhex(r.digest) for r in resources)).hexdigest()


# --- signing -----------------------------------------------------------------------------------------------


def scope_of(rep, options: dict) -> Scope:
    """What the gate checked: the baseline, the candidates ``--variants`` named (all, without it), the metrics
    ``--metrics`` named (all, without it), whether lm-eval verdicts counted, and each checked variant's own
    outcome under the gate's family rule. A signature covers exactly this, nothing the gate left out."""
    from quantgate.gate.check import outcome

    names = options.get("variants") or [v.name for v in rep.variants if v.name != rep.baseline]
    metrics = options.get("metrics") or list(dict.fromkeys(r.metric for r in rep.verdicts))
    lmeval = bool(options.get("lmeval"))
    per = {}
    for name in names:
        rows = [r for r in rep.verdicts if r.variant == name and r.metric in metrics]
        rows += [r for r in (rep.lm_eval.verdicts if rep.lm_eval and lmeval else []) if r.variant == name]
        code = int(outcome(rows))
        per[name] = VariantOutcome(exit_code=code, outcome=OUTCOME[code], verdicts=len(rows))
    return Scope(baseline=rep.baseline, variants=per, metrics=metrics, lmeval=lmeval)


def statement(out: Path, code: int, lines: list[str], options: dict) -> Statement:
    """The in-toto Statement for a study folder the gate just judged ``code`` (0-2): its subjects the baseline
    and the variants the gate checked, its verdicts those the gate checked."""
    from in_toto_attestation.v1.resource_descriptor import ResourceDescriptor
    from in_toto_attestation.v1.statement import Statement

    from quantgate import __version__
    from quantgate.schema.summary import SUMMARY, load_summary

    rep = load_summary(out)
    scope = scope_of(rep, options)
    models, subjects = [], []
    for v in rep.variants:
        if v.name != rep.baseline and v.name not in scope.variants:
            continue  # not checked: not signed (a signed PASS must never name a variant the gate left out)
        vdir = safe_join(out, v.path, what=f"summary.json: variants.{v.name}.path")
        res = folder_resources(vdir)
        digests = {r.name: r.digest for r in res}
        changed = [f for f, sha in v.files.items() if digests.get(f) != sha]
        if changed:  # the gate checked these hashes a moment ago: something is writing to the folder
            raise AttestationError(f"{vdir / changed[0]} changed while the gate ran; nothing signed")
        models.append({"name": v.name, "path": v.path, "serialization": SERIALIZATION,
                       "resources": [r.model_dump() for r in res]})
        subjects.append(ResourceDescriptor(name=vdir.name, digest={"sha256": root_digest(res)}).pb)
    checked = scope.variants
    verdicts = [{k: r[k] for k in ("variant", "metric", "verdict", "reason", "delta", "ci_low", "ci_high", "margin",
                                   "n", "p_regression_holm")} | ({"tag": r["tag"]} if r.get("tag") else {})
                for r in (x.model_dump() for x in rep.verdicts)
                if r["variant"] in checked and r["metric"] in scope.metrics]
    lm = [{k: r[k] for k in ("variant", "task", "metric", "verdict", "reason", "delta", "ci_low", "ci_high", "margin",
                             "n")} for r in (x.model_dump() for x in (rep.lm_eval.verdicts if rep.lm_eval else []))
          if r["variant"] in checked and scope.lmeval]
    predicate = {
        "study": {"name": rep.study.get("name"), "summary": SUMMARY, "digest": {"sha256": sha256_file(out / SUMMARY)}},
        "gate": {"exit_code": code, "outcome": OUTCOME[code], "lines": lines, **options},
        "scope": scope.model_dump(), "baseline": rep.baseline, "verdicts": verdicts, "lm_eval_verdicts": lm, "models": models,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "quantgate": __version__,
    }
    st = Statement(subjects=subjects, predicate_type=PREDICATE_TYPE, predicate=predicate)
    st.validate()
    return st


def sign(out: Path, key, code: int, lines: list[str], options: dict, dest: Path) -> Path:
    """Write the signed attestation of ``gate``'s outcome on ``out`` to ``dest`` (atomically)."""
    from google.protobuf import json_format
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import CryptoSigner

    st = json_format.MessageToDict(statement(Path(out), code, lines, options).pb)
    body = json.dumps(st, sort_keys=True).encode()
    env = Envelope(payload=body, payload_type=PAYLOAD_TYPE, signatures={})
    env.sign(CryptoSigner(key))
    atomic_write_bytes(dest, (json.dumps(env.to_dict(), indent=2) + "\n").encode())
    return Path(dest)


# --- verification ------------------------------------------------------------------------------------------


def read_statement(path: Path, public_key) -> VerdictPredicate:
    """The predicate of a DSSE envelope whose signature verifies with ``public_key`` and whose subjects are its
    models' root digests, or AttestationError."""
    from google.protobuf import json_format
    from in_toto_attestation.v1.statement import Statement
    from in_toto_attestation.v1.statement_pb2 import Statement as StatementPB
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import SSlibKey

    from quantgate.schema.load import load_json, parse_json

    path = Path(path)
    try:
        env = Envelope.from_dict(load_json(path, "attestation", MAX_ATTESTATION_BYTES))
    except QuantgateError as e:
        raise AttestationError(f"{' '.join(str(e).split())}: not a DSSE envelope") from None
    except (ValueError, KeyError, TypeError, AttributeError):
        raise AttestationError(f"{path}: not a DSSE envelope (payload, payloadType, signatures)") from None
    if env.payload_type != PAYLOAD_TYPE:
        raise AttestationError(f"{path}: payloadType {env.payload_type!r}, not an in-toto statement ({PAYLOAD_TYPE})")
    try:
        env.verify([SSlibKey.from_crypto(public_key)], 1)
    except Exception:  # noqa: BLE001 — securesystemslib's VerificationError and its malformed-signature errors
        raise AttestationError(f"{path}: the signature does not verify with this key (signed with another key, or the "
                               "attestation was edited after signing)") from None
    try:  # signed, so made by quantgate with the key; checked all the same
        parse_json(env.payload, f"{path}: payload")  # the payload under the loader's limits before protobuf reads it
        pb = json_format.Parse(env.payload, StatementPB(), ignore_unknown_fields=True)
        Statement.copy_from_pb(pb).validate()
        if pb.predicate_type != PREDICATE_TYPE:
            raise ValueError(f"predicateType {pb.predicate_type!r}, not {PREDICATE_TYPE}")
        st = json_format.MessageToDict(pb)
        pred = VerdictPredicate.model_validate(st["predicate"])
    except (ValueError, KeyError, json_format.ParseError, ValidationError, QuantgateError) as e:
        raise AttestationError(f"{path}: not a quantgate verdict statement ({' '.join(str(e).split())[:200]})") from None
    subjects = {s["name"]: s["digest"].get("sha256") for s in st["subject"]}
    if pred.scope is not None and sorted(m.name for m in pred.models) != sorted(
            [pred.scope.baseline, *pred.scope.variants]):
        raise AttestationError(f"{path}: its models {[m.name for m in pred.models]} are not the baseline and the "
                               f"variants its scope says were checked {list(pred.scope.variants)}")
    for m in pred.models:  # each subject digest is its resources' root, as model-signing checks a manifest
        name = PurePosixPath(m.path).name
        if subjects.get(name) != root_digest(m.resources):
            raise AttestationError(f"{path}: subject {name!r} does not match its resources in the predicate")
    return pred


def verify(path: Path, public_key_path: Path, study: Path | None = None,
           require: list[str] | None = None) -> tuple[int, list[str]]:
    """(the attested gate exit code, lines to print) once the attestation checks out; AttestationError else.
    With ``study``: its summary.json is the one signed, each variant folder holds exactly the signed files,
    and every file summary.json binds by hash still has that hash. With ``require`` (variant names): each must be
    in the signed scope (else AttestationError), and the code is the worst of their own signed outcomes, so a
    pipeline deploying one variant learns whether that variant passed, not whether some subset did."""
    from quantgate.gate.check import rehash_study
    from quantgate.schema.summary import SUMMARY

    pub = load_public_key(public_key_path)
    pred = read_statement(path, pub)
    code = int(pred.gate.get("exit_code", -1))
    if code not in OUTCOME:
        raise AttestationError(f"{path}: the statement's gate exit code {code} is not a verdict (0, 1 or 2)")
    lines = [f"signature: good (Ed25519 key {key_id(pub)[:16]})",
             f"statement: study {pred.study.get('name')!r}, gate {OUTCOME[code]} (exit {code}), signed {pred.created}",
             _scope_line(pred)]
    if require:
        code = _required(path, pred, require, lines)
    if study is None:
        lines.append("not checked against a study folder: pass --study DIR to check its summary.json and weights")
        return code, lines
    study = Path(study)
    want = (pred.study.get("digest") or {}).get("sha256")
    summary = study / SUMMARY
    if not summary.is_file():
        raise AttestationError(f"{summary} is missing: {study} is not a finished study folder")
    if sha256_file(summary) != want:
        raise AttestationError(f"{summary}: not the summary.json this attestation signed (an attestation for another "
                               "study, or the summary changed after signing)")
    for m in pred.models:
        vdir = safe_join(study, m.path, what=f"{path}: models.{m.name}.path")
        _same_files(vdir, {r.name: r.digest for r in m.resources}, m.name)
    try:  # score files, pages.jsonl, lm-eval files: as the signed summary.json names them
        rehash_study(study)
    except QuantgateError as e:
        raise AttestationError(" ".join(str(e).split())) from None
    lines.append(f"study: {summary} is the signed one; every variant folder holds exactly its signed files; every "
                 "file summary.json binds has its hash")
    return code, lines


def _scope_line(pred: VerdictPredicate) -> str:
    sc = pred.scope
    if sc is None:
        return ("scope: not stated (signed by an older quantgate); its subjects are "
                f"{', '.join(m.name for m in pred.models)} — re-sign with this quantgate to use --variant")
    per = ", ".join(f"{n} {v.outcome}" for n, v in sc.variants.items())
    return (f"scope: checked {per} against baseline {sc.baseline} on {', '.join(sc.metrics)}"
            + (" and lm-eval" if sc.lmeval else "") + "; no other variant is covered by this signature")


def _required(path: Path, pred: VerdictPredicate, require: list[str], lines: list[str]) -> int:
    """The worst signed outcome of the required variants; AttestationError if one was not checked."""
    if pred.scope is None:
        raise AttestationError(f"{path}: states no scope (signed by an older quantgate), so it cannot say whether "
                               f"{require[0]!r} was checked; gate and sign the study again")
    codes = []
    for name in require:
        got = pred.scope.variants.get(name)
        if got is None:
            raise AttestationError(f"{path}: variant {name!r} was not checked by the signed gate (it checked "
                                   f"{', '.join(pred.scope.variants) or 'none'}); this signature does not cover it")
        lines.append(f"variant {name}: checked, {got.outcome} (exit {got.exit_code}, {got.verdicts} verdict(s))")
        codes.append(got.exit_code)
    return 1 if 1 in codes else max(codes)  # as the gate: a confirmed regression outranks an undecided verdict


def _same_files(vdir: Path, signed: dict[str, str], name: str) -> None:
    have = {r.name: r.digest for r in folder_resources(vdir)}
    for f in sorted(set(signed) | set(have)):
        if f not in have:
            raise AttestationError(f"{vdir / f}: signed for variant {name} but missing")
        if f not in signed:
            raise AttestationError(f"{vdir / f}: not among the files signed for variant {name} (added after signing)")
        if have[f] != signed[f]:
            raise AttestationError(f"{vdir / f}: not the file signed for variant {name} (sha256 differs): the "
                                   "signature is over other weights")
