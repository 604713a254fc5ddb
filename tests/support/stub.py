"""An OpenAI-compatible stand-in server that answers at once: for measuring the client's own
overhead (benchmarks/client_overhead.py) and for injecting faults in tests (hangs, HTTP 500,
malformed chunks, non-OpenAI JSON). Not a backend: it never looks at the image.

    python -m tests.support.stub --port 8011 [--fault hang|500|badchunk|notopenai] [--every 3]
    python -m tests.support.stub --port 8011 --answers PAGES [--corrupt 0.5] [--corrupt-tag language:zh] [--delay 0.05]

``--answers``: a page set; each request is answered with the ground truth of the page whose image it
carries (by sha256 of the image bytes), and ``--corrupt`` of the pages (chosen by a hash of the page)
lose the second half of their words — a stand-in "candidate" with a known regression, for study tests;
``--corrupt-tag``: so do the pages carrying that page tag (a regression on one tag value's pages only);
``--blank``: every page is answered with nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json


def _fake_ids(body: dict, n: int) -> list[int]:
    """Token ids that depend on the messages only (not on timing or batching): a deterministic server."""
    import hashlib

    seed = hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode()).digest()
    return [seed[i % len(seed)] * 7 + i for i in range(n)]


def _page_answers(pages_dir: str, corrupt: float, corrupt_tag: str | None = None) -> dict[str, str]:
    """sha256 of a page's image bytes -> the text to answer it with."""
    import hashlib

    from quantgate.io.pageset import load_pageset

    ps = load_pageset(pages_dir)
    out = {}
    for p in ps.pages:
        truth = ps.truth_text(p) or ""
        u = int(hashlib.sha256(f"corrupt:{p.id}".encode()).hexdigest()[:8], 16) / 2**32
        if u < corrupt or (corrupt_tag is not None and corrupt_tag in p.tags):
            words = truth.split(" ")
            truth = " ".join(words[: max(1, len(words) // 2)])
        out[hashlib.sha256(ps.image_bytes(p)).hexdigest()] = truth
    return out


def _image_sha(body: dict) -> str | None:
    import base64
    import hashlib

    for m in body.get("messages") or []:
        for part in m.get("content") if isinstance(m.get("content"), list) else []:
            url = (part.get("image_url") or {}).get("url", "") if isinstance(part, dict) else ""
            if url.startswith("data:") and "," in url:
                return hashlib.sha256(base64.b64decode(url.split(",", 1)[1])).hexdigest()
    return None


def make_app(fault: str | None = None, every: int = 1, text: str = "# Title\n\nhello world",
             answers: dict[str, str] | None = None, delay: float = 0.0, token_delay: float = 0.0):
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    counter = itertools.count(1)

    async def health(request):
        return Response("ok")

    async def chat(request):
        body = await request.json()
        n = next(counter)
        hit = fault is not None and n % every == 0
        if hit and fault == "hang":
            await asyncio.sleep(3600)
        if hit and fault == "500":
            return JSONResponse({"error": {"message": "injected failure"}}, status_code=500)
        if hit and fault == "notopenai":
            return JSONResponse({"result": "I am not an OpenAI server"})
        if delay:
            await asyncio.sleep(delay)
        reply = answers.get(_image_sha(body), text) if answers else text
        words = reply.split(" ")
        if body.get("ignore_eos"):  # like vLLM: exactly max_tokens tokens, then finish_reason "length"
            words = ["w"] * int(body.get("max_tokens") or 16)
        finish = "length" if body.get("ignore_eos") else "stop"
        model = body.get("model")  # echoed, as vLLM (--served-model-name) does; the client checks it

        async def stream():
            yield f"data: {json.dumps({'model': model, 'choices': [{'index': 0, 'delta': {'role': 'assistant'}}]})}\n\n"
            for i, w in enumerate(words):
                if token_delay:  # a server that decodes at a pace: requests sent together overlap
                    await asyncio.sleep(token_delay)
                piece = w if i == 0 else " " + w
                yield f"data: {json.dumps({'model': model, 'choices': [{'index': 0, 'delta': {'content': piece}}]})}\n\n"
            if hit and fault == "badchunk":
                yield "data: {this is not json\n\n"
            yield f"data: {json.dumps({'model': model, 'choices': [{'index': 0, 'delta': {}, 'finish_reason': finish}], 'usage': {'prompt_tokens': 100, 'completion_tokens': len(words)}})}\n\n"
            yield "data: [DONE]\n\n"

        if not body.get("stream"):
            choice = {"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": reply}}
            if body.get("return_token_ids"):  # like vLLM: the generated ids, here a function of the request only
                choice["token_ids"] = _fake_ids(body, len(words))
            return JSONResponse({"object": "chat.completion", "model": model, "choices": [choice],
                                 "usage": {"prompt_tokens": 100, "completion_tokens": len(words)}})
        return StreamingResponse(stream(), media_type="text/event-stream")

    return Starlette(routes=[Route("/health", health), Route("/v1/chat/completions", chat, methods=["POST"])])


def main() -> None:
    import uvicorn

    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--fault", choices=["hang", "500", "badchunk", "notopenai"])
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--answers", help="a page set: answer each page with its ground truth")
    ap.add_argument("--corrupt", type=float, default=0.0, help="with --answers: the share of pages answered badly")
    ap.add_argument("--corrupt-tag", help="with --answers: the pages with this tag are answered badly")
    ap.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    ap.add_argument("--blank", action="store_true", help="with --answers: answer every page with nothing (a model "
                    "that reads nothing, for the baseline-fitness tests)")
    a = ap.parse_args()
    answers = _page_answers(a.answers, a.corrupt, a.corrupt_tag) if a.answers else None
    if answers and a.blank:
        answers = dict.fromkeys(answers, "")
    uvicorn.run(make_app(a.fault, a.every, answers=answers, delay=a.delay), host=a.host, port=a.port,
                log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
