"""The gate and `verify` from the outside, field by field: every leaf of a finished study's summary.json, each
variant's run.json and the signed attestation edited one at a time, each edit judged under a time limit.

A finished stub study (bf16, fp8 answering every page right, bad answering half of them badly; the stub server
and the stand-in quantize of ``tests.support.stub_study``) is gated and signed once. Then, for each leaf (a
number +1 or x1.5, a string with a character appended, a boolean flipped, a null given a value, an empty list or
mapping given an element): the file rewritten, ``gate`` (or ``verify`` for the attestation) run in this process
under an alarm, the file restored. An edit is

- detected: exit 3 (or verify's one error), the field named or not;
- undetected: any other outcome — the edit passed the gate (the outcome unchanged, or changed);
- for a field in ``ALLOWLIST`` (an edit that changes no meaning, docs/reliability.md says why for each): fine
  when not refused ("allowed"), "malformed" when summary.json's schema refuses the edited value naming that
  field (a null given a number, an enum word given a letter: the file is then malformed, and saying so is no
  false alarm), a false alarm when refused for anything else;
- a traceback (any exception but quantgate's own) or a hang (the alarm) are counted apart.

    PYTHONPATH=. nice -n 10 python benchmarks/tamper_fields.py --out benchmarks/results/tamper_fields.json.gz

prints the counts per file and the undetected fields, and writes every case to the JSON.
"""

from __future__ import annotations

import argparse
import base64
import json
import shutil
import signal
import tempfile
import time
from pathlib import Path

from results_io import write_text

# summary.json fields the gate does not vouch for, and why an edit of them changes no verdict (the gate prints
# this list on every run: quantgate.gate.check.NOT_VOUCHED)
ALLOWLIST = {
    "created": "when summary.json was written: the signer's clock, no verdict rests on it",
    "time_budget": "wall-clock accounting of the study's own run, shown in the report, not judged",
    "provenance.packages": "the library versions the study ran with, informational",
    "provenance.git_commit": "the commit the study ran from, informational",
}
TIMEOUT_S = 60


class Hang(Exception):
    pass


def _alarm(*_):
    raise Hang()


def leaves(obj, path=()):
    """(path, value) of every scalar and every empty container."""
    if isinstance(obj, dict) and obj:
        for k, v in obj.items():
            yield from leaves(v, (*path, k))
    elif isinstance(obj, list) and obj:
        for i, v in enumerate(obj):
            yield from leaves(v, (*path, i))
    else:
        yield path, obj


def edited(v):
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return v + 1
    if isinstance(v, float):
        return v * 1.5 + 0.25
    if isinstance(v, str):
        return v + "x"
    if v is None:
        return 1
    if isinstance(v, list):
        return [1]
    return {"x": 1}


def put(obj, path, value):
    for k in path[:-1]:
        obj = obj[k]
    obj[path[-1]] = value


def dotted(path) -> str:
    return ".".join(str(p) for p in path)


def allowed(field: str) -> str | None:
    return next((k for k in ALLOWLIST if field == k or field.startswith(k + ".")), None)


def finished_study(root: Path) -> tuple[Path, Path, Path]:
    """A stub study run to the end, its folder, the signing key's public half and its attestation."""
    from quantgate.gate.attest import ATTESTATION, keygen, load_private_key, sign
    from quantgate.gate.check import gate
    from quantgate.heldout.synth import synth_pages
    from tests.support.stub_study import run, study_yaml

    synth_pages(root / "pages", 40, seed=7, profile="simple", calibration_fraction=0.0)
    study = study_yaml(root / "study.yaml", root / "pages", {"fp8": 0.0, "bad": 0.5}, min_pages=5)
    out = root / "out"
    run(study, out)
    code, lines = gate(out)
    key, pub = keygen(root / "key")
    sign(out, load_private_key(key), int(code), lines, {"metrics": None, "variants": None, "lmeval": False},
         out / ATTESTATION)
    return out, pub, out / ATTESTATION


def judge(run, timeout: int):
    """(outcome, detail): ('refused', line) | ('code', n) | ('traceback', repr) | ('hang', '')."""
    from quantgate.errors import QuantgateError

    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout)
    try:
        return run()
    except Hang:
        return "hang", ""
    except QuantgateError as e:
        return "refused", " ".join(str(e).split())[:200]
    except Exception as e:  # noqa: BLE001 — what this benchmark counts: anything but quantgate's own error
        return "traceback", repr(e)[:200]
    finally:
        signal.alarm(0)


def classify(field: str, outcome: str, detail: str = "") -> str:
    if outcome in ("traceback", "hang"):
        return outcome
    if allowed(field):
        if outcome == "refused" and f"field '{field}'" in detail:
            return "malformed"  # the edit gave the field a value of another type or outside its enum: schema's refusal
        return "false_alarm" if outcome == "refused" else "allowed"
    return "detected" if outcome == "refused" else "undetected"


def cases_of(path: Path, label: str, check, skip=()) -> list[dict]:
    raw = path.read_bytes()
    obj = json.loads(raw)
    rows = []
    for p, v in leaves(obj):
        field = dotted(p)
        if any(field == s or field.startswith(s + ".") for s in skip):
            continue
        doc = json.loads(raw)
        put(doc, p, edited(v)) if p else None
        path.write_text(json.dumps(doc, indent=2))
        t = time.perf_counter()
        outcome, detail = judge(check, TIMEOUT_S)
        path.write_bytes(raw)
        rows.append({"file": label, "field": field, "was": v if not isinstance(v, (dict, list)) else str(v),
                     "result": classify(field, outcome, detail), "outcome": outcome, "detail": detail,
                     "seconds": round(time.perf_counter() - t, 3)})
    return rows


def write(path: Path, head: dict, rows: list[dict]) -> None:
    """One case a line (the refusal's text kept only where the edit was not simply refused), so the file stays
    small and diffs line by line; gzipped when the name ends in .gz (the committed result: 1,120 cases are 170 KB of
    text, and the tracked tree has a size budget)."""
    cases = [{k: v for k, v in r.items() if k != "detail" or r["result"] != "detected"} for r in rows]
    body = ",\n".join(json.dumps(c, ensure_ascii=False) for c in cases)
    write_text(path, json.dumps(head, indent=1)[:-2] + ',\n "cases": [\n' + body + "\n ]\n}\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/tamper_fields.json.gz"))
    ap.add_argument("--limit", type=int, default=None, help="at most this many summary.json leaves (a smoke run)")
    a = ap.parse_args()

    from quantgate.gate.attest import read_statement, verify
    from quantgate.gate.check import INVALID, gate

    t0 = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="tamper-"))
    try:
        out, pub, att = finished_study(root)
        setup_s = time.perf_counter() - t0
        base_code, _ = gate(out)

        def gated():
            code, lines = gate(out)
            return ("refused", lines[0]) if code == INVALID else ("code", int(code))

        rows = []
        summary = out / "summary.json"
        n = len(list(leaves(json.loads(summary.read_bytes()))))
        if a.limit:
            keep = {dotted(p) for p, _ in list(leaves(json.loads(summary.read_bytes())))[:a.limit]}
            rows += [r for r in cases_of(summary, "summary.json", gated,
                                         skip=[dotted(p) for p, _ in leaves(json.loads(summary.read_bytes()))
                                               if dotted(p) not in keep])]
        else:
            rows += cases_of(summary, "summary.json", gated)
        for run_json in sorted(out.glob("runs/*/run.json")):
            rows += cases_of(run_json, str(run_json.relative_to(out)), gated)

        def verified():
            code, _ = verify(att, pub, out)
            return "code", code

        rows += cases_of(att, "attestation.intoto.json", verified, skip=["payload"])
        # the statement inside the payload, leaf by leaf, re-encoded (the signature no longer covers it)
        env = json.loads(att.read_bytes())
        st = json.loads(base64.b64decode(env["payload"]))
        raw = att.read_bytes()
        for p, v in leaves(st):
            doc = json.loads(json.dumps(st))
            put(doc, p, edited(v))
            att.write_text(json.dumps({**env, "payload": base64.b64encode(json.dumps(doc).encode()).decode()}))
            t = time.perf_counter()
            outcome, detail = judge(verified, TIMEOUT_S)
            att.write_bytes(raw)
            rows.append({"file": "attestation.intoto.json payload", "field": dotted(p), "was": str(v)[:80],
                         "result": classify("payload." + dotted(p), outcome, detail), "outcome": outcome, "detail": detail,
                         "seconds": round(time.perf_counter() - t, 3)})
        read_statement(att, __import__("quantgate.gate.attest", fromlist=["x"]).load_public_key(pub))  # intact
    finally:
        shutil.rmtree(root, ignore_errors=True)
    total_s = time.perf_counter() - t0

    files = sorted({r["file"] for r in rows})
    kinds = ["detected", "undetected", "allowed", "malformed", "false_alarm", "traceback", "hang"]
    print(f"{'file':<36}" + "".join(f"{k:>12}" for k in kinds))
    counts = {}
    for f in files:
        c = {k: sum(1 for r in rows if r["file"] == f and r["result"] == k) for k in kinds}
        counts[f] = c
        print(f"{f:<36}" + "".join(f"{c[k]:>12}" for k in kinds))
    und = [r for r in rows if r["result"] in ("undetected", "false_alarm", "traceback", "hang")]
    for r in und:
        print(f"{r['result']}: {r['file']} {r['field']} ({r['outcome']} {r['detail']})")
    print(f"{len(rows)} edits ({n} summary.json leaves) in {total_s:.0f} s (setup {setup_s:.0f} s); gate exit "
          f"before any edit: {int(base_code)}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    write(a.out, {"command": "PYTHONPATH=. nice -n 10 python benchmarks/tamper_fields.py",
                  "seconds": round(total_s, 1), "setup_seconds": round(setup_s, 1),
                  "gate_exit_untouched": int(base_code), "allowlist": ALLOWLIST, "counts": counts}, rows)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
