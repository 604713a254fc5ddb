"""One counter read from a server's Prometheus ``/metrics`` page (vLLM publishes its engine counters there).
The text format is parsed by ``prometheus_client``'s own parser, not by hand."""

from __future__ import annotations

PREEMPTIONS = "vllm:num_preemptions"  # vLLM's counter of requests preempted (its KV cache full), per engine


def counter_value(text: str, name: str) -> float | None:
    """The sum over label sets (engines, models) of counter ``name`` in a ``/metrics`` page, or None when the
    page has no such counter. ``name`` without the ``_total`` suffix the exposition adds."""
    from prometheus_client.parser import text_string_to_metric_families

    total, seen = 0.0, False
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name in (f"{name}_total", name):
                    total, seen = total + float(s.value), True
    except ValueError:  # a page that is not the text exposition format: no count
        return None
    return total if seen else None


def scrape_counter(base_url: str, name: str, timeout_s: float = 5.0) -> float | None:
    """Counter ``name`` from ``<server>/metrics``, where ``base_url`` is the OpenAI base (``…/v1``); None when the
    server does not answer or publishes no such counter — a missing count is "not measured", never zero."""
    import httpx

    root = base_url.rstrip("/")
    root = root[: -len("/v1")] if root.endswith("/v1") else root
    try:
        r = httpx.get(f"{root}/metrics", timeout=timeout_s)
    except httpx.HTTPError:
        return None
    if r.status_code != 200:
        return None
    return counter_value(r.text, name)
