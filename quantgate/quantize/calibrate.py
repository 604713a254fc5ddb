"""Calibration samples from a page set's calibration split: real page images through the model's
processor and chat template with the study's prompt, so the decoder's observers see
image-conditioned activations. Every processor output is kept (Qwen3.5 needs
``mm_token_type_ids`` for M-RoPE), one sample per batch."""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from pathlib import Path

from quantgate.errors import InputError
from quantgate.schema.run import DEFAULT_PROMPT  # noqa: E402,F401  (re-exported)


def calibration_pages(pageset_dir: Path, n: int):
    """The page set and the pages calibration uses: the first ``n`` of its calibration split."""
    from quantgate.io.pageset import load_pageset

    ps = load_pageset(pageset_dir)
    pages = ps.split("calibration")
    if not pages:
        raise InputError(f"{pageset_dir}: no pages in the calibration split; import with --calibration-fraction > 0")
    return ps, pages[:n]


def calibration_pages_sha256(pageset_dir: Path, n: int) -> tuple[str, int]:
    """sha256 over the pages calibration uses — id, image bytes and truth text, in order — and their
    count: what the calibration data is, whatever else the page set holds or however it is named."""
    import hashlib
    import json

    ps, pages = calibration_pages(pageset_dir, n)
    h = hashlib.sha256()
    for p in pages:
        truth = ps.truth_text(p)
        h.update(json.dumps([p.id, hashlib.sha256(ps.image_bytes(p)).hexdigest(),
                             None if truth is None else hashlib.sha256(truth.encode()).hexdigest()]).encode() + b"\n")
    return h.hexdigest(), len(pages)


def calibration_samples(processor, pageset_dir: Path, prompt: str, n: int, max_seq_len: int,
                        text_only: bool = False, warn: Callable[[str], None] | None = None
                        ) -> tuple[list[dict], list[str]]:
    """One sample per page of the first ``n`` calibration pages. A page image longer than ``max_seq_len``
    tokens is left out with a warning (``warn``; default a Python warning), never cut: cutting an image's
    tokens would desynchronise pixels and placeholders. Only when no page fits is the build refused.
    ``max_seq_len`` is quantgate's bound, not llmcompressor's: the samples reach oneshot ready-tokenised."""
    from PIL import Image

    ps, pages = calibration_pages(pageset_dir, n)
    samples, ids, long = [], [], []
    for p in pages:
        truth = ps.truth_text(p) or ""
        if text_only:
            msgs = [{"role": "user", "content": [{"type": "text", "text": prompt}]},
                    {"role": "assistant", "content": [{"type": "text", "text": truth}]}]
            text = processor.apply_chat_template(msgs, tokenize=False)
            enc = processor.tokenizer(text, return_tensors="pt", truncation=True, max_length=max_seq_len)
        else:
            msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": prompt}]}]
            text = processor.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
            # The expected answer follows, so the observers also see the activations of generation.
            text += truth
            img = Image.open(io.BytesIO(ps.image_bytes(p))).convert("RGB")
            enc = processor(text=[text], images=[img], return_tensors="pt")
            if enc["input_ids"].shape[1] > max_seq_len:
                long.append(f"{p.id} ({enc['input_ids'].shape[1]} tokens)")
                continue
        samples.append(dict(enc))
        ids.append(p.id)
    if not samples:
        raise InputError(f"{pageset_dir}: every calibration page is longer than max_seq_len {max_seq_len}: "
                         f"{', '.join(long)}; raise --max-seq-len (or the recipe's calibration.max_seq_len) or "
                         "lower the processor's max_pixels")
    if long:
        msg = (f"calibration: {len(long)} of {len(pages)} page(s) longer than max_seq_len {max_seq_len} left out "
               f"({', '.join(long)}); calibrating on {len(samples)}")
        (warn or (lambda m: warnings.warn(m, stacklevel=3)))(msg)
    return samples, ids


def sample_loader(samples: list[dict]):
    """Ready batches (batch size 1, every processor output) as a DataLoader, which llmcompressor's
    pipelines take as calibration data without re-tokenising."""
    from torch.utils.data import DataLoader

    return DataLoader(samples, batch_size=1, shuffle=False, collate_fn=lambda batch: batch[0])
