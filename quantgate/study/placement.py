"""Where a study's servers run: each variant's parallel settings from its backend options (vLLM's
``tensor_parallel_size`` / ``data_parallel_size``, the study's ``backend:`` block with the variant's own
``backend:`` overrides — one place), placed on groups of GPUs from the study's ``gpus:`` pool.

Rules (``place``):
- a variant needs ``tensor_parallel_size × data_parallel_size`` GPUs, all on one host;
- a GPU holds one server, unless every server on it declares a memory fraction (vLLM's
  ``gpu_memory_utilization``) and the fractions sum to at most 1; a backend without a memory option
  (``transformers serve``) reserves nothing up front and shares any GPU no exclusive server holds;
- ``one_at_a_time``: one server up at a time, the groups taken in turn round the pool (so the next
  variant's server may start beside this one's lm-eval on other GPUs);
- ``all_at_once``: waves. Each wave takes, in study order, every variant that still fits beside the ones
  already in it (least-loaded GPUs first); what does not fit waits for a later wave. A wave's servers
  are up together; the next wave starts when its variants are done.

Without a pool the servers inherit the devices, as a study without placement did (a TP=2 server then takes the first two
it sees). The placement is made from the study alone (never from what a resumed study has left to do), so a
resumed study places every variant where it was. Refused before any work: a variant needing more GPUs
than one host of the pool has, and (``heads``) a tensor-parallel size that does not divide the model's heads."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from quantgate.errors import InputError
from quantgate.schema.placement import Device, Placement, PlacementRequest, VariantDemand, VariantPlacement
from quantgate.schema.placement import ParallelSettings as Parallel

if TYPE_CHECKING:
    from quantgate.study.overlap import OverlapPlan

_EPS = 1e-9
# per-variant backend overrides that have their own place in a study
_NOT_PER_VARIANT = {"name": "a variant keeps the study's backend", "extra_args": "use the variant's server_args",
                    "compile_cache": "every server of a study shares one compile cache (backend.compile_cache)"}


def variant_backend(spec, v, index: int | None = None, where: str = ""):
    """The study's ``backend:`` block with variant ``v``'s ``backend:`` overrides, checked by the backend's own
    options model (so a key the backend does not have, or a bad value, is one line naming the field)."""
    over = dict(getattr(v, "backend", None) or {})
    if not over:
        return spec
    at = f"variants.{index if index is not None else v.name}.backend"
    for k, why in _NOT_PER_VARIANT.items():
        if k in over:
            raise InputError(f"{where}field '{at}.{k}': not a per-variant option ({why})")
    cls = type(spec)
    unknown = [k for k in over if k not in cls.model_fields]
    if unknown:
        from quantgate.serve.backends.derive import backend_flags

        owners = backend_flags().get(unknown[0], {}).get("backends", {})
        hint = f" (it is an option of: {', '.join(owners)})" if owners else ""
        raise InputError(f"{where}field '{at}.{unknown[0]}': not an option of backend {spec.name}{hint}")
    try:
        return cls.model_validate({**spec.model_dump(), **over})
    except ValidationError as e:
        err = e.errors()[0]
        raise InputError(f"{where}field '{at}.{'.'.join(str(p) for p in err['loc'])}': {err['msg']}") from None


def parallel_of(spec) -> Parallel:
    """A backend block's parallel settings: its ``tensor_parallel_size`` / ``data_parallel_size`` where the
    backend has them (vLLM), else one device."""
    return Parallel(tensor_parallel_size=getattr(spec, "tensor_parallel_size", 1) or 1,
                    data_parallel_size=getattr(spec, "data_parallel_size", 1) or 1)


def memory_fraction_of(spec) -> float | None:
    """None: the server takes its GPUs whole (vLLM without ``gpu_memory_utilization``); 0.0: a backend with no
    memory option, which reserves nothing up front."""
    if "gpu_memory_utilization" not in type(spec).model_fields:
        return 0.0
    return spec.gpu_memory_utilization


def request_for(st, pool: list[Device] | None = None, overlap: OverlapPlan | None = None) -> PlacementRequest:
    """The study's placement request: its variants (the baseline first in a sequential study, whose candidates
    need the baseline's pages first), their settings, and the pool (``gpus:`` on this machine unless given).
    ``servers: auto`` is settled by ``overlap`` (its mode and each server's share of the GPU); without one, one
    server at a time."""
    pool = pool if pool is not None else [Device(index=g) for g in dict.fromkeys(st.gpus)]
    variants = sorted(st.variants, key=lambda v: v.name != st.baseline) if st.sequential else list(st.variants)
    share = {s.variant: s.fraction for s in overlap.servers} if overlap else {}
    demands = []
    for v in variants:
        spec = variant_backend(st.backend, v)
        demands.append(VariantDemand(name=v.name, parallel=parallel_of(spec),
                                     memory_fraction=share.get(v.name, memory_fraction_of(spec))))
    servers = st.servers if st.servers != "auto" else (overlap.mode if overlap else "one_at_a_time")
    return PlacementRequest(pool=pool, servers=servers, variants=demands)


def plan_placement(st, pool: list[Device] | None = None, placed_by: str = "study",
                   overlap: OverlapPlan | None = None) -> Placement:
    """``place`` on the study's request; refusals name the study's fields. ``overlap``: ``servers: auto``'s memory
    plan on the one GPU the servers inherit, whose waves the placement takes."""
    placement = place(request_for(st, pool, overlap), placed_by=placed_by)
    if overlap is None or placement.request.pool:
        return placement
    wave_of = {n: i for i, w in enumerate(overlap.waves) for n in w}
    placed = {n: p.model_copy(update={"wave": wave_of[n]}) for n, p in placement.variants.items()}
    return _finish(placement.request, placed)


def place(req: PlacementRequest, placed_by: str = "study") -> Placement:
    hosts: dict[str, list[Device]] = {}
    for d in req.pool:
        hosts.setdefault(d.host, []).append(d)
    widest = max((len(ds) for ds in hosts.values()), default=0)
    for v in req.variants:
        n = v.parallel.devices_needed
        if req.pool and n > widest:
            where = f"{widest} on one host" if len(hosts) > 1 else f"{widest}"
            raise InputError(f"variant {v.name!r} ({v.parallel.label()}) needs {n} GPUs; the pool has {where} "
                             f"({_pool_text(req.pool)}): lower its tensor_parallel_size / data_parallel_size, or "
                             "add GPUs to 'gpus:'")
    if not req.pool:
        wave_of = {v.name: (0 if req.servers == "all_at_once" else i) for i, v in enumerate(req.variants)}
        placed = {v.name: VariantPlacement(variant=v.name, parallel=v.parallel, placed_by="inherited",
                                           wave=wave_of[v.name], memory_fraction=v.memory_fraction)
                  for v in req.variants}
        return _finish(req, placed)
    if req.servers == "one_at_a_time":
        placed, turn = {}, 0
        for i, v in enumerate(req.variants):
            host, group, turn = _in_turn(hosts, v.parallel.devices_needed, turn)
            placed[v.name] = VariantPlacement(variant=v.name, parallel=v.parallel, placed_by=placed_by, host=host,
                                              gpus=group, wave=i, memory_fraction=v.memory_fraction)
        return _finish(req, placed)
    placed, left, wave = {}, list(req.variants), 0
    while left:
        load = {(d.host, d.index): [] for d in req.pool}  # device -> demands on it this wave
        for v in list(left):
            fit = _fit(hosts, load, v)
            if fit is None:
                continue
            host, group = fit
            for g in group:
                load[(host, g)].append(v)
            placed[v.name] = VariantPlacement(variant=v.name, parallel=v.parallel, placed_by=placed_by, host=host,
                                              gpus=group, wave=wave, memory_fraction=v.memory_fraction)
            left.remove(v)
        wave += 1
    return _finish(req, placed)


def _in_turn(hosts: dict[str, list[Device]], n: int, turn: int) -> tuple[str, list[int], int]:
    """The next group of ``n`` GPUs going round the pool: one GPU each is round robin over the pool."""
    flat = [d for ds in hosts.values() for d in ds]
    for k in range(len(flat)):
        start = (turn + k) % len(flat)
        host = flat[start].host
        ring = [d for d in flat if d.host == host]
        at = ring.index(flat[start])
        group = sorted(ring[(at + j) % len(ring)].index for j in range(n))
        if len(set(group)) == n:
            return host, group, start + n
    raise AssertionError("place() checked that a host has enough GPUs")


def _fit(hosts: dict[str, list[Device]], load: dict, v: VariantDemand) -> tuple[str, list[int]] | None:
    """The least-loaded group of GPUs on one host that ``v`` fits on beside what the wave holds, or None."""
    n, f = v.parallel.devices_needed, v.memory_fraction
    best = None
    for host, devices in hosts.items():
        free = []
        for d in devices:
            on = load[(host, d.index)]
            if f is None and on:
                continue  # a server taking its GPU whole shares it with nobody
            if any(o.memory_fraction is None for o in on):
                continue
            used = sum(o.memory_fraction for o in on)
            if f is not None and used + f > 1 + _EPS:
                continue
            free.append((used, len(on), devices.index(d), d.index))
        if len(free) < n:
            continue
        group = sorted(free)[:n]
        key = (sum(u for u, *_ in group), sum(c for _, c, *_ in group))
        if best is None or key < best[0]:
            best = (key, host, sorted(g[3] for g in group))  # a group in index order, as CUDA_VISIBLE_DEVICES
    if best is None:
        return None
    return best[1], best[2]


def _finish(req: PlacementRequest, placed: dict[str, VariantPlacement]) -> Placement:
    waves: dict[int, list[str]] = {}
    for v in req.variants:
        waves.setdefault(placed[v.name].wave, []).append(v.name)
    for name, p in placed.items():
        if p.gpus is None:
            continue
        p.shares_gpu_with = [o for o in waves[p.wave] if o != name and placed[o].host == p.host
                             and set(placed[o].gpus or ()) & set(p.gpus)]
    return Placement(request=req, waves=[waves[w] for w in sorted(waves)], variants=placed)


def _pool_text(pool: list[Device]) -> str:
    return ", ".join(str(d.index) if d.host == "local" else f"{d.host[:8]}:{d.index}" for d in pool)


def placement_env(p: VariantPlacement) -> dict[str, str]:
    """The environment that puts a server on its GPUs (none when the study did not place it)."""
    return {"CUDA_VISIBLE_DEVICES": ",".join(map(str, p.gpus))} if p.placed_by == "study" and p.gpus else {}


def may_run_together(placement: Placement, a: str, b: str) -> bool:
    """Whether b's server may be up while a's still runs (one_at_a_time starts the next server during the
    previous variant's lm-eval): when they hold different GPUs, or the memory fractions on every GPU they
    share sum to at most 1. Without a pool both inherit the same devices."""
    pa, pb = placement.variants[a], placement.variants[b]
    if pa.placed_by == "study" and pb.placed_by == "study" and pa.host == pb.host:
        shared = set(pa.gpus or ()) & set(pb.gpus or ())
        if not shared:
            return True
    fa, fb = pa.memory_fraction, pb.memory_fraction
    return fa is not None and fb is not None and fa + fb <= 1 + _EPS


def describe(placement: Placement) -> list[str]:
    """One line per variant, for the study's log."""
    out = []
    for name, p in placement.variants.items():
        where = f"GPUs {','.join(map(str, p.gpus))}" if p.gpus else {"ray": "GPUs Ray assigns",
                                                                     "inherited": "inherited devices"}[p.placed_by]
        beside = f", beside {', '.join(p.shares_gpu_with)}" if p.shares_gpu_with else ""
        out.append(f"placement: {name}: {p.parallel.label()} on {where}, wave {p.wave + 1}{beside}")
    return out


def checked_placement(st, model, pool: list[Device] | None = None, placed_by: str = "study",
                      where: str = "", overlap: OverlapPlan | None = None) -> Placement:
    """The study's placement, and every variant's tensor-parallel size checked against the heads of ``model``
    (the study's model folder; ``heads.check_heads``): one clear error before any work starts."""
    from quantgate.study.heads import check_heads

    placement = plan_placement(st, pool, placed_by, overlap)
    for i, v in enumerate(st.variants):
        p = placement.variants[v.name].parallel
        if p.tensor_parallel_size > 1:
            check_heads(model, p.tensor_parallel_size, _extra_args(st, v),
                        where=f"{where}variant {v.name!r} (variants.{i})")
    return placement


def _extra_args(st, v) -> list[Any]:
    return list(getattr(st.backend, "extra_args", []) or []) + list(v.server_args)
