"""Backend construction and vLLM log parsing (CPU), plus a real vLLM run behind the gpu marker; the
backend registry, the flags and study schema derived from it, the external-command backend and a
resumed run keeping its server facts (CPU, stub server)."""

import json
import os
import shlex
from pathlib import Path

import pytest

from quantgate.errors import InputError
from quantgate.serve.backends import make_backend
from quantgate.serve.backends.vllm import kernels_from_log, version_from_log
from quantgate.serve.run import ServeHooks, ServeOptions
from tests.support.paths import REPO

VLLM_LOG = """INFO 11-29 12:00:01 [api_server.py:1] vLLM API server version 0.26.0
INFO 11-29 12:00:09 [fp8.py:88] Selected CutlassFP8ScaledMMLinearKernel for CompressedTensorsW8A8Fp8
INFO 11-29 12:00:09 [__init__.py:978] Using MarlinNvFp4LinearKernel for NVFP4 GEMM
"""


def test_vllm_command_carries_engine_arguments(tmp_path, monkeypatch):
    monkeypatch.setenv("QUANTGATE_VLLM", "python3 -m vllm.entrypoints.cli.main")
    b = make_backend("vllm", tensor_parallel_size=2, max_model_len=8192, gpu_memory_utilization=0.8,
                     extra_args=["--enforce-eager"])
    srv = b.server(tmp_path / "model", tmp_path / "log")
    cmd = srv.make_command(8123)
    assert cmd[:4] == ["python3", "-m", "vllm.entrypoints.cli.main", "serve"]
    joined = shlex.join(cmd)
    for part in ("--port 8123", "--tensor-parallel-size 2", "--max-model-len 8192", "--gpu-memory-utilization 0.8",
                 "--enforce-eager", "--limit-mm-per-prompt"):
        assert part in joined


def test_vllm_without_a_command_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv("QUANTGATE_VLLM", raising=False)
    with pytest.raises(InputError, match="QUANTGATE_VLLM"):
        make_backend("vllm").server(tmp_path, tmp_path / "log")


def test_kernels_parsed_from_the_log():
    k = kernels_from_log(VLLM_LOG)
    assert k == {"CompressedTensorsW8A8Fp8": {"CutlassFP8ScaledMMLinearKernel": 1}, "NVFP4": {"MarlinNvFp4LinearKernel": 1}}


def test_openai_backend_needs_an_endpoint():
    with pytest.raises(InputError, match="--endpoint"):
        make_backend("openai")


@pytest.mark.gpu
def test_vllm_serves_a_fixture(tiny_models, synth_pageset, tmp_path):
    """On the H200: QUANTGATE_VLLM must point at vLLM 0.26 (docs/gpu.md)."""
    from quantgate.serve import load_records, serve_variant

    assert os.environ.get("QUANTGATE_VLLM"), "set QUANTGATE_VLLM"
    b = make_backend("vllm", extra_args=["--enforce-eager", "--gdn-prefill-backend", "triton"])
    m = serve_variant(tiny_models["qwen3_5"], synth_pageset, b, tmp_path / "run", ServeOptions(concurrency=[1, 4], max_tokens=8), hooks=ServeHooks(log=lambda s: None))
    recs = load_records(tmp_path / "run")
    assert len(recs) == 2 * m.levels[0].n_requests and all(r.error is None for r in recs)
    assert m.server_version and m.server_version.startswith("vllm")
    assert Path(tmp_path / "run" / "server.log").is_file()


def test_vllm_version_read_from_its_log():
    line = "(EngineCore pid=1365) INFO 11-29 20:13:21 [core.py:116] Initializing a V1 LLM engine (v0.26.0) with config"
    assert version_from_log(line) == "0.26.0"
    assert version_from_log(VLLM_LOG) == "0.26.0"
    assert version_from_log("INFO nothing about versions here") is None


# --- the registry: one file per backend, flags and study schema derived ---------------

def _qg(*args, env=None, **kw):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "quantgate", *args], capture_output=True, text=True, env=env,
                          timeout=300, **kw)


def test_registry_lists_every_backend_and_an_unknown_name_says_which_exist():
    from quantgate.serve.backends import registered

    assert {"transformers", "vllm", "openai", "external"} <= set(registered())
    with pytest.raises(InputError, match=r"unknown backend 'sglang'; known backends: external, openai, transformers"):
        make_backend("sglang")


def test_every_backend_option_is_a_flag_of_serve_and_lmeval_and_a_study_key():
    from quantgate.cli import build_parser
    from quantgate.serve.backends import registered
    from quantgate.serve.backends.base import flag_of
    from quantgate.study.spec import Study

    parser = build_parser()
    verbs = parser._subparsers._group_actions[0].choices
    for verb in ("serve", "lmeval"):
        flags = {o for a in verbs[verb]._actions for o in a.option_strings}
        for name, cls in registered().items():
            assert cls.Options.model_config.get("extra") == "forbid", name
            for field in cls.Options.model_fields:
                assert flag_of(cls.Options, field) in flags, (verb, name, field)
        backend = next(a for a in verbs[verb]._actions if "--backend" in a.option_strings)
        assert sorted(backend.choices) == sorted(registered())
    for name, cls in registered().items():
        required = {f: "http://h:1/v1" if f == "endpoint" else "x --port {port}"
                    for f, i in cls.Options.model_fields.items() if i.is_required()}
        st = Study.model_validate({"name": "s", "model": "m", "pages": {"path": "p"}, "variants": [
            {"name": "bf16", "recipe": "bf16"}, {"name": "b", "recipe": "bf16"}], "backend": {"name": name, **required}})
        assert st.backend.name == name and type(st.backend).__mro__[1] is cls.Options


def test_flags_are_checked_against_the_chosen_backend(tmp_path):
    import argparse

    from quantgate.serve.backends.derive import add_backend_flags, backend_from_args

    p = argparse.ArgumentParser()
    add_backend_flags(p)
    b = backend_from_args(p.parse_args(["--backend", "vllm", "--tensor-parallel-size", "2", "--server-arg=-x",
                                        "--server-arg", "y"]), variant="v")
    assert (b.name, b.options.tensor_parallel_size, b.options.extra_args) == ("vllm", 2, ["-x", "y"])
    b = backend_from_args(p.parse_args(["--backend", "openai", "--endpoint", "http://h:8000/v1"]), variant="served")
    assert b.model_name(Path("ignored")) == "served"  # the VARIANT argument names the model at an endpoint
    with pytest.raises(InputError, match=r"--vllm-cmd is not an option of backend transformers \(it is for: vllm\)"):
        backend_from_args(p.parse_args(["--vllm-cmd", "vllm"]))
    with pytest.raises(SystemExit):  # the field's constraint is the flag's type: refused while parsing
        p.parse_args(["--backend", "vllm", "--tensor-parallel-size", "0"])
    a = p.parse_args(["--backend", "vllm"])
    a.backend_option__tensor_parallel_size = 0  # and again when the backend is built
    with pytest.raises(InputError, match=r"backend vllm: --tensor-parallel-size: Input should be greater than 0"):
        backend_from_args(a)
    with pytest.raises(InputError, match=r"backend openai: --endpoint: Field required"):
        backend_from_args(p.parse_args(["--backend", "openai"]))
    with pytest.raises(InputError, match=r"--start-command: Value error, must contain \{port\}"):
        backend_from_args(p.parse_args(["--backend", "external", "--start-command", "llama-server"]))


def test_cli_refuses_a_flag_of_another_backend_in_one_line(tmp_path):
    r = _qg("serve", "m", "--pages", str(tmp_path), "-o", str(tmp_path / "o"), "--endpoint", "http://h:1/v1")
    assert r.returncode == 64 and "Traceback" not in r.stderr
    assert r.stderr.strip() == ("quantgate serve: error: --endpoint is not an option of backend transformers "
                                "(it is for: openai)")


def _study(tmp_path, backend, server_args=None):
    from quantgate.study import load_study

    v2 = {"name": "fp8", "recipe": "fp8-dynamic", **({"server_args": server_args} if server_args else {})}
    doc = {"name": "s", "model": "m", "pages": {"path": "p"}, "variants": [{"name": "bf16", "recipe": "bf16"}, v2]}
    if backend is not None:
        doc["backend"] = backend
    (tmp_path / "s.yaml").write_text(json.dumps(doc))
    return load_study(tmp_path / "s.yaml")


def test_study_backend_block_is_each_backends_own_schema(tmp_path):
    from quantgate.serve.backends.derive import backend_from_spec

    st = _study(tmp_path, None)
    assert st.backend.name == "transformers" and st.backend.device == "cpu"  # the default, without a name
    st = _study(tmp_path, {"device": "cuda:0"})
    assert st.backend.name == "transformers" and st.backend.device == "cuda:0"
    st = _study(tmp_path, {"name": "vllm", "max_model_len": 8192, "extra_args": ["-a"]}, server_args=["-b"])
    b = backend_from_spec(st.backend, st.variants[1].server_args)
    assert (b.name, b.options.max_model_len, b.options.extra_args) == ("vllm", 8192, ["-a", "-b"])
    with pytest.raises(InputError, match=r"field 'backend\.transformers\.vllm_cmd': Extra inputs are not permitted"):
        _study(tmp_path, {"name": "transformers", "vllm_cmd": "vllm"})
    with pytest.raises(InputError, match=r"field 'backend\.vllm\.gpu_memory_utilization': Input should be less"):
        _study(tmp_path, {"name": "vllm", "gpu_memory_utilization": 1.5})
    with pytest.raises(InputError, match=r"field 'backend'.*'sglang'.*'external', 'openai', 'transformers', 'vllm'"):
        _study(tmp_path, {"name": "sglang"})
    with pytest.raises(InputError, match=r"variants\.1\.server_args: backend openai starts no server"):
        _study(tmp_path, {"name": "openai", "endpoint": "http://h:1/v1"}, server_args=["-x"])


DROPPED_IN = '''
from pydantic import Field

from quantgate.serve.backends.base import Backend, BackendOptions, register_backend


class TritonishOptions(BackendOptions):
    grpc_port: int = Field(8001, gt=0, description="the server's gRPC port")


@register_backend("tritonish")
class TritonishBackend(Backend):
    """a backend added as one file."""

    Options = TritonishOptions

    def server(self, model, log_path):
        return None
'''


def test_a_backend_dropped_in_as_one_file_gets_flags_and_a_study_schema(tmp_path):
    """Discovery imports every module of the backends package: a new file there (here: a folder added
    to the package's search path, so the source tree stays untouched) is a backend everywhere."""
    import subprocess
    import sys

    drop = tmp_path / "drop"
    drop.mkdir()
    (drop / "tritonish.py").write_text(DROPPED_IN)
    code = f"""
import json, sys
import quantgate.serve.backends as pkg
pkg.__path__.append({str(drop)!r})
from quantgate.cli import build_parser
from quantgate.errors import InputError
from quantgate.study.spec import Study
verbs = build_parser()._subparsers._group_actions[0].choices
flags = {{v: sorted(o for a in verbs[v]._actions for o in a.option_strings) for v in ("serve", "lmeval")}}
doc = {{"name": "s", "model": "m", "pages": {{"path": "p"}}, "variants": [{{"name": "a", "recipe": "bf16"}},
       {{"name": "bf16", "recipe": "bf16"}}], "backend": {{"name": "tritonish", "grpc_port": 9}}}}
st = Study.model_validate(doc)
doc["backend"]["grpc_port"] = 0
try:
    Study.model_validate(doc)
    refused = False
except Exception as e:
    refused = "greater than 0" in str(e)
print(json.dumps({{"flags": flags, "port": st.backend.grpc_port, "refused": refused}}))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert "--grpc-port" in got["flags"]["serve"] and "--grpc-port" in got["flags"]["lmeval"]
    assert got["port"] == 9 and got["refused"]
    from quantgate.cli import build_parser  # and in this process, without the extra folder, it is not there

    serve = build_parser()._subparsers._group_actions[0].choices["serve"]
    assert "--grpc-port" not in {o for a in serve._actions for o in a.option_strings}


# --- the external backend: a server started by a user-given command (the docs' worked example) ----

def _stub_command(*extra):
    import shlex
    import sys

    return f"{shlex.quote(sys.executable)} -m tests.support.stub --port {{port}} {' '.join(extra)}".strip()


@pytest.fixture(scope="module")
def stub_pages(tmp_path_factory):
    from quantgate.heldout.synth import synth_pages

    out = tmp_path_factory.mktemp("ext") / "pages"
    synth_pages(out, 4, seed=7, profile="simple", calibration_fraction=0.0)
    return out


def test_external_backend_starts_the_users_command_and_stops_it(stub_pages, tmp_path):
    import psutil

    from quantgate.serve import load_records, serve_variant

    b = make_backend("external", start_command=_stub_command(), model="stub")
    assert not b.serves_local_weights  # the command does not name {model}: a name, not a folder
    m = serve_variant(Path("stub"), stub_pages, b, tmp_path / "run", ServeOptions(concurrency=[1, 2], max_tokens=8), hooks=ServeHooks(log=lambda s: None))
    recs = load_records(tmp_path / "run")
    assert len(recs) == 8 and all(r.error is None and r.output == "# Title\n\nhello world" for r in recs)
    assert m.backend == "external" and m.variant_fingerprint is None
    cmd = m.server_command
    assert cmd[1:4] == ["-m", "tests.support.stub", "--port"] and cmd[4].isdigit() and "{port}" not in cmd
    assert not any("tests.support.stub" in " ".join(p.cmdline()) for p in psutil.Process().children(recursive=True))


def test_external_backend_with_model_placeholder_checks_the_folder(stub_pages, tmp_path):
    from quantgate.serve import serve_variant

    b = make_backend("external", start_command=_stub_command() + " --text {model}", model="stub")
    assert b.serves_local_weights
    (tmp_path / "v").mkdir()
    with pytest.raises(InputError, match="not a model folder"):
        serve_variant(tmp_path / "v", stub_pages, b, tmp_path / "run", hooks=ServeHooks(log=lambda s: None))


def test_external_backend_from_the_command_line(stub_pages, tmp_path):
    r = _qg("serve", "stub", "--backend", "external", "--start-command", _stub_command(), "--health-path", "/health",
            "--pages", str(stub_pages), "--concurrency", "1", "--max-tokens", "8", "-o", str(tmp_path / "r"))
    assert r.returncode == 0, r.stderr
    assert "pages/s" in r.stdout
    run = json.loads((tmp_path / "r" / "run.json").read_text())
    assert run["backend"] == "external" and run["levels"][0]["n_requests"] == 4 and run["levels"][0]["n_errors"] == 0


# --- a resumed run keeps what an earlier start recorded ---------------------------------

def _logging_stub(tmp_path, lines: str):
    """The vllm backend (its own log reading) whose server prints ``lines`` and then runs the stub, on CPU."""
    import shlex
    import sys

    from quantgate.serve.backends.vllm import VllmBackend
    from quantgate.serve.server import ManagedServer

    banner = tmp_path / f"vllm-lines-{abs(hash(lines))}.txt"  # from a file: the command itself is logged too
    banner.write_text(lines)

    class LoggingStub(VllmBackend):
        def server(self, model, log_path):
            return ManagedServer("logging stub", lambda port: ["sh", "-c", f"cat {shlex.quote(str(banner))}; exec "
                                                               f"{shlex.quote(sys.executable)} -m tests.support.stub "
                                                               f"--port {port}"], log_path, startup_timeout_s=60)

        def model_name(self, model):
            return "stub"

    return LoggingStub()


def _fp8_nvfp4_variant(folder: Path) -> Path:
    """A variant folder whose config names an FP8-dynamic and an NVFP4 group (the stub never loads it)."""
    from compressed_tensors.quantization import preset_name_to_scheme

    groups = {f"group_{i}": {**preset_name_to_scheme(p, ["Linear"]).model_dump(mode="json"), "targets": [f"re:.*{i}$"]}
              for i, p in enumerate(["FP8_DYNAMIC", "NVFP4"])}
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "x", "quantization_config": {
        "quant_method": "compressed-tensors", "format": "mixed-precision", "config_groups": groups}}))
    (folder / "model.safetensors").write_bytes(b"\0" * 8)
    return folder


def test_resumed_run_keeps_kernels_version_command_and_notes(stub_pages, tmp_path):
    """A finished run rerun (nothing left to send: no server starts) used to rewrite run.json from a
    fresh manifest, dropping what the first start read from the server log. The numerics
    (per format, from the kernels the log names) are recorded and kept too."""
    from quantgate.serve import serve_variant

    variant = _fp8_nvfp4_variant(tmp_path / "variant")
    run = tmp_path / "run"
    first = serve_variant(variant, stub_pages, _logging_stub(tmp_path, VLLM_LOG), run, ServeOptions(concurrency=[1], max_tokens=8), hooks=ServeHooks(log=lambda s: None))
    assert first.server_version == "vllm 0.26.0" and first.server_command[:2] == ["sh", "-c"]
    assert first.kernels == {"CompressedTensorsW8A8Fp8": {"CutlassFP8ScaledMMLinearKernel": 1},
                             "NVFP4": {"MarlinNvFp4LinearKernel": 1}}
    num = first.numerics
    assert (num.backend, num.quantized, list(num.formats)) == ("vllm", True, ["fp8", "nvfp4"])
    assert (num.formats["fp8"].computes, num.formats["fp8"].kernel) == \
        ("weights+activations", "CutlassFP8ScaledMMLinearKernel")
    assert (num.formats["nvfp4"].computes, num.formats["nvfp4"].kernel) == ("weights-only", "MarlinNvFp4LinearKernel")
    assert any("nvfp4 runs weights-only" in n and "Marlin" in n for n in first.notes)
    # the notes of the numerics known before the log was read (no kernels: not measured) were replaced
    assert not any("weights-only or weights+activations not measured" in n for n in first.notes)
    before = json.loads((run / "run.json").read_text())
    assert before["numerics"] == num.model_dump()
    again = serve_variant(variant, stub_pages, _logging_stub(tmp_path, VLLM_LOG), run, ServeOptions(concurrency=[1], max_tokens=8), hooks=ServeHooks(log=lambda s: None))
    assert (run / "server.log").read_text().count("$ sh -c") == 1  # nothing left to send: no second start
    after = json.loads((run / "run.json").read_text())
    for key in ("kernels", "numerics", "server_version", "server_command", "notes", "levels"):
        assert after[key] == before[key], key
    assert again.kernels == first.kernels
    # a run.json an older quantgate wrote: no numerics, its unmeasured note; resumed, the measured ones replace it
    old_note = ("NVFP4 ran through Marlin weight-only kernels (pre-Blackwell GPU): activations stayed BF16, so this "
                "accuracy is not Blackwell's W4A4 accuracy")
    older = {**before, "numerics": None, "notes": [n for n in before["notes"] if "runs" not in n] + [old_note]}
    (run / "run.json").write_text(json.dumps(older))
    serve_variant(variant, stub_pages, _logging_stub(tmp_path, VLLM_LOG), run, ServeOptions(concurrency=[1], max_tokens=8), hooks=ServeHooks(log=lambda s: None))
    upgraded = json.loads((run / "run.json").read_text())
    assert upgraded["numerics"] == before["numerics"] and sorted(upgraded["notes"]) == sorted(before["notes"])


def test_server_facts_come_from_this_start_of_the_log_only(stub_pages, tmp_path):
    """server.log is appended across starts. An earlier start's lines (here: vLLM 0.26 with
    Cutlass and Marlin kernels) must not be read as this start's, which names none."""
    from quantgate.serve import serve_variant

    variant = _fp8_nvfp4_variant(tmp_path / "variant")
    run = tmp_path / "run"
    run.mkdir()
    (run / "server.log").write_text("$ vllm serve (an earlier start)\n" + VLLM_LOG)
    m = serve_variant(variant, stub_pages, _logging_stub(tmp_path, "INFO nothing about kernels\n"), run, ServeOptions(concurrency=[1], max_tokens=8), hooks=ServeHooks(log=lambda s: None))
    assert m.kernels == {} and m.server_version is None
    assert {f.evidence for f in m.numerics.formats.values()} == {"not measured"}
    assert not any("Marlin" in n or "Cutlass" in n for n in m.notes)
    assert sum("weights-only or weights+activations not measured" in n for n in m.notes) == 2  # fp8, nvfp4
    assert "MarlinNvFp4LinearKernel" in (run / "server.log").read_text()  # still there, for a reader of the log
    # a later start that names kernels: read from its own part
    (run / "run.json").unlink()
    (run / "requests.jsonl").unlink()
    m2 = serve_variant(variant, stub_pages, _logging_stub(tmp_path, VLLM_LOG.replace("0.26.0", "0.27.1")), run, ServeOptions(concurrency=[1], max_tokens=8), hooks=ServeHooks(log=lambda s: None))
    assert m2.server_version == "vllm 0.27.1" and m2.numerics.formats["nvfp4"].computes == "weights-only"


def test_the_docs_worked_example_is_the_shipped_file(tmp_path, monkeypatch):
    # docs/extending.md no longer copies external.py's source (a copy drifts); it names the shipped file as the
    # worked example and shows its command line and study block, which must be what that file accepts
    import re

    import yaml

    from quantgate import cli
    from quantgate.serve.backends.derive import backend_from_args
    from quantgate.serve.backends.external import ExternalBackend, ExternalOptions

    doc = (REPO / "docs" / "extending.md").read_text()
    section = doc[doc.index("## A backend"):]
    section = section[:section.index("\n## ", 1)] if "\n## " in section[1:] else section
    assert "The worked example is the one that ships" in section
    assert "`quantgate/serve/backends/external.py`" in section
    assert "worked example of docs/extending.md" in (REPO / "quantgate" / "serve" / "backends" / "external.py").read_text()
    bash = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    argv = shlex.split(bash.replace("\\\n", " "))
    assert argv[:2] == ["quantgate", "serve"]
    monkeypatch.chdir(tmp_path)  # the example's paths, so the real parser's existence checks pass
    (tmp_path / "model-fp8").mkdir()
    (tmp_path / "pages").mkdir()
    args = cli.build_parser().parse_args(argv[1:])
    b = backend_from_args(args, "model-fp8")
    assert isinstance(b, ExternalBackend)
    assert b.options.start_command == "python -m sglang.launch_server --model-path {model} --port {port}"
    assert b.options.health_path == "/health"
    block = yaml.safe_load(re.search(r"```yaml\n(.*?)```", section, re.S).group(1))["backend"]
    assert block.pop("name") == "external"
    assert ExternalOptions(**block).start_command == b.options.start_command
