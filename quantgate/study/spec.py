"""A study's YAML read: ``load_study``. The record is ``quantgate.schema.study.Study``, every number checked
when it is parsed; here its ``backend:`` block is typed by the registered backends' own option models
(``quantgate.serve.backends.derive``), so a new backend needs no change here, and what only the backend can
answer is checked: whether it starts a server to pass a variant's flags, environment or GPU to."""

from __future__ import annotations

import warnings
from pathlib import Path

from pydantic import Field

from quantgate.errors import DeprecatedSpelling, InputError
from quantgate.schema import study as schema
from quantgate.schema.base import parse_record
from quantgate.schema.load import load_yaml
from quantgate.serve.backends.derive import default_study_backend, study_backend_type

BackendSpec = study_backend_type()  # {name: transformers | vllm | openai | external | …, that backend's options}


class Study(schema.Study):
    backend: BackendSpec = Field(default_factory=default_study_backend)  # type: ignore[valid-type]


def load_study(path: Path) -> Study:
    path = Path(path)
    obj = load_yaml(path, "study file")  # one DataError naming the file and line, under the loader's limits
    if not isinstance(obj, dict):
        raise InputError(f"{path}: a study is a YAML mapping")
    for old, new in schema.RENAMED_KEYS.items():
        if old in obj and new not in obj:
            warnings.warn(f"{path}: key '{old}' is deprecated, use '{new}' (the old name goes in the next release)",
                          DeprecatedSpelling, stacklevel=2)
    st = parse_record(Study, obj, where=str(path))
    check_placement(st, str(path))
    return st


def check_placement(st: Study, where: str) -> None:
    """What the backend must be able to do for the study's placement of its servers: start a server (for a
    variant's ``server_args``/``server_env`` and for ``gpus``), and fit as many on a GPU as ``servers: all_at_once``
    puts there."""
    backend = st.backend
    for i, v in enumerate(st.variants):
        for field in ("server_args", "server_env"):
            if getattr(v, field) and not backend.starts_server:
                raise InputError(f"{where}: variants.{i}.{field}: backend {backend.name} starts no server to "
                                 "pass them to")
    if st.gpus and not backend.starts_server:
        raise InputError(f"{where}: field 'gpus': backend {backend.name} starts no server to place on a GPU")
    for i, v in enumerate(st.variants):
        if st.gpus and "CUDA_VISIBLE_DEVICES" in v.server_env:
            raise InputError(f"{where}: variants.{i}.server_env: CUDA_VISIBLE_DEVICES and the study's 'gpus' both "
                             "place this server; keep one of them")
    from quantgate.study.placement import plan_placement, variant_backend

    for i, v in enumerate(st.variants):  # per-variant backend options, then the placement on the pool
        variant_backend(backend, v, i, where=f"{where}: ")
    if st.gpus and st.cluster:
        raise InputError(f"{where}: field 'gpus': with a cluster, Ray assigns each server its GPUs; remove 'gpus'")
    if not st.cluster:  # a cluster's pool is known once connected (study/cluster.py)
        try:
            plan_placement(st)
        except InputError as e:
            raise InputError(f"{where}: {e}") from None
    if st.servers == "all_at_once" and not st.gpus and not st.cluster and backend.takes_most_of_a_gpu():
        raise InputError(f"{where}: field 'servers': all_at_once puts {len(st.variants)} servers on "
                         f"{max(len(set(st.gpus)), 1)} GPU(s), and each {backend.name} server takes most of a "
                         "GPU's memory by default; set backend.gpu_memory_utilization (below 1/number of servers "
                         "per GPU) and a KV-cache size in backend.extra_args (vLLM: --kv-cache-memory-bytes), "
                         "or list one GPU per variant in 'gpus'")


def resolve_path(base: Path, p: str) -> Path:
    """A path written in a study: relative to the study file's folder unless absolute."""
    q = Path(p)
    return q if q.is_absolute() else (base / q)


def recipe_ref(recipe: str, base: Path) -> str:
    """A variant's recipe as a study run from anywhere reads it: a preset's name, else the file's absolute path
    (``run_study`` reads it as given; the study's folder is the intent)."""
    from quantgate.recipes import PRESETS_DIR

    if (PRESETS_DIR / f"{recipe}.yaml").is_file():
        return recipe
    for cand in (Path(recipe), base / recipe):
        if cand.is_file():
            return str(cand.resolve())
    return recipe


def absolute_study(st: Study, base: Path) -> Study:
    """The study with every path absolute, as read from ``base``: what a copy of it written elsewhere (a tune's
    trial study) holds, and what the gate compares a folder's echo with. A copy, not validated again: a tune's
    user study may hold the baseline alone."""
    upd: dict = {"model": str(resolve_path(base, st.model).resolve()),
                 "variants": [v.model_copy(update={"recipe": recipe_ref(v.recipe, base)}) for v in st.variants]}
    if st.pages.path:
        upd["pages"] = st.pages.model_copy(update={"path": str(resolve_path(base, st.pages.path).resolve())})
    if st.lm_eval and st.lm_eval.include_path:
        upd["lm_eval"] = st.lm_eval.model_copy(
            update={"include_path": str(resolve_path(base, st.lm_eval.include_path).resolve())})
    cc = getattr(st.backend, "compile_cache", None)
    if cc and cc.lower() != "none":
        upd["backend"] = st.backend.model_copy(update={"compile_cache": str(resolve_path(base, cc).resolve())})
    return st.model_copy(update=upd)
