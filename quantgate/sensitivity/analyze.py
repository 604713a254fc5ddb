"""``quantgate sensitivity``: damage and bytes of every group × format, each group quantized alone.

Work is saved as it finishes: one JSONL record per group × format beside the output (plus a
header with the inputs and the BF16 reference answers); a rerun with the same inputs skips what is
done, and a rerun with more formats adds only those."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from quantgate.errors import InputError, UsageError
from quantgate.io.fileio import append_jsonl, atomic_write_json, read_jsonl
from quantgate.io.pageset import PageSet
from quantgate.schema.base import Record, parse_record
from quantgate.schema.run import DEFAULT_PROMPT
from quantgate.schema.sensitivity import (
    DEFAULT_BANDWIDTH_GBPS,
    DEFAULT_KEEP_BF16,
    QUANT_FORMATS,
    Baseline,
    Group,
    Measurement,
    ModuleEntry,
    Reference,
    SensitivityFile,
    Sizes,
)


def records_path(out: Path) -> Path:
    return Path(out).with_name(Path(out).name + ".records.jsonl")


def parse_formats(spec: str | list[str]) -> list[str]:
    items = [f.strip() for f in (spec.split(",") if isinstance(spec, str) else spec) if f.strip()]
    bad = [f for f in items if f not in QUANT_FORMATS]
    if bad or not items:
        raise UsageError(f"--formats: {', '.join(bad) or 'empty'} — choose from {', '.join(QUANT_FORMATS)}")
    return list(dict.fromkeys(items))


def _read_progress(path: Path, fingerprint: dict, overwrite: bool) -> tuple[dict | None, dict]:
    if not path.exists():
        return None, {}
    if overwrite:
        path.unlink()
        return None, {}
    rows = [obj for _, obj in read_jsonl(path, repair_torn_tail=True)]
    if not rows or rows[0].get("type") != "header":
        raise InputError(f"{path}: not a sensitivity progress file; delete it or choose another -o")
    if rows[0]["fingerprint"] != fingerprint:
        changed = sorted(k for k in fingerprint if rows[0]["fingerprint"].get(k) != fingerprint[k])
        raise InputError(f"{path}: an earlier run with other inputs ({', '.join(changed)} differ); pass --overwrite "
                         "to start over or choose another -o")
    done = {}
    header = dict(rows[0])
    for no, obj in enumerate(rows[1:], start=2):
        if obj.get("type") == "baseline":
            header["baseline"] = obj["baseline"]
            continue
        m = parse_record(Measurement, {k: v for k, v in obj.items() if k != "type"}, where=f"{path}:{no}")
        done[(m.group, m.format)] = m
    return header, done


class SensitivityOptions(Record):
    """What ``quantgate sensitivity`` measures and how (the CLI flags); everything that changes a number is in
    the run's fingerprint, so a rerun with other values starts over or is refused."""

    formats: list[str]
    samples: int = 16  # calibration pages the damage is measured on
    max_new_tokens: int = 256
    max_seq_len: int = 4096
    prompt: str | None = None  # None: DEFAULT_PROMPT
    allow_vision: bool = False
    keep_bf16: list[str] | None = None  # None: DEFAULT_KEEP_BF16
    bandwidth_gbps: float | None = None  # None: DEFAULT_BANDWIDTH_GBPS (a spec sheet's, not measured)
    batch_pages: int = 16
    device: str = "auto"
    overwrite: bool = False
    trust_remote_code: bool = False
    replay_upstream: bool = True  # replay the recorded BF16 outputs of modules upstream of a group (faster)


def analyze(model_dir: Path, pageset_dir: Path, out: Path, options: SensitivityOptions, *,
            log: Callable[[str], None] = print, show_progress: bool = True) -> SensitivityFile:
    """Measure every group × format (each group quantized alone), resuming from the progress file beside
    ``out``, and write the sensitivity file."""
    t_start = time.time()
    run = _Analysis.start(Path(model_dir), Path(pageset_dir), Path(out), options)
    run.load()
    run.reference(log)
    run.baseline()
    run.measure(show_progress)
    run.timings["total_s"] = time.time() - t_start
    result = run.result()
    atomic_write_json(out, result.model_dump())
    return result


@dataclass
class _Analysis:
    """One sensitivity run: its settled inputs, the progress file's records so far, and the model loaded."""

    model_dir: Path
    pageset_dir: Path
    out: Path
    o: SensitivityOptions
    formats: list[str]
    keep_bf16: list[str]
    prompt: str
    ps: PageSet
    pages: list
    device: str
    fingerprint: dict[str, Any]
    header: dict[str, Any] | None
    done: dict[tuple[str, str], Measurement]
    timings: dict[str, float] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)  # the loaded model and what the steps derive from it

    @classmethod
    def start(cls, model_dir: Path, pageset_dir: Path, out: Path, o: SensitivityOptions) -> _Analysis:
        """Check the inputs and read the progress of an earlier run with the same fingerprint."""
        import torch

        from quantgate.io.fingerprint import weights_fingerprint
        from quantgate.io.modeldir import check_model_dir
        from quantgate.io.pageset import load_pageset
        from quantgate.io.provenance import package_versions
        from quantgate.quantize.build import _PKGS

        formats = parse_formats(o.formats)
        if o.samples < 1 or o.batch_pages < 1 or o.max_new_tokens < 1:
            raise UsageError("--calibration-samples, --batch-pages and --max-new-tokens must be at least 1")
        if o.bandwidth_gbps is not None and o.bandwidth_gbps <= 0:
            raise UsageError(f"--bandwidth {o.bandwidth_gbps}: must be a positive number of GB/s")
        keep_bf16 = DEFAULT_KEEP_BF16 if o.keep_bf16 is None else o.keep_bf16
        prompt = o.prompt or DEFAULT_PROMPT
        check_model_dir(model_dir, o.trust_remote_code)
        ps = load_pageset(pageset_dir)
        pages = ps.split("calibration")
        if not pages:
            raise InputError(f"{pageset_dir}: no pages in the calibration split; the damage is measured on them — "
                             "import with --calibration-fraction > 0")
        pages = pages[: o.samples]
        device = ("cuda" if torch.cuda.is_available() else "cpu") if o.device == "auto" else o.device
        # everything that changes a number: a rerun with other values starts over (or is refused)
        fingerprint = {"device": device, "batch_pages": o.batch_pages,
                       "model_weights_sha256": weights_fingerprint(model_dir), "pageset_sha256": ps.sha256,
                       "page_ids": [p.id for p in pages], "prompt": prompt, "max_new_tokens": o.max_new_tokens,
                       "max_seq_len": o.max_seq_len, "allow_vision": o.allow_vision, "keep_bf16": keep_bf16,
                       "versions": package_versions(_PKGS)}
        out.parent.mkdir(parents=True, exist_ok=True)
        header, done = _read_progress(records_path(out), fingerprint, o.overwrite)
        return cls(model_dir, pageset_dir, out, o, formats, keep_bf16, prompt, ps, pages, device, fingerprint, header,
                   done)

    def load(self) -> None:
        """The model and processor, its modules, the groups to measure and their BF16 bytes."""
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        from quantgate.quantize.classify import list_modules
        from quantgate.sensitivity.groups import build_groups

        t0 = time.time()
        model = AutoModelForImageTextToText.from_pretrained(self.model_dir, dtype=torch.bfloat16, device_map=self.device,
                                                            trust_remote_code=self.o.trust_remote_code).eval()
        processor = AutoProcessor.from_pretrained(self.model_dir, trust_remote_code=self.o.trust_remote_code)
        modules, n_layers, embeddings = list_modules(model)
        specs = build_groups(modules, n_layers, allow_vision=self.o.allow_vision, keep_bf16=self.keep_bf16)
        if not specs:
            raise InputError(f"{self.model_dir}: no attention, linear-attention or MLP projections to measure")
        sizes, group_bf16 = _sizes(model, modules, embeddings, specs)
        self.state.update(model=model, processor=processor, modules=modules, n_layers=n_layers, specs=specs,
                          sizes=sizes, group_bf16=group_bf16)
        self.timings["load_s"] = time.time() - t0

    def reference(self, log: Callable[[str], None]) -> None:
        """The BF16 answers every measurement is scored against (generated once and recorded) and their log-probs."""
        from quantgate.sensitivity import forward as fw

        t0 = time.time()
        model, processor, st = self.state["model"], self.state["processor"], self.state
        tok = processor.tokenizer
        pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
        eos = model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if tok.eos_token_id is not None:
            eos_ids.add(tok.eos_token_id)
        # a draft ends where the chat template ends the turn
        end = tok.eos_token_id if tok.eos_token_id is not None else (min(eos_ids) if eos_ids else None)
        prompts = fw.build_prompts(processor, self.ps, self.pages, self.prompt, self.o.max_seq_len)
        if self.header is None:
            answers, rounds, generated = fw.greedy_answers(
                model, [fw.PagePrompt(p.id, p.enc, p.draft + [end] if p.draft is not None and end is not None else p.draft)
                        for p in prompts], max_new_tokens=self.o.max_new_tokens, eos_ids=eos_ids, pad_id=pad_id,
                batch_pages=self.o.batch_pages, progress=None)
            ref_answers = Reference(tokens=sum(map(len, answers)), rounds=rounds, pages_generated=generated,
                                    answers=answers)
            self.header = {"type": "header", "fingerprint": self.fingerprint, "reference": ref_answers.model_dump()}
            append_jsonl(records_path(self.out), self.header, fsync=True)
        reference = Reference(**self.header["reference"])
        log(f"reference: {len(prompts)} page(s), {reference.tokens} answer tokens ({reference.rounds} verification "
            f"round(s), {reference.pages_generated} page(s) generated)")
        thin = thin_calibration(len(prompts), reference.tokens)
        if thin:
            log(f"warning: {thin}")
        replay = _replay_plan(model, st["specs"], st["modules"]) if self.o.replay_upstream \
            else {s.name: [] for s in st["specs"]}
        record = sorted({n for names in replay.values() for n in names})
        ref = fw.reference_logprobs(model, prompts, reference.answers, batch_pages=self.o.batch_pages, pad_id=pad_id,
                                    record=record)
        st.update(pad_id=pad_id, prompts=prompts, reference=reference, replay=replay, ref=ref)
        self.timings["reference_s"] = time.time() - t0

    def baseline(self) -> None:
        """llmcompressor's oneshot rounds offset norms even when it quantizes nothing: measured once, after the
        reference, as the damage every quantized variant carries."""
        from quantgate.sensitivity import forward as fw
        from quantgate.sensitivity.fakequant import oneshot_norms

        t0, st = time.time(), self.state
        assert self.header is not None  # written by reference()
        if "baseline" not in self.header:
            with oneshot_norms(st["model"]) as changed:
                base = fw.kl_against(st["model"], st["prompts"], st["reference"].answers, st["ref"],
                                     pad_id=st["pad_id"]) if changed else None
            self.header["baseline"] = None if base is None else Baseline(
                what="llmcompressor oneshot's offset-norm round trip (norm weights rounded in their dtype)",
                params_changed=changed, kl_mean=base.kl_mean, kl_pages=base.kl_pages).model_dump()
            append_jsonl(records_path(self.out), {"type": "baseline", "baseline": self.header["baseline"]}, fsync=True)
        st["baseline"] = Baseline(**self.header["baseline"]) if self.header.get("baseline") else None
        self.timings["reference_s"] += time.time() - t0

    def measure(self, show_progress: bool) -> None:
        """Every group × format not measured yet: each format's session calibrated once, each group quantized
        alone in it; each measurement appended to the progress file as it finishes."""
        from quantgate.quantize.calibrate import calibration_samples
        from quantgate.recipes import to_llmcompressor
        from quantgate.sensitivity import forward as fw
        from quantgate.sensitivity.fakequant import FormatSession
        from quantgate.sensitivity.groups import resolve_assignment

        st, o, done = self.state, self.o, self.done
        specs, modules = st["specs"], st["modules"]
        kinds = {m.name: m.kind for m in modules}
        todo = [(f, s) for f in self.formats for s in specs if (s.name, f) not in done]
        bar = None
        if show_progress and todo:
            import sys

            from tqdm import tqdm

            bar = tqdm(total=len(todo), desc="sensitivity", unit="group", file=sys.stderr, disable=None)
        cal_cache: list = []

        def calibration():  # prompt + truth, one page per batch: exactly what `quantgate quantize` calibrates on
            if not cal_cache:
                cal_cache.extend(calibration_samples(st["processor"], self.pageset_dir, self.prompt, o.samples,
                                                     o.max_seq_len)[0])
            return cal_cache

        for fmt in self.formats:
            pending = [s for s in specs if (s.name, fmt) not in done]
            if not pending:
                continue
            plan, _ = resolve_assignment(specs, {s.name: fmt for s in specs}, modules, st["n_layers"],
                                         keep_bf16=self.keep_bf16, allow_vision=o.allow_vision, where=f"format {fmt}")
            t_fmt = time.time()
            with FormatSession(st["model"], to_llmcompressor(plan, kinds), calibration) as sess:
                self.timings[f"calibration_s.{fmt}"] = sess.calibration_s
                for s in pending:
                    t0 = time.time()
                    quant = [n for n in s.modules if plan[n] == fmt]
                    kept = [n for n in s.modules if plan[n] != fmt]
                    with sess.only(quant):
                        r = fw.kl_against(st["model"], st["prompts"], st["reference"].answers, st["ref"],
                                          pad_id=st["pad_id"], replay=st["replay"][s.name])
                    nbytes = sum(sess.module_bytes(n) for n in quant) + sum(st["group_bf16"][n] for n in kept)
                    m = Measurement(group=s.name, format=fmt, bytes=nbytes, quantized=quant, kept_bf16=kept,
                                    wall_s=round(time.time() - t0, 3), **r.model_dump())
                    append_jsonl(records_path(self.out), {"type": "measurement", **m.model_dump()}, fsync=True)
                    done[(s.name, fmt)] = m
                    if bar:
                        bar.set_postfix_str(f"{s.name} {fmt} KL {m.kl_mean:.2e}")
                        bar.update(1)
            self.timings[f"format_s.{fmt}"] = time.time() - t_fmt
        if bar:
            bar.close()

    def result(self) -> SensitivityFile:
        st, o, fp = self.state, self.o, self.fingerprint
        reference = st["reference"]
        return SensitivityFile(
            model=str(self.model_dir), model_weights_sha256=fp["model_weights_sha256"], pageset=str(self.pageset_dir),
            pageset_sha256=self.ps.sha256, page_ids=fp["page_ids"], prompt=self.prompt,
            max_new_tokens=o.max_new_tokens, max_seq_len=o.max_seq_len, formats=self.formats,
            allow_vision=o.allow_vision, keep_bf16=self.keep_bf16,
            bandwidth_gbps=o.bandwidth_gbps or DEFAULT_BANDWIDTH_GBPS,
            bandwidth_source="--bandwidth" if o.bandwidth_gbps else "default: H200 HBM3e spec sheet (4.8 TB/s), not measured",
            n_layers=st["n_layers"],
            modules=[ModuleEntry(name=m.name, kind=m.kind, layer=m.layer, in_features=m.in_features,
                                 out_features=m.out_features) for m in st["modules"]],
            groups=[Group(name=s.name, kind=s.kind, layer=s.layer, modules=s.modules, selector=s.selector,
                          params=s.params, bf16_bytes=sum(st["group_bf16"][n] for n in s.modules), decode=s.decode)
                    for s in st["specs"]],
            sizes=st["sizes"], reference=reference, baseline=st["baseline"],
            measurements=[self.done[(s.name, f)] for f in self.formats for s in st["specs"]],
            timings={k: round(v, 3) for k, v in self.timings.items()}, versions=fp["versions"],
            created_utc=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            notes=[f"device {self.device}; {len(self.pages)} calibration page(s), {reference.tokens} scored tokens",
                   "each group quantized alone, everything else BF16; nvfp4 is emulated as llmcompressor does (W4A4 "
                   "fake quantization), while vLLM on Hopper runs it weight-only"])


def _replay_plan(model, specs, modules) -> dict[str, list[str]]:
    """Per group, the modules upstream of it whose BF16 outputs can be replayed: the vision tower
    and projector (top-most modules), for a decoder group at layer L decoder layers 0..L-1, and
    for an MLP group also layer L's token mixer (attention or Gated DeltaNet runs before the MLP,
    or beside it in parallel-residual layers; either way the MLP's quantization cannot reach it)."""
    import re

    from quantgate.quantize.classify import classify_name

    names = [n for n, _ in model.named_modules() if n]
    vis = [n for n in names if classify_name(n, []) in ("vision", "projector")]
    tops = [n for n in vis if not any(n.startswith(v + ".") for v in vis if v != n)]
    known = set(names)
    plan = {}
    for s in specs:
        if not s.decode:
            plan[s.name] = []
            continue
        m = re.match(r"^(.*\.(?:layers|h|blocks))\.(\d+)\.", s.modules[0])
        upstream = [f"{m.group(1)}.{i}" for i in range(int(m.group(2)))] if m else []
        if m and s.kind == "mlp":
            here = f"{m.group(1)}.{m.group(2)}."
            upstream += sorted({here + x.name[len(here):].split(".")[0] for x in modules
                                if x.kind in ("attention", "linear_attention") and x.name.startswith(here)})
        plan[s.name] = tops + [u for u in upstream if u in known]
    return plan


def _sizes(model, modules, embeddings, specs) -> tuple[Sizes, dict[str, int]]:
    """Bytes of every weight as loaded, split into groups and the fixed rest."""
    from quantgate.quantize.classify import classify_name

    named = dict(model.named_modules())
    weight_bytes = {m.name: named[m.name].weight.numel() * named[m.name].weight.element_size() for m in modules}
    in_group = {n for s in specs for n in s.modules}
    tied = bool(getattr(model.config, "tie_word_embeddings", False))
    total = fixed_decode = 0
    emb = set(embeddings)
    for pname, p in model.named_parameters():  # shared (tied) tensors are listed once
        b = p.numel() * p.element_size()
        total += b
        owner = pname.rsplit(".", 1)[0]
        if owner in in_group and pname.endswith(".weight"):
            continue
        if classify_name(owner, []) in ("vision", "projector") or (owner in emb and not tied):
            continue  # read once per page (vision) or one row per token (embeddings)
        fixed_decode += b
    grouped = sum(weight_bytes[n] for n in in_group)
    return Sizes(bf16_bytes=total, fixed_bytes=total - grouped, fixed_decode_bytes=fixed_decode), weight_bytes


# Below these the groups' KL is read from too few tokens to rank them (a rule of thumb, not measured here: a
# page's tokens are correlated, so pages count as much as tokens): said, not refused — a smoke run is fine.
THIN_PAGES = 8
THIN_TOKENS = 1000


def thin_calibration(pages: int, tokens: int) -> str | None:
    """What is thin about measuring on ``pages`` pages and ``tokens`` scored answer tokens (None: nothing)."""
    if pages >= THIN_PAGES and tokens >= THIN_TOKENS:
        return None
    return (f"thin calibration: the KL of every group is measured on {pages} page(s) and {tokens} answer token(s) "
            f"(fewer than {THIN_PAGES} pages or {THIN_TOKENS} tokens); the ranking of groups may not hold on other "
            "pages — give more calibration pages (--calibration-samples, a larger calibration split) or longer answers "
            "(--max-new-tokens)")
