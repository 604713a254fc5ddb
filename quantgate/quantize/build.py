"""``quantgate quantize``: plan → (calibrate) → llmcompressor ``oneshot`` → save compressed-tensors
→ verify against the plan → ``quantgate.json``. The variant is built in a temporary sibling folder
and renamed into place only after it verified, so a crash or a failed check leaves nothing behind."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import resource
import secrets
import shutil
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from quantgate.errors import InputError, UnsafeInputError, UsageError, VerificationError
from quantgate.io.fileio import atomic_write_json, disk_full, disk_full_error, recorded_path
from quantgate.io.provenance import package_versions
from quantgate.quantize import asis, store
from quantgate.quantize.plan import Plan
from quantgate.quantize.verify import verify_checkpoint
from quantgate.recipes import NEEDS_CALIBRATION, LoadedRecipe, load_recipe, to_llmcompressor
from quantgate.schema.base import read_record_file
from quantgate.schema.run import DEFAULT_PROMPT
from quantgate.schema.variant import FileInfo, QuantizeResult, VariantInputs, VariantManifest, Verification

MANIFEST = "quantgate.json"
_PKGS = ["torch", "transformers", "llmcompressor", "compressed-tensors"]


def file_hashes(folder: Path) -> dict[str, FileInfo]:
    return {f.name: FileInfo(sha256=store.sha256_memo(f), bytes=f.stat().st_size)
            for f in sorted(Path(folder).iterdir()) if f.is_file() and f.name != MANIFEST}


# Their versions define the quantization (observers, scale formulas) and the format written: in the fingerprint.
# torch and transformers only change floating-point rounding of the calibration forward, as the device does: not.
_FINGERPRINT_PKGS = ["llmcompressor", "compressed-tensors"]


def input_fingerprint(model_dir: Path, recipe: LoadedRecipe, calibration: Path | None, *, samples: int,
                      max_seq_len: int, prompt: str, pipeline: str, text_only: bool) -> VariantInputs:
    """What decides a variant's weights: reused when this matches, refused (without --overwrite) when not.

    In it: the source weights and every other source file transformers reads (by sha256), the recipe
    text, llmcompressor's and compressed-tensors' versions and, when calibration data is used, the
    calibration pages (ids, image and truth bytes), how many, ``max_seq_len``, the prompt, the pipeline
    and ``text_only``. Without calibration data those options change nothing, so they are left out
    (None). Not in it: the device (CPU or GPU calibration differ only in floating-point rounding, and a
    variant built on a GPU must be reusable on a CPU machine) and ``trust_remote_code`` (the code it
    allows is hashed with the model files)."""
    from quantgate.quantize.calibrate import calibration_pages_sha256

    model_dir = Path(model_dir)
    weights = {f.name: store.sha256_memo(f) for f in sorted(model_dir.glob("*.safetensors"))}
    files = {f.name: store.sha256_memo(f) for f in sorted(model_dir.iterdir())
             if f.is_file() and f.suffix in asis.MODEL_FILE_SUFFIXES and not f.name.startswith(".")}
    fp = {"model_weights": weights, "model_files": files, "recipe_text": recipe.text, "calibration_pages_sha256": None,
          "samples": None, "max_seq_len": None, "prompt": None, "pipeline": None, "text_only": None,
          "packages": package_versions(_FINGERPRINT_PKGS)}
    if calibration is not None:
        cal, used = calibration_pages_sha256(Path(calibration), samples)
        fp.update(calibration_pages_sha256=cal, samples=used, max_seq_len=max_seq_len, prompt=prompt,
                  pipeline=pipeline, text_only=bool(text_only))
    return VariantInputs.model_validate(fp)


def changed_inputs(old: VariantInputs, new: VariantInputs) -> list[str]:
    """The fingerprint fields whose values differ, for the log and the refusal."""
    a, b = old.model_dump(), new.model_dump()
    return [k for k in b if a.get(k) != b[k]]


def _files_intact(variant: Path, manifest: VariantManifest) -> bool:
    """Every file the manifest lists is there with its recorded sha256 (else the variant is rebuilt)."""
    return store.intact(variant, manifest)


def read_manifest(variant: Path) -> VariantManifest | None:
    """The variant's ``quantgate.json``, or None when the folder has none."""
    f = Path(variant) / MANIFEST
    return read_record_file(VariantManifest, f) if f.is_file() else None


def check_output(out: Path) -> None:
    """``-o`` is checked before any work: a finished build is renamed into its place, which a
    symbolic link (or a file) there would turn into a traceback after minutes of calibration."""
    out = Path(out)
    if out.is_symlink():
        raise UnsafeInputError(f"-o {out}: is a symbolic link (to {os.readlink(out)!r}); quantgate replaces the "
                               "folder it writes — pass the real folder, not a link")
    if out.exists() and not out.is_dir():
        raise UsageError(f"-o {out}: exists and is not a folder; choose another -o")


def _building_dirs(out: Path) -> list[Path]:
    pat = re.compile(rf"^\.{re.escape(out.name)}\.building\.[A-Za-z0-9_]{{8}}$")  # the 8-character suffix quantize gives it
    return [d for d in out.parent.iterdir() if pat.match(d.name) and d.is_dir() and not d.is_symlink()] \
        if out.parent.is_dir() else []


def _hold(folder: Path) -> int:
    """flock a build folder for as long as this process lives: a lock that a killed process releases,
    so the next start can tell a stale build folder from a build still running."""
    import fcntl

    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise
    return fd


def clean_stale_builds(out: Path, log=print) -> None:
    """Remove ``.NAME.building.*`` folders no running quantgate holds (left by a SIGKILL or power loss)."""
    for d in _building_dirs(Path(out)):
        try:
            fd = _hold(d)
        except OSError:
            continue  # another quantize is building it now
        try:
            shutil.rmtree(d)
            log(f"removed {d}, left by an interrupted build")
        finally:
            os.close(fd)


@contextlib.contextmanager
def _terminate_cleanly():
    """SIGTERM/SIGHUP raise SystemExit(128+signal) instead of killing the process outright, so the
    partial build folder is removed on the way out. Only the main thread can set handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        signal.signal(signum, signal.SIG_IGN)  # a second signal must not interrupt the cleanup
        raise SystemExit(128 + signum)

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@dataclass(frozen=True)
class Build:
    """One variant to build, everything settled before any work: the recipe's calibration defaults filled
    in, the plan made, the fingerprint taken (what :func:`quantize` hands its steps, instead of each option)."""

    model_dir: Path
    recipe: LoadedRecipe
    out: Path
    plan: Plan
    inputs: VariantInputs
    calibration: Path | None  # None: the recipe needs no data (or none was given for a raw recipe)
    samples: int
    max_seq_len: int
    prompt: str
    pipeline: str
    text_only: bool
    trust_remote_code: bool
    device: str
    record_root: Path | None
    # (devices, max_memory, device_map, bytes_per_device) when spread over several GPUs (quantize.devices)
    spread: tuple | None = None

    @property
    def kinds(self) -> dict[str, str]:
        return {m.name: m.kind for m in self.plan.modules}


def quantize(model_dir: Path, recipe_spec: str | Path, out: Path, *, calibration: Path | None = None,
             samples: int | None = None, max_seq_len: int | None = None, prompt: str | None = None,
             pipeline: str | None = None, text_only: bool | None = None, overwrite: bool = False,
             trust_remote_code: bool = False, allow_pickle_files: bool = False, device: str = "auto",
             record_root: Path | None = None, devices: list[int] | None = None,
             max_memory: dict[str, str] | None = None, log: Callable[[str], None] = print,
             note: Callable[[str], None] | None = None) -> QuantizeResult:
    """Build (or reuse) the variant ``out``. ``record_root``: quantgate.json records the source and calibration
    paths relative to it when they lie inside it (a study passes its folder; see ``fileio.recorded_path``).
    ``note``: one short phrase per step worth showing beside a progress line (``calibrating on 8 page(s)``).
    ``devices`` / ``max_memory``: the model spread over several GPUs under per-device caps (``quantize.devices``)."""
    from quantgate.quantize.devices import check_flags

    check_flags(devices, max_memory, device, pipeline)  # before the plan is made
    job = _settle(Path(model_dir), recipe_spec, Path(out), calibration=calibration, samples=samples,
                  max_seq_len=max_seq_len, prompt=prompt, pipeline=pipeline, text_only=text_only,
                  trust_remote_code=trust_remote_code, allow_pickle_files=allow_pickle_files, device=device,
                  record_root=record_root, log=log)
    existing = _reusable(job, overwrite, log)
    if existing is not None:
        return QuantizeResult(manifest=existing, reused=True)
    if devices:  # the device map planned (no weights read) and checked against the caps before any work
        from quantgate.quantize.devices import check_visible, plan_device_map

        check_visible(devices)
        job = dataclasses.replace(job, spread=(devices, max_memory or {},
                                               *plan_device_map(job.model_dir, devices, max_memory, trust_remote_code)))
    t0 = time.time()
    job.out.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_builds(job.out, log)
    with _terminate_cleanly():
        # named before it is made, and made inside the try: a SIGTERM at any moment after the folder appears
        # (before its lock is taken, too) removes it
        tmp = job.out.parent / f".{job.out.name}.building.{secrets.token_hex(4)}"
        lock: int | None = None
        try:
            tmp.mkdir(mode=0o700)
            lock = _hold(tmp)
            stored = store.fetch(job.inputs, tmp, log)  # built on this machine before from the same inputs
            if stored is not None:
                manifest = _restamp(stored, job)
                atomic_write_json(tmp / MANIFEST, manifest.model_dump())
            else:
                manifest = _build(job, tmp, t0, log, note or (lambda _: None))
            _install(tmp, job.out)
            if stored is None:
                store.keep(job.out, manifest, log)
            return QuantizeResult(manifest=manifest, reused=stored is not None)
        except BaseException as e:
            shutil.rmtree(tmp, ignore_errors=True)
            if isinstance(e, SystemExit):
                log(f"stopped by a signal; removed the partial build {tmp}")
            if disk_full(e):  # safetensors' SafetensorError carries only the OS's text (a raw traceback)
                raise disk_full_error(job.out.parent, e) from None
            raise
        finally:
            if lock is not None:
                os.close(lock)
            _release_gpu_cache()


def _restamp(stored: VariantManifest, job: Build) -> VariantManifest:
    """A stored variant's manifest as this build would have written it: its own name and its source and
    calibration paths recorded against this build's ``record_root`` (the fingerprint, hence the files, are equal)."""
    root = job.record_root
    cal = stored.calibration
    if cal.pageset is not None and job.calibration is not None:
        cal = cal.model_copy(update={"pageset": recorded_path(job.calibration, root)})
    return stored.model_copy(update={"name": job.out.name, "source_model": recorded_path(job.model_dir, root),
                                     "calibration": cal})


def _release_gpu_cache() -> None:
    """Hand the build's cached GPU memory back to the driver: a study quantizes in its own process while the
    servers of the variants already built start beside it (``servers: all_at_once``), and vLLM refuses to start
    below its memory share while torch's caching allocator still holds a 4B build's blocks."""
    import gc
    import sys

    torch = sys.modules.get("torch")  # a build that never imported torch has nothing cached
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        gc.collect()
        torch.cuda.empty_cache()


def _settle(model_dir: Path, recipe_spec: str | Path, out: Path, *, calibration: Path | None, samples: int | None,
            max_seq_len: int | None, prompt: str | None, pipeline: str | None, text_only: bool | None,
            trust_remote_code: bool, allow_pickle_files: bool, device: str, record_root: Path | None,
            log: Callable[[str], None]) -> Build:
    """Every check and default before any work: the output folder, the recipe, the plan, the chat template,
    the calibration data the recipe needs."""
    from quantgate.io.modeldir import check_chat_template
    from quantgate.quantize.plan import make_plan

    check_output(out)
    recipe = load_recipe(recipe_spec)
    cal_cfg = recipe.recipe.calibration if recipe.recipe else None
    plan = make_plan(model_dir, recipe, trust_remote_code, allow_pickle_files=allow_pickle_files)  # before any work
    for w in plan.warnings + check_chat_template(model_dir):  # a template that hangs is refused here
        log(f"warning: {w}")
    needs_data = recipe.recipe is None or any(f in NEEDS_CALIBRATION for f in plan.formats.values())
    if needs_data and calibration is None and recipe.recipe is not None:
        raise InputError(f"recipe {recipe.name} uses {', '.join(sorted({f for f in plan.formats.values() if f in NEEDS_CALIBRATION}))}, "
                         "which needs calibration data: pass --calibration PAGESET")
    cal = Path(calibration) if needs_data and calibration is not None else None
    settled = {"samples": samples or (cal_cfg.samples if cal_cfg else 32),
               "max_seq_len": max_seq_len or (cal_cfg.max_seq_len if cal_cfg else 4096),
               "prompt": prompt or DEFAULT_PROMPT, "pipeline": pipeline or (cal_cfg.pipeline if cal_cfg else "basic"),
               "text_only": text_only if text_only is not None else (cal_cfg.text_only if cal_cfg else False)}
    inputs = input_fingerprint(model_dir, recipe, cal, **settled)
    return Build(model_dir=model_dir, recipe=recipe, out=out, plan=plan, inputs=inputs, calibration=cal, **settled,
                 trust_remote_code=trust_remote_code, device=device, record_root=record_root)


def _reusable(job: Build, overwrite: bool, log: Callable[[str], None]) -> VariantManifest | None:
    """The variant already in ``out`` when it was built from the same inputs and every file is intact; else
    None (the folder is rebuilt with ``overwrite``, refused without it)."""
    out = job.out
    if not (out.exists() and any(out.iterdir())):
        return None
    try:
        existing = read_manifest(out)
    except InputError as e:
        existing, what = None, f"a variant whose {MANIFEST} does not read ({e})"
    else:
        what = "other files"
    if existing is not None:
        if existing.inputs == job.inputs and _files_intact(out, existing):
            log(f"{out}: already built from the same inputs; reusing it")
            return existing
        diff = changed_inputs(existing.inputs, job.inputs)
        what = f"a variant built from other inputs ({', '.join(diff)})" if diff else "a variant whose files changed"
    if not overwrite:
        raise InputError(f"{out}: already holds {what}; choose another -o or pass --overwrite")
    log(f"{out}: holds {what}; rebuilding it")
    return None


def _build(job: Build, tmp: Path, t0: float, log: Callable[[str], None], note: Callable[[str], None]) -> VariantManifest:
    """Load the source, quantize it into ``tmp`` (llmcompressor), verify what was written against the plan and
    write its manifest there."""
    import torch

    from quantgate.quantize.devices import peak_per_device, reset_peaks

    reset_peaks()  # this build's peaks, not an earlier build's in the same process (a study's)
    lc_recipe: dict | None
    if asis.quantizes_nothing(job.recipe, job.plan):
        lc_recipe, cal_ids = None, []
        asis.serve_source_as_is(job.model_dir, tmp, job.inputs, job.recipe.name, log, note)
    else:
        model, processor = _load(job)
        lc_recipe, cal_ids = _compress(job, model, processor, tmp, log, note)
        processor.save_pretrained(tmp)
        for extra in ("generation_config.json", "chat_template.jinja", "chat_template.json"):
            if (job.model_dir / extra).is_file() and not (tmp / extra).exists():
                shutil.copy(job.model_dir / extra, tmp / extra)
    verification = verify_checkpoint(tmp, job.plan.formats, job.kinds) if job.recipe.recipe is not None \
        else _verify_raw(tmp, job.kinds)
    rows = _planned_rows(job, tmp)
    files = file_hashes(tmp)
    # sizes only: the source weights were already hashed once, for the fingerprint
    bf16_bytes = sum(f.stat().st_size for f in job.model_dir.glob("*.safetensors"))
    weight_bytes = sum(v.bytes for k, v in files.items() if k.endswith(".safetensors"))
    root, recipe = job.record_root, job.recipe
    manifest = VariantManifest.model_validate({  # typed: a field this code forgets or misspells fails here
        "name": job.out.name, "source_model": recorded_path(job.model_dir, root),
        "recipe": {"name": recipe.name, "source": recipe.source, "text": recipe.text,
                   "resolved": recipe.recipe.model_dump() if recipe.recipe else None, "llmcompressor": lc_recipe},
        "plan": {"modules": rows, "totals": job.plan.totals(), "warnings": job.plan.warnings},
        "verification": verification,
        "calibration": {"pageset": recorded_path(job.calibration, root) if cal_ids and job.calibration else None,
                        "page_ids": cal_ids, "samples": len(cal_ids), "max_seq_len": job.max_seq_len,
                        "pipeline": job.pipeline if cal_ids else None, "text_only": job.text_only if cal_ids else None,
                        "prompt": job.prompt if cal_ids else None},
        "inputs": job.inputs, "packages": package_versions(_PKGS), "files": files,
        "size": {"weights_bytes": weight_bytes, "source_weights_bytes": bf16_bytes,
                 "compression": round(bf16_bytes / weight_bytes, 3) if weight_bytes else None},
        "wall_s": round(time.time() - t0, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "peak_gpu_mb": round(torch.cuda.max_memory_allocated() / 2**20, 1) if torch.cuda.is_available() else None,
        "peak_gpu_mb_per_device": peak_per_device(),
        "devices": None if job.spread is None else {"devices": job.spread[0], "max_memory": job.spread[1],
                                                    "device_map": job.spread[2], "bytes_per_device": job.spread[3]},
    })
    atomic_write_json(tmp / MANIFEST, manifest.model_dump())
    return manifest


def _load(job: Build):
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    device = job.device
    if job.spread is not None:
        from quantgate.quantize.devices import loadable

        device = loadable(job.spread[2])  # exactly the map planned and recorded
    elif device == "auto":
        # Whole model on the GPU when there is one: calibration of a 4B VLM on page images takes
        # minutes there and hours on CPU; --pipeline sequential (model on CPU) for models that don't fit.
        device = "cuda" if torch.cuda.is_available() and job.pipeline != "sequential" else "cpu"
    try:
        # use_safetensors: never fall back to a pickle file, even one --allow-pickle-files let through
        model = AutoModelForImageTextToText.from_pretrained(job.model_dir, dtype=torch.bfloat16, device_map=device,
                                                            use_safetensors=True,
                                                            trust_remote_code=job.trust_remote_code)
    except OSError as e:
        raise InputError(f"{job.model_dir}: transformers cannot load its safetensors weights ({e})") from None
    return model, AutoProcessor.from_pretrained(job.model_dir, trust_remote_code=job.trust_remote_code)


def _compress(job: Build, model, processor, tmp: Path, log: Callable[[str], None], note: Callable[[str], None]
              ) -> tuple[dict | None, list[str]]:
    """llmcompressor's oneshot over the calibration pages (when the recipe needs them), the model saved into
    ``tmp`` compressed (a recipe that quantizes nothing never gets here: ``asis`` serves its source as it is).
    (the recipe handed to llmcompressor, the calibration page ids)"""
    from quantgate.quantize.calibrate import calibration_samples, sample_loader

    lc_recipe = to_llmcompressor(job.plan.formats, job.kinds) if job.recipe.recipe else job.recipe.raw
    from llmcompressor import oneshot

    kw: dict = {}
    cal_ids: list[str] = []
    if job.calibration is not None:
        data, cal_ids = calibration_samples(processor, job.calibration, job.prompt, job.samples, job.max_seq_len,
                                            job.text_only, warn=log)
        kw = {"dataset": sample_loader(data), "num_calibration_samples": len(data), "pipeline": job.pipeline}
        note(f"calibrating on {len(data)} page(s)")
        log(f"calibrating on {len(data)} page(s) from {job.calibration} "
            f"({'text only' if job.text_only else 'page images'})")
    oneshot(model=model, recipe=_recipe_objects(lc_recipe), **kw)
    model.save_pretrained(tmp, save_compressed=True)
    return lc_recipe, cal_ids


def _planned_rows(job: Build, tmp: Path) -> list[dict]:
    """The plan's rows for the manifest; a raw llmcompressor recipe's formats read back from what it wrote."""
    rows = job.plan.rows()
    if job.recipe.recipe is None:
        from quantgate.quantize.verify import checkpoint_tensors, format_of, map_to_checkpoint

        t = checkpoint_tensors(tmp)
        mp = map_to_checkpoint([r["module"] for r in rows], {k.rsplit(".", 1)[0] for k in t})
        for r in rows:
            r["format"] = format_of(t, mp.get(r["module"], "")) or "bf16"
        job.plan.formats = {r["module"]: r["format"] for r in rows}
    return rows


def _install(tmp: Path, out: Path) -> None:
    """The verified build renamed into place (the folder it replaces removed first)."""
    check_output(out)  # again: a link may have been planted while building
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)


def _recipe_objects(lc_recipe: dict):
    """A quantgate-compiled recipe becomes modifier objects; a raw llmcompressor recipe is passed
    as the YAML text llmcompressor parses itself."""
    import yaml
    from llmcompressor.modifiers.quantization import QuantizationModifier

    stage = lc_recipe.get("quant_stage", {}).get("quant_modifiers", {})
    if list(stage) == ["QuantizationModifier"] and len(lc_recipe) == 1:
        return [QuantizationModifier(**stage["QuantizationModifier"])]
    return yaml.safe_dump(lc_recipe)


def _verify_raw(folder: Path, kinds: dict[str, str]) -> Verification:
    from quantgate.quantize.verify import checkpoint_tensors, format_of, map_to_checkpoint

    t = checkpoint_tensors(folder)
    mp = map_to_checkpoint(list(kinds), {k.rsplit(".", 1)[0] for k in t})
    touched = [n for n, k in kinds.items() if k in ("vision", "projector") and format_of(t, mp.get(n, "")) not in ("bf16", None)]
    if touched:
        raise VerificationError(f"{folder}: the raw llmcompressor recipe quantized {len(touched)} vision/projector "
                                f"module(s), e.g. {touched[0]}; add them to its ignore list")
    return Verification(modules_checked=len(kinds), vision_bf16=True)
