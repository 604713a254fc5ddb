"""``vllm serve`` in its own interpreter (vLLM pins its own torch), and what its log says: the
version, the linear kernels it chose, and the engine settings that shape speed (compilation, CUDA
graphs, batching limits, KV-cache dtype, whether the compile cache was hit). The log line formats are
vLLM 0.26.0's, read from its source; every parser takes the log text of one start."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

from pydantic import Field

from quantgate.errors import InputError
from quantgate.schema.run import EngineSettings, LogFacts
from quantgate.serve.backends.base import Backend, ServerArgs, register_backend
from quantgate.serve.kernels import kernels_from_log

VLLM_ENV = "QUANTGATE_VLLM"
# Environment that changes vLLM's numerics, speed or compile-cache use, recorded in run.json when set.
# (VLLM_CACHE_ROOT and CUDA_VISIBLE_DEVICES are not part of vLLM 0.26's compile-cache key; the others are.)
ENGINE_ENV = ("CUDA_VISIBLE_DEVICES", "VLLM_BATCH_INVARIANT", "VLLM_CACHE_ROOT", "VLLM_DISABLE_COMPILE_CACHE",
              "TRITON_CACHE_DIR", "VLLM_USE_AOT_COMPILE", "VLLM_DISABLED_KERNELS", "TORCH_COMPILE_DISABLE",
              "VLLM_USE_FLASHINFER_SAMPLER")


class VllmOptions(ServerArgs):
    vllm_cmd: str | None = Field(None, min_length=1, description=f"command that runs vLLM's CLI, e.g. "
                                 f"'/opt/vllm/bin/vllm' or 'python3 -m vllm.entrypoints.cli.main' (default ${VLLM_ENV})")
    tensor_parallel_size: int = Field(1, gt=0, description="GPUs per model replica (vLLM --tensor-parallel-size)")
    data_parallel_size: int = Field(1, gt=0, description="model replicas (vLLM --data-parallel-size)")
    max_model_len: int | None = Field(None, gt=0, description="context length vLLM reserves KV cache for")
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1, description="fraction of GPU memory vLLM may use")
    startup_timeout_s: float = Field(1200.0, gt=0, description="seconds to wait for the server to become healthy")
    compile_cache: str | None = Field(
        None, min_length=1, description="folder for vLLM's compile caches, exported as VLLM_CACHE_ROOT (and Triton's "
        "as TRITON_CACHE_DIR under it unless set), so a later start of the same variant and settings loads its "
        "compiled graphs instead of compiling; 'none': vLLM's compile cache off (every start compiles). Default: "
        "the machine's quantgate cache (~/.cache/quantgate/vllm, $QUANTGATE_CACHE_DIR/vllm), shared by every study "
        "and serve on the machine")

    def takes_most_of_a_gpu(self) -> bool:
        # vLLM reserves gpu_memory_utilization of the GPU (0.9 by default) and refuses to start below it
        return not self.gpu_memory_utilization

    def resolved(self, base: Path, out: Path) -> VllmOptions:
        """Every server of every study on the machine shares the default compile cache (``default_compile_cache``)
        unless the study names a folder (relative to the study file) or ``none``: vLLM keys it by content, so each
        variant compiles once per machine and a rerun or a second study of the same checkpoint starts warm."""
        cc = self.compile_cache
        if cc is None:
            cc = default_compile_cache()
        elif cc.lower() != "none":
            q = Path(os.path.expanduser(cc))
            cc = str((q if q.is_absolute() else Path(base) / q).resolve())
        return self.model_copy(update={"compile_cache": cc})


@register_backend("vllm")
class VllmBackend(Backend):
    """vllm serve, started per variant from its own environment (--vllm-cmd or $QUANTGATE_VLLM)."""

    Options = VllmOptions
    options: VllmOptions

    def command_prefix(self) -> list[str]:
        cmd = self.options.vllm_cmd or os.environ.get(VLLM_ENV)
        if not cmd:
            raise InputError(f"vLLM backend needs its command: pass --vllm-cmd or set {VLLM_ENV} "
                             "(e.g. '/opt/vllm-env/bin/vllm' or 'python3 -m vllm.entrypoints.cli.main')")
        return shlex.split(cmd)

    def server(self, model: Path, log_path: Path):
        from quantgate.serve.server import ManagedServer

        prefix, o = self.command_prefix(), self.options

        def cmd(port: int) -> list[str]:
            c = [*prefix, "serve", str(model), "--host", "127.0.0.1", "--port", str(port),
                 "--served-model-name", str(model), "--tensor-parallel-size", str(o.tensor_parallel_size),
                 "--data-parallel-size", str(o.data_parallel_size),
                 "--limit-mm-per-prompt", '{"image":1,"video":0}']
            if o.max_model_len:
                c += ["--max-model-len", str(o.max_model_len)]
            if o.gpu_memory_utilization:
                c += ["--gpu-memory-utilization", str(o.gpu_memory_utilization)]
            return c + list(o.extra_args)

        return ManagedServer(name=f"vllm serve {model.name}", make_command=cmd, log_path=log_path,
                             env=self.cache_env(), startup_timeout_s=o.startup_timeout_s)

    def cache_env(self) -> dict[str, str]:
        """The environment ``compile_cache`` asks for. An absolute root: vLLM keys its cache by content, not by
        where the root is (VLLM_CACHE_ROOT is not in the key), so every server of a study can share one."""
        cc = self.options.compile_cache or default_compile_cache()
        if cc is None:
            return {}
        if cc.lower() == "none":
            return {"VLLM_DISABLE_COMPILE_CACHE": "1"}
        root = Path(cc).expanduser().resolve()
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(f"compile cache {cc}: cannot use it as a folder ({e}); pass another --compile-cache "
                             "(or 'none')") from None
        env = {"VLLM_CACHE_ROOT": str(root)}
        # vLLM redirects Triton into each compiled graph's own key folder once it compiles; this one holds what
        # is JIT-compiled outside that (eager / mode 0 servers, kernels built before the model compile).
        if "TRITON_CACHE_DIR" not in os.environ:
            env["TRITON_CACHE_DIR"] = str(root / "triton")
        return env

    engine_env = ENGINE_ENV

    def engine_settings(self, text: str) -> EngineSettings:
        return engine_from_log(text)

    def read_log(self, text: str) -> LogFacts:
        version = version_from_log(text)
        # what the kernels compute per format (Marlin NVFP4: weight-only) is written by Backend.numerics
        return LogFacts(kernels=kernels_from_log(text), server_version=f"vllm {version}" if version else None)

    def preemptions(self, base_url: str) -> int | None:
        from quantgate.serve.prometheus import PREEMPTIONS, scrape_counter

        n = scrape_counter(base_url, PREEMPTIONS)
        return None if n is None else int(n)


def default_compile_cache() -> str | None:
    """``vllm`` under the machine's quantgate cache (``io.cachedir``); None when that cache is off (vLLM's own
    default then: ~/.cache/vllm)."""
    from quantgate.io.cachedir import cache_dir

    d = cache_dir("vllm")
    return None if d is None else str(d)


_VERSION_RE = re.compile(r"vLLM API server version (\S+)|LLM engine \(v(\d[\w.+-]*)\)", re.I)


def version_from_log(text: str) -> str | None:
    m = _VERSION_RE.search(text)
    return (m.group(1) or m.group(2)) if m else None


# --- engine settings (vLLM 0.26.0 line formats) ---------------------------------------------------
# The whole config, printed once per start by EngineCore (``VllmConfig.__str__``); the fields below are read
# from that one line only (the "non-default args" line repeats some of them with the user's raw values).
_INIT_LINE = re.compile(r"Initializing a V1 LLM engine \(v[^)]*\) with config: (.*)$", re.M)
_IN_CONFIG = {
    "compilation": re.compile(r"'mode': <CompilationMode\.(\w+): \d+>"),
    "cudagraph_mode": re.compile(r"'cudagraph_mode': <CUDAGraphMode\.(\w+):"),
    "cudagraph_capture_sizes": re.compile(r"'cudagraph_capture_sizes': \[([\d, ]*)\]"),
    "enforce_eager": re.compile(r"\benforce_eager=(True|False)"),
    "prefix_caching": re.compile(r"\benable_prefix_caching=(True|False)"),
    "kv_cache_dtype": re.compile(r"\bkv_cache_dtype=(\w+)"),
    "speculative": re.compile(r"\bspeculative_config=(None|SpeculativeConfig\(.*?\))(?=, tokenizer=)"),
    "dtype": re.compile(r"\bdtype=(?:torch\.)?(\w+)"),
}
_IN_LOG = {  # elsewhere in the log; the last occurrence wins
    "max_num_batched_tokens": re.compile(r"Chunked prefill is enabled with max_num_batched_tokens=(\d+)\."),
    "max_num_seqs": re.compile(r"non-default args: \{.*'max_num_seqs': (\d+)"),
    "async_scheduling": re.compile(r"Asynchronous scheduling is (enabled|disabled)\."),
    "attention_backend": re.compile(r"Using (\w+) attention backend out of potential backends"),
    "cudagraph_mode_effective": re.compile(r"CUDAGraphMode\.\w+ is not supported with .*?; setting cudagraph_mode=(\w+)"),
    "compile_cache_dir": re.compile(r"Using cache directory: (\S+) for vLLM's torch\.compile"),
    "compile_s": re.compile(r"torch\.compile (?:and initial profiling/warmup run together )?took ([\d.]+) s in total"),
    "init_engine_s": re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s"),
    "graph_capture_s": re.compile(r"Graph capturing finished in ([\d.]+) secs"),
}
# vLLM's log prefix "(EngineCore pid=9) INFO 12-02 01:44:24 [monitor.py:81] …": month-day and time, no year
_STAMP = re.compile(r"\b(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d) \[")
_PROFILED = re.compile(r"^.*Initial profiling/warmup run took.*$", re.M)
_KV_LINE = re.compile(r"^.*(?:Initial free memory|GPU KV cache size).*$", re.M)
_WARMED = re.compile(r"^.*(?:Kernel JIT monitor activated|init engine \(profile, create kv cache, warmup model\) took).*$",
                     re.M)
_COLD = re.compile(r"Compiling a graph for compile range|Compiling model again due to a load failure")
_WARM = re.compile(r"Directly load AOT compilation from path|Directly load the compiled graph\(s\) for compile range")
_UNCACHED = re.compile(r"vLLM's torch\.compile cache is disabled\.")


def _last(rx: re.Pattern, text: str) -> str | None:
    found = None
    for m in rx.finditer(text):
        found = m.group(1)
    return found


def compile_start_from_log(text: str, compilation: str | None) -> str | None:
    """cold (compiled and stored), warm (loaded from the compile cache: an AOT or compiled-graph hit and no
    graph compiled), uncached (compiled, cache off), none (nothing compiled), or None (the log says nothing)."""
    if compilation == "NONE":
        return "none"
    if _UNCACHED.search(text):
        return "uncached"
    if _COLD.search(text):
        return "cold"
    if _WARM.search(text):
        return "warm"
    return None


def log_seconds(line: str) -> float | None:
    """A vLLM log line's stamp as seconds (a leap year's, UTC: only differences within one start mean anything)."""
    from datetime import datetime, timezone

    m = _STAMP.search(line)
    if not m:
        return None
    mo, d, h, mi, se = (int(x) for x in m.groups())
    try:  # the log has no year: a leap year, so that 02-29 reads; a difference within one start is the same
        return datetime(2000, mo, d, h, mi, se, tzinfo=timezone.utc).timestamp()  # no DST jumps
    except ValueError:
        return None


def _span_after_last(text: str, first: re.Pattern, then: re.Pattern) -> float | None:
    """Seconds from the last line ``first`` matches to the next line ``then`` matches after it (the last start's
    span); None without such a pair, or when the stamps run backwards (a year's turn)."""
    last = next(reversed(list(first.finditer(text))), None)
    end = then.search(text, last.end()) if last else None
    if not last or not end:
        return None
    a, b = log_seconds(last.group(0)), log_seconds(end.group(0))
    return float(b - a) if a is not None and b is not None and b >= a else None


def profile_wait_from_log(text: str) -> float | None:
    """Seconds between the last profiling/warm-up line and the KV-cache line after it; None when the log has no
    such pair (an eager start logs no warm-up line) or the stamps run backwards (a year's turn)."""
    return _span_after_last(text, _PROFILED, _KV_LINE)


def warmup_wait_from_log(text: str) -> float | None:
    """Seconds from the last start's KV-cache line to the end of its warm-up (the first line after it that says the
    engine is warmed up); None when the log has no such pair or the stamps run backwards."""
    return _span_after_last(text, _KV_LINE, _WARMED)


def engine_from_log(text: str) -> EngineSettings:
    """The engine settings one vLLM start printed: its config line, scheduler and attention choices, and the
    compile-cache lines (cold or warm, compile and engine-init seconds). Fields the log lacks stay None."""
    found: dict[str, Any] = {}
    init = None
    for m in _INIT_LINE.finditer(text):
        init = m.group(1)
    if init is not None:
        found.update({k: m.group(1) for k, rx in _IN_CONFIG.items() if (m := rx.search(init))})
    found.update({k: _last(rx, text) for k, rx in _IN_LOG.items()})
    sizes = found.pop("cudagraph_capture_sizes", None)
    out: dict[str, Any] = {k: v for k, v in found.items() if v is not None}
    if sizes is not None:
        out["cudagraph_capture_sizes"] = [int(x) for x in sizes.replace(",", " ").split()]
    for k in ("enforce_eager", "prefix_caching"):
        if k in out:
            out[k] = out[k] == "True"
    if "async_scheduling" in out:
        out["async_scheduling"] = out["async_scheduling"] == "enabled"
    if out.get("speculative") == "None":
        out["speculative"] = None
    for k in ("max_num_batched_tokens", "max_num_seqs"):
        if k in out:
            out[k] = int(out[k])
    for k in ("compile_s", "init_engine_s", "graph_capture_s"):
        if k in out:
            out[k] = float(out[k])
    out["compile_start"] = compile_start_from_log(text, out.get("compilation"))
    out["profile_wait_s"] = profile_wait_from_log(text)
    out["warmup_wait_s"] = warmup_wait_from_log(text)
    return EngineSettings(**out)


def probe_version(cmd: str | None) -> tuple[str | None, str]:
    """(version, status) from ``CMD --version``: whether the configured vLLM command runs at all."""
    if not cmd:
        return None, f"not configured (set ${VLLM_ENV} or pass --vllm-cmd)"
    try:
        r = subprocess.run([*shlex.split(cmd), "--version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{cmd!r} did not run: {e}"
    if r.returncode != 0:
        return None, f"{cmd!r} --version exited {r.returncode}: {(r.stderr or r.stdout).strip()[-200:]}"
    return r.stdout.strip().splitlines()[-1] if r.stdout.strip() else "?", "ok"
