"""Train the bundled tiny reader: a Qwen3.5 VLM (hybrid Gated DeltaNet + attention, ~5 M
parameters) that transcribes `quantgate pages synth --profile reader` pages to markdown.

Seeded, resumable (``--work`` holds checkpoints: rerun the same command to continue), runs on
CPU (2 cores: hours) or a GPU. Training pages are rendered on the fly from seeds >= 1000; the
held-out pages quantgate's demo uses come from seeds < 1000, so no page is memorised.

    python training/train_reader.py --work .cache/reader-train --steps 6000 \
        --out quantgate/assets/reader
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the fixtures live with the tests (tests/support)

from quantgate.heldout.synth import reader_sample, vocabulary
from tests.support import fixtures

PROMPT = "Convert this page to markdown. Output only the markdown."


class Batches(torch.utils.data.IterableDataset):
    """Endless processed batches of fresh training pages; each worker draws its own seeds."""

    def __init__(self, model_dir, batch, seed):
        self.model_dir, self.batch, self.seed = model_dir, batch, seed

    def __iter__(self):
        from transformers import AutoProcessor

        info = torch.utils.data.get_worker_info()
        wid = info.id if info else 0
        processor = AutoProcessor.from_pretrained(self.model_dir)
        processor.tokenizer.padding_side = "right"
        rng = random.Random(f"train:{self.seed}:{wid}")
        words = vocabulary()
        while True:
            items = [reader_sample(1000 + rng.randrange(10**9), 0, words)[:2] for _ in range(self.batch)]
            yield build_batch(processor, items, "cpu")


def build_batch(processor, items, device):
    """Chat-formatted inputs with labels on the answer only."""
    texts, images, prefix_lens = [], [], []
    for img, md in items:
        msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": PROMPT}]}]
        prefix = processor.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
        texts.append(prefix + md + "<|im_end|>")
        images.append(img)
        prefix_lens.append(prefix)
    enc = processor(text=texts, images=images, padding=True, return_tensors="pt")
    pre = processor(text=prefix_lens, images=images, padding=True, return_tensors="pt")
    labels = enc["input_ids"].clone()
    labels[enc["attention_mask"] == 0] = -100
    for i in range(len(items)):
        labels[i, : int(pre["attention_mask"][i].sum())] = -100
    enc["labels"] = labels
    return {k: v.to(device) for k, v in enc.items()}


@torch.no_grad()
def evaluate(model, processor, n, device, seed=999):
    from rapidfuzz.distance import Levenshtein

    model.eval()
    words = vocabulary()
    teds = []
    for i in range(n):
        img, md, _ = reader_sample(seed, i, words)
        msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": PROMPT}]}]
        text = processor.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
        enc = processor(text=[text], images=[img], return_tensors="pt").to(device)
        out = model.generate(**enc, max_new_tokens=64, do_sample=False)
        pred = processor.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)[0]
        teds.append(Levenshtein.normalized_distance(" ".join(pred.split()), " ".join(md.split())))
    model.train()
    return sum(teds) / len(teds)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", type=Path, required=True, help="checkpoints and log (resumable)")
    ap.add_argument("--out", type=Path, default=None, help="write the final BF16 checkpoint here")
    ap.add_argument("--steps", type=int, default=6000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--ckpt-every", type=int, default=200)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--minutes", type=float, default=None, help="time budget: the schedule follows elapsed time")
    ap.add_argument("--workers", type=int, default=0, help="DataLoader workers rendering and processing pages")
    ap.add_argument("--stop-after", type=float, default=None,
                    help="minutes for this invocation only (checkpoint and exit; rerun to continue)")
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    device = torch.device(a.device)
    a.work.mkdir(parents=True, exist_ok=True)
    init = a.work / "init"
    if not (init / "config.json").exists():
        fixtures.build_qwen3_5(init, seed=a.seed)
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(init)
    processor.tokenizer.padding_side = "right"
    model = AutoModelForImageTextToText.from_pretrained(init, dtype=torch.float32).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.01, betas=(0.9, 0.98))
    step, prior = 0, 0.0
    ck = a.work / "ckpt.pt"
    if ck.exists():
        state = torch.load(ck, map_location=device, weights_only=True)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step = state["step"]
        prior = state.get("elapsed", 0.0)
        print(f"resumed at step {step} after {prior / 60:.1f} min")
    log = open(a.work / "log.jsonl", "a")
    model.train()
    t0, ema = time.time(), None
    data = torch.utils.data.DataLoader(Batches(init, a.batch, f"{a.seed}:{step}"), batch_size=None,
                                       num_workers=a.workers, prefetch_factor=4 if a.workers else None)
    it = iter(data)

    def progress() -> float:
        p = step / a.steps
        if a.minutes:
            p = max(p, (prior + time.time() - t0) / (a.minutes * 60))
        return min(1.0, p)

    while progress() < 1.0:
        if a.stop_after and time.time() - t0 > a.stop_after * 60:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                        "elapsed": prior + time.time() - t0}, ck)
            print(f"stopping this invocation at step {step}; rerun to continue", flush=True)
            return
        batch = {k: v.to(device, non_blocking=True) for k, v in next(it).items()}
        lr = a.lr * min(1.0, (step + 1) / 100) * 0.5 * (1 + math.cos(math.pi * progress()))
        for g in opt.param_groups:
            g["lr"] = lr
        loss = model(**batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        ema = loss.item() if ema is None else 0.98 * ema + 0.02 * loss.item()
        if step % 20 == 0:
            rate = step / max(1e-9, time.time() - t0)
            print(f"step {step} loss {ema:.3f} lr {lr:.2e} ({rate:.2f} steps/s this session)", flush=True)
            log.write(json.dumps({"step": step, "loss": ema, "t": time.time()}) + "\n")
            log.flush()
        if step % a.ckpt_every == 0:
            tmp = ck.with_suffix(".tmp")
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                        "elapsed": prior + time.time() - t0}, tmp)
            tmp.replace(ck)
        if step % a.eval_every == 0:
            ned = evaluate(model, processor, 20, device)
            print(f"step {step} held-out ned {ned:.4f}", flush=True)
            log.write(json.dumps({"step": step, "eval_ned": ned}) + "\n")
            log.flush()
    ned = evaluate(model, processor, 50, device)
    card = {"steps": step, "batch": a.batch, "lr": a.lr, "seed": a.seed, "minutes": round((prior + time.time() - t0) / 60, 1),
            "device": str(device), "final_loss_ema": ema, "eval_pages": 50, "eval_seed": 999, "eval_ned": ned,
            "data": "quantgate pages synth --profile reader, training seeds >= 1000 rendered on the fly"}
    print(json.dumps(card), flush=True)
    (a.work / "card.json").write_text(json.dumps(card, indent=2))
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                "elapsed": prior + time.time() - t0}, ck)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        model.to(torch.bfloat16).save_pretrained(a.out, safe_serialization=True)
        (a.out / "CARD.json").write_text(json.dumps(card, indent=2))
        processor.tokenizer.padding_side = "left"
        processor.save_pretrained(a.out)
        for f in ("generation_config.json",):
            (a.out / f).write_bytes((init / f).read_bytes())
        print(f"saved {a.out}")
    if not math.isfinite(ema or 0):
        raise SystemExit("training diverged")


if __name__ == "__main__":
    main()
