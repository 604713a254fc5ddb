"""A client that survives any server. Each fault is served by a small fake OpenAI server on
localhost (tests/support/fake_openai.py); each must end as that page's error record (one line, marked
``infrastructure``), the run going on — never a traceback, never a stored "success"."""

import asyncio
import json
import subprocess
import sys
import time
import tracemalloc

import pytest

from quantgate.schema.base import parse_record
from quantgate.schema.run import RequestRecord
from quantgate.serve.client import RequestSpec, byte_cap, run_level, token_cap
from tests.support.fake_openai import (
    GOOD,
    FakeOpenAI,
    body,
    chunk,
    completion,
    disconnect,
    endless,
    hang,
    huge_body,
    huge_line,
    stream,
    trickle,
)


def _send(handler, tmp_path, *, pages=1, max_tokens=16, timeout_s=10.0, warmup=False, model="m"):
    tmp_path.mkdir(exist_ok=True)
    with FakeOpenAI(handler) as srv:
        spec = RequestSpec(base_url=srv.base_url, model=model, prompt="p", max_tokens=max_tokens, timeout_s=timeout_s)
        t0 = time.perf_counter()
        recs = asyncio.run(run_level(spec, [(f"p{i}", lambda: b"png") for i in range(pages)], 1,
                                     tmp_path / "requests.jsonl", "s", warmup=warmup))
        wall = time.perf_counter() - t0
    on_disk = [parse_record(RequestRecord, json.loads(x), where="requests.jsonl")
               for x in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert [r.model_dump() for r in on_disk] == [r.model_dump() for r in recs]
    return recs, srv, wall


def _failed(rec: RequestRecord, match: str) -> None:
    assert rec.error is not None and match in rec.error, rec.error
    assert "\n" not in rec.error and len(rec.error) < 600
    assert rec.error_kind == "infrastructure" and rec.output is None and not rec.truncated


TYPE_FAULTS = {
    "stream content an int": (stream(chunk(5), *GOOD[2:]), "field 'choices.0.delta.content'"),
    "stream content a list": (stream(chunk(["a", "b"]), *GOOD[2:]), "field 'choices.0.delta.content'"),
    "body content an int": (body(completion(5)), "field 'choices.0.message.content'"),
    "body content a list": (body(completion([{"type": "text", "text": "hi"}])), "field 'choices.0.message.content'"),
    "stream choices a string": (stream({"model": None, "choices": "hello"}), "field 'choices'"),
    "body choices a string": (body(completion(choices="hello")), "field 'choices'"),
    "stream a null choice": (stream({"model": None, "choices": [None]}), "field 'choices.0'"),
    "body a null choice": (body(completion(choices=[None])), "field 'choices.0'"),
    "stream usage a list": (stream(*GOOD[:2], chunk(finish="stop", usage=[10, 2])), "field 'usage'"),
    "body usage a list": (body(completion(usage=[10, 2])), "field 'usage'"),
    "usage tokens a string": (stream(*GOOD[:2], chunk(finish="stop", usage={"completion_tokens": "2"})),
                              "field 'usage.completion_tokens'"),
    "finish_reason an int": (stream(chunk("a", finish=1)), "field 'choices.0.finish_reason'"),
    "model missing": (stream({"choices": [{"index": 0, "delta": {"content": "a"}}]}), "field 'model'"),
    "a chunk that is a list": (stream("[1, 2]"), "not an OpenAI chat chunk"),
    # past the loader's limits (quantgate.schema.load): nesting and a number json.loads cannot convert
    "a chunk nested 200,000 deep": (stream("[" * 200_000 + "]" * 200_000), "malformed stream chunk"),
    "a chunk with a 5,001-digit number": (stream('{"n": ' + "9" * 5001 + "}"), "malformed stream chunk"),
}


@pytest.mark.parametrize("fault", TYPE_FAULTS)
def test_a_field_of_the_wrong_type_is_an_error_record(fault, tmp_path):
    handler, field = TYPE_FAULTS[fault]
    recs, _, _ = _send(handler, tmp_path, pages=2)
    assert len(recs) == 2  # the run went on
    for r in recs:
        _failed(r, "malformed" if field.startswith("field") else field)
        assert field in r.error


def test_extra_fields_a_real_server_adds_are_ignored(tmp_path):
    # vLLM adds token_ids, stop_reason, prompt_token_ids; transformers serve system_fingerprint
    extra = dict(token_ids=[1, 2], stop_reason=None, logprobs=None)
    ev = [{**chunk("hello", **extra), "system_fingerprint": "", "prompt_token_ids": [3]},
          chunk(finish="stop", usage={"prompt_tokens": 3, "completion_tokens": 1, "prompt_tokens_details": None})]
    (rec,), _, _ = _send(stream(*ev), tmp_path)
    assert rec.error is None and rec.output == "hello" and rec.completion_tokens == 1 and rec.error_kind is None


def test_endless_stream_ends_at_the_token_cap_without_growing_memory(tmp_path):
    tracemalloc.start()
    try:
        (rec,), srv, wall = _send(endless(), tmp_path, max_tokens=16, timeout_s=60)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    _failed(rec, f"more than {token_cap(16)} content chunks for max_tokens 16")
    assert wall < 10 and peak < 30e6  # before: 2.1 GB in 15 s, then a timeout
    assert srv.events > token_cap(16)


def test_a_50_mb_sse_line_is_an_error_not_a_traceback(tmp_path):
    (rec,), _, wall = _send(huge_line(50 << 20), tmp_path, timeout_s=60)
    _failed(rec, "a stream line longer than")
    assert wall < 20


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_50_mb_json_body_is_an_error_not_a_stored_output(declared, tmp_path):
    (rec,), _, _ = _send(huge_body(50 << 20, declared=declared), tmp_path, timeout_s=60)
    _failed(rec, "-byte cap for this request")
    assert str(byte_cap(RequestSpec(base_url="", model="m", prompt="", max_tokens=16))) in rec.error
    assert (tmp_path / "requests.jsonl").stat().st_size < 2000


def test_a_stream_of_many_small_lines_past_the_byte_cap_is_an_error(tmp_path):
    # keep-alive comments are not content: only the byte cap ends this one
    (rec,), _, _ = _send(stream(*([": keep-alive " + "." * 1000] * 2000)), tmp_path, timeout_s=60)
    _failed(rec, "stream larger than the")


def test_the_server_reporting_more_tokens_than_asked_is_an_error(tmp_path):
    (rec,), _, _ = _send(body(completion(usage={"completion_tokens": 5000})), tmp_path, max_tokens=16)
    _failed(rec, "reports 5000 completion tokens for max_tokens 16")


def test_another_model_is_an_error_and_transformers_at_main_is_accepted(tmp_path):
    (rec,), _, _ = _send(stream(chunk("a", model="other"), chunk(finish="stop")), tmp_path, model="/m/fp8")
    _failed(rec, "names model 'other', not the requested '/m/fp8'")
    (ok,), _, _ = _send(stream(chunk("a", model="/m/fp8@main"), chunk(finish="stop", model="/m/fp8@main"), done=False),
                        tmp_path / "x", model="/m/fp8")
    assert ok.error is None and ok.output == "a"
    (rev,), _, _ = _send(body(completion(model="/m/fp8@main")), tmp_path / "y", model="/m/fp8@v2")
    _failed(rev, "not the requested")


@pytest.mark.parametrize("handler,match", [
    (body(completion(choices=[])), "the answer has 0 choices"),
    (body(completion(None)), "message.content is null"),
    (stream(chunk("hello"), chunk(" wor"), done=False), "stream ended before the answer was finished"),
    (stream(chunk("hello"), done=True), "stream ended before the answer was finished"),
    (stream(chunk("a", index=1), chunk(finish="stop")), "choice 1"),
    (body({"error": {"message": "CUDA out of memory"}}), "server error: CUDA out of memory"),
    (stream(chunk("a"), '{"error": "generation failed"}'), "server error in stream: generation failed"),
], ids=["choices-empty", "content-null", "no-done-no-finish", "done-without-finish", "second-choice", "error-body",
        "error-chunk"])
def test_empty_null_or_unfinished_answers_are_errors(handler, match, tmp_path):
    (rec,), _, _ = _send(handler, tmp_path)
    _failed(rec, match)


def test_finish_without_done_is_complete_and_an_empty_answer_is_the_models(tmp_path):
    # transformers serve 5.17 never sends [DONE]: the finish_reason chunk ends its streams
    (rec,), _, _ = _send(stream(*GOOD, done=False), tmp_path)
    assert rec.error is None and rec.output == "hello world" and rec.finish_reason == "stop"
    # a model that stops at once produced "": that is a (bad) output to score, not a server failure
    (empty,), _, _ = _send(stream(chunk(finish="stop")), tmp_path / "e")
    assert empty.error is None and empty.output == "" and not empty.truncated


def test_an_output_cut_at_max_tokens_is_kept_and_flagged(tmp_path):
    (rec,), _, _ = _send(stream(chunk("a"), chunk(" b", finish="length"), chunk(usage={"completion_tokens": 2})),
                         tmp_path, max_tokens=2)
    assert rec.error is None and rec.error_kind is None and rec.output == "a b" and rec.truncated
    (nonstream,), _, _ = _send(body(completion("a b", finish="length")), tmp_path / "b", max_tokens=2)
    assert nonstream.output == "a b" and nonstream.truncated


@pytest.mark.parametrize("handler,match", [
    (body({"error": "boom"}, status=500), "HTTP 500"),
    (disconnect(chunks=2), ""),
    (disconnect(), "connection failed after 3 attempts"),
], ids=["http-500", "died-mid-stream", "died-before-answering"])
def test_infrastructure_failures_are_marked_as_such(handler, match, tmp_path):
    (rec,), _, _ = _send(handler, tmp_path)
    _failed(rec, match)


def _within(latency: float, timeout: float) -> bool:
    return abs(latency - timeout) <= max(0.1 * timeout, 1.0)


@pytest.mark.parametrize("handler", [hang(), hang(after_headers=True), trickle(0.2)],
                         ids=["no-headers", "headers-then-nothing", "trickle"])
@pytest.mark.parametrize("timeout", [1.5, 6.5])  # 6.5: past aiohttp's 5 s threshold, where it rounds deadlines up
def test_a_request_timeout_holds(handler, timeout, tmp_path):
    (rec,), _, _ = _send(handler, tmp_path, timeout_s=timeout, max_tokens=100000)
    _failed(rec, f"timeout after {timeout:g} s")
    assert _within(rec.end - rec.start, timeout), rec.end - rec.start


def test_the_timeout_includes_the_retries(tmp_path):
    # a server that takes 0.7 T and then drops the connection: three attempts used to get a full timeout each
    (rec,), _, _ = _send(disconnect(1.4), tmp_path, timeout_s=2.0)
    _failed(rec, "timeout after 2 s")
    assert _within(rec.end - rec.start, 2.0) and rec.attempts == 2


def test_a_stalled_server_costs_one_timeout_per_level_not_one_more_for_the_warm_up(tmp_path):
    # the 1.5-2x overshoot: the warm-up waited a full timeout, then every page another one
    recs, srv, wall = _send(hang(), tmp_path, pages=3, timeout_s=2.0, warmup=True)
    assert srv.requests == 1 and _within(wall, 2.0), wall
    for r in recs:
        _failed(r, "the warm-up request got no answer within 2 s")
        assert r.attempts == 0


def test_schema_1_records_still_read():
    old = {"schema_version": 1, "page_id": "p", "concurrency": 1, "output": "x", "start": 1.0, "end": 2.0,
           "finish_reason": "length", "attempts": 1, "session": "s"}
    rec = parse_record(RequestRecord, old, where="requests.jsonl:1")
    assert rec.schema_version == 1 and rec.truncated and rec.error_kind is None
    failed = parse_record(RequestRecord, {**old, "output": None, "error": "HTTP 500", "finish_reason": None}, where="x")
    assert failed.error == "HTTP 500" and failed.error_kind is None and not failed.truncated
    with pytest.raises(Exception, match="schema_version"):  # 3 is the chained one: 4 is from a newer quantgate
        parse_record(RequestRecord, {**old, "schema_version": 4}, where="requests.jsonl:1")


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    from quantgate.heldout.synth import synth_pages

    out = tmp_path_factory.mktemp("faults") / "pages"
    synth_pages(out, 3, seed=5, profile="simple", calibration_fraction=0.0)
    return out


def test_serve_exits_non_zero_with_one_line_when_every_request_of_a_level_failed(pages, tmp_path):
    with FakeOpenAI(stream(chunk(5))) as srv:
        r = subprocess.run([sys.executable, "-m", "quantgate", "serve", "m", "--backend", "openai", "--endpoint",
                            srv.base_url, "--pages", str(pages), "-o", str(tmp_path / "run"), "--max-tokens", "8"],
                           capture_output=True, text=True, timeout=120)
    assert r.returncode == 4, r.stderr
    err = [line for line in r.stderr.splitlines() if line.strip()]
    assert err[-1].startswith("quantgate serve: error: every request failed at concurrency 1 (the first: malformed")
    assert "Traceback" not in r.stderr
    recs = [json.loads(x) for x in (tmp_path / "run" / "requests.jsonl").read_text().splitlines()]
    assert len(recs) == 3 and all(x["error_kind"] == "infrastructure" for x in recs)
