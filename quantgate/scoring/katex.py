"""KaTeX for olmOCR-bench's math checks, installed from the npm registry at setup, not kept in the tree.

Math checks compare rendered layouts, and a different KaTeX lays some equations out differently, so the
version is the one upstream olmOCR-bench renders with: the npm package ``katex`` 0.16.21, whose
``dist/katex.min.js`` and ``dist/katex.min.css`` are byte-identical to upstream's copies. ``make setup``
runs ``python -m quantgate.scoring.katex install``: ``npm pack`` fetches the published tarball (npm checks
the registry's integrity hash), quantgate checks its sha256, and the two files land in the
environment's ``share/quantgate/katex-0.16.21``. ``QUANTGATE_KATEX`` names another folder holding them.
Both files are checked by sha256 whenever they are read."""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from quantgate.errors import QuantgateError

VERSION = "0.16.21"
TARBALL = f"katex-{VERSION}.tgz"
TARBALL_SHA256 = "7764a23b6c42d0a260fc1c8dcfe91d73e07d802dfc0624c08997b33c02dac0cd"
FILES = {"katex.min.js": "863811e2baa0849c77bc92d26d44f4d0a4843c2a8ab52c462017dea57316e4d8",
         "katex.min.css": "f787891b550d554c214aa8902f39ac46df2dbd48fdec500a2040a5dce1e8ab58"}
ENV = "QUANTGATE_KATEX"
SETUP = f"make setup (or: python -m quantgate.scoring.katex install), or set {ENV} to a folder holding " \
        f"KaTeX {VERSION}'s katex.min.js and katex.min.css"


class KatexMissing(QuantgateError):
    """The pinned KaTeX is not installed (or not the pinned bytes): math checks cannot render."""


def default_dir() -> Path:
    return Path(sys.prefix) / "share" / "quantgate" / f"katex-{VERSION}"


def folder() -> Path:
    env = os.environ.get(ENV, "").strip()
    return Path(env) if env else default_dir()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@functools.cache
def _read(where: Path) -> tuple[str, str]:
    texts = {}
    for name, digest in FILES.items():
        path = where / name
        if not path.is_file():
            raise KatexMissing(f"math checks need KaTeX {VERSION}: {path} is missing; run {SETUP}")
        data = path.read_bytes()
        if _sha256(data) != digest:
            raise KatexMissing(f"math checks need KaTeX {VERSION}: {path} is not its {name} (sha256 "
                               f"{_sha256(data)[:12]}…, expected {digest[:12]}…); run {SETUP}")
        texts[name] = data.decode("utf-8")
    return texts["katex.min.css"], texts["katex.min.js"]


def assets() -> tuple[str, str]:
    """(katex.min.css, katex.min.js) as text, from ``folder()``, checked by sha256."""
    return _read(folder().resolve())


def install(dest: Path | None = None) -> Path:
    """Fetch the pinned tarball with npm, check it, and put its two dist files in ``dest``. Idempotent."""
    dest = Path(dest or default_dir())
    if all((dest / n).is_file() and _sha256((dest / n).read_bytes()) == d for n, d in FILES.items()):
        return dest
    npm = shutil.which("npm")
    if npm is None:
        raise KatexMissing("installing KaTeX needs npm (Debian: apt-get install npm; `make system` does it)")
    with tempfile.TemporaryDirectory(prefix="quantgate-katex-") as tmp:
        r = subprocess.run([npm, "pack", f"katex@{VERSION}", "--pack-destination", tmp, "--silent"],
                           capture_output=True, text=True, cwd=tmp, timeout=600)
        tgz = Path(tmp) / TARBALL
        if r.returncode != 0 or not tgz.is_file():
            raise KatexMissing(f"npm pack katex@{VERSION} failed (exit {r.returncode}): "
                               f"{(r.stderr or r.stdout).strip()[-500:]}")
        got = _sha256(tgz.read_bytes())
        if got != TARBALL_SHA256:
            raise KatexMissing(f"{TARBALL} from npm has sha256 {got}, expected {TARBALL_SHA256}: not installed")
        staged = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=_parent(dest)))
        try:
            staged.chmod(0o755)  # mkdtemp's 0700 would hide it from other users of the environment
            with tarfile.open(tgz) as tar:
                for name, digest in FILES.items():
                    data = tar.extractfile(f"package/dist/{name}").read()
                    if _sha256(data) != digest:
                        raise KatexMissing(f"{TARBALL}: dist/{name} is not the pinned file (sha256 {_sha256(data)})")
                    (staged / name).write_bytes(data)
                (staged / "LICENSE").write_bytes(tar.extractfile("package/LICENSE").read())
            if dest.exists():
                shutil.rmtree(dest)
            staged.rename(dest)
        except BaseException:
            shutil.rmtree(staged, ignore_errors=True)
            raise
    _read.cache_clear()
    return dest


def _parent(dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    return dest.parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m quantgate.scoring.katex", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("install", help=f"install KaTeX {VERSION} from npm (checked by sha256)")
    i.add_argument("--dest", type=Path, default=None, help=f"folder (default: {default_dir()})")
    sub.add_parser("where", help="print the folder math checks read KaTeX from")
    a = ap.parse_args(argv)
    try:
        print(install(a.dest) if a.cmd == "install" else folder())
    except QuantgateError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
