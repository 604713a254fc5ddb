"""Quantize costs seconds when there is nothing to compute: a recipe that quantizes nothing hard-links the source
(copies it, hashes checked, when it lies on another filesystem), a variant built on the machine before from the
same inputs is linked back from the machine's store after its hashes are verified, and FlashInfer's prebuild runs
once per machine."""

import os
import threading

import pytest

from quantgate.io.fileio import sha256_file
from quantgate.quantize import quantize
from quantgate.serve.warm import prebuild_flashinfer


def _quiet(_):
    pass


def test_bf16_links_the_source_weights_instead_of_copying_them(tiny_models, tmp_path):
    src = tiny_models["qwen2_5_vl"]
    r = quantize(src, "bf16", tmp_path / "bf16", log=_quiet)
    out = tmp_path / "bf16"
    weights = sorted(p.name for p in src.glob("*.safetensors"))
    assert weights and sorted(p.name for p in out.glob("*.safetensors")) == weights
    for name in weights:
        a, b = os.stat(src / name), os.stat(out / name)
        assert (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)  # one file on disk: no byte copied
        assert not (out / name).is_symlink()
        assert r.manifest.files[name].sha256 == sha256_file(src / name) == r.manifest.inputs.model_weights[name]
    assert (out / "config.json").is_file() and not (out / "config.json").is_symlink()
    assert r.manifest.recipe.llmcompressor is None and r.manifest.size.compression == 1.0
    assert r.manifest.verification.vision_bf16  # the header check still ran on what was linked


def test_bf16_across_filesystems_copies_the_source_bytes_verified_never_a_link(tiny_models, tmp_path, monkeypatch):
    """No hard link reaches a source on another filesystem (EXDEV): the files are copied as they are — checked
    against the fingerprint's hashes, never loaded and re-saved, never a symbolic link — and the log says so."""
    import errno

    from quantgate.quantize import build

    src = tiny_models["qwen2_5_vl"]

    def cross_device(a, b, **_):
        raise OSError(errno.EXDEV, "Invalid cross-device link", str(a))

    def no_load(job):
        raise AssertionError("the model was loaded: a bf16 variant needs no load")

    monkeypatch.setattr(os, "link", cross_device)
    monkeypatch.setattr(build, "_load", no_load)
    logs: list[str] = []
    r = quantize(src, "bf16", tmp_path / "bf16", log=logs.append)
    out = tmp_path / "bf16"
    weights = sorted(p.name for p in src.glob("*.safetensors"))
    assert weights and sorted(p.name for p in out.glob("*.safetensors")) == weights
    for name in weights:
        assert not (out / name).is_symlink() and os.stat(out / name).st_ino != os.stat(src / name).st_ino
        assert (out / name).read_bytes() == (src / name).read_bytes()
        assert r.manifest.files[name].sha256 == r.manifest.inputs.model_weights[name]
    assert not any(p.is_symlink() for p in out.iterdir())
    assert any("another filesystem" in line and "copied" in line for line in logs)
    assert r.manifest.size.compression == 1.0 and r.manifest.verification.vision_bf16


def test_a_source_changed_while_it_is_copied_is_refused_by_name(tmp_path):
    from quantgate.errors import VerificationError
    from quantgate.quantize.store import copy_verified

    (tmp_path / "src").mkdir()
    (tmp_path / "dst").mkdir()
    (tmp_path / "src" / "model.safetensors").write_bytes(b"weights as they are now")
    fingerprinted = sha256_file(tmp_path / "src" / "model.safetensors")
    (tmp_path / "src" / "model.safetensors").write_bytes(b"weights as they were then")
    with pytest.raises(VerificationError, match=r"src/model\.safetensors: changed while it was copied"):
        copy_verified(tmp_path / "src", tmp_path / "dst", {"model.safetensors": fingerprinted})
    assert not any((tmp_path / "dst").iterdir())  # nothing half-written left behind


def test_a_variant_built_before_on_the_machine_is_reused_by_a_new_folder(tiny_models, tmp_path):
    src = tiny_models["llava"]
    first = quantize(src, "fp8-dynamic", tmp_path / "study1" / "fp8", log=_quiet)
    assert not first.reused
    logs: list[str] = []
    again = quantize(src, "fp8-dynamic", tmp_path / "study2" / "fp8", log=logs.append)
    assert again.reused and any("built on this machine" in line for line in logs)
    assert again.manifest.files == first.manifest.files and again.manifest.name == "fp8"
    for name in first.manifest.files:
        a, b = os.stat(tmp_path / "study1" / "fp8" / name), os.stat(tmp_path / "study2" / "fp8" / name)
        assert a.st_ino == b.st_ino and not (tmp_path / "study2" / "fp8" / name).is_symlink()


def test_a_stored_variant_whose_files_changed_is_rebuilt_not_reused(tiny_models, tmp_path):
    src = tiny_models["llava"]
    first = quantize(src, "fp8-dynamic", tmp_path / "a", log=_quiet)
    w = next(n for n in first.manifest.files if n.endswith(".safetensors"))
    p = tmp_path / "a" / w  # the same inode as the store's copy: editing it edits the stored one
    data = bytearray(p.read_bytes())
    data[-1] ^= 0xFF
    p.unlink()
    p.write_bytes(bytes(data))  # a new file in study a only: the store still holds the original ...
    store_file = next(f for f in (tmp_path / "machine-cache" / "variants").rglob(w))
    with open(store_file, "r+b") as fh:  # ... which is then damaged too
        fh.seek(-1, 2)
        fh.write(bytes([data[-1]]))
    logs: list[str] = []
    again = quantize(src, "fp8-dynamic", tmp_path / "b", log=logs.append)
    assert not again.reused and any("files changed" in line for line in logs)
    assert sha256_file(tmp_path / "b" / w) == first.manifest.files[w].sha256


def test_no_store_when_the_machine_cache_is_off(tiny_models, tmp_path, monkeypatch):
    monkeypatch.setenv("QUANTGATE_CACHE_DIR", "none")
    quantize(tiny_models["llava"], "fp8-dynamic", tmp_path / "a", log=_quiet)
    assert not quantize(tiny_models["llava"], "fp8-dynamic", tmp_path / "b", log=_quiet).reused


def test_flashinfer_prebuild_runs_once_per_machine_under_a_lock(tmp_path):
    count = tmp_path / "builds"
    fake = tmp_path / "python"  # stands in for vLLM's interpreter: each run is one build, taking a moment
    fake.write_text(f"#!/bin/sh\necho built >> {count}\nsleep 1\n")
    fake.chmod(0o755)
    prefix = [str(fake), "-m", "vllm.entrypoints.cli.main"]
    results = []
    threads = [threading.Thread(target=lambda: results.append(prebuild_flashinfer(prefix, _quiet)))
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.status for r in results) == ["built", "cached", "cached"]
    assert count.read_text().count("built") == 1
    assert prebuild_flashinfer(prefix, _quiet).status == "cached"
    nothing = tmp_path / "python-without-flashinfer"
    nothing.write_text("#!/bin/sh\nexit 3\n")
    nothing.chmod(0o755)
    assert prebuild_flashinfer([str(nothing), "-m", "vllm"], _quiet).status == "unavailable"


def test_two_studies_serve_a_stored_variant_from_one_path(tiny_models, tmp_path, monkeypatch):
    """vLLM keys its compile cache by the served path among the rest: a variant the machine store holds is served
    from the store's folder, the same path in every study (the study's own folder still holds its files)."""
    import json
    import shlex
    import sys

    import yaml

    from quantgate.study import run_study

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    body = {"name": "paths", "model": str(tiny_models["qwen2_5_vl"]),
            "pages": {"synth": {"n": 4, "profile": "simple", "calibration_fraction": 0.0}},
            "variants": [{"name": "bf16", "recipe": "bf16"}, {"name": "fp8", "recipe": "fp8-dynamic"}],
            "backend": {"name": "vllm", "vllm_cmd": f"{shlex.quote(sys.executable)} -m tests.support.fake_vllm",
                        "compile_cache": "none", "startup_timeout_s": 60},
            "concurrency": [1], "max_tokens": 8, "metrics": ["ned"], "min_pages": 2, "resamples": 1000}
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(body))
    served = {}
    for study in ("first", "second"):
        run_study(tmp_path / "study.yaml", tmp_path / study, log=_quiet, stop_after="serve")
        for v in ("bf16", "fp8"):
            cmd = json.loads((tmp_path / study / "runs" / v / "run.json").read_text())["server_command"]
            served[(study, v)] = cmd[cmd.index("serve") + 1]
    store = (tmp_path / "machine-cache" / "variants").resolve()
    for v in ("bf16", "fp8"):
        assert served[("first", v)] == served[("second", v)]
        assert os.path.dirname(served[("first", v)]) == str(store)
    assert served[("first", "bf16")] != served[("first", "fp8")]
