"""A study's ``speed.profile``: each variant's decode step profiled by its own vLLM server,
right after that server measured its speed waves, at the listed levels — the numbers the report's Decode step
section explains the speed with come from the very server that measured it, and no second start is paid (a
separate ``quantgate speed-profile`` starts every variant again: ~80 s each for the 4B class, 2026-12-02).

The server is started with vLLM's ``--profiler-config`` (torch profiler, traces under ``speed/<variant>/trace``).
vLLM arms that profiler only on ``/start_profile``, which is sent after the waves, so no timed request runs under
it; the config is not part of vLLM's compile-cache key (docs/gpu.md), so the start stays warm. Files:
``speed/<variant>/c<C>.profile.json`` (a level already written is kept: a resumed study profiles only what is
missing), ``speed/cost-table.json`` (``quantgate.speed.costtable``; when the profiles cannot make one — a plan
whose GEMMs the trace does not show one to one — the profiles stay and the log says why) and
``speed/prefill-table.json`` (``quantgate.speed.served``: the prefill phase of the speed waves, per format), the two
files ``recommend`` / ``tune --speedup`` take as ``--speed-table`` and ``--prefill-table`` for served speed-ups."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from quantgate.errors import InputError
from quantgate.io.fileio import atomic_write_json
from quantgate.io.pageset import PageSet
from quantgate.schema.base import read_record_file
from quantgate.schema.study import Study, VariantSpec
from quantgate.schema.variant import VariantManifest
from quantgate.speed.profile import profile_levels, profiler_config
from quantgate.speed.report import SPEED_DIR

PROFILER_FLAG = "--profiler-config"
COST_TABLE = "cost-table.json"
PREFILL_TABLE = "prefill-table.json"


def profiled(st: Study) -> list[int]:
    """The levels each variant's server profiles (empty: the study takes no profile)."""
    return list(st.speed.profile) if st.speed is not None else []


def speed_dir(out: Path, variant: str) -> Path:
    return Path(out) / SPEED_DIR / variant


def profiler_args(st: Study, out: Path, v: VariantSpec, backend_args: list[str]) -> list[str]:
    """The server flags that arm vLLM's profiler for ``v`` (none when the study profiles nothing). A study whose
    own server flags already set a profiler is refused: two configs would leave unclear which one wrote a trace."""
    if not profiled(st):
        return []
    for a in [*backend_args, *v.server_args]:
        if a == PROFILER_FLAG or a.startswith(PROFILER_FLAG + "="):
            raise InputError(f"variant {v.name}: {PROFILER_FLAG} in the server flags, and speed.profile sets vLLM's "
                             "profiler itself; drop one of them")
    sp = st.speed
    assert sp is not None
    trace = speed_dir(out, v.name) / "trace"
    return [PROFILER_FLAG, json.dumps(profiler_config(trace, sp.profile_delay, sp.profile_steps))]


def levels_left(st: Study, out: Path, variant: str) -> list[int]:
    return [c for c in profiled(st) if not (speed_dir(out, variant) / f"c{c}.profile.json").is_file()]


def profile_variant(st: Study, out: Path, ps: PageSet, v: VariantSpec, variant_dir: Path, endpoint,
                    log: Callable[[str], None]) -> None:
    """The variant's missing levels profiled on ``endpoint`` (its study server, already armed)."""
    from quantgate.serve.client import data_url

    todo = levels_left(st, out, v.name)
    if not todo:
        return
    sp = st.speed
    assert sp is not None
    manifest = read_record_file(VariantManifest, Path(variant_dir) / "quantgate.json")
    pages = ps.split(st.split)[: st.limit or None][: max(todo)]
    if not pages:
        raise InputError(f"{ps.root}: no {st.split} pages to profile with")
    images = [data_url(ps.image_bytes(p)) for p in pages]
    d = speed_dir(out, v.name)
    profile_levels(endpoint.base_url, endpoint.model, endpoint.api_key, manifest, todo, d, d / "trace", images,
                   max_tokens=sp.profile_max_tokens, request_timeout_s=st.timeout_s, log=log)


def write_cost_table(out: Path, log: Callable[[str], None]) -> Path | None:
    """``speed/cost-table.json`` from every profile under ``speed/`` (None, said in the log, when they cannot make
    one: the profiles are the measurement and stay)."""
    from quantgate.schema.speed import load_step_profile
    from quantgate.speed.costtable import build_cost_table

    root = Path(out) / SPEED_DIR
    files = sorted(root.glob("*/c*.profile.json"))
    if not files:
        return None
    try:
        table = build_cost_table([load_step_profile(f) for f in files])
    except InputError as e:
        log(f"speed: {len(files)} decode profiles kept under {root}; no cost table: {e}")
        return None
    atomic_write_json(root / COST_TABLE, table.model_dump(mode="json"))
    log(f"speed: cost table from {len(files)} decode profiles: {root / COST_TABLE}")
    return root / COST_TABLE


def write_prefill_table(out: Path, variants: list[str], baseline: str, log: Callable[[str], None]) -> Path | None:
    """``speed/prefill-table.json`` from the study's own speed waves (``runs/<variant>/speed.jsonl``: each level's
    first-token phase) and the plans its decode profiles carry, fitted on every variant that has both — the same
    variants the cost table beside it reads. None, said in the log, when they cannot make one (no baseline waves, or
    recipes that do not tell the formats apart): the waves and profiles are the measurement and stay."""
    from quantgate.schema.speed import load_step_profile
    from quantgate.serve.run import SPEED, load_records
    from quantgate.speed.served import build_prefill_table, wave_phases

    root = Path(out) / SPEED_DIR
    plans = {f.parent.name: load_step_profile(f).plan for f in sorted(root.glob("*/c*.profile.json"))
             if f.parent.name in variants}
    phases = {}
    for v in plans:
        recs = load_records(Path(out) / "runs" / v, file=SPEED)
        by = {c: ph for c in sorted({r.concurrency for r in recs}) if (ph := wave_phases(recs, c)) is not None}
        if by:
            phases[v] = by
    built = [v for v in variants if v in phases]
    if baseline not in built or len(built) < 2:
        if plans:
            log(f"speed: no prefill table: it needs speed waves and decode profiles of {baseline} and of a recipe "
                f"that quantizes (has them: {', '.join(built) or 'none'})")
        return None
    try:
        table = build_prefill_table(phases, plans, built, baseline=baseline,
                                    source=f"{Path(out).name}: the speed waves' first-token phase of {', '.join(built)}")
    except InputError as e:
        log(f"speed: no prefill table: {e}")
        return None
    atomic_write_json(root / PREFILL_TABLE, table.model_dump(mode="json"))
    log(f"speed: prefill table from the speed waves of {len(built)} variants: {root / PREFILL_TABLE}")
    return root / PREFILL_TABLE
