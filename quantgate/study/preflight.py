"""What a study checks before any work: where each variant's server runs (the placement on the GPU
pool, each tensor-parallel size against the model's heads) and, on a cluster, the connection and every work
node's view of the study's storage. ``quantgate study`` makes these checks before it opens the study's log, so
a study refused here leaves nothing behind; ``run_study`` makes them itself when called without them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from quantgate.schema.placement import Placement

if TYPE_CHECKING:
    from quantgate.study.cluster import Cluster
    from quantgate.study.overlap import OverlapPlan


@dataclass
class Prepared:
    placement: Placement
    cluster: Cluster | None = None  # connected, or None
    overlap: OverlapPlan | None = None  # servers: auto — the memory plan that settled it (study/overlap.py)


def prepare(st, base: Path, out: Path, ray: str | None = None, log=lambda s: None) -> Prepared:
    from quantgate.study.placement import checked_placement
    from quantgate.study.spec import resolve_path

    model = resolve_path(base, st.model)
    check_page_checks(st, base)
    check_recipes(st, model)
    cluster = None
    if ray or st.cluster:
        from quantgate.study.cluster import open_cluster

        cluster = open_cluster(st, ray, base, out, log)
    overlap = None
    if st.servers == "auto" and not st.gpus and cluster is None and model.is_dir():
        from quantgate.study.overlap import gpu_memory_bytes, plan_overlap
        from quantgate.study.placement import variant_backend

        backends = {v.name: variant_backend(st.backend, v) for v in st.variants}
        overlap = plan_overlap(st, model, gpu_memory_bytes(), backends)
    try:
        placement = cluster.placement(st, model) if cluster else checked_placement(st, model, overlap=overlap)
    except BaseException:
        if cluster is not None:
            cluster.close()
        raise
    return Prepared(placement, cluster, overlap)


def check_page_checks(st, base: Path) -> None:
    """An imported page set's checks, as scoring will read them, before the first quantize: a malformed check
    found after every variant is served costs the whole GPU time of the study."""
    from quantgate.io.pageset import PAGES_FILE
    from quantgate.scoring.olmocr_checks import pageset_checks, validate_checks
    from quantgate.study.spec import resolve_path

    if st.pages.path is not None and (resolve_path(base, st.pages.path) / PAGES_FILE).is_file():
        validate_checks(pageset_checks(resolve_path(base, st.pages.path)))


def check_recipes(st, model: Path) -> None:
    """Every variant's recipe read and planned against the model (its meta-device build, read once) before the
    first quantize: a typo in the last variant's recipe is found before BF16 has been written, not after."""
    from quantgate.errors import InputError
    from quantgate.quantize.plan import make_plan, model_modules
    from quantgate.recipes import load_recipe

    modules = None
    for v in st.variants:
        try:
            recipe = load_recipe(v.recipe)
            if model.is_dir():  # a model only the cluster's nodes can see is planned there
                modules = modules or model_modules(model)
                make_plan(model, recipe, modules=modules)
        except InputError as e:
            raise InputError(f"variant {v.name!r}: {e}") from None


def prepare_study(study_path: Path, out: Path, ray: str | None = None) -> Prepared:
    from quantgate.study.spec import load_study

    study_path = Path(study_path)
    return prepare(load_study(study_path), study_path.resolve().parent, Path(out), ray)
