"""The compile cache every study and serve on a machine shares by default, and its two overrides."""

from pathlib import Path

from quantgate.io.cachedir import cache_root
from quantgate.serve.backends.vllm import VllmBackend, VllmOptions
from quantgate.serve.warm import python_of


def _env(monkeypatch, home: Path, cache: str | None = None, xdg: str | None = None) -> None:
    monkeypatch.setenv("HOME", str(home))
    for k, v in (("QUANTGATE_CACHE_DIR", cache), ("XDG_CACHE_HOME", xdg)):
        if v is None:
            monkeypatch.delenv(k, raising=False)
        else:
            monkeypatch.setenv(k, v)


def test_two_studies_share_the_default_compile_cache_under_the_users_cache_folder(tmp_path, monkeypatch):
    _env(monkeypatch, tmp_path / "home")
    want = (tmp_path / "home" / ".cache" / "quantgate" / "vllm").resolve()
    a = VllmOptions().resolved(tmp_path / "s1", tmp_path / "s1" / "out")
    b = VllmOptions().resolved(tmp_path / "s2", tmp_path / "elsewhere" / "out")
    assert Path(a.compile_cache) == Path(b.compile_cache) == want
    env = VllmBackend(vllm_cmd="vllm").cache_env()  # `quantgate serve` without a study: the same folder
    assert Path(env["VLLM_CACHE_ROOT"]) == want and want.is_dir()
    assert "VLLM_DISABLE_COMPILE_CACHE" not in env


def test_the_cache_folder_follows_xdg_and_quantgate_cache_dir(tmp_path, monkeypatch):
    _env(monkeypatch, tmp_path / "home", xdg=str(tmp_path / "xdg"))
    assert cache_root() == (tmp_path / "xdg" / "quantgate").resolve()
    _env(monkeypatch, tmp_path / "home", cache=str(tmp_path / "qg"), xdg=str(tmp_path / "xdg"))
    assert Path(VllmOptions().resolved(tmp_path, tmp_path / "o").compile_cache) == (tmp_path / "qg" / "vllm").resolve()


def test_none_turns_the_compile_cache_off_and_a_named_folder_wins(tmp_path, monkeypatch):
    _env(monkeypatch, tmp_path / "home")
    off = VllmOptions(compile_cache="none").resolved(tmp_path, tmp_path / "o")
    assert off.compile_cache == "none"
    assert VllmBackend(vllm_cmd="vllm", compile_cache="none").cache_env() == {"VLLM_DISABLE_COMPILE_CACHE": "1"}
    named = VllmOptions(compile_cache="cc").resolved(tmp_path / "study", tmp_path / "o")
    assert Path(named.compile_cache) == (tmp_path / "study" / "cc").resolve()


def test_machine_cache_off_leaves_vllm_its_own_default(tmp_path, monkeypatch):
    _env(monkeypatch, tmp_path / "home", cache="none")
    assert cache_root() is None
    assert VllmOptions().resolved(tmp_path, tmp_path / "o").compile_cache is None
    assert VllmBackend(vllm_cmd="vllm").cache_env() == {}
    assert not (tmp_path / "home" / ".cache").exists()


def test_the_prebuild_runs_in_vllms_own_interpreter(tmp_path, monkeypatch):
    assert python_of(["env", "PYTHONPATH=/tmp/site", "python3", "-m", "vllm.entrypoints.cli.main"]) == \
        ["env", "PYTHONPATH=/tmp/site", "python3"]
    script = tmp_path / "bin" / "vllm"
    script.parent.mkdir()
    script.write_text("#!/opt/venv/bin/python3 -s\nimport vllm\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", str(script.parent))
    assert python_of(["vllm"]) == ["/opt/venv/bin/python3", "-s"]
    assert python_of(["no-such-vllm"]) is None
