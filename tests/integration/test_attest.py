"""A signed verdict. ``gate --sign`` writes an in-toto statement in a DSSE envelope (Ed25519);
``verify`` checks the signature, and with --study that the folder holds the signed summary and the signed files.
Round trip, tampering, and bad input, on synthetic finished study folders (tests.support.study_folder)."""

import base64
import json
import shutil

import pytest

from quantgate.gate.attest import ATTESTATION, PREDICATE_TYPE, folder_resources, keygen, root_digest
from tests.support.cli import run_cli as _cli
from tests.support.study_folder import finished_study


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    """A finished study (bf16, fp8 within noise, bad a regression: the gate says 1), a key pair, and the
    attestation `gate --sign` wrote into the study folder."""
    root = tmp_path_factory.mktemp("attest")
    study = finished_study(root / "study")
    key, pub = keygen(root / "key")
    code, out, err = _cli("gate", study, "--sign", key)
    assert code == 1 and "FAIL: regression" in out and f"attestation: {study / ATTESTATION}" in out, (out, err)
    return study, key, pub


def _copy(signed, tmp_path):
    study, key, pub = signed
    copy = tmp_path / "copy"
    shutil.copytree(study, copy)
    return copy, copy / ATTESTATION, pub


def _refused(*args, needle: str):
    code, out, err = _cli(*args)
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 3 and len(lines) == 1 and needle in lines[0], (code, out, err)
    assert "Traceback" not in err
    return lines[0]


def _statement(att):
    return json.loads(base64.b64decode(json.loads(att.read_text())["payload"]))


def test_sign_then_verify_round_trip(signed, tmp_path):
    study, _, pub = signed
    att = study / ATTESTATION
    st = _statement(att)
    assert st["_type"] == "https://in-toto.io/Statement/v1" and st["predicateType"] == PREDICATE_TYPE
    assert [s["name"] for s in st["subject"]] == ["bf16", "fp8", "bad"]
    pred = st["predicate"]
    assert pred["gate"]["exit_code"] == 1 and {v["variant"] for v in pred["verdicts"]} == {"fp8", "bad"}
    code, out, _ = _cli("verify", att, "--key", pub, "--study", study)
    assert code == 1, out  # the signed outcome: FAIL
    assert "signature: good" in out and "is the signed one" in out
    # a moved folder still verifies: nothing signed names where it lives
    copy, catt, _ = _copy(signed, tmp_path)
    shutil.rmtree(copy / "report.html", ignore_errors=True)
    assert _cli("verify", catt, "--key", pub, "--study", copy)[0] == 1


def test_subjects_are_model_signing_digests(signed):
    """Each subject digest is what OpenSSF model-signing (the model_signing package) names for the folder."""
    hashing = pytest.importorskip("model_signing.hashing")
    from model_signing._signing.signing import Payload

    study, _, _ = signed
    st = _statement(study / ATTESTATION)
    for subject, model in zip(st["subject"], st["predicate"]["models"], strict=True):
        theirs = Payload(hashing.Config().hash(study / model["path"])).statement.pb
        assert subject["name"] == theirs.subject[0].name
        assert subject["digest"]["sha256"] == theirs.subject[0].digest["sha256"]
        assert [dict(r) for r in theirs.predicate["resources"]] == model["resources"]
        assert root_digest(folder_resources(study / model["path"])) == subject["digest"]["sha256"]


def test_other_weights_fail(signed, tmp_path):
    copy, att, pub = _copy(signed, tmp_path)
    w = copy / "variants" / "fp8" / "model.safetensors"
    w.write_bytes(w.read_bytes()[:-1] + b"\xff")
    _refused("verify", att, "--key", pub, "--study", copy, needle="the signature is over other weights")


def test_swapped_weights_with_hashes_rewritten_consistently_fail(signed, tmp_path):
    """The issue's attack: the regressing variant's weights copied over fp8, every hash rewritten to match (the
    unsigned gate cannot tell). The signed summary and subjects can."""
    from quantgate.io.fileio import sha256_file

    copy, att, pub = _copy(signed, tmp_path)
    fp8 = copy / "variants" / "fp8"
    shutil.copy(copy / "variants" / "bad" / "model.safetensors", fp8 / "model.safetensors")
    sha = sha256_file(fp8 / "model.safetensors")
    man = json.loads((fp8 / "quantgate.json").read_text())
    man["files"]["model.safetensors"]["sha256"] = sha
    (fp8 / "quantgate.json").write_text(json.dumps(man))
    summ = json.loads((copy / "summary.json").read_text())
    next(v for v in summ["variants"] if v["name"] == "fp8")["files"]["model.safetensors"] = sha
    (copy / "summary.json").write_text(json.dumps(summ))
    _refused("verify", att, "--key", pub, "--study", copy, needle="not the summary.json this attestation signed")
    # the summary restored, the weights still swapped: the subjects catch it
    shutil.copy(signed[0] / "summary.json", copy / "summary.json")
    _refused("verify", att, "--key", pub, "--study", copy, needle="variants/fp8/model.safetensors")


def test_a_file_added_to_a_variant_folder_fails(signed, tmp_path):
    copy, att, pub = _copy(signed, tmp_path)
    (copy / "variants" / "fp8" / "special_tokens_map.json").write_text("{}")
    _refused("verify", att, "--key", pub, "--study", copy, needle="added after signing")


def test_a_score_file_changed_after_signing_fails(signed, tmp_path):
    from quantgate.study.verdicts import score_file

    copy, att, pub = _copy(signed, tmp_path)
    score = copy / score_file("fp8", 1)
    before = score.read_text()
    score.write_text(before.replace('"ned": 0.', '"ned": 1.', 1))
    assert score.read_text() != before
    _refused("verify", att, "--key", pub, "--study", copy, needle=f"{score} changed since the verdicts")


def test_an_attestation_for_another_study_fails(signed, tmp_path):
    other = finished_study(tmp_path / "other", seed=1)
    _refused("verify", signed[0] / ATTESTATION, "--key", signed[2], "--study", other,
             needle="an attestation for another study")


def test_an_edited_envelope_fails(signed, tmp_path):
    copy, att, pub = _copy(signed, tmp_path)
    env = json.loads(att.read_text())
    st = _statement(att)
    st["predicate"]["gate"]["exit_code"] = 0  # FAIL rewritten as PASS
    st["predicate"]["gate"]["outcome"] = "PASS"
    edited = {**env, "payload": base64.b64encode(json.dumps(st).encode()).decode()}
    att.write_text(json.dumps(edited))
    _refused("verify", att, "--key", pub, needle="the signature does not verify")
    sig = bytearray(base64.b64decode(env["signatures"][0]["sig"]))
    sig[0] ^= 1
    env["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    att.write_text(json.dumps(env))
    _refused("verify", att, "--key", pub, needle="the signature does not verify")
    _, other_pub = keygen(tmp_path / "other")
    _refused("verify", signed[0] / ATTESTATION, "--key", other_pub, needle="the signature does not verify")
    att.write_text("not json")
    _refused("verify", att, "--key", pub, needle="not a DSSE envelope")


def test_bad_keys_are_one_error_and_nothing_is_written(signed, tmp_path):
    from cryptography.hazmat.primitives import serialization as ser
    from cryptography.hazmat.primitives.asymmetric import ec

    copy, att, pub = _copy(signed, tmp_path)
    att.unlink()
    text = tmp_path / "not-a-key"
    text.write_text("hello\n")
    ec_key = tmp_path / "ec.pem"
    ec_key.write_bytes(ec.generate_private_key(ec.SECP256R1()).private_bytes(
        ser.Encoding.PEM, ser.PrivateFormat.PKCS8, ser.NoEncryption()))
    for key, needle in [(text, "not a PEM"), (pub, "not a PEM private key"), (ec_key, "not an Ed25519 private key"),
                        (tmp_path / "missing", "cannot read")]:
        _refused("gate", copy, "--sign", key, needle=needle)
        assert not att.exists()
    _refused("verify", signed[0] / ATTESTATION, "--key", signed[1], needle="a private key")
    _refused("verify", signed[0] / ATTESTATION, "--key", text, needle="not a PEM")


def test_an_invalid_study_is_not_signed(signed, tmp_path):
    copy, att, _ = _copy(signed, tmp_path)
    att.unlink()
    (copy / "variants" / "fp8" / "model.safetensors").write_bytes(b"changed")
    code, out, _ = _cli("gate", copy, "--sign", signed[1])
    assert code == 3 and out.startswith("INVALID") and not att.exists()


def test_keygen_never_overwrites_and_keeps_the_private_key_private(tmp_path):
    code, out, _ = _cli("keygen", "-o", tmp_path / "k")
    assert code == 0 and (tmp_path / "k").stat().st_mode & 0o077 == 0
    before = (tmp_path / "k").read_bytes()
    _refused("keygen", "-o", tmp_path / "k", needle="exists")
    assert (tmp_path / "k").read_bytes() == before


def test_the_attestation_in_the_folder_does_not_make_the_next_gate_refuse_it(signed, tmp_path):
    """attestation.intoto.json lies in the study folder: the next gate (which refuses extra files in variant
    folders and undeclared variant folders) still judges the folder, a second --sign replaces it, verify holds."""
    copy, att, pub = _copy(signed, tmp_path)
    key = signed[1]
    code, out, err = _cli("gate", copy, "--variants", "fp8")
    assert code == 0 and out.splitlines()[-1] == "PASS", (out, err)
    code, out, err = _cli("gate", copy, "--variants", "fp8", "--sign", key)
    assert code == 0 and f"attestation: {att}" in out, (out, err)
    assert _statement(att)["predicate"]["gate"]["exit_code"] == 0
    code, out, err = _cli("gate", copy, "--variants", "fp8")
    assert code == 0 and "INVALID" not in out, (out, err)
    code, out, _ = _cli("verify", att, "--key", pub, "--study", copy)
    assert code == 0 and "is the signed one" in out, out
