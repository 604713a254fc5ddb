"""Teacher-forced forwards over page images, batched: the BF16 model's greedy answers (found by
verifying drafts, not token by token) and the KL of any variant's next-token distributions
against BF16's on those answers.

Batches are right-padded: with a causal model, padding after a sequence cannot change its logits
(checked in tests: batched and one-page logits are equal), so all pages run in one forward."""

from __future__ import annotations

import copy
from contextlib import contextmanager
from dataclasses import dataclass, field

from quantgate.schema.sensitivity import KlResult


@dataclass
class PagePrompt:
    id: str
    enc: dict  # every processor output for the prompt (image + chat template), batch of one
    draft: list[int] | None  # the page's truth as token ids (a guess at the answer), or None


def build_prompts(processor, pageset, pages, prompt: str, max_seq_len: int) -> list[PagePrompt]:
    import io

    from PIL import Image

    from quantgate.errors import InputError

    msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": prompt}]}]
    text = processor.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    out = []
    for p in pages:
        img = Image.open(io.BytesIO(pageset.image_bytes(p))).convert("RGB")
        enc = dict(processor(text=[text], images=[img], return_tensors="pt"))
        if enc["input_ids"].shape[1] > max_seq_len:
            raise InputError(f"calibration page {p.id}: its prompt alone has {enc['input_ids'].shape[1]} tokens, over "
                             f"--max-seq-len {max_seq_len}; raise it or lower the processor's max_pixels")
        truth = pageset.truth_text(p)
        draft = processor.tokenizer(truth, add_special_tokens=False)["input_ids"] if truth else None
        out.append(PagePrompt(p.id, enc, draft))
    return out


def _seq_keys(enc: dict) -> list[str]:
    n = enc["input_ids"].shape
    return [k for k, v in enc.items() if hasattr(v, "shape") and v.dim() == 2 and tuple(v.shape) == tuple(n)]


def make_batch(items: list[tuple[dict, list[int]]], pad_id: int):
    """Prompt + answer for each item, right-padded into one batch. Per-token tensors (input_ids,
    attention_mask, mm_token_type_ids, ...) get the answer appended (mask 1, type 0 = text);
    everything else (pixel values, grids) is concatenated along the first axis."""
    import torch

    seqs, lens = [], []
    for enc, ans in items:
        a = torch.tensor([ans], dtype=enc["input_ids"].dtype)
        row = {}
        for k in _seq_keys(enc):
            v = enc[k]
            ext = a if k == "input_ids" else (torch.ones_like(a) if k == "attention_mask" else torch.zeros_like(a, dtype=v.dtype))
            row[k] = torch.cat([v, ext.to(v.dtype)], dim=1)
        seqs.append(row)
        lens.append(enc["input_ids"].shape[1])
    T = max(r["input_ids"].shape[1] for r in seqs)
    batch = {}
    for k in seqs[0]:
        fill = pad_id if k == "input_ids" else 0
        batch[k] = torch.cat([torch.nn.functional.pad(r[k], (0, T - r[k].shape[1]), value=fill) for r in seqs])
    for k, v in items[0][0].items():
        if k not in batch and hasattr(v, "shape"):
            batch[k] = torch.cat([enc[k] for enc, _ in items])
    return batch, lens, T


def answer_logits(model, items: list[tuple[dict, list[int]]], pad_id: int, extra: int = 0):
    """Logits (float32) at the positions that predict each item's answer tokens, plus ``extra``
    positions after (``extra=1`` also gives the prediction that follows the last answer token)."""
    import torch

    batch, prompt_lens, T = make_batch(items, pad_id)
    dev = next(model.parameters()).device
    batch = {k: v.to(dev) for k, v in batch.items()}
    first = min(p - 1 for p in prompt_lens)
    with torch.no_grad():
        try:
            logits = model(**batch, use_cache=False, logits_to_keep=T - first).logits
        except TypeError:  # a model without logits_to_keep: all positions
            logits, first = model(**batch, use_cache=False).logits, 0
    out = []
    for i, ((_, ans), p) in enumerate(zip(items, prompt_lens, strict=True)):
        s = p - 1 - first
        out.append(logits[i, s:s + len(ans) + extra].float())
    return out


def _chunks(order: list[int], size: int) -> list[list[int]]:
    return [order[i:i + size] for i in range(0, len(order), size)]


def greedy_answers(model, prompts: list[PagePrompt], *, max_new_tokens: int, eos_ids: set[int], pad_id: int,
                   batch_pages: int, max_rounds: int = 4, progress=None) -> tuple[list[list[int]], int, int]:
    """The BF16 model's greedy answer for each page, as teacher-forced argmaxes.

    Speculative decoding with the page's truth as the draft (written here: transformers' assisted
    generation takes a draft *model*, not a given draft): one batched forward checks every draft
    token at once; the first wrong token is replaced by the model's own and the draft re-checked.
    A trained reader needs one or two rounds; pages still open after ``max_rounds`` (or without
    truth) finish with ``model.generate`` from their verified prefix."""
    import torch

    answers = [list(p.draft or [])[:max_new_tokens] for p in prompts]
    open_ = [i for i, p in enumerate(prompts) if p.draft is not None]
    rounds = 0
    while open_ and rounds < max_rounds:
        rounds += 1
        still = []
        for chunk in _chunks(open_, batch_pages):
            logits = answer_logits(model, [(prompts[i].enc, answers[i]) for i in chunk], pad_id, extra=1)
            for i, lg in zip(chunk, logits, strict=True):
                pred, a = lg.argmax(-1).tolist(), answers[i]
                k = next((j for j in range(len(a)) if pred[j] != a[j]), None)
                if k is None:
                    if (a and a[-1] in eos_ids) or len(a) >= max_new_tokens:
                        continue
                    a.append(pred[len(a)])
                else:  # keep the draft after the fix: OCR slips are mostly substitutions
                    a[:] = a[:k] + [pred[k]] + ([] if pred[k] in eos_ids else a[k + 1:])
                del a[max_new_tokens:]
                still.append(i)
        open_ = still
        if progress:
            progress(f"verification round {rounds}: {len(open_)} page(s) open")
    verified = {i: _verified_prefix(model, prompts[i], answers[i], pad_id) for i in open_}
    to_generate = sorted(set(open_) | {i for i, p in enumerate(prompts) if p.draft is None})
    for i in to_generate:
        prefix = verified.get(i, [])
        items = [(prompts[i].enc, prefix)]
        batch, _, _ = make_batch(items, pad_id)
        dev = next(model.parameters()).device
        with torch.no_grad():
            out = model.generate(**{k: v.to(dev) for k, v in batch.items()}, do_sample=False,
                                 max_new_tokens=max(1, max_new_tokens - len(prefix)), pad_token_id=pad_id)
        new = out[0, batch["input_ids"].shape[1]:].tolist()
        ans = prefix + new
        cut = next((j for j, t in enumerate(ans) if t in eos_ids), None)
        answers[i] = ans[:cut + 1] if cut is not None else ans[:max_new_tokens]
    return answers, rounds, len(to_generate)


def _verified_prefix(model, prompt: PagePrompt, answer: list[int], pad_id: int) -> list[int]:
    if not answer:
        return []
    pred = answer_logits(model, [(prompt.enc, answer)], pad_id)[0].argmax(-1).tolist()
    k = next((j for j in range(len(answer)) if pred[j] != answer[j]), len(answer))
    return answer[:k]


@dataclass
class ReferenceLogprobs:
    """BF16 log-probabilities on the answer positions, per chunk of pages (kept on the model's
    device), and what each replayable module returned in the BF16 forward."""

    chunks: list[list[int]]
    logp: list = field(default_factory=list)  # per chunk: [tokens, vocab] float32
    spans: list = field(default_factory=list)  # per chunk: [(page index, start, end)]
    outputs: list = field(default_factory=list)  # per chunk: {module name: [output per call]}


def _replay_module(module, outputs: list):
    """A stand-in for a module whose inputs a measurement cannot change (everything upstream of
    the quantized group is BF16): it returns what the module returned in the BF16 forward, so the
    forward skips the vision tower and the decoder layers before the group. Attribute lookups
    (e.g. a decoder layer's ``layer_type``) go to the real module."""
    import torch

    class Replay(torch.nn.Module):
        def forward(self, *args, **kwargs):
            out = outputs[self._calls % len(outputs)]
            object.__setattr__(self, "_calls", self._calls + 1)
            return copy.copy(out)  # callers may set fields on a model output (Qwen3.5 splits pooler_output)

        def __getattr__(self, name):
            try:
                return super().__getattr__(name)
            except AttributeError:
                return getattr(module, name)

    r = Replay()
    object.__setattr__(r, "_calls", 0)
    return r


@contextmanager
def replaying(model, outputs: dict[str, list], names: list[str]):
    """Swap the named modules for replays of their recorded outputs, then put them back."""
    swapped = []
    try:
        for n in names:
            parent_name, _, child = n.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            real = getattr(parent, child)
            setattr(parent, child, _replay_module(real, outputs[n]))
            swapped.append((parent, child, real))
        yield
    finally:
        for parent, child, real in reversed(swapped):
            setattr(parent, child, real)


def _chunk_logp(model, prompts, answers, chunk, pad_id):
    import torch

    logits = answer_logits(model, [(prompts[i].enc, answers[i]) for i in chunk], pad_id)
    spans, start = [], 0
    for i, lg in zip(chunk, logits, strict=True):
        spans.append((i, start, start + lg.shape[0]))
        start += lg.shape[0]
    return torch.log_softmax(torch.cat(logits), dim=-1), spans


def _recorder(into: list):
    return lambda _module, _args, out: into.append(copy.copy(out))


def reference_logprobs(model, prompts, answers, *, batch_pages: int, pad_id: int,
                       record: list[str] = ()) -> ReferenceLogprobs:
    """BF16 log-probs per chunk; the outputs of the modules in ``record`` are kept for replay."""
    # longest first, so padding is small inside each chunk
    order = sorted(range(len(prompts)), key=lambda i: -(prompts[i].enc["input_ids"].shape[1] + len(answers[i])))
    ref = ReferenceLogprobs(chunks=_chunks(order, batch_pages))
    for chunk in ref.chunks:
        outs: dict[str, list] = {n: [] for n in record}
        hooks = [model.get_submodule(n).register_forward_hook(_recorder(outs[n])) for n in record]
        try:
            lp, spans = _chunk_logp(model, prompts, answers, chunk, pad_id)
        finally:
            for h in hooks:
                h.remove()
        ref.logp.append(lp)
        ref.spans.append(spans)
        ref.outputs.append(outs)
    return ref


def kl_against(model, prompts, answers, ref: ReferenceLogprobs, *, pad_id: int, replay: list[str] = ()) -> KlResult:
    """Mean KL(BF16 || model) per answer token (overall and per page) and top-1 agreement. The
    modules in ``replay`` return their recorded BF16 outputs instead of running."""

    kl_page = [0.0] * len(prompts)
    n_page = [0] * len(prompts)
    agree = 0
    for chunk, ref_lp, spans, outs in zip(ref.chunks, ref.logp, ref.spans, ref.outputs, strict=True):
        with replaying(model, outs, list(replay)):
            lp, _ = _chunk_logp(model, prompts, answers, chunk, pad_id)
        kl_tok = (ref_lp.exp() * (ref_lp - lp)).sum(-1).clamp_min(0)  # rounding can dip a hair below 0
        agree += int((lp.argmax(-1) == ref_lp.argmax(-1)).sum())
        for i, s, e in spans:
            kl_page[i] = float(kl_tok[s:e].sum())
            n_page[i] = e - s
    tokens = sum(n_page)
    return KlResult(kl_mean=sum(kl_page) / max(tokens, 1),
                    kl_pages=[k / max(n, 1) for k, n in zip(kl_page, n_page, strict=True)],
                    top1_agreement=agree / max(tokens, 1), tokens=tokens)
