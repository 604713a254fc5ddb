"""Where the tests find the repository, its test data and the shared reference folder, wherever a test file
sits below tests/.

The reference oracles (upstream olmOCR-bench and OmniDocBench code, their results, olmOCR-bench's sample PDFs and
system outputs) live in ../shared beside the clone, not in it. A test that needs them skips with one reason when
they are absent (``oracle_missing``), so a clone with nothing beside it passes; in CI, where they are present,
``QUANTGATE_REQUIRE_ORACLES=1`` (set by .ci/run) turns any such skip into a failure (tests/conftest.py)."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
SHARED = REPO.parent / "shared"
OLMOCR_SAMPLE = SHARED / "data" / "olmocr-bench-sample"

ORACLE_ABSENT = "oracle absent"  # every oracle skip's reason starts so: the conftest hook recognizes them by it
REQUIRE_ORACLES = "QUANTGATE_REQUIRE_ORACLES"


def oracle_missing(*needed: Path) -> str | None:
    """The skip reason when an oracle file or folder is absent, else None. With no ../shared at all the reason is
    the same for every oracle test (one line in `pytest -rs`, one thing to fix)."""
    missing = [Path(p) for p in needed if not Path(p).exists()]
    if not missing:
        return None
    if not SHARED.is_dir() and all(p.is_relative_to(SHARED) for p in missing):
        return f"{ORACLE_ABSENT}: {SHARED} does not exist (the reference oracles live beside the clone)"
    return f"{ORACLE_ABSENT}: {', '.join(map(str, missing))} missing"
