"""The report model: everything a verdict rests on, gathered once into ``summary.json``; every
renderer (markdown, HTML, JUnit) reads only this dict."""

from __future__ import annotations

import importlib.metadata as md
import json
import subprocess
import time
from pathlib import Path

from quantgate.fileio import sha256_file

SCHEMA_VERSION = 1
_PKGS = ["quantgate", "torch", "transformers", "llmcompressor", "compressed-tensors", "rapidfuzz", "numpy"]


def _versions() -> dict[str, str | None]:
    out = {}
    for p in _PKGS:
        try:
            out[p] = md.version(p)
        except md.PackageNotFoundError:
            out[p] = None
    return out


def _git_commit() -> str | None:
    try:
        r = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                           cwd=Path(__file__).resolve().parent)
        return r.stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        return None


def build_report(study: dict, out: Path, pages_sha256: str, variant_dirs: dict[str, Path], verdicts: list[dict],
                 compare_level: int, noise_level: int | None, worst: dict[str, list[dict]],
                 lm_eval: dict | None = None) -> dict:
    variants = []
    runs: dict[str, dict] = {}
    for name, vdir in variant_dirs.items():
        man = json.loads((vdir / "quantgate.json").read_text("utf-8"))
        run = json.loads((out / "runs" / name / "run.json").read_text("utf-8"))
        runs[name] = run
        variants.append({
            "name": name, "recipe": man["recipe"]["name"], "recipe_sha256": _sha(man["recipe"]["text"]),
            "path": str(vdir), "weights_bytes": man["size"]["weights_bytes"], "compression": man["size"]["compression"],
            "formats": man["verification"].get("formats"), "vision_bf16": man["verification"].get("vision_bf16"),
            "files": {k: v["sha256"] for k, v in man["files"].items()},
            "kernels": run.get("kernels", {}), "notes": run.get("notes", []), "server_version": run.get("server_version"),
            "levels": run["levels"], "max_concurrency_within_slo": run.get("max_concurrency_within_slo"),
            "calibration_pages": len(man["calibration"]["page_ids"]),
        })
    base = study["baseline"]
    base_levels = {lv["concurrency"]: lv for lv in runs[base]["levels"]}
    for v in variants:
        v["speedup"] = {str(lv["concurrency"]): (lv["pages_per_s"] / base_levels[lv["concurrency"]]["pages_per_s"])
                        if lv["concurrency"] in base_levels and base_levels[lv["concurrency"]]["pages_per_s"] else None
                        for lv in v["levels"]}
    expected = (len(study["variants"]) - 1) * len(study["metrics"])
    return {
        "schema_version": SCHEMA_VERSION, "kind": "quantgate.report", "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "study": study, "baseline": base, "compare_level": compare_level, "noise_level": noise_level,
        "complete": len(verdicts) == expected and (not study.get("lm_eval") or bool(lm_eval and lm_eval["verdicts"])),
        "verdicts": verdicts, "lm_eval": lm_eval, "variants": variants, "worst_pages": worst,
        "provenance": {"packages": _versions(), "git_commit": _git_commit(), "pageset_sha256": pages_sha256,
                       "statistics": "paired percentile bootstrap over pages, 90% interval (two one-sided 5% tests), "
                                     "margin = max(study margin, baseline noise floor)"},
    }


def _sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def write_reports(report: dict, out: Path) -> None:
    from quantgate.fileio import atomic_write_json, atomic_write_text
    from quantgate.reports.html import render_html
    from quantgate.reports.junit import render_junit
    from quantgate.reports.markdown import render_markdown

    atomic_write_json(out / "summary.json", report)
    atomic_write_text(out / "report.md", render_markdown(report))
    atomic_write_text(out / "report.html", render_html(report))
    atomic_write_text(out / "junit.xml", render_junit(report))


def load_summary(out: Path) -> dict:
    from quantgate.errors import InputError

    f = Path(out) / "summary.json"
    if not f.is_file():
        raise InputError(f"{out}: no summary.json — the study has not finished; rerun `quantgate study`")
    try:
        rep = json.loads(f.read_text("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{f}: not valid JSON ({e})") from None
    if rep.get("kind") != "quantgate.report" or rep.get("schema_version") != SCHEMA_VERSION:
        raise InputError(f"{f}: not a quantgate report of schema {SCHEMA_VERSION}")
    return rep


def rehash(report: dict) -> list[str]:
    """Weight files that changed (or vanished) since the verdicts were made."""
    changed = []
    for v in report["variants"]:
        for name, sha in v["files"].items():
            p = Path(v["path"]) / name
            if not p.is_file():
                changed.append(f"{p} is missing")
            elif sha256_file(p) != sha:
                changed.append(f"{p} changed since the verdict (sha256 differs)")
    return changed
