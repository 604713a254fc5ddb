"""What produced a result: package versions and the quantgate source commit. Neutral on purpose
(standard library only, no stage imported), so quantize, reports and ``doctor`` share it.

quantgate's own version and commit come from the source tree that is running, not from installed
package metadata: run from a checkout on ``PYTHONPATH`` (as the GPU scripts do) there may be no
installed distribution at all, or one of a different checkout."""

from __future__ import annotations

import importlib.metadata as md
import subprocess
from pathlib import Path

import quantgate

SOURCE_ROOT = Path(quantgate.__file__).resolve().parent.parent  # the folder holding the quantgate package


def package_versions(names: list[str] | tuple[str, ...]) -> dict[str, str | None]:
    """Version of each distribution (``None`` when not installed); ``quantgate`` is the running source's."""
    out: dict[str, str | None] = {}
    for name in names:
        if name == "quantgate":
            out[name] = quantgate.__version__
            continue
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


def git_commit() -> str | None:
    """HEAD of the git checkout the running quantgate package lives in; ``None`` when the package is
    not the top of a checkout (an installed wheel, a copied tree) or git is unavailable."""
    def git(*args: str) -> str | None:
        try:
            r = subprocess.run(["git", *args], capture_output=True, text=True, timeout=5, cwd=SOURCE_ROOT)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else None

    top = git("rev-parse", "--show-toplevel")
    # a site-packages inside some other repository must not report that repository's commit
    if top is None or Path(top).resolve() != SOURCE_ROOT:
        return None
    return git("rev-parse", "HEAD")
