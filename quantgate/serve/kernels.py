"""Which linear kernels vLLM chose, read from a server log, and how a decode profile's GEMM time splits
over them.

The log lines are vLLM 0.26.0's, read from its source: ``Selected <Kernel> for <Scheme>``
(``init_fp8_linear_kernel`` / ``init_int8_linear_kernel``, ``logger.info_once``), ``Using <Kernel> for
<Scheme>`` (``CompressedTensorsWNA16`` and the other mixed-precision schemes: logged once per kernel class
per process, kept in the scheme's ``_kernel_backends_being_used``) and ``Using <Kernel> for NVFP4 GEMM``
(also MXFP8 / MXFP4). vLLM chooses a kernel per layer, but it logs each distinct choice only once per process:
a scheme whose layers went to two kernels (W4A16 on Hopper: Machete where the shape allows it, Marlin
elsewhere) prints two lines, and nothing in the log says how many layers each got. So the counts here are
log lines (one per engine or worker process that made the choice); how much of the work each kernel did
is in the profile (:func:`gemm_time`).

Written by hand: no library parses vLLM's logs or maps its GPU kernel names to its kernel classes."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from quantgate.schema.run import KernelCounts, KernelTime

# The scheme a "for NVFP4 GEMM" line names is the format ("NVFP4"), as run.json has always recorded it.
_CHOICE = re.compile(r"\b(?:Using|Selected) ([A-Za-z0-9_]+Kernel) for ([A-Za-z0-9_]+)")


def kernels_from_log(text: str) -> KernelCounts:
    """scheme -> kernel -> how many log lines name that choice, in the order vLLM printed them. Lines from
    every process in ``text`` count: pass one start's text (a TP=2 start has two processes per choice)."""
    found: KernelCounts = {}
    for m in _CHOICE.finditer(text):
        per = found.setdefault(m.group(2), {})
        per[m.group(1)] = (per.get(m.group(1)) or 0) + 1
    return found


def kernel_names(kernels: Mapping[str, Mapping[str, int | None]]) -> list[str]:
    """Every kernel named, each once, in first-seen order."""
    return list(dict.fromkeys(k for per in kernels.values() for k in per))


# --- GPU kernel names (torch profiler) -> vLLM linear kernel --------------------------------------
# vLLM's ScalarType.id packs exponent (8 bits), mantissa (8), signed (1), bias (32), finite_values_only (1)
# and nan_repr (8), lowest first (vllm/scalar_type.py, v0.26.0). Marlin's template arguments start with the
# activation, weight, output and scale types as such ids, so its kernel name says which format it ran.
_MARLIN = re.compile(r"marlin::Marlin<(\d+)l?, (\d+)l?, (\d+)l?, (\d+)l?")


def _scalar(type_id: int) -> tuple[int, int, int]:
    """(exponent bits, mantissa bits, bias) of a vLLM ScalarType id."""
    return type_id & 0xFF, (type_id >> 8) & 0xFF, (type_id >> 17) & 0xFFFFFFFF


def _marlin(name: str) -> str:
    m = _MARLIN.search(name)
    if not m:
        return "Marlin (weight type not in the name)"
    (we, wm, _), (se, sm, _) = _scalar(int(m.group(2))), _scalar(int(m.group(4)))
    if we == 0:  # an integer weight type (uint4b8, uint8b128 …): the GPTQ/compressed-tensors WNA16 path
        return "MarlinLinearKernel"
    if (we, wm) == (2, 1):  # FP4 E2M1: the scale type tells NVFP4 (FP8 E4M3 scales) from MXFP4 (E8M0)
        return "MarlinNvFp4LinearKernel" if (se, sm) == (4, 3) else "MarlinMxFp4LinearKernel"
    if (we, wm) == (4, 3):
        return "MarlinFP8ScaledMMLinearKernel"
    return f"Marlin (weight type e{we}m{wm})"


# (label, regex on the kernel name); first match wins. The labels are vLLM's kernel classes where a name
# pins one down (read from the kernel names in vLLM 0.26's shared objects), else what ran.
_GEMM_NAMES = [
    ("MacheteLinearKernel", r"machete::"),
    ("marlin", r"marlin::"),
    # Inductor's generated Triton kernels carry the fused ops' names (an FP8 activation quantization fused
    # ahead of cutlass_scaled_mm reads "..._cutlass_scaled_mm_..."): they are not the GEMM itself.
    ("Inductor Triton kernel (fused ops)", r"^triton_"),
    ("CutlassFp8BlockScaledMMKernel", r"cutlass_3x_gemm_fp8_blockwise"),
    ("CutlassFP8ScaledMMLinearKernel", r"cutlass_3x_gemm\w*_fp8|cutlass_2x_gemm<[^>]*float_e4m3"),
    ("CutlassInt8ScaledMMLinearKernel", r"cutlass_3x_gemm\w*_int8|cutlass_2x_gemm<[^>]*int8"),
    ("CutlassNvFp4LinearKernel", r"Fp4GemmSm100|fp4_gemm"),
    ("cuBLAS (unquantized layers)", r"^nvjet|cublas|xmma_gemm|gemv|gemmk1|splitKreduce|cutlass_80_tensorop"
                                    r"|cutlass::Kernel2<cutlass_\d+_"),
]
_GEMM_RX = [(label, re.compile(rx)) for label, rx in _GEMM_NAMES]
UNATTRIBUTED = "not attributed (names beyond the profile's list)"


def gemm_kernel(name: str) -> str:
    """The vLLM linear kernel (or library) a GPU kernel of the GEMM class belongs to; ``other GEMM`` when
    no rule matches."""
    for label, rx in _GEMM_RX:
        if rx.search(name):
            return _marlin(name) if label == "marlin" else label
    return "other GEMM"


def gemm_time(rows: Iterable[Mapping], decode_steps: int, gemm_ms_per_step: float | None = None,
              ) -> dict[str, KernelTime]:
    """Per kernel: GPU ms and launches per decode step, and its share of the step's GEMM time, from
    ``rows`` of ``{"name", "ms_total", "count"}`` over ``decode_steps`` steps (the GEMM
    names the GPU sessions' profile.json kept: lab/2026-11-30-h200-serving-options/README.md). ``gemm_ms_per_step``: the class total, when ``rows`` lists only the heaviest names; the rest is
    the ``UNATTRIBUTED`` entry. Heaviest first."""
    if decode_steps <= 0:
        raise ValueError(f"decode_steps must be positive, not {decode_steps}")
    ms: dict[str, float] = {}
    launches: dict[str, float] = {}
    for r in rows:
        k = gemm_kernel(str(r["name"]))
        ms[k] = ms.get(k, 0.0) + float(r["ms_total"]) / decode_steps
        launches[k] = launches.get(k, 0.0) + float(r["count"]) / decode_steps
    listed = sum(ms.values())
    total = listed if gemm_ms_per_step is None else float(gemm_ms_per_step)
    if total + 1e-9 < listed:
        raise ValueError(f"the listed GEMM kernels take {listed:.4f} ms per step, more than the class total "
                         f"{total:.4f}: rows and total are from different profiles")
    if total - listed > 1e-6:
        ms[UNATTRIBUTED] = total - listed
    out = {k: KernelTime(ms_per_step=v, launches_per_step=launches.get(k), share_of_gemm=v / total if total else 0.0)
           for k, v in ms.items()}
    return dict(sorted(out.items(), key=lambda kv: -kv[1].ms_per_step))


def gemm_time_from_profile(entry: Mapping) -> dict[str, KernelTime]:
    """:func:`gemm_time` of one variant of a committed session ``profile.json``: its full GEMM list
    (``gemm_names``) when it has one, else the heaviest names it kept (``top_by_class.gemm``) with the
    rest unattributed."""
    gemm_ms = entry["classes"]["gemm"]["ms_per_step"]
    rows = entry.get("gemm_names")
    if rows is None:
        rows = entry["top_by_class"]["gemm"]
    return gemm_time(rows, int(entry["decode_steps"]), gemm_ms)
