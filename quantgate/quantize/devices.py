"""``quantgate quantize --devices 0,1 --max-memory 0=20GiB,1=20GiB``: a model too big for one GPU,
quantized with the same plan, verification and manifest, spread over several.

The path chosen is llmcompressor 0.14's own for the basic pipeline (its "Model Loading" guide: ``device_map=
"auto"`` loads onto every visible GPU): the model is loaded with accelerate's device map over the listed GPUs
under the caps — each decoder layer whole on one device (the model's ``_no_split_modules``) — and
``oneshot``'s pre-processing turns accelerate's hooks into compressed-tensors offloading (``from_accelerate``),
whose wrapped ``forward`` moves each module's inputs to its own device. Calibration then runs the same pages
through the same modules in the same order as on one GPU, so a scheme that needs no data (FP8_DYNAMIC) gives
the same weights whatever the map (measured on GPUs: not yet — docs/scale.md).

Not chosen: llmcompressor's distributed oneshot (torchrun, one process per GPU, each rank calibrating a share of
the pages, statistics all-reduced). It buys calibration time, not memory — each rank onloads layer by layer
from the CPU through the sequential pipeline, whose tracing VLMs often fail — needs a launcher and an NCCL
group inside ``quantize``, and reduces observer statistics over a partition of the pages, in another order
than one device. For the same reason ``--devices`` is refused with ``--pipeline sequential``: that pipeline
onloads every layer to one main device (``set_onload_device(model, get_main_device())``).

The map is planned here, on the meta device, before any weight is read (accelerate's ``infer_auto_device_map``,
the function ``from_pretrained`` itself uses), and the model is loaded with exactly that map: a cap the model
does not fit is one error before any work, and ``quantgate.json`` records the map that ran. Caps bound the
weights; leave headroom for activations (a page's vision tokens through the widest layer)."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from quantgate.errors import UsageError


def parse_devices(text: str) -> list[int]:
    """``--devices 0,1``: distinct CUDA device indices (as CUDA_VISIBLE_DEVICES numbers them), read as every other
    comma list of the CLI is (``cli._args.concurrency_list``: empty pieces skipped)."""
    try:
        devices = [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        devices = []
    if not devices or any(d < 0 for d in devices) or len(set(devices)) != len(devices):
        raise argparse.ArgumentTypeError(f"{str(text)[:40]!r}: expected distinct CUDA device indices (>= 0) separated "
                                         "by commas, e.g. 0,1")
    return devices


def parse_max_memory(text: str) -> dict[str, str]:
    """``--max-memory 0=20GiB,1=20GiB[,cpu=200GiB]``: a cap per device (accelerate's size units)."""
    from accelerate.utils import convert_file_size_to_int

    caps: dict[str, str] = {}
    for part in str(text).split(","):
        key, sep, size = (x.strip() for x in part.partition("="))
        if not sep or not (key.isdigit() or key == "cpu"):
            raise UsageError(f"--max-memory {part[:40]!r}: give DEVICE=SIZE, DEVICE a CUDA index or cpu, e.g. 0=20GiB")
        try:
            ok = convert_file_size_to_int(size) > 0
        except ValueError:
            ok = False
        if not ok:
            raise UsageError(f"--max-memory {part[:40]!r}: {size[:20]!r} is not a size (e.g. 20GiB, 500MB)")
        if key in caps:
            raise UsageError(f"--max-memory {str(text)[:60]!r}: caps device {key} twice")
        caps[key] = size
    return caps


def check_flags(devices: list[int] | None, max_memory: dict[str, str] | None, device: str, pipeline: str | None) -> None:
    """The flag combinations, before anything is loaded."""
    if max_memory and not devices:
        raise UsageError("--max-memory caps the devices of --devices; give --devices too (e.g. --devices 0,1)")
    if not devices:
        return
    if device != "auto":
        raise UsageError(f"--device {device} and --devices {_text(devices)}: --devices places the model itself; "
                         "drop --device")
    if pipeline == "sequential":
        raise UsageError("--devices with --pipeline sequential: that pipeline onloads every layer to one device "
                         "(llmcompressor's main device), so the other GPUs would sit idle; use --pipeline basic "
                         "(the default) to spread the model, or one GPU with --pipeline sequential")
    unknown = [k for k in (max_memory or {}) if k != "cpu" and int(k) not in devices]
    if unknown:
        raise UsageError(f"--max-memory caps device {unknown[0]}, which is not in --devices {_text(devices)}")


def check_visible(devices: list[int]) -> None:
    import torch

    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    missing = [d for d in devices if d >= n]
    if missing:
        seen = f"{n} CUDA device(s) visible" if n else "no CUDA device is visible"
        raise UsageError(f"--devices {_text(devices)}: {seen} (device {missing[0]} missing); --devices spreads a "
                         "model over GPUs — on a machine without them leave it out")


def plan_device_map(model_dir: Path, devices: list[int], max_memory: dict[str, str] | None,
                    trust_remote_code: bool = False, free: dict[int, int] | None = None):
    """(module -> device map, planned weight bytes per device) for the listed GPUs under the caps. A device
    without a cap offers its free memory (``free``, measured when not given). Refused: a map that puts weights on
    disk, or on the CPU when ``cpu`` is not capped (the user did not allow host offloading)."""
    import torch
    from accelerate import infer_auto_device_map
    from accelerate.utils import compute_module_sizes, convert_file_size_to_int

    from quantgate.quantize.classify import load_meta_model

    caps = dict(max_memory or {})
    budget: dict = {}
    for d in devices:
        if str(d) in caps:
            budget[d] = convert_file_size_to_int(caps[str(d)])
        else:
            budget[d] = (free or {}).get(d) if free is not None else torch.cuda.mem_get_info(d)[0]
    if "cpu" in caps:
        budget["cpu"] = convert_file_size_to_int(caps["cpu"])
    model = load_meta_model(model_dir, trust_remote_code)
    no_split = list(getattr(model, "_no_split_modules", None) or [])
    dmap = infer_auto_device_map(model, max_memory=budget, no_split_module_classes=no_split, dtype=torch.bfloat16)
    sizes = compute_module_sizes(model, dtype=torch.bfloat16)
    per = Counter()
    for name, dev in dmap.items():
        per[str(dev)] += sizes[name]
    total = sizes[""]
    spilled = {d: per[d] for d in ("disk", "cpu") if per.get(d) and not (d == "cpu" and "cpu" in caps)}
    if spilled:
        on_gpus = sum(b for d, b in per.items() if d not in ("cpu", "disk"))
        raise UsageError(f"--max-memory {_caps_text(caps, devices)}: the GPUs {_text(devices)} hold "
                         f"{_gib(on_gpus)} of the model's {_gib(total)} (BF16); {_gib(sum(spilled.values()))} would go "
                         f"to {' and '.join(spilled)}. Raise the caps, add devices, or allow host memory with "
                         "cpu=SIZE (slow: those layers are copied to a GPU for every forward)")
    return {name: str(dev) for name, dev in dmap.items()}, dict(per)


def loadable(device_map: dict[str, str]) -> dict[str, int | str]:
    """The recorded map as ``from_pretrained`` takes it (GPU indices as integers)."""
    return {name: int(dev) if dev.isdigit() else dev for name, dev in device_map.items()}


def reset_peaks() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.init()  # before CUDA's first use in the process, resetting a device's stats is refused
        for i in range(torch.cuda.device_count()):
            try:
                torch.cuda.reset_peak_memory_stats(i)
            except RuntimeError:  # a device with no context yet has no peaks to reset
                pass


def peak_per_device() -> dict[str, float] | None:
    """torch.cuda.max_memory_allocated of every visible device, in MiB (None without CUDA)."""
    import torch

    if not torch.cuda.is_available():
        return None
    return {str(i): round(torch.cuda.max_memory_allocated(i) / 2**20, 1) for i in range(torch.cuda.device_count())}


def _text(devices: list[int]) -> str:
    return ",".join(map(str, devices))


def _caps_text(caps: dict[str, str], devices: list[int]) -> str:
    return ",".join(f"{k}={v}" for k, v in caps.items()) or f"(none; free memory of {_text(devices)})"


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"
