"""OmniDocBench v1.5's CDM (upstream's ``metrics/cdm`` at 523fd1d, ../shared/reference/omnidocbench-v1.5) as test
oracles for quantgate's own CDM, two ways:

* live: upstream's matcher module (``modules/visual_matcher.py``: token normalisation, token cost, Hungarian
  assignment) imported straight from the reference file — it imports only numpy, scipy and PIL, so nothing is
  copied and no path is changed;
* recorded: upstream's whole CDM run on the 18 demo pages under the numeric stack it pins (numpy 1.24,
  scikit-image 0.20, which quantgate's environment cannot host) by lab/2026-12-05-cdm/upstream_run.py:
  ``upstream.json`` holds each display formula's F1 with the token boxes upstream's renderer found, so
  quantgate's matching is checked on upstream's own boxes, RANSAC fits included."""

from __future__ import annotations

import functools
import gzip
import importlib.util
import json
import os
import types
from pathlib import Path

from tests.support.paths import REPO, SHARED, oracle_missing

REFERENCE = Path(os.environ.get("QUANTGATE_OMNIDOC15_REFERENCE") or SHARED / "reference" / "omnidocbench-v1.5")
MODULES = REFERENCE / "metrics" / "cdm" / "modules"
RECORDED = REPO / "lab" / "2026-12-05-cdm" / "upstream.json.gz"  # gzipped: 144 KB of boxes as text


def missing_reason() -> str | None:
    return oracle_missing(MODULES / "visual_matcher.py", MODULES / "latex_processor.py")


def _load(name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"upstream_cdm_{name}", MODULES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def visual_matcher() -> types.ModuleType:
    return _load("visual_matcher")


@functools.cache
def latex_processor() -> types.ModuleType:
    return _load("latex_processor")


@functools.cache
def recorded() -> dict:
    """upstream.json.gz: ``set`` (whole-set values and Overall), ``per_page_cdm``, ``formulas`` (page, F1 as ``cdm``,
    ``gt``/``pred`` LaTeX, ``*_tokenized``, ``*_boxes`` as upstream's bbox lines, ``*_size`` of the cropped image)."""
    return json.loads(gzip.decompress(RECORDED.read_bytes()).decode("utf-8"))


@functools.cache
def toolchain_missing() -> str | None:
    """The skip reason of a test that renders formulas where the CDM toolchain is absent. It counts as an absent
    oracle: skipped on a bare machine, a failure in CI (.ci/run installs it with ``make setup-cdm``)."""
    from quantgate.scoring.omnidoc.cdm_render import MAKE_TARGET, missing_packages
    from tests.support.paths import ORACLE_ABSENT

    missing = missing_packages()
    return f"{ORACLE_ABSENT}: formula CDM's toolchain is not installed ({' '.join(missing)}; {MAKE_TARGET})" \
        if missing else None


TOKENIZER = MODULES / "tokenize_latex" / "preprocess_formula.js"


def tokenizer_missing() -> str | None:
    import shutil

    from tests.support.paths import ORACLE_ABSENT

    return oracle_missing(TOKENIZER) or (None if shutil.which("node") else
                                         f"{ORACLE_ABSENT}: node is not installed (make setup installs it)")


def tokenizer(lines: list[str]) -> list[str]:
    """Upstream's tokenizer itself (``node preprocess_formula.js normalize``, run where it lies, reading stdin) on
    one formula per line: its output line for each (empty where it failed). Integration tests only: it is a process."""
    import subprocess

    assert all("\n" not in x and "\r" not in x for x in lines)
    r = subprocess.run(["node", str(TOKENIZER), "normalize"], input="".join(x + "\n" for x in lines),
                       capture_output=True, text=True, timeout=60, check=True)
    out = r.stdout.split("\n")
    assert out[-1] == "" and len(out) == len(lines) + 1, (len(out), len(lines))
    return out[:-1]
