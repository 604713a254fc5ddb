"""A signature covers what the gate checked and nothing else: an unknown name in ``--variants``/``--metrics`` is a
usage error (exit 64) before anything is judged or signed; the statement's subjects are the baseline and the checked
variants; its predicate states the scope; ``verify`` prints it and ``--variant NAME`` requires NAME was checked and
passed. On a synthetic finished study (bf16 baseline, fp8 within noise, bad a regression)."""

import base64
import json
import shutil

import pytest

from quantgate.gate.attest import ATTESTATION, keygen
from tests.support.cli import run_cli as _cli
from tests.support.study_folder import finished_study


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("scope")
    folder = finished_study(root / "study")
    key, pub = keygen(root / "key")
    return folder, key, pub


def _statement(att):
    return json.loads(base64.b64decode(json.loads(att.read_text())["payload"]))


@pytest.mark.parametrize("flag,value,name", [
    ("--variants", "fp8,bd", "bd"),          # a typo beside a real name: was dropped, the gate passed on fp8 alone
    ("--variants", "bf16", "bf16"),          # the baseline: no verdict of its own
    ("--variants", "fp8,", ""),              # an empty name
    ("--metrics", "ned,nde", "nde"),
])
def test_an_unknown_name_is_a_usage_error_and_nothing_is_signed(study, tmp_path, flag, value, name):
    folder, key, _ = study
    att = tmp_path / "att.json"
    code, out, err = _cli("gate", folder, flag, value, "--sign", key, "--attestation", att)
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 64 and len(lines) == 1 and f"{flag}: {name!r}" in lines[0], (code, out, err)
    assert out == "" and not att.exists()


def test_the_signature_covers_only_the_checked_variant(study, tmp_path):
    folder, key, pub = study
    att = tmp_path / "att.json"
    code, out, err = _cli("gate", folder, "--variants", "fp8", "--sign", key, "--attestation", att)
    assert code == 0 and out.splitlines()[-1].startswith("attestation:"), (out, err)
    st = _statement(att)
    assert [s["name"] for s in st["subject"]] == ["bf16", "fp8"]  # the regressing "bad" is not a subject
    pred = st["predicate"]
    assert [m["name"] for m in pred["models"]] == ["bf16", "fp8"]
    assert {v["variant"] for v in pred["verdicts"]} == {"fp8"}
    assert pred["scope"]["variants"] == {"fp8": {"exit_code": 0, "outcome": "PASS", "verdicts": 3}}
    assert pred["scope"]["baseline"] == "bf16" and pred["scope"]["metrics"] == ["ned", "cer", "bow_f1"]

    code, out, _ = _cli("verify", att, "--key", pub, "--study", folder)
    assert code == 0 and "scope: checked fp8 PASS against baseline bf16 on ned, cer, bow_f1" in out, out
    code, out, _ = _cli("verify", att, "--key", pub, "--study", folder, "--variant", "fp8")
    assert code == 0 and "variant fp8: checked, PASS" in out, out
    code, out, err = _cli("verify", att, "--key", pub, "--study", folder, "--variant", "fp8", "--variant", "bad")
    assert code == 3 and "variant 'bad' was not checked by the signed gate" in err and len(err.splitlines()) == 1


def test_verify_variant_gives_that_variants_own_outcome(study, tmp_path):
    folder, key, pub = study
    att = tmp_path / "att.json"
    code, out, _ = _cli("gate", folder, "--sign", key, "--attestation", att)
    assert code == 1, out  # bad regresses
    assert [s["name"] for s in _statement(att)["subject"]] == ["bf16", "fp8", "bad"]
    assert _cli("verify", att, "--key", pub, "--variant", "fp8")[0] == 0
    code, out, _ = _cli("verify", att, "--key", pub, "--variant", "bad")
    assert code == 1 and "variant bad: checked, FAIL: regression" in out, out
    assert _cli("verify", att, "--key", pub, "--variant", "fp8", "--variant", "bad")[0] == 1
    assert _cli("verify", att, "--key", pub)[0] == 1


def test_a_scope_that_disagrees_with_the_subjects_is_refused(study, tmp_path):
    """verify's own consistency check: a statement (signed with the key) whose scope and subjects disagree is
    refused, so a scope line can never be printed over subjects it does not name."""
    from quantgate.errors import VerificationError
    from quantgate.gate import attest

    folder, key, pub = study
    att = tmp_path / "att.json"
    _cli("gate", folder, "--variants", "fp8", "--sign", key, "--attestation", att)
    env = json.loads(att.read_text())
    st = _statement(att)
    st["predicate"]["scope"]["variants"]["bad"] = {"exit_code": 0, "outcome": "PASS", "verdicts": 3}
    body = json.dumps(st, sort_keys=True).encode()
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import CryptoSigner

    forged = Envelope(payload=body, payload_type=env["payloadType"], signatures={})
    forged.sign(CryptoSigner(attest.load_private_key(key)))
    att.write_text(json.dumps(forged.to_dict()))
    with pytest.raises(VerificationError, match="not the baseline and the variants its scope says"):
        attest.verify(att, pub)


def test_an_old_attestation_without_scope_cannot_answer_variant(study, tmp_path):
    folder, key, pub = study
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    att = copy / ATTESTATION
    _cli("gate", copy, "--sign", key)
    st = _statement(att)
    del st["predicate"]["scope"]
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import CryptoSigner

    from quantgate.gate import attest

    env = Envelope(payload=json.dumps(st, sort_keys=True).encode(), payload_type=attest.PAYLOAD_TYPE, signatures={})
    env.sign(CryptoSigner(attest.load_private_key(key)))
    att.write_text(json.dumps(env.to_dict()))
    code, out, _ = _cli("verify", att, "--key", pub)
    assert code == 1 and "scope: not stated" in out
    code, _, err = _cli("verify", att, "--key", pub, "--variant", "fp8")
    assert code == 3 and "states no scope" in err
