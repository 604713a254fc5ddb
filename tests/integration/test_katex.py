"""KaTeX comes from npm at setup, pinned: the installed files are upstream olmOCR-bench's bytes (so math
verdicts match upstream's), a missing or altered install is one clear error naming the setup command,
and a tarball that is not the pinned one is refused with nothing installed."""

import os
import stat

import pytest

from quantgate.scoring import katex
from tests.support.paths import oracle_missing
from tests.support.upstream_olmocr import REFERENCE


def test_installed_katex_is_upstreams():
    css, js = katex.assets()  # raises KatexMissing (naming `make setup`) where setup has not run
    for name, text in (("katex.min.css", css), ("katex.min.js", js)):
        ref = REFERENCE / "katex" / name
        if ref.is_file():
            assert ref.read_bytes() == text.encode("utf-8"), name


def test_missing_or_altered_katex_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv(katex.ENV, str(tmp_path))
    with pytest.raises(katex.KatexMissing, match="katex.min.js is missing; run make setup"):
        katex.assets()
    (tmp_path / "katex.min.js").write_text("/* another KaTeX */")
    (tmp_path / "katex.min.css").write_text("")
    with pytest.raises(katex.KatexMissing, match="is not its katex.min.js"):
        katex.assets()


def _fake_npm(folder, script: str):
    npm = folder / "npm"
    npm.write_text("#!/bin/sh\n" + script)
    npm.chmod(npm.stat().st_mode | stat.S_IEXEC)
    return str(folder)


def test_install_refuses_a_tarball_that_is_not_the_pinned_one(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # an npm that "packs" some other tarball into --pack-destination ($4)
    monkeypatch.setenv("PATH", _fake_npm(bin_dir, f'mkdir -p "$4/package/dist" && cd "$4" && echo x > '
                                         f'package/dist/katex.min.js && tar czf {katex.TARBALL} package\n')
                       + os.pathsep + "/usr/bin:/bin")
    dest = tmp_path / "share" / "katex"
    with pytest.raises(katex.KatexMissing, match="expected " + katex.TARBALL_SHA256):
        katex.install(dest)
    assert not dest.exists() and not (dest.parent.exists() and any(dest.parent.iterdir()))
    monkeypatch.setenv("PATH", _fake_npm(bin_dir, "echo 'E404 no such package' >&2; exit 1\n") + os.pathsep + "/bin")
    with pytest.raises(katex.KatexMissing, match="E404 no such package"):
        katex.install(dest)


def test_install_keeps_a_checked_install_without_npm(tmp_path, monkeypatch):
    dest = tmp_path / "k"
    dest.mkdir()
    for name in katex.FILES:
        src = REFERENCE / "katex" / name
        if not src.is_file():
            pytest.skip(oracle_missing(src) or f"{src}: not a file")
        (dest / name).write_bytes(src.read_bytes())
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    assert katex.install(dest) == dest
    monkeypatch.setenv(katex.ENV, str(dest))
    assert katex.assets()[1].startswith("!function")  # the minified bundle's first bytes


def test_math_checks_stop_with_the_setup_command_when_katex_is_missing(tmp_path, monkeypatch):
    from quantgate.scoring import olmocr_math
    from quantgate.scoring.olmocr_checks import run_checks

    if olmocr_math.skip_reason():
        pytest.skip(olmocr_math.skip_reason())
    monkeypatch.setenv(katex.ENV, str(tmp_path))
    monkeypatch.setattr(olmocr_math, "_CACHE", {})
    m = {"pdf": "x.pdf", "page": 1, "id": "m", "type": "math", "math": "x^{2}+1"}
    with pytest.raises(katex.KatexMissing, match="make setup"):
        run_checks([m], "$y^3$")
