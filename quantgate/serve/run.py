"""``quantgate serve``: one server per variant, every page of the split at each concurrency level,
one record per request, resumable."""

from __future__ import annotations

import asyncio
import json
import math
import re
import uuid
from collections.abc import Callable
from pathlib import Path

from quantgate.errors import InputError, ServerError
from quantgate.fileio import atomic_write_json, read_jsonl
from quantgate.records import RequestRecord, RunManifest, parse_record
from quantgate.serve.backends import Backend, OpenAIBackend, check_model_dir, kernels_from_log
from quantgate.serve.client import RequestSpec, run_level
from quantgate.serve.server import log_tail
from quantgate.serve.stats import level_stats, max_concurrency_within_slo

REQUESTS = "requests.jsonl"
RUN = "run.json"
DEFAULT_MAX_TOKENS = 1024


def load_records(run_dir: Path, *, latest: bool = True) -> list[RequestRecord]:
    """Records so far. A torn last line (a crash mid-append) is cut off, never mixed in. A failed
    request is re-sent on resume and its new record appended; with ``latest`` only the last record
    per (page, concurrency) is kept, so nothing is counted twice."""
    path = Path(run_dir) / REQUESTS
    if not path.is_file():
        return []
    recs = [parse_record(RequestRecord, obj, where=f"{path}:{no}") for no, obj in read_jsonl(path, repair_torn_tail=True)]
    if not latest:
        return recs
    last = {(r.page_id, r.concurrency): r for r in recs}
    return [r for r in recs if last[(r.page_id, r.concurrency)] is r]


_FINGERPRINTS: dict[tuple, str] = {}


def weights_fingerprint(variant: Path) -> str:
    """sha256 over the variant's weight files (names and contents).

    Memoised per process on each file's (name, size, mtime): a study asks for it when quantizing,
    serving and running lm-eval, and hashing a 9 GB checkpoint three times is a minute of nothing."""
    import hashlib

    from quantgate.fileio import sha256_file

    files = sorted(Path(variant).glob("*.safetensors"))
    key = tuple((str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    if key not in _FINGERPRINTS:
        h = hashlib.sha256()
        for f in files:
            h.update(f.name.encode() + b"\0" + sha256_file(f).encode())
        _FINGERPRINTS[key] = h.hexdigest()
    return _FINGERPRINTS[key]


def _variant_notes(variant: Path, backend: Backend) -> list[str]:
    notes = []
    cfg_path = variant / "config.json"
    if backend.name == "transformers" and cfg_path.is_file():
        cfg = json.loads(cfg_path.read_text("utf-8"))
        if cfg.get("quantization_config"):
            notes.append("transformers serve decompresses compressed-tensors weights to BF16 at load: this run "
                         "measures weight-quantization error only (activation quantization is not simulated) "
                         "and no quantized-kernel speed")
    return notes


def level_pages(pages: list, concurrency: int, waves: float | None) -> list:
    """The pages one level sends: all of them, or ``waves`` × concurrency (at least 3, for a p90)."""
    if waves is None:
        return pages
    return pages[: max(3, math.ceil(waves * concurrency))]


def serve_variant(variant: Path, pageset_dir: Path, backend: Backend, out: Path, *, split: str = "heldout",
                  concurrency: list[int] = (1,), max_tokens: int = DEFAULT_MAX_TOKENS, prompt: str | None = None,
                  slo_s: float = 10.0, timeout_s: float = 600.0, limit: int | None = None, overwrite: bool = False,
                  ignore_eos: bool = False, waves: float | None = None,
                  on_level: Callable[[int, int], Callable[[RequestRecord], None]] | None = None,
                  log: Callable[[str], None] = print) -> RunManifest:
    from quantgate.heldout import load_pageset
    from quantgate.records import DEFAULT_PROMPT

    variant, out = Path(variant), Path(out)
    prompt = prompt or DEFAULT_PROMPT
    if not isinstance(backend, OpenAIBackend):
        check_model_dir(variant)
    if not concurrency or any(c < 1 for c in concurrency):
        raise InputError(f"--concurrency must list positive integers, got {list(concurrency)}")
    if waves is not None and waves <= 0:
        raise InputError(f"--waves must be positive, got {waves}")
    ps = load_pageset(pageset_dir)
    pages = ps.split(split)[: limit or None]
    if not pages:
        raise InputError(f"{pageset_dir}: no pages in split {split!r}")
    ps_sha = ps.sha256
    out.mkdir(parents=True, exist_ok=True)
    desc = backend.describe()
    fingerprint = weights_fingerprint(variant) if not isinstance(backend, OpenAIBackend) else None
    manifest = RunManifest(variant=str(variant), variant_fingerprint=fingerprint, backend=backend.name, pageset=str(pageset_dir), pageset_sha256=ps_sha,
                           split=split, prompt=prompt, max_tokens=max_tokens, slo_p90_latency_s=slo_s,
                           ignore_eos=ignore_eos, waves=waves,
                           server_version=desc.get("server_version"),
                           notes=list(desc.get("notes", [])) + _variant_notes(variant, backend))
    if (out / RUN).is_file():
        old = parse_record(RunManifest, json.loads((out / RUN).read_text("utf-8")), where=str(out / RUN))
        # Identity by content, not path: a moved study folder resumes instead of re-serving.
        ident = old.variant_fingerprint or old.variant
        same = (ident, old.backend, old.pageset_sha256, old.split, old.prompt, old.max_tokens, old.ignore_eos) == \
               (fingerprint or manifest.variant, manifest.backend, ps_sha, split, prompt, max_tokens, ignore_eos)
        if not same and not overwrite:
            raise InputError(f"{out}: holds a run of {old.variant} ({old.backend}, split {old.split}, max_tokens "
                             f"{old.max_tokens}); choose another -o, or --overwrite to discard it")
        if not same:
            (out / REQUESTS).unlink(missing_ok=True)
    records = load_records(out)
    done = {(r.page_id, r.concurrency) for r in records if r.error is None}  # failed ones are re-sent
    todo = {c: [p for p in level_pages(pages, c, waves) if (p.id, c) not in done] for c in concurrency}
    manifest.waves = waves
    session = uuid.uuid4().hex[:12]

    def loader(page):
        return lambda: ps.image_bytes(page)

    server = None
    try:
        if any(todo.values()):
            server = backend.server(variant, out / "server.log")
            if server is not None:
                log(f"starting {server.name} …")
                server.start()
                base_url = server.base_url
                manifest.server_command = server.command
            else:
                base_url = backend.endpoint.rstrip("/")  # type: ignore[attr-defined]
            api_key = backend.api_key() if isinstance(backend, OpenAIBackend) else None
            spec = RequestSpec(base_url=base_url, model=backend.model_name(variant), prompt=prompt,
                               max_tokens=max_tokens, timeout_s=timeout_s, api_key=api_key,
                               extra_body={"ignore_eos": True} if ignore_eos else None)
            for c in concurrency:
                if not todo[c]:
                    continue
                cb = on_level(c, len(todo[c])) if on_level else None
                new = asyncio.run(run_level(spec, [(p.id, loader(p)) for p in todo[c]], c, out / REQUESTS, session,
                                            on_done=cb))
                retried = {(r.page_id, r.concurrency) for r in new}
                records = [r for r in records if (r.page_id, r.concurrency) not in retried] + new
                if server is not None and not server.alive():
                    raise ServerError(f"{server.name} died during the run; log {server.log_path} ends with:\n"
                                      f"{log_tail(server.log_path)}")
                _finish(manifest, records, concurrency, out, server)
    finally:
        if server is not None:
            server.stop()
    return _finish(manifest, records, concurrency, out, server)


_VLLM_VERSION = re.compile(r"vLLM API server version (\S+)|LLM engine \(v(\d[\w.+-]*)\)", re.I)


def _finish(manifest: RunManifest, records, concurrency, out: Path, server) -> RunManifest:
    manifest.levels = [level_stats(records, c) for c in concurrency if any(r.concurrency == c for r in records)]
    manifest.max_concurrency_within_slo = max_concurrency_within_slo(manifest.levels, manifest.slo_p90_latency_s)
    if server is not None and manifest.backend == "vllm" and server.log_path.is_file():
        text = server.log_path.read_text("utf-8", errors="replace")
        manifest.kernels = kernels_from_log(text)
        m = _VLLM_VERSION.search(text)
        if m:
            manifest.server_version = f"vllm {m.group(1) or m.group(2)}"
        if any("Marlin" in k and "Fp4" in k for k in manifest.kernels.values()):
            note = ("NVFP4 ran through Marlin weight-only kernels (pre-Blackwell GPU): activations stayed BF16, so "
                    "this accuracy is not Blackwell's W4A4 accuracy")
            if note not in manifest.notes:
                manifest.notes.append(note)
    atomic_write_json(out / RUN, manifest.model_dump())
    return manifest
