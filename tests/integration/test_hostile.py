"""Hostile input: untrusted model folders, links out of a folder, bad bytes in
hand-written JSONL. Each test names a fault that today's code let through."""

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

from quantgate.errors import InputError, UnsafeInputError
from quantgate.io.fileio import append_jsonl, read_jsonl
from quantgate.serve.run import ServeHooks, ServeOptions

from .test_reliability import StubBackend

NESTED_LOOPS = "{% for a in range(100000) %}{% for b in range(100000) %}{{ '' }}{% endfor %}{% endfor %}"


def _cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "quantgate", *args], capture_output=True, text=True, timeout=timeout)


def _one_error_line(r, code=65):
    # 65 (EX_DATAERR) is an input refused as written; 2 belongs to an inconclusive verdict alone
    lines = r.stderr.strip().splitlines()
    assert r.returncode == code and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


@pytest.fixture(scope="module")
def llava(tmp_path_factory):
    from tests.support import fixtures

    return fixtures.build("llava", tmp_path_factory.mktemp("hostile") / "llava")


@pytest.fixture(scope="module")
def pageset(tmp_path_factory):
    from quantgate.heldout.synth import synth_pages

    out = tmp_path_factory.mktemp("hostile") / "pages"
    synth_pages(out, 6, seed=5, profile="simple", calibration_fraction=0.5)
    return out


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


class _Payload:
    """A pickle that, when loaded, would write a marker file: proof that nothing unpickled it."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "unpickled"))


# --- untrusted model folders ------------------------------------------------------------------

@pytest.mark.parametrize("name", ["pytorch_model.bin", "model.pt", "weights.pth", "x.pkl", "last.ckpt"])
def test_pickle_files_next_to_safetensors_are_refused(llava, tmp_path, name):
    from quantgate.quantize import make_plan
    from quantgate.recipes import load_recipe

    m = _copy(llava, tmp_path / "m")
    (m / name).write_bytes(pickle.dumps(_Payload(tmp_path / "marker")))
    with pytest.raises(UnsafeInputError, match=rf"pickle files \({name}\).*--allow-pickle-files"):
        make_plan(m, load_recipe("fp8-dynamic"))
    assert make_plan(m, load_recipe("fp8-dynamic"), allow_pickle_files=True).modules  # opt-in: ignored
    assert not (tmp_path / "marker").exists()


def test_decoy_safetensors_never_lets_a_pickle_load(llava, tmp_path):
    """An empty ``x.safetensors`` beside ``pytorch_model.bin``: refused; with --allow-pickle-files
    the loader still reads safetensors only (use_safetensors=True) and fails cleanly."""
    from quantgate.quantize import quantize

    m = tmp_path / "decoy"
    m.mkdir()
    for f in llava.iterdir():
        if f.suffix != ".safetensors":
            shutil.copy(f, m)
    (m / "x.safetensors").write_bytes(b"")
    (m / "pytorch_model.bin").write_bytes(pickle.dumps(_Payload(tmp_path / "marker")))
    line = _one_error_line(_cli("plan", str(m), "--recipe", "fp8-dynamic"))
    assert "pytorch_model.bin" in line and "--allow-pickle-files" in line
    with pytest.raises(InputError, match="cannot load its safetensors weights"):
        quantize(m, "fp8-dynamic", tmp_path / "v", allow_pickle_files=True, log=lambda s: None)
    assert not (tmp_path / "marker").exists() and not (tmp_path / "v").exists()
    assert not [p for p in tmp_path.iterdir() if ".building." in p.name]


def test_hostile_chat_template_is_refused_before_any_work(llava, pageset, tmp_path, monkeypatch):
    import quantgate.io.modeldir as modeldir
    from quantgate.quantize import quantize
    from quantgate.serve import serve_variant

    monkeypatch.setattr(modeldir, "TEMPLATE_RENDER_LIMIT_S", 2.0, raising=False)
    m = _copy(llava, tmp_path / "m")
    (m / "chat_template.jinja").write_text(NESTED_LOOPS)
    t0 = time.monotonic()
    with pytest.raises(UnsafeInputError, match=r"chat_template\.jinja: chat template did not finish .* within 2 s"):
        quantize(m, "nvfp4", tmp_path / "v", calibration=pageset, samples=1, log=lambda s: None)
    assert time.monotonic() - t0 < 120  # today: calibration renders it and never ends (10^10 iterations)
    assert not [p for p in tmp_path.iterdir() if p.name != "m"]  # nothing built, nothing left
    # The same template in tokenizer_config.json, and through serve (before any server starts).
    (m / "chat_template.jinja").unlink()
    cfg = json.loads((m / "tokenizer_config.json").read_text())
    (m / "tokenizer_config.json").write_text(json.dumps({**cfg, "chat_template": NESTED_LOOPS}))
    with pytest.raises(UnsafeInputError, match=r"tokenizer_config\.json field 'chat_template'"):
        serve_variant(m, pageset, StubBackend(), tmp_path / "run", hooks=ServeHooks(log=lambda s: None))
    assert not (tmp_path / "run").exists()
    # A template that grows without bound is stopped by the memory cap, not by the machine.
    (m / "tokenizer_config.json").write_text(json.dumps({**cfg, "chat_template": "{{ 'x' * 4000000000 }}"}))
    with pytest.raises(UnsafeInputError, match="MiB"):
        modeldir.check_model_dir(m)


def test_sigterm_while_quantizing_removes_the_building_folder(llava, tmp_path):
    out = tmp_path / "variants" / "v"
    proc = subprocess.Popen([sys.executable, "-m", "quantgate", "quantize", str(llava), "--recipe", "fp8-dynamic",
                             "-o", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not (out.parent.is_dir() and any(".v.building." in p.name for p in out.parent.iterdir())):
        assert proc.poll() is None and time.monotonic() < deadline, "the build never started"
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err and "removed the partial build" in err
    assert list(out.parent.iterdir()) == []  # no .v.building.*, no half-written v

    # What a SIGKILL leaves (no lock held) is removed at the next start; a build still held is not.
    import fcntl

    from quantgate.quantize import quantize
    from quantgate.quantize.build import clean_stale_builds

    stale, held = out.parent / ".v.building.stale001", out.parent / ".v.building.held0001"
    for d in (stale, held):
        d.mkdir()
        (d / "model.safetensors").write_bytes(b"partial")
    fd = os.open(held, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        clean_stale_builds(out, log=lambda s: None)
        assert not stale.exists() and held.exists()
    finally:
        os.close(fd)
    stale.mkdir()
    quantize(llava, "fp8-dynamic", out, log=lambda s: None)
    assert sorted(p.name for p in out.parent.iterdir()) == ["v"]


def test_a_signal_while_the_build_folder_is_being_locked_still_removes_it(llava, tmp_path, monkeypatch):
    """The window the SIGTERM test above can hit on a loaded machine (seen under two test workers): the folder
    exists, its lock is not taken yet. The signal handler's SystemExit raised there removes the folder too."""
    from quantgate.quantize import build, quantize

    def signalled(folder):
        raise SystemExit(128 + signal.SIGTERM)  # what _terminate_cleanly's handler raises

    monkeypatch.setattr(build, "_hold", signalled)
    out = tmp_path / "variants" / "v"
    lines: list[str] = []
    with pytest.raises(SystemExit):
        quantize(llava, "fp8-dynamic", out, log=lines.append)
    assert list(out.parent.iterdir()) == [] and any("removed the partial build" in x for x in lines)


# --- links out of a folder --------------------------------------------------------------------

def test_requests_jsonl_link_is_not_followed(pageset, tmp_path):
    from quantgate.serve import serve_variant

    variant = tmp_path / "variant"
    variant.mkdir()
    (variant / "config.json").write_text("{}")
    (variant / "model.safetensors").write_bytes(b"\0" * 8)
    run = tmp_path / "run"
    serve_variant(variant, pageset, StubBackend(), run, ServeOptions(max_tokens=8), hooks=ServeHooks(log=lambda s: None))
    outside = tmp_path / "elsewhere.jsonl"
    lines = (run / "requests.jsonl").read_bytes().splitlines(keepends=True)
    outside.write_bytes(b"".join(lines[:-1]) + b'{"torn')  # one page left to re-send, and a torn tail
    before = outside.read_bytes()
    (run / "requests.jsonl").unlink()
    (run / "requests.jsonl").symlink_to(outside)
    with pytest.raises(UnsafeInputError, match=r"requests\.jsonl: is a symbolic link"):
        serve_variant(variant, pageset, StubBackend(), run, ServeOptions(max_tokens=8), hooks=ServeHooks(log=lambda s: None))
    assert outside.read_bytes() == before  # neither truncated nor appended to
    # A dangling link is not created through either.
    (tmp_path / "dangling.jsonl").symlink_to(tmp_path / "created.jsonl")
    with pytest.raises(UnsafeInputError, match="symbolic link"):
        append_jsonl(tmp_path / "dangling.jsonl", {"a": 1})
    assert not (tmp_path / "created.jsonl").exists()


def _png(path: Path, color=0):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("L", (64, 48), color).save(path)
    return path


def test_pages_import_refuses_links_out_of_their_folder(tmp_path):
    from quantgate.heldout.importer import ImportOptions, import_pages
    from quantgate.io.pageset import load_pageset

    src, truth = tmp_path / "src", tmp_path / "truth"
    _png(src / "a.png")
    (truth).mkdir()
    (truth / "a.md").write_text("# A\n")
    secret = tmp_path / "private" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("password=hunter2\n")
    _png(tmp_path / "private" / "scan.png", 200)
    (truth / "b.md").symlink_to(secret)
    (src / "b.png").symlink_to(tmp_path / "private" / "scan.png")
    (src / "c.png").symlink_to(src / "a.png")  # a link inside its folder is fine

    out = tmp_path / "ps"
    with pytest.raises(UnsafeInputError, match=r"src/b\.png: is a link to .*private/scan\.png, outside"):
        import_pages([src], out, ImportOptions())
    (src / "b.png").unlink()
    with pytest.raises(UnsafeInputError, match=r"truth/b\.md: is a link to .*secret\.txt, outside"):
        import_pages([src], out, ImportOptions(truth_dir=truth))
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["private", "src", "truth"]
    line = _one_error_line(_cli("pages", "import", str(src), "--truth", str(truth), "-o", str(out)))
    assert "b.md" in line and "--follow-outside-links" in line
    # Asked for: copied, with a warning naming the link.
    rep = import_pages([src], out, ImportOptions(truth_dir=truth, follow_outside_links=True))
    assert any("b.md" in w and "secret.txt" in w for w in rep.warnings)
    assert len(load_pageset(out).pages) == 2


def test_pages_check_refuses_a_manifest_linked_out_of_its_folder(pageset, tmp_path):
    ps = _copy(pageset, tmp_path / "ps")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for name in ("pages.jsonl", "pageset.json"):
        shutil.move(ps / name, elsewhere / name)
        (ps / name).symlink_to(elsewhere / name)
        line = _one_error_line(_cli("pages", "check", str(ps)))
        assert f"{name}: is a link to" in line and "outside the page set" in line
        (ps / name).unlink()
        shutil.move(elsewhere / name, ps / name)
    assert _cli("pages", "check", str(ps)).returncode == 0


def test_quantize_output_link_is_checked_before_building(llava, tmp_path):
    from quantgate.quantize import quantize

    target = tmp_path / "important"
    target.mkdir()
    (target / "keep.txt").write_text("keep me")
    link = tmp_path / "v"
    link.symlink_to(target)
    t0 = time.monotonic()
    with pytest.raises(UnsafeInputError, match=r"-o .*v: is a symbolic link"):
        quantize(llava, "fp8-dynamic", link, overwrite=True, log=lambda s: None)
    assert time.monotonic() - t0 < 30  # refused before planning, not after a build
    assert [p.name for p in target.iterdir()] == ["keep.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["important", "v"]
    (tmp_path / "f").write_text("x")
    # a bad -o is the command line's fault: a usage error (64)
    line = _one_error_line(_cli("quantize", str(llava), "--recipe", "fp8-dynamic", "-o", str(tmp_path / "f")), 64)
    assert "is not a folder" in line


# --- bad bytes in hand-written JSONL ----------------------------------------------------------

def test_read_jsonl_reports_a_non_utf8_line(tmp_path):
    from quantgate.io.scores import read_scores

    f = tmp_path / "scores.jsonl"
    f.write_bytes(b'{"page_id": "a", "ned": 0.1}\n{"page_id": "b\xff", "ned": 0.2}\n')
    with pytest.raises(InputError, match=r"scores\.jsonl:2: not UTF-8 \(bad byte 0xff at column 15\)"):
        read_scores(f)
    # Lines are split on \n only: U+2028 inside a string (json.dumps(ensure_ascii=False) leaves it raw)
    # stays one record.
    g = tmp_path / "r.jsonl"
    append_jsonl(g, {"text": "a\u2028b\x1cc"})
    append_jsonl(g, {"text": "d"})
    assert [o["text"] for _, o in read_jsonl(g)] == ["a\u2028b\x1cc", "d"]
    with pytest.raises(InputError, match="is a folder"):
        list(read_jsonl(tmp_path))


@pytest.mark.parametrize("content,msg", [
    (b'{"pdf": "a.pdf", "page": "x", "type": "present", "id": "1"}\n', r"checks\.jsonl:1 .*field 'page'"),
    (b'{"pdf": 5, "page": 1, "type": "present", "id": "1"}\n', r"checks\.jsonl:1 .*field 'pdf'"),
    (b'{"pdf": "a.pdf", "page": 1, "type": 3}\n', r"checks\.jsonl:1 .*field 'type'"),
    (b'{"pdf": "a.pdf", "page": 1, "type": "present", "id": 7}\n', r"checks\.jsonl:1 .*field 'id'"),
    (b'{"pdf": "a.pdf", "page": 0, "type": "present"}\n', r"checks\.jsonl:1 .*field 'page'"),
    (b'{"pdf": "a.pdf", "page": 1, "type": "present"}\n{"pdf": "a\xe9.pdf"}\n', r"checks\.jsonl:2: not UTF-8"),
    (None, r"checks\.jsonl: is a folder"),
])
def test_bad_checks_files_name_file_and_line(tmp_path, content, msg):
    from quantgate.heldout.importer import ImportOptions, import_pages

    src = tmp_path / "src"
    _png(src / "a_pg1.png")
    checks = tmp_path / "checks.jsonl"
    if content is None:
        checks.mkdir()
    else:
        checks.write_bytes(content)
    with pytest.raises(InputError, match=msg):
        import_pages([src], tmp_path / "ps", ImportOptions(checks_file=checks))
    assert not (tmp_path / "ps").exists()
    if content is None or b"\xe9" in content:
        # bytes that are not text, a folder in a file's place: the file is unusable as written (EX_DATAERR)
        _one_error_line(_cli("pages", "import", str(src), "--checks", str(checks), "-o", str(tmp_path / "ps")), 65)


def test_checks_file_without_final_newline_is_read(tmp_path):
    from quantgate.heldout.importer import ImportOptions, import_pages

    _png(tmp_path / "src" / "a_pg1.png")
    checks = tmp_path / "checks.jsonl"
    checks.write_text('{"pdf": "a.pdf", "page": 1, "type": "present", "id": "1", "text": "A"}')  # no newline
    rep = import_pages([tmp_path / "src"], tmp_path / "ps", ImportOptions(checks_file=checks))
    assert rep.n_checks == 1
