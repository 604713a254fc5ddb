"""The preemption count a vLLM run records comes from vLLM's ``/metrics`` page: the counter summed
over engines, and "not measured" — never zero — when the page or the counter is missing."""

from quantgate.serve.prometheus import PREEMPTIONS, counter_value, scrape_counter

# as prometheus_client (which vLLM publishes through) writes a labelled counter, two engines of one server
PAGE = """# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="/m"} 3.0
vllm:num_preemptions_total{engine="1",model_name="/m"} 4.0
# HELP vllm:num_preemptions_created Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_created gauge
vllm:num_preemptions_created{engine="0",model_name="/m"} 1.7e+09
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="/m"} 2.0
"""


def test_the_counter_is_summed_over_engines_and_nothing_else_is_counted():
    assert counter_value(PAGE, PREEMPTIONS) == 7.0
    assert counter_value(PAGE, "vllm:num_requests_running") == 2.0  # a gauge by its own name


def test_a_missing_counter_or_a_page_that_is_not_metrics_is_not_measured():
    assert counter_value(PAGE.replace("num_preemptions", "other"), PREEMPTIONS) is None
    assert counter_value("", PREEMPTIONS) is None
    assert counter_value("<html>{ not metrics", PREEMPTIONS) is None


def test_a_server_that_does_not_answer_is_not_measured():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    assert scrape_counter(f"http://127.0.0.1:{port}/v1", PREEMPTIONS, timeout_s=2) is None
