"""Speed-ups with their uncertainty — a level's records split into waves from requests.jsonl
alone, and the interval on a variant's speed over BF16's, its coverage measured against a known answer."""

import json

import numpy as np
import pytest
from scipy import stats

from quantgate.judge.speed import speedup_interval, split_waves, t_quantile
from quantgate.schema.run import RequestRecord
from quantgate.serve.stats import level_stats


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 8, 31, 120])
def test_t_quantile_matches_scipy(df):
    for p in (0.005, 0.05, 0.25, 0.5, 0.9, 0.975):
        assert t_quantile(p, df) == pytest.approx(stats.t.ppf(p, df), abs=1e-9)


def _coverage(true_ratio: float, n_v: int, n_b: int, sigma: float, trials: int, expanded: bool = True) -> float:
    """Share of ``trials`` lognormal runs (per-wave speeds, equal sigma, so the ratio of means is ``true_ratio``)
    whose 90 % interval holds ``true_ratio``."""
    rng = np.random.default_rng(12345)
    hits = 0
    for t in range(trials):
        b = np.exp(rng.normal(np.log(280.0), sigma, n_b))
        v = np.exp(rng.normal(np.log(280.0 * true_ratio), sigma, n_v))
        if expanded:
            r = speedup_interval(v, b, resamples=2000, seed=t)
            lo, hi = r.low, r.high
        else:  # the plain percentile bootstrap of the same ratio, for comparison
            mv = v[rng.integers(0, n_v, (2000, n_v))].mean(1)
            mb = b[rng.integers(0, n_b, (2000, n_b))].mean(1)
            lo, hi = np.quantile(mv / mb, [0.05, 0.95])
        hits += lo <= true_ratio <= hi
    return hits / trials


@pytest.mark.parametrize("true_ratio,n_v,n_b,sigma", [(1.15, 3, 3, 0.05), (1.0, 3, 3, 0.08), (0.94, 3, 5, 0.03),
                                                      (1.15, 8, 8, 0.05)])
def test_the_90_percent_interval_covers_a_known_ratio_about_90_percent_of_the_time(true_ratio, n_v, n_b, sigma):
    # 1,000 runs: the binomial standard error of a 0.90 coverage is 0.0095; the tolerance is 0.04 (4 SE)
    assert abs(_coverage(true_ratio, n_v, n_b, sigma, 1000) - 0.90) <= 0.04


def test_the_plain_percentile_interval_undercovers_at_three_waves():
    # why the expansion is there (the module docstring's 0.75)
    assert _coverage(1.15, 3, 3, 0.05, 1000, expanded=False) < 0.82


def test_a_ratio_of_one_straddles_one_and_a_clear_speedup_does_not():
    same = speedup_interval([280.0, 291.0, 276.0], [284.0, 270.0, 289.0])
    assert same.low < 1 < same.high and same.ratio == pytest.approx(847 / 843)
    fast = speedup_interval([330.0, 321.0, 338.0], [284.0, 289.0, 286.0])
    assert 1 < fast.low < fast.ratio < fast.high and fast.ratio == pytest.approx(989 / 859)
    # more spread between waves, a wider interval around the same ratio
    wide = speedup_interval([300.0, 321.0, 368.0], [254.0, 289.0, 316.0])
    assert (wide.high - wide.low) > (fast.high - fast.low)


def test_seeded_and_refuses_what_it_cannot_judge():
    a, b = [330.0, 321.0, 338.0], [284.0, 289.0, 286.0]
    assert speedup_interval(a, b) == speedup_interval(a, b)
    assert speedup_interval(a, b, seed=1).low != speedup_interval(a, b, seed=2).low
    assert speedup_interval(a, b, level=0.5).high < speedup_interval(a, b, level=0.95).high
    with pytest.raises(ValueError, match="baseline: 2 wave.*at least 3"):
        speedup_interval(a, b[:2])
    with pytest.raises(ValueError, match="positive"):
        speedup_interval([330.0, 0.0, 338.0], b)


# --- waves from request records -----------------------------------------------------------------------

def _rec(page: str, c: int, start: float, dur: float, session: str = "s1", tokens: int = 1000) -> dict:
    return RequestRecord(page_id=page, concurrency=c, completion_tokens=tokens, ttft_s=0.2, latency_s=dur,
                         start=start, end=start + dur, session=session).model_dump()


def test_back_to_back_waves_are_found_at_c32_and_at_c1():
    recs = []
    t = 100.0
    for w in range(3):  # three waves of 32 sent together, each after the last one ended
        recs += [_rec(f"p{w}-{i}", 32, t + 0.001 * i, 10.0 + 0.01 * i) for i in range(32)]
        t += 11.0
    for i in range(9):  # c=1: nine requests one after another, waves of 3
        recs.append(_rec(f"q{i}", 1, t, 3.5))
        t += 3.6
    waves, partial = split_waves(recs, 32, concurrency=32)
    assert [len(w) for w in waves] == [32, 32, 32] and partial == []
    assert {r["page_id"].split("-")[0] for r in waves[1]} == {"p1"}
    waves1, _ = split_waves(recs, 3, concurrency=1)
    assert [[r["page_id"] for r in w] for w in waves1] == [["q0", "q1", "q2"], ["q3", "q4", "q5"], ["q6", "q7", "q8"]]


def test_a_continuous_queue_is_not_waves_and_a_resumed_wave_is_partial():
    # c=4 workers pulling from a queue: each request starts when one finishes, so requests always overlap
    queue = [_rec(f"p{i}", 4, 100.0 + 2.5 * i, 10.0) for i in range(12)]
    with pytest.raises(ValueError, match="not sent in waves of 4"):
        split_waves(queue, 4)
    # a wave cut by a crash (session s1), the level resumed in another session
    recs = [_rec("a", 2, 0.0, 5.0), _rec("b", 2, 0.0, 5.1), _rec("c", 2, 6.0, 5.0)]
    recs += [_rec(p, 2, 1000.0 + k * 6, 5.0, session="s2") for k, pair in enumerate([("d", "e"), ("f", "g")])
             for p in pair]
    waves, partial = split_waves(recs, 2)
    assert [[r["page_id"] for r in w] for w in waves] == [["a", "b"], ["d", "e"], ["f", "g"]]
    assert [[r["page_id"] for r in w] for w in partial] == [["c"]]


def test_the_speedup_of_a_synthetic_run_from_requests_jsonl_alone(tmp_path):
    """Two arms of 4 waves at c=8, the variant's requests 1.25x as fast in expectation: read back from a
    requests.jsonl, each wave's pages/s (level_stats of its records) is 8 / its longest request, and the
    interval on them excludes 1 (coverage itself is the test above)."""
    rng = np.random.default_rng(7)
    expected: dict[str, list[float]] = {}

    def arm(speed: float, session: str) -> list[dict]:
        recs, t = [], 0.0
        for w in range(4):
            durs = np.exp(rng.normal(np.log(1000 / speed), 0.03, 8))
            recs += [_rec(f"{session}{w}-{i}", 8, t, float(d), session=session) for i, d in enumerate(durs)]
            expected.setdefault(session, []).append(8 / float(durs.max()))
            t += float(durs.max()) + 0.5
        return recs

    path = tmp_path / "requests.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in arm(280.0, "base") + arm(350.0, "var")))
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    speeds = {}
    for arm_name in ("base", "var"):
        waves, partial = split_waves([r for r in lines if r["session"] == arm_name], 8)
        assert len(waves) == 4 and not partial
        speeds[arm_name] = [level_stats([RequestRecord(**r) for r in w], 8).pages_per_s for w in waves]
        assert speeds[arm_name] == pytest.approx(expected[arm_name])
    r = speedup_interval(speeds["var"], speeds["base"])
    assert 1.0 < r.low < r.ratio < r.high and r.ratio == pytest.approx(np.mean(speeds["var"]) / np.mean(speeds["base"]))
