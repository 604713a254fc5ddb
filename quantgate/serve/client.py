"""One async OpenAI-compatible client for every backend.

Each page is one streamed chat request (image as a base64 data URL + the prompt, greedy). At a
concurrency level exactly that many workers pull pages from a queue, so the server sees that many
requests in flight. Each finished request is appended to ``requests.jsonl`` at once; a failed one
is recorded with its error (connection errors are retried a bounded number of times first) and
never raised out of the run."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp

from quantgate.errors import QuantgateError
from quantgate.io.fileio import append_jsonl, fsync_file
from quantgate.schema.run import RequestRecord

CONNECT_RETRIES = 2


@dataclass
class RequestSpec:
    base_url: str  # .../v1
    model: str
    prompt: str
    max_tokens: int
    timeout_s: float = 600.0
    api_key: str | None = None
    extra_body: dict | None = None


def data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()


def chat_body(spec: RequestSpec, image_url: str) -> dict:
    body = {"model": spec.model, "stream": True, "stream_options": {"include_usage": True},
            "max_tokens": spec.max_tokens, "temperature": 0.0,
            "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": image_url}},
                                                      {"type": "text", "text": spec.prompt}]}]}
    if spec.extra_body:
        body.update(spec.extra_body)
    return body


class BadResponse(Exception):
    pass


class RecordWriteError(QuantgateError):
    exit_code = 5


async def _one(client: aiohttp.ClientSession, spec: RequestSpec, body: dict) -> dict:
    """Send one streamed request; return output, usage and timings. Raises on failure."""
    t0 = time.perf_counter()
    ttft = None
    parts: list[str] = []
    usage: dict = {}
    finish = None
    headers = {"Authorization": f"Bearer {spec.api_key}"} if spec.api_key else None
    async with client.post(f"{spec.base_url}/chat/completions", json=body, headers=headers) as r:
        if r.status != 200:
            text = (await r.read()).decode("utf-8", "replace")[:300]
            raise BadResponse(f"HTTP {r.status}: {text}")
        ctype = r.headers.get("content-type", "")
        if "text/event-stream" not in ctype:
            # Some servers ignore stream=True and answer one JSON body.
            raw = (await r.read()).decode("utf-8", "replace")
            try:
                obj = json.loads(raw)
                msg = obj["choices"][0]["message"]["content"]
                finish = obj["choices"][0].get("finish_reason")
                usage = obj.get("usage") or {}
            except (json.JSONDecodeError, KeyError, IndexError, TypeError):
                raise BadResponse(f"not an OpenAI chat completion: {raw[:200]!r}") from None
            ttft = time.perf_counter() - t0
            parts.append(msg or "")
        else:
            async for raw_line in r.content:
                line = raw_line.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                try:
                    obj = json.loads(data)
                except json.JSONDecodeError:
                    raise BadResponse(f"malformed stream chunk: {data[:200]!r}") from None
                if not isinstance(obj, dict):
                    raise BadResponse(f"malformed stream chunk: {data[:200]!r}")
                if obj.get("error"):
                    raise BadResponse(f"server error in stream: {str(obj['error'])[:200]}")
                for ch in obj.get("choices") or []:
                    delta = (ch.get("delta") or {}).get("content")
                    if delta:
                        if ttft is None:
                            ttft = time.perf_counter() - t0
                        parts.append(delta)
                    if ch.get("finish_reason"):
                        finish = ch["finish_reason"]
                if obj.get("usage"):
                    usage = obj["usage"]
                if "choices" not in obj and "usage" not in obj:
                    raise BadResponse(f"not an OpenAI chat chunk: {data[:200]!r}")
    return {"output": "".join(parts), "ttft_s": ttft, "latency_s": time.perf_counter() - t0,
            "prompt_tokens": usage.get("prompt_tokens"), "completion_tokens": usage.get("completion_tokens"),
            "finish_reason": finish}


async def read_image(load: Callable[[], bytes]) -> str | Exception:
    """The page as a data URL, read and encoded in a worker thread: a multi-megapixel PNG read on the
    event loop would stall every other stream in flight and inflate their TTFT and latency. A page
    that cannot be read comes back as its exception, recorded as that page's error."""
    def read() -> str:
        return data_url(load())

    try:
        return await asyncio.to_thread(read)
    except Exception as e:  # noqa: BLE001 — recorded for that page
        return e


async def send_page(client: aiohttp.ClientSession, spec: RequestSpec, page_id: str, image_url: str | Exception,
                    concurrency: int, session: str) -> RequestRecord:
    """One page's request; its timer starts here, after the image was read."""
    start = time.time()
    if isinstance(image_url, Exception):
        return RequestRecord(page_id=page_id, concurrency=concurrency, start=start, end=time.time(),
                             error=f"image unreadable: {image_url}", attempts=0, session=session)
    body = chat_body(spec, image_url)
    attempts = 0
    while True:
        attempts += 1
        try:
            res = await _one(client, spec, body)
            return RequestRecord(page_id=page_id, concurrency=concurrency, start=start, end=time.time(),
                                 attempts=attempts, session=session, **res)
        except (aiohttp.ClientConnectorError, aiohttp.ServerDisconnectedError) as e:
            if attempts <= CONNECT_RETRIES:
                await asyncio.sleep(0.5 * attempts)
                continue
            err = f"connection failed after {attempts} attempts: {type(e).__name__}: {e}"
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError):
            err = f"timeout after {spec.timeout_s:.0f} s"
        except BadResponse as e:
            err = str(e)
        except (aiohttp.ClientError, UnicodeDecodeError) as e:
            err = f"{type(e).__name__}: {e}"
        return RequestRecord(page_id=page_id, concurrency=concurrency, start=start, end=time.time(), error=err,
                             attempts=attempts, session=session)


async def run_level(spec: RequestSpec, pages: list[tuple[str, Callable[[], bytes]]], concurrency: int,
                    requests_path, session: str, warmup: bool = True,
                    on_done: Callable[[RequestRecord], None] | None = None) -> list[RequestRecord]:
    """Send every page once with ``concurrency`` requests in flight; append each record as it finishes."""
    records: list[RequestRecord] = []
    connector = aiohttp.TCPConnector(limit=concurrency + 1)
    timeout = aiohttp.ClientTimeout(total=spec.timeout_s)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as client:
        if warmup and pages:
            url = await read_image(pages[0][1])
            try:
                if not isinstance(url, Exception):
                    await _one(client, spec, chat_body(spec, url))
            except Exception:  # noqa: BLE001 — a failing warm-up shows up again in the timed requests
                pass
        queue: asyncio.Queue = asyncio.Queue()
        for item in pages:
            queue.put_nowait(item)

        async def worker():
            while True:
                try:
                    pid, load = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                rec = await send_page(client, spec, pid, await read_image(load), concurrency, session)
                try:
                    append_jsonl(requests_path, rec.model_dump())
                except OSError as e:  # disk full, read-only: stop rather than measure what cannot be kept
                    raise RecordWriteError(f"{requests_path}: cannot append a request record ({e}); records "
                                           "already written are intact — free space and rerun to resume") from None
                records.append(rec)
                if on_done:
                    on_done(rec)

        await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
    if records:
        fsync_file(requests_path)
    return records
