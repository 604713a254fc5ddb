"""Helpers shared by the session's serving scripts (serve4b.py, batch_invariance.py): starting several vLLM
servers at once from one thread, start records, the single-stream ratios against the weight-bytes bound."""

from __future__ import annotations

import time

START_KEYS = ("start_s", "compile_start", "compile_s", "init_engine_s", "graph_capture_s")
RATIOS = (("fp8-dynamic", "bf16"), ("fp8-all", "bf16"))
GiB = 2**30


def parse_bytes(text: str) -> int:
    """``12GiB``, ``512MiB`` or a plain integer."""
    t = text.strip()
    for unit, mult in (("GiB", GiB), ("MiB", 2**20), ("KiB", 2**10)):
        if t.endswith(unit):
            return int(float(t[: -len(unit)]) * mult)
    return int(t)


def single_stream_ratios(speed: dict, pairs=RATIOS) -> dict:
    """Per pair (quantized, BF16): the measured ratio of per-request decode rates at concurrency 1, the ratio
    the weight bytes bound it to (BF16 decode bytes / quantized decode bytes: what a purely weight-read-bound
    step would gain), and the share of that possible gain the measurement reached."""
    out = {}
    for num, den in pairs:
        a, b = speed["variants"].get(num), speed["variants"].get(den)
        if not a or not b:
            continue
        ra, rb = _c1_rate(a), _c1_rate(b)
        bound = b["decode_weight_bytes"] / a["decode_weight_bytes"]
        measured = ra / rb if ra and rb else None
        out[f"{num}/{den}"] = {
            "measured_c1": measured, "weight_bytes_bound": bound,
            "share_of_possible_gain": (measured - 1) / (bound - 1) if measured and bound != 1 else None}
    return out


def _c1_rate(entry: dict) -> float | None:
    c1 = next((lv for lv in entry.get("levels", []) if lv["concurrency"] == 1), None)
    return c1.get("per_request_tokens_per_s_p50") if c1 else None


def start_together(servers: dict, until: float, on_ready, on_fail, retries: int = 1) -> None:
    """Launch every ManagedServer in ``servers`` (name -> server) from this thread at once — the launching
    thread must outlive its servers (they are stopped when it exits) — then poll them all until each is healthy
    (``on_ready(name)``), has exited (``on_fail(name, error)``, after one relaunch on another port if its port was
    taken meanwhile), or ``until`` (epoch s) passes (``on_fail`` too)."""
    from quantgate.errors import ServerError

    pending, tries = {}, {}
    for name, server in servers.items():
        try:
            pending[name] = server.launch()
        except ServerError as e:
            on_fail(name, str(e))
    while pending and time.time() < until:
        for name, server in list(pending.items()):
            try:
                ok = server.poll_healthy()
            except ServerError as e:
                if server.bound_elsewhere() and tries.get(name, 0) < retries:
                    tries[name] = tries.get(name, 0) + 1
                    server.launch()
                    continue
                server.stop()
                del pending[name]
                on_fail(name, str(e))
                continue
            if ok:
                del pending[name]
                on_ready(name)
        time.sleep(1.0)
    for name, server in pending.items():
        server.stop()
        on_fail(name, f"not healthy before the deadline (log {server.log_path})")


def start_record(engine, kind: str, contended: bool) -> dict:
    rec = {k: getattr(engine, k, None) for k in START_KEYS}
    return {**rec, "kind": kind, "contended": contended}
