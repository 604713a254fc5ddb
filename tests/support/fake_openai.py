"""Small fake OpenAI chat servers for the client's fault tests: each answers every request with
one scripted behaviour, runs on localhost in a thread of the test process (its own event loop), and counts
the requests it got and the stream events it wrote.

    with FakeOpenAI(stream(chunk(content=5))) as srv:   # srv.base_url is ".../v1"
        ...
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable

from aiohttp import web

Handler = Callable[["FakeOpenAI", web.Request, dict], Awaitable[web.StreamResponse]]


class FakeOpenAI:
    def __init__(self, handler: Handler):
        self.handler = handler
        self.requests = 0
        self.events = 0  # stream events written
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        return await self.handler(self, request, await request.json())

    async def _start(self) -> int:
        app = web.Application(client_max_size=64 << 20)
        app.router.add_post("/v1/chat/completions", self._chat)
        self._runner = web.AppRunner(app, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        return site._server.sockets[0].getsockname()[1]

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        self.port = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        return self

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def chunk(content=None, *, finish=None, usage=None, model=None, **choice) -> dict:
    """One chat.completion.chunk; ``model`` None: the requested one (filled in when sent)."""
    ch = {"index": 0, "delta": {} if content is None else {"content": content}, "finish_reason": finish, **choice}
    out = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": model, "choices": [ch]}
    if usage is not None:
        out["usage"] = usage
    return out


def completion(content="hello", *, finish="stop", model=None, **extra) -> dict:
    out = {"id": "c1", "object": "chat.completion", "created": 1, "model": model,
           "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
           "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}}
    out.update(extra)
    return out


def _named(obj, body: dict):
    if isinstance(obj, dict) and "model" in obj and obj["model"] is None:
        return {**obj, "model": body.get("model")}
    return obj


GOOD = [chunk("hello"), chunk(" world"), chunk(finish="stop", usage={"prompt_tokens": 10, "completion_tokens": 2})]


def stream(*events, done: bool = True) -> Handler:
    """An SSE stream of ``events`` (dicts as JSON data, strings as data as they are, strings starting with ":"
    as SSE comment lines), then ``[DONE]`` unless ``done`` is False."""
    async def handler(srv, request, body):
        r = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await r.prepare(request)
        for ev in events:
            data = ev if isinstance(ev, str) else json.dumps(_named(ev, body))
            await r.write(f"{ev}\n\n".encode() if data.startswith(":") else f"data: {data}\n\n".encode())
            srv.events += 1
        if done:
            await r.write(b"data: [DONE]\n\n")
        await r.write_eof()
        return r
    return handler


def body(obj, *, status: int = 200) -> Handler:
    """One JSON body (the answer of a server that ignores ``stream: true``, or an HTTP error)."""
    async def handler(srv, request, req):
        return web.json_response(_named(obj, req), status=status)
    return handler


def endless() -> Handler:
    """Valid content chunks forever: a server that ignores max_tokens."""
    async def handler(srv, request, body):
        r = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await r.prepare(request)
        line = f"data: {json.dumps(_named(chunk('word '), body))}\n\n".encode()
        while True:
            await r.write(line)
            srv.events += 1
    return handler


def huge_line(n_bytes: int) -> Handler:
    """One ``data:`` line of ``n_bytes`` with no newline until its end, written 64 KiB at a time."""
    async def handler(srv, request, body):
        r = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await r.prepare(request)
        await r.write(b'data: {"model": "m", "choices": [{"index": 0, "delta": {"content": "')
        piece = b"x" * (1 << 16)
        for _ in range(n_bytes >> 16):
            await r.write(piece)
        await r.write(b'"}}]}\n\n')
        return r
    return handler


def huge_body(n_bytes: int, *, declared: bool) -> Handler:
    """A valid JSON completion whose content is ``n_bytes`` long: with its Content-Length (``declared``), or
    chunked so that only the bytes received tell its size."""
    async def handler(srv, request, req):
        text = json.dumps(_named(completion("x" * n_bytes), req)).encode()
        if declared:
            return web.Response(body=text, content_type="application/json")
        r = web.StreamResponse(headers={"Content-Type": "application/json"})
        await r.prepare(request)
        for i in range(0, len(text), 1 << 16):
            await r.write(text[i:i + (1 << 16)])
        return r
    return handler


def hang(*, after_headers: bool = False) -> Handler:
    async def handler(srv, request, body):
        if after_headers:
            r = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await r.prepare(request)
            await r.write(f"data: {json.dumps(_named(chunk('a'), body))}\n\n".encode())
        await asyncio.sleep(3600)
    return handler


def trickle(every_s: float) -> Handler:
    """A content chunk every ``every_s`` seconds, never finishing: each read is quick, the answer never ends."""
    async def handler(srv, request, body):
        r = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await r.prepare(request)
        while True:
            await r.write(f"data: {json.dumps(_named(chunk('a'), body))}\n\n".encode())
            srv.events += 1
            await asyncio.sleep(every_s)
    return handler


def disconnect(after_s: float = 0.0, *, chunks: int = 0) -> Handler:
    """Close the connection after ``after_s`` seconds (and ``chunks`` content chunks): a server that dies."""
    async def handler(srv, request, body):
        if chunks:
            r = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await r.prepare(request)
            for _ in range(chunks):
                await r.write(f"data: {json.dumps(_named(chunk('a'), body))}\n\n".encode())
        await asyncio.sleep(after_s)
        request.transport.close()
        await asyncio.sleep(3600)
    return handler
