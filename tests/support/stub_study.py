"""A whole ``quantgate study`` in seconds on CPU, for tests: the stub server (``tests.support.stub``)
answers each page with its ground truth, a candidate's ``server_args`` (``--corrupt F``) make it answer a
share of the pages badly, and quantize is replaced by a stand-in that writes a small variant folder.
Everything else — serving, records, resume, scoring, verdicts (fixed or sequential), reports, the gate — is
the study's own code.

    python -m tests.support.stub_study STUDY.yaml OUT   # the study, with the stand-in quantize
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import yaml

from quantgate.schema.variant import QuantizeResult, VariantManifest


def fake_quantize(model, recipe, vdir, **kw) -> QuantizeResult:
    """A variant folder the report and the gate accept (its weights a few bytes), reused when present."""
    from tests.support.study_folder import _manifest

    vdir = Path(vdir)
    if (vdir / "quantgate.json").is_file():
        return QuantizeResult(manifest=VariantManifest.model_validate_json((vdir / "quantgate.json").read_text()),
                              reused=True)
    name = vdir.name
    man = _manifest(vdir, name, name.encode() * 8)
    (vdir / "quantgate.json").write_text(json.dumps(man))
    return QuantizeResult(manifest=VariantManifest.model_validate(man), reused=False)


def study_yaml(path: Path, pages: Path, candidates: dict[str, float], *, sequential: dict | None = None,
               delay: float = 0.0, corrupt_tag: dict[str, str] | None = None, **fields) -> Path:
    """Write a study of bf16 (the stub answering every page right) and ``candidates`` (name -> share of
    pages answered badly) served by the stub through the external backend; ``corrupt_tag`` (name -> page
    tag): that candidate also answers the pages with that tag badly."""
    tags = corrupt_tag or {}
    cmd = (f"{shlex.quote(sys.executable)} -m tests.support.stub --port {{port}} --answers "
           f"{shlex.quote(str(Path(pages).resolve()))}" + (f" --delay {delay}" if delay else ""))
    body = {"name": "stub", "model": "stub-model", "pages": {"path": str(Path(pages).resolve())},
            "variants": [{"name": "bf16", "recipe": "bf16"}]
            + [{"name": n, "recipe": "bf16", "server_args": ["--corrupt", str(f)] + (["--corrupt-tag", tags[n]] if n in tags else [])}
               for n, f in candidates.items()],
            "backend": {"name": "external", "start_command": cmd, "model": "stub", "startup_timeout_s": 60},
            "concurrency": [1, 2], "metrics": ["ned", "bow_f1"], "resamples": 1000, "max_tokens": 64,
            **fields}
    if sequential is not None:
        body["sequential"] = sequential
    Path(path).write_text(yaml.safe_dump(body, sort_keys=False))
    return Path(path)


def run(study: Path, out: Path, log=None) -> dict:
    """``run_study`` with the stand-in quantize; its report as summary.json holds it."""
    import quantgate.quantize as qz
    from quantgate.study import run_study

    saved = qz.quantize
    qz.quantize = fake_quantize
    try:
        outcome = run_study(study, out, log=log or (lambda line: None))
        return outcome.summary.model_dump() if outcome.summary else {}
    finally:
        qz.quantize = saved


if __name__ == "__main__":
    run(Path(sys.argv[1]), Path(sys.argv[2]), log=print)
