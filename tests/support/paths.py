"""Where the tests find the repository, its test data and the shared reference folder, wherever a test file
sits below tests/."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
SHARED = REPO.parent / "shared"
OLMOCR_SAMPLE = SHARED / "data" / "olmocr-bench-sample"
