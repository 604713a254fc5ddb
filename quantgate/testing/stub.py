"""An OpenAI-compatible stand-in server that answers at once: for measuring the client's own
overhead (benchmarks/client_overhead.py) and for injecting faults in tests (hangs, HTTP 500,
malformed chunks, non-OpenAI JSON). Not a backend: it never looks at the image.

    python -m quantgate.testing.stub --port 8011 [--fault hang|500|badchunk|notopenai] [--every 3]
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


def make_app(fault: str | None = None, every: int = 1, text: str = "# Title\n\nhello world"):
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
        words = text.split(" ")
        if body.get("ignore_eos"):  # like vLLM: exactly max_tokens tokens, then finish_reason "length"
            words = ["w"] * int(body.get("max_tokens") or 16)
        finish = "length" if body.get("ignore_eos") else "stop"

        async def stream():
            yield f"data: {json.dumps({'choices': [{'index': 0, 'delta': {'role': 'assistant'}}]})}\n\n"
            for i, w in enumerate(words):
                piece = w if i == 0 else " " + w
                yield f"data: {json.dumps({'choices': [{'index': 0, 'delta': {'content': piece}}]})}\n\n"
            if hit and fault == "badchunk":
                yield "data: {this is not json\n\n"
            yield f"data: {json.dumps({'choices': [{'index': 0, 'delta': {}, 'finish_reason': finish}], 'usage': {'prompt_tokens': 100, 'completion_tokens': len(words)}})}\n\n"
            yield "data: [DONE]\n\n"

        if not body.get("stream"):
            choice = {"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": text}}
            if body.get("return_token_ids"):  # like vLLM: the generated ids, here a function of the request only
                choice["token_ids"] = _fake_ids(body, len(words))
            return JSONResponse({"object": "chat.completion", "choices": [choice],
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
    a = ap.parse_args()
    uvicorn.run(make_app(a.fault, a.every), host=a.host, port=a.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
