"""Run lm-eval against a variant's OpenAI-compatible server (started here, or one already running).

lm-eval does the evaluation (``simple_evaluate`` with ``local-chat-completions``); quantgate starts
and stops the server, keeps lm-eval's response cache in the output folder (so a killed run resumes
without re-asking the server), and writes two things a later comparison needs:
``lmeval.json`` (scores with lm-eval's stderr, versions, settings) and one ``samples-<task>.jsonl``
per task (per-sample metric values keyed by document id)."""

from __future__ import annotations

import importlib.metadata as md
import json
import math
from pathlib import Path

from quantgate.errors import InputError
from quantgate.io.fileio import atomic_write_json, atomic_write_text, read_jsonl, recorded_path, safe_join
from quantgate.schema.base import read_record_file
from quantgate.schema.lmeval import LmEvalRun, LmEvalSample, MetricResult

RESULT = "lmeval.json"
__all__ = ["RESULT", "LmEvalRun", "MetricResult", "load_lmeval", "run_lmeval"]  # the records live in schema.lmeval


def _num(x):
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _sample_id(s: dict) -> str:
    doc = s.get("doc") or {}
    return str(doc.get("doc_id", s.get("doc_id")))


MODEL = "quantgate-chat"
# lm-eval builds the model from a name and arguments, so a progress callback reaches it through here,
# keyed by the server's URL (each variant's server has its own port).
_ON_RESPONSE: dict = {}


def _register_model() -> None:
    """lm-eval's ``local-chat-completions`` minus an empty ``stop`` field: transformers serve 5.17
    builds a stop-string criterion from any ``stop`` it receives, which fails with VLM processors."""
    from lm_eval.api import registry
    from lm_eval.models.openai_completions import LocalChatCompletion

    if MODEL in registry.MODEL_REGISTRY:
        return

    class QuantgateChat(LocalChatCompletion):
        def _create_payload(self, *args, **kwargs):
            payload = super()._create_payload(*args, **kwargs)
            if not payload.get("stop"):
                payload.pop("stop", None)
            return payload

        def parse_generations(self, outputs, **kwargs):
            cb = _ON_RESPONSE.get(self.base_url)
            if cb is not None:
                cb()
            return super().parse_generations(outputs, **kwargs)

    registry.register_model(MODEL)(QuantgateChat)


_TASK_MANAGERS: dict = {}


def task_manager(tasks: list[str], include_path: Path | None):
    """lm-eval's task index. Indexing its built-in tasks parses its ~14,000 YAML files (seconds of CPU
    on every run), so tasks that all live in ``include_path`` are looked up there alone,
    and an index is kept for the process — keyed by the include folder's file names, sizes and
    modification times, so a rewritten task folder is indexed again."""
    from lm_eval.tasks import TaskManager

    def build(include: Path | None, defaults: bool):
        files = tuple(sorted((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in Path(include).rglob("*")
                             if f.is_file())) if include else ()
        key = (str(include) if include else None, defaults, files)
        if key not in _TASK_MANAGERS:
            _TASK_MANAGERS[key] = TaskManager(include_path=str(include) if include else None, include_defaults=defaults)
        return _TASK_MANAGERS[key]

    if include_path:
        local = build(Path(include_path), False)
        if all(t in local.all_tasks for t in tasks):
            return local
    return build(Path(include_path) if include_path else None, True)


def run_lmeval(variant: Path, backend, out: Path, *, tasks: list[str], include_path: Path | None = None,
               limit: int | None = None, concurrent: int = 1, server=None, on_response=None,
               record_root: Path | None = None, log=print) -> LmEvalRun:
    """``server``: a ``SharedServer`` of this variant already serving (a study's page runs started it);
    without one, a server is started for this run. ``on_response()`` is called per answer the server
    gives (not for answers lm-eval's cache already holds). ``record_root``: lmeval.json records the
    variant and include paths relative to it when they lie inside it (a study passes its folder; see
    ``fileio.recorded_path``)."""
    from contextlib import nullcontext

    import lm_eval

    from quantgate.io.fingerprint import weights_fingerprint
    from quantgate.serve.server import SharedServer

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if not tasks:
        raise InputError("lm-eval needs at least one task (--tasks T1,T2)")
    tm = task_manager(tasks, include_path)
    unknown = [t for t in tasks if t not in tm.all_tasks]
    if unknown:
        raise InputError(f"unknown lm-eval task(s) {unknown}; local tasks need --include-path DIR holding their YAML")
    with nullcontext(server) if server is not None else SharedServer(backend, Path(variant), out / "server.log", log) as srv:
        ep = srv.endpoint()
        model_args = {"base_url": f"{ep.base_url}/chat/completions", "model": ep.model,
                      "max_images": 1, "num_concurrent": concurrent, "max_retries": 3, "tokenized_requests": False,
                      # no client-side tokenizer: lm-eval needs none for image tasks, and its EOS stop string
                      # would reach transformers serve, which fails on stop strings with VLM processors
                      "tokenizer_backend": None}
        if ep.api_key is not None:
            model_args["api_key"] = ep.api_key  # read by lm-eval as a model arg
        _register_model()
        url = model_args["base_url"]
        if on_response:
            _ON_RESPONSE[url] = on_response
        try:
            res = lm_eval.simple_evaluate(model=MODEL, model_args=model_args, tasks=tasks,
                                          task_manager=tm, limit=limit, log_samples=True, apply_chat_template=True,
                                          use_cache=str(out / "lm_cache"), random_seed=0, numpy_random_seed=0,
                                          torch_random_seed=0, fewshot_random_seed=0)
        finally:
            _ON_RESPONSE.pop(url, None)
    fingerprint = weights_fingerprint(Path(variant)) if backend.serves_local_weights else None
    run = LmEvalRun(variant=recorded_path(variant, record_root),  # relative inside the study: a moved one keeps it
                    variant_fingerprint=fingerprint, backend=backend.name, tasks=tasks,
                    include_path=recorded_path(include_path, record_root) if include_path else None,
                    limit=limit, lm_eval_version=md.version("lm_eval"))
    hib = res.get("higher_is_better", {})
    for task in tasks:
        keys = [key for key, val in res["results"].get(task, {}).items()
                if "," in key and not key.split(",")[0].endswith("_stderr") and _num(val) is not None]
        rows = doc_rows(res.get("samples", {}).get(task, []), keys, task)
        metrics = {}
        for key in keys:
            name, filt = key.split(",", 1)
            err = _num(res["results"][task].get(f"{name}_stderr,{filt}"))
            metrics[key] = MetricResult(value=float(res["results"][task][key]), stderr=err,
                                        higher_is_better=bool(hib.get(task, {}).get(name, True)),
                                        n=sum(r.metrics.get(key) is not None for r in rows))  # documents
        run.results[task] = metrics
        name = f"samples-{task}.jsonl"
        atomic_write_text(out / name, "".join(json.dumps(r.model_dump(), default=str) + "\n" for r in rows))
        run.samples[task] = name
    atomic_write_json(out / RESULT, run.model_dump())
    return run


def doc_rows(samples: list[dict], keys: list[str], task: str) -> list[LmEvalSample]:
    """lm-eval logs one sample per (document, filter), its metric values under the bare metric name
    (gsm8k: ``strict-match`` and ``flexible-extract``). One row per document: ``metrics`` holds one
    value per ``metric,filter`` key, ``responses`` the filtered response per filter, ``doc_hash`` is
    lm-eval's hash of the document (compare refuses to pair documents whose hashes differ)."""
    rows: dict[str, LmEvalSample] = {}
    for s in samples:
        filt, doc_id = s.get("filter", "none"), _sample_id(s)
        row = rows.setdefault(doc_id, LmEvalSample(doc_id=doc_id, doc_hash=s.get("doc_hash"), target=s.get("target")))
        if row.doc_hash != s.get("doc_hash"):
            raise InputError(f"lm-eval task {task}: two different documents share the id {doc_id!r}; give each "
                             "document of the task's data its own doc_id")
        resp = s.get("filtered_resps")
        row.responses[filt] = resp[0] if isinstance(resp, list) and resp else resp
        row.metrics.update({key: _num(s[key.split(",")[0]]) for key in keys
                            if key.split(",", 1)[1] == filt and key.split(",")[0] in s})
    return list(rows.values())


def load_lmeval(out: Path) -> tuple[LmEvalRun, dict[str, dict[str, LmEvalSample]]]:
    """The run record and, per task and document id, the document's sample row. Rows of one document are
    merged (files written before rows were merged per document hold one row per filter)."""
    f = Path(out) / RESULT
    run = read_record_file(LmEvalRun, f, missing="run `quantgate lmeval` first")
    samples: dict[str, dict[str, LmEvalSample]] = {}
    for task, name in run.samples.items():
        path = safe_join(Path(out), name, what=f"{f}: samples.{task}")
        docs: dict[str, LmEvalSample] = {}
        for no, r in read_jsonl(path):
            if not isinstance(r, dict) or not isinstance(r.get("metrics"), dict) or "doc_id" not in r:
                raise InputError(f"{path}:{no}: not a quantgate lm-eval sample row (doc_id, metrics); rerun lmeval")
            d = docs.setdefault(str(r["doc_id"]), LmEvalSample(doc_id=str(r["doc_id"]), doc_hash=r.get("doc_hash")))
            d.metrics.update(r["metrics"])
        samples[task] = docs
    return run, samples
