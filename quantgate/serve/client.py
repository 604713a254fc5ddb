"""One async OpenAI-compatible client for every backend.

Each page is one streamed chat request (image as a base64 data URL + the prompt, greedy). At a
concurrency level exactly that many workers pull pages from a queue, so the server sees that many
requests in flight. Each finished request is appended to ``requests.jsonl`` at once; a failed one
is recorded with its error (connection errors are retried a bounded number of times first) and
never raised out of the run.

Nothing a server sends is trusted: every field read is validated (``serve.wire``), the
answer must name the requested model, bytes and content chunks are capped from ``max_tokens``, an
unfinished stream is an error, and one deadline bounds each request. Failures on the server's side are
recorded as ``error_kind: infrastructure``; an output cut at max_tokens is the model's, kept and
flagged ``truncated``."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong

from quantgate.errors import DataError, QuantgateError
from quantgate.io.chain import Chain
from quantgate.io.fileio import append_jsonl, fsync_file
from quantgate.schema.load import parse_json
from quantgate.schema.run import RequestRecord
from quantgate.serve.wire import ChatChunk, ChatCompletion, Usage, WireError, model_matches, parse, server_error

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
    """The server's answer cannot be used (HTTP error, malformed, too large, unfinished); ``str`` is one line."""


class RecordWriteError(QuantgateError):
    exit_code = 5


# Caps per request, from max_tokens: a server that ignores max_tokens, or sends one endless line,
# ends that request as an error instead of growing memory without bound. A server that streams one chunk per
# token never sends more content chunks than max_tokens; the slack (2x + 16) leaves room for servers that split
# a token's text over chunks. A chunk's JSON is an envelope (id, created, the model name, one choice) around a
# token's text: 2 KiB plus twice the name leaves several times that room, and 1 MiB covers role and usage chunks.
CHUNK_BYTES = 2048
BASE_BYTES = 1 << 20
LINE_BYTES = 1 << 20  # one SSE line: a single chunk is never near this


def token_cap(max_tokens: int) -> int:
    return 2 * max_tokens + 16


def byte_cap(spec: RequestSpec) -> int:
    return BASE_BYTES + token_cap(spec.max_tokens) * (CHUNK_BYTES + 2 * len(spec.model.encode()))


def _check_model(answered: str, spec: RequestSpec) -> None:
    if not model_matches(answered, spec.model):
        raise BadResponse(f"the response names model {answered[:100]!r}, not the requested {spec.model[:100]!r}")


def _check_tokens(usage: Usage | None, spec: RequestSpec) -> None:
    if usage and usage.completion_tokens is not None and usage.completion_tokens > token_cap(spec.max_tokens):
        raise BadResponse(f"the server reports {usage.completion_tokens} completion tokens for max_tokens "
                          f"{spec.max_tokens}: it does not honour max_tokens")


async def _read_body(r: aiohttp.ClientResponse, cap: int) -> bytes:
    """The whole body, or BadResponse once it passes ``cap`` bytes (never more than that held in memory)."""
    declared = r.content_length
    if declared is not None and declared > cap:
        raise BadResponse(f"response of {declared} bytes is larger than the {cap}-byte cap for this request")
    buf = bytearray()
    while chunk := await r.content.read(1 << 16):
        buf += chunk
        if len(buf) > cap:
            raise BadResponse(f"response larger than the {cap}-byte cap for this request")
    return bytes(buf)


def _completion(raw: bytes, spec: RequestSpec) -> tuple[str, str | None, Usage | None]:
    """A non-streamed answer: its text, finish_reason and usage."""
    try:
        obj = parse_json(raw, "response")  # a server's answer, under the loader's limits (depth, number size)
    except DataError:
        raise BadResponse(f"not an OpenAI chat completion: {raw[:200]!r}") from None
    if (msg := server_error(obj)) is not None:
        raise BadResponse(f"server error: {msg}")
    if not isinstance(obj, dict) or "choices" not in obj:
        raise BadResponse(f"not an OpenAI chat completion: {raw[:200]!r}")
    resp = parse(ChatCompletion, obj, "chat completion")
    _check_model(resp.model, spec)
    if len(resp.choices) != 1:
        raise BadResponse(f"the answer has {len(resp.choices)} choices; one was asked for")
    choice = resp.choices[0]
    if choice.message.content is None:
        raise BadResponse("the answer has no text (message.content is null)")
    _check_tokens(resp.usage, spec)
    return choice.message.content, choice.finish_reason, resp.usage


class _Stream:
    """What a stream said so far; ``feed`` takes one ``data:`` payload and says whether it was ``[DONE]``."""

    def __init__(self, spec: RequestSpec, t0: float):
        self.spec, self.t0 = spec, t0
        self.parts: list[str] = []
        self.ttft: float | None = None
        self.finish: str | None = None
        self.usage: Usage | None = None

    def feed(self, data: str) -> bool:
        if data == "[DONE]":
            return True
        try:
            obj = parse_json(data, "stream chunk")
        except DataError:
            raise BadResponse(f"malformed stream chunk: {data[:200]!r}") from None
        if (msg := server_error(obj)) is not None:
            raise BadResponse(f"server error in stream: {msg}")
        if not isinstance(obj, dict) or ("choices" not in obj and "usage" not in obj):
            raise BadResponse(f"not an OpenAI chat chunk: {data[:200]!r}")
        chunk = parse(ChatChunk, obj, "stream chunk")
        _check_model(chunk.model, self.spec)
        for ch in chunk.choices:
            if ch.index != 0:
                raise BadResponse(f"a stream chunk for choice {ch.index}; one choice was asked for")
            if ch.delta.content:
                if self.ttft is None:
                    self.ttft = time.perf_counter() - self.t0
                self.parts.append(ch.delta.content)
                if len(self.parts) > token_cap(self.spec.max_tokens):
                    raise BadResponse(f"more than {token_cap(self.spec.max_tokens)} content chunks for max_tokens "
                                      f"{self.spec.max_tokens}: the server does not stop")
            if ch.finish_reason is not None:
                self.finish = ch.finish_reason
        if chunk.usage is not None:
            self.usage = chunk.usage
            _check_tokens(chunk.usage, self.spec)
        return False


async def _read_stream(r: aiohttp.ClientResponse, spec: RequestSpec, t0: float) -> _Stream:
    st, cap = _Stream(spec, t0), byte_cap(spec)
    left, done = cap, False
    over = BadResponse(f"stream larger than the {cap}-byte cap for this request")
    while True:
        if left <= 0:
            raise over
        try:
            raw = await r.content.readline(max_line_length=min(left, LINE_BYTES))
        except LineTooLong:
            raise (over if left < LINE_BYTES else BadResponse(f"a stream line longer than {LINE_BYTES} bytes")) from None
        if not raw:
            break
        left -= len(raw)
        line = raw.decode("utf-8", "replace").strip()
        if line.startswith("data:") and (done := st.feed(line[5:].strip())):
            break
    # A stream is finished by a choice's finish_reason. transformers serve 5.17 ends its streams after that chunk
    # without "data: [DONE]" (ChatCompletionHandler's sse_gen), so [DONE] alone is neither needed nor enough.
    if st.finish is None:
        raise BadResponse(f"the stream ended before the answer was finished (no finish_reason"
                          f"{'' if done else ', no [DONE]'})")
    return st


async def _one(client: aiohttp.ClientSession, spec: RequestSpec, body: dict) -> dict:
    """Send one streamed request; return output, usage and timings. Raises on failure."""
    t0 = time.perf_counter()
    headers = {"Authorization": f"Bearer {spec.api_key}"} if spec.api_key else None
    async with client.post(f"{spec.base_url}/chat/completions", json=body, headers=headers) as r:
        if r.status != 200:
            text = " ".join((await r.content.read(300)).decode("utf-8", "replace").split())
            raise BadResponse(f"HTTP {r.status}: {text[:200]}")
        if "text/event-stream" not in r.headers.get("content-type", ""):
            # Some servers ignore stream=True and answer one JSON body.
            output, finish, usage = _completion(await _read_body(r, byte_cap(spec)), spec)
            ttft = time.perf_counter() - t0
        else:
            st = await _read_stream(r, spec, t0)
            output, finish, usage, ttft = "".join(st.parts), st.finish, st.usage, st.ttft
    return {"output": output, "ttft_s": ttft, "latency_s": time.perf_counter() - t0,
            "prompt_tokens": usage.prompt_tokens if usage else None,
            "completion_tokens": usage.completion_tokens if usage else None,
            "finish_reason": finish, "truncated": finish == "length"}


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


async def _attempts(client: aiohttp.ClientSession, spec: RequestSpec, body: dict, tries: list[int]) -> dict:
    """``_one``, retried a bounded number of times when the connection fails; ``tries`` counts the attempts."""
    while True:
        tries[0] += 1
        try:
            return await _one(client, spec, body)
        except (aiohttp.ClientConnectorError, aiohttp.ServerDisconnectedError) as e:
            if tries[0] > CONNECT_RETRIES:
                raise BadResponse(f"connection failed after {tries[0]} attempts: {type(e).__name__}: {e}") from None
            await asyncio.sleep(0.5 * tries[0])


async def send_page(client: aiohttp.ClientSession, spec: RequestSpec, page_id: str, image_url: str | Exception,
                    concurrency: int, session: str, wave: int | None = None) -> RequestRecord:
    """One page's request; its timer starts here, after the image was read. ``spec.timeout_s`` bounds the
    request's wall time, retries included (one ``asyncio.timeout`` deadline: aiohttp's own total timeout is
    per attempt and rounds deadlines past 5 s up to a whole second)."""
    start = time.time()
    if isinstance(image_url, Exception):
        return RequestRecord(page_id=page_id, concurrency=concurrency, start=start, end=time.time(),
                             error=f"image unreadable: {image_url}", error_kind="page", attempts=0, session=session,
                             wave=wave)
    body = chat_body(spec, image_url)
    tries = [0]
    try:
        async with asyncio.timeout(spec.timeout_s):
            res = await _attempts(client, spec, body, tries)
        return RequestRecord(page_id=page_id, concurrency=concurrency, start=start, end=time.time(),
                             attempts=tries[0], session=session, wave=wave, **res)
    except TimeoutError:
        err = f"timeout after {spec.timeout_s:g} s"
    except (BadResponse, WireError) as e:
        err = str(e)
    except (aiohttp.ClientError, HttpProcessingError, UnicodeDecodeError) as e:
        err = f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
    except Exception as e:  # noqa: BLE001 — whatever a server sends ends as this page's record, never a traceback
        err = f"unexpected {type(e).__name__} reading the response: {' '.join(str(e).split())[:300]}"
    return RequestRecord(page_id=page_id, concurrency=concurrency, start=start, end=time.time(), error=err,
                         error_kind="infrastructure", attempts=tries[0], session=session, wave=wave)


async def _warm_up(client: aiohttp.ClientSession, spec: RequestSpec, load: Callable[[], bytes]) -> str | None:
    """One untimed request before a level. None, or why the level is not sent: a warm-up with no answer within
    the timeout means a stalled server, and sending every page to it would cost a full timeout each on top of
    this one (a study once overshot its time 1.5-2x so). Other warm-up failures show up again in the timed requests."""
    url = await read_image(load)
    if isinstance(url, Exception):
        return None
    try:
        async with asyncio.timeout(spec.timeout_s):
            await _one(client, spec, chat_body(spec, url))
    except TimeoutError:
        return (f"not sent: the warm-up request got no answer within {spec.timeout_s:g} s (a stalled server; "
                "raise --timeout-s (timeout_s) if it is only slow)")
    except Exception:  # noqa: BLE001 — see above
        pass
    return None


async def run_level(spec: RequestSpec, pages: list[tuple[str, Callable[[], bytes]]], concurrency: int,
                    requests_path, session: str, warmup: bool = True,
                    on_done: Callable[[RequestRecord], None] | None = None,
                    wave: int | None = None, chain: Chain | None = None) -> list[RequestRecord]:
    """Send every page once with ``concurrency`` requests in flight; append each record as it finishes, linked
    to the one before it when ``chain`` (``io.chain``) holds the file's head (``wave``: a speed level's repeat,
    recorded in each record)."""
    records: list[RequestRecord] = []
    connector = aiohttp.TCPConnector(limit=concurrency + 1)
    # no aiohttp timeout: send_page's deadline bounds each request, retries included
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None)) as client:
        stalled = await _warm_up(client, spec, pages[0][1]) if warmup and pages else None
        queue: asyncio.Queue = asyncio.Queue()
        for item in pages:
            queue.put_nowait(item)

        async def worker():
            while True:
                try:
                    pid, load = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                if stalled:
                    now = time.time()
                    rec = RequestRecord(page_id=pid, concurrency=concurrency, start=now, end=now, error=stalled,
                                        error_kind="infrastructure", attempts=0, session=session, wave=wave)
                else:
                    rec = await send_page(client, spec, pid, await read_image(load), concurrency, session, wave)
                try:
                    obj = chain.link(rec.model_dump()) if chain is not None else rec.model_dump()
                    append_jsonl(requests_path, obj)
                    if chain is not None:
                        chain.advance(obj)
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
