"""Metrics on known pairs, bootstrap against scipy, verdicts on constructed data, the
error rate of `within_noise` by simulation, and bad score files."""

import json
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats as sps

from quantgate.errors import InputError
from quantgate.io.scores import read_scores
from quantgate.judge.clustered import decide
from quantgate.judge.compare import compare_scores
from quantgate.judge.stats import bootstrap_means, percentile_ci
from quantgate.schema.scores import ScoreRow
from quantgate.schema.settings import VerdictSettings
from quantgate.scoring import get_metric
from quantgate.scoring.metrics import score_one
from quantgate.scoring.normalize import Normalization
from quantgate.scoring.tables import table_teds


def m(name, pred, truth=None, checks=()):
    return score_one(get_metric(name), pred, truth, list(checks))


def test_text_metrics_known_values():
    assert m("ned", "kitten", "sitting") == pytest.approx(3 / 7)
    assert m("cer", "kitten", "sitting") == pytest.approx(3 / 7)
    assert m("ned", "abc", "abc") == 0.0
    assert m("wer", "the cat sat", "the cat sat down") == pytest.approx(1 / 4)
    assert m("wer", "a b c", "x y z") == 1.0
    # whitespace folding and NFKC: re-wrapped lines and full-width digits are not errors
    assert m("ned", "one  two\nthree", "one two three") == 0.0
    assert m("ned", "ＡＢＣ１２３", "ABC123") == 0.0
    # CJK: one wrong character of four
    assert m("cer", "東京大字", "東京大学") == pytest.approx(0.25)
    # LaTeX counted character by character
    assert m("cer", r"$\alpha+\beta$", r"$\alpha+\gamma$") == pytest.approx(4 / 15)
    assert m("bow_f1", "b a", "a b") == 1.0
    assert m("bow_f1", "a b c d", "a b") == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert m("bow_f1", "# Title\n- item", "Title item") == 1.0


def test_empty_predictions_get_worst_value():
    for name, worst in (("ned", 1.0), ("cer", 1.0), ("wer", 1.0), ("bow_f1", 0.0)):
        assert m(name, "", "some truth") == worst
        assert m(name, None, "some truth") == worst
    # checks judge an empty text themselves, as upstream's do (an absent check passes it); no output at all is worst
    absent = [{"type": "absent", "text": "x", "pdf": "a", "page": 1, "id": "a"}]
    assert m("checks", "", None, absent) == 1.0
    assert m("checks", None, None, absent) == 0.0
    assert m("ned", "anything", None) is None  # no truth: not applicable, not zero


def test_normalization_options():
    n = Normalization(strip_markdown=True, lowercase=True)
    assert n("# Title\n\n**Bold** and _it_\n\n| a | b |\n|---|---|\n| 1 | 2 |") == "title bold and it a b 1 2"


def test_table_teds_markdown_and_html():
    md = "| a | b |\n|---|---|\n| 1 | 2 |\n"
    html = "<table><tr><td>a</td><td>b</td></tr><tr><td>1</td><td>2</td></tr></table>"
    assert table_teds(md, md) == 1.0
    assert table_teds(html, md) == 1.0  # same structure, either syntax
    # one cell of four wrong (full rename): 1 - 1/7 nodes
    assert table_teds("| a | b |\n|---|---|\n| 1 | 9 |\n", md) == pytest.approx(1 - 1 / 7)
    # a missing row: delete tr + 2 td = 3 of 10 nodes
    assert table_teds(md, "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n") == pytest.approx(1 - 3 / 10)
    assert table_teds("no table here", md) == 0.0
    assert table_teds(md, "no table in truth") is None


def test_bootstrap_matches_scipy():
    rng = np.random.default_rng(7)
    x = rng.normal(0.02, 0.1, size=80)
    ours = percentile_ci(x, 0.90, 20_000, seed=1)
    ref = sps.bootstrap((x,), np.mean, confidence_level=0.90, n_resamples=20_000, method="percentile",
                        random_state=np.random.default_rng(2)).confidence_interval
    se = x.std(ddof=1) / np.sqrt(len(x))
    # Two Monte-Carlo estimates of the same quantiles: they agree to a small fraction of a standard error.
    assert abs(ours[0] - ref.low) < 0.05 * se
    assert abs(ours[1] - ref.high) < 0.05 * se


def test_bootstrap_is_seeded_and_chunked_consistently():
    x = np.arange(10.0)
    assert np.array_equal(bootstrap_means(x, 500, 3), bootstrap_means(x, 500, 3))
    assert not np.array_equal(bootstrap_means(x, 500, 3), bootstrap_means(x, 500, 4))
    assert bootstrap_means(np.ones(5), 100, 0).tolist() == [1.0] * 100


def _scores(values, metric="ned"):
    return {f"p{i}": ScoreRow(page_id=f"p{i}", **{metric: float(v)}) for i, v in enumerate(values)}


def test_verdicts_on_constructed_data():
    rng = np.random.default_rng(0)
    base = rng.uniform(0.05, 0.3, size=400)
    same = base + rng.normal(0, 0.005, size=400)
    v = compare_scores(_scores(base), _scores(same), VerdictSettings(metric="ned", margin=0.01))
    assert v.verdict == "within_noise" and v.n == 400
    worse = base + 0.03 + rng.normal(0, 0.005, size=400)  # three margins worse (ned: lower is better)
    v = compare_scores(_scores(base), _scores(worse), VerdictSettings(metric="ned", margin=0.01))
    assert v.verdict == "regression" and v.delta == pytest.approx(0.03, abs=0.002) and v.ci_low > 0.01
    few_b = base[:6]
    few_c = few_b + 0.01 + rng.normal(0, 0.02, size=6)
    v = compare_scores(_scores(few_b), _scores(few_c), VerdictSettings(metric="ned", margin=0.01))
    assert v.verdict == "inconclusive" and v.reason == "too_few_pages" and v.pages_needed >= 30


def test_direction_is_respected():
    base = np.linspace(0.5, 0.9, 200)
    better = base + 0.05  # higher bow_f1 is better: an improvement is never a regression
    # 200 pages rule out rare failures for a declared worst page damage of 0.1 (29 pages), not the range (299)
    v = compare_scores(_scores(base, "bow_f1"), _scores(better, "bow_f1"), VerdictSettings(metric="bow_f1", margin=0.01, worst_page_damage=0.1))
    assert v.verdict == "within_noise" and v.delta > 0
    v = compare_scores(_scores(base, "bow_f1"), _scores(base - 0.05, "bow_f1"), VerdictSettings(metric="bow_f1", margin=0.01))
    assert v.verdict == "regression" and v.ci_high < -0.01


def test_false_pass_rate_by_simulation():
    """With the true mean shifted 1.5 margins the bad way, within_noise must come out in <= 5% of studies."""
    rng = np.random.default_rng(123)
    # 80 single-page documents and a declared worst page damage of 0.2 (59 pages rule out rare failures), so the
    # interval, not the count rule, is what must hold the rate (judge.clustered decides)
    margin, n, studies, passes = 0.01, 80, 400, 0
    ids = [f"p{i}" for i in range(n)]
    for s in range(studies):
        d = rng.normal(-1.5 * margin, 0.03, size=n)
        passes += decide(d, ids, VerdictSettings(metric="ned", margin=margin, worst_page_damage=0.2, n_resamples=2000,
                                                   seed=s)).verdict == "within_noise"
    assert passes / studies <= 0.05, passes


def test_missing_pages_are_an_error_unless_allowed():
    a, b = _scores([0.1, 0.2, 0.3]), _scores([0.1, 0.2])
    with pytest.raises(InputError, match="p2"):
        compare_scores(a, b, VerdictSettings(metric="ned"))
    v = compare_scores(a, b, VerdictSettings(metric="ned"), allow_missing=True)
    assert v.n == 2 and v.missing_pages == ["p2"]


@pytest.mark.parametrize("line,msg", [
    ('{"page_id": "a", "ned": "0.1"}', r"s\.jsonl:2: ned = '0\.1' is not a number"),
    ('{"page_id": "a", "ned": NaN}', r"s\.jsonl:2: ned is nan"),
    ('{"page_id": "x", "ned": 0.1}', r"s\.jsonl:2: duplicate page_id 'x'"),
    ('{"page_id": "a", "nedd": 0.1}', r"s\.jsonl:2: unknown metric 'nedd'"),
    ('{"page_id": "a", "ned": 0.1', r"s\.jsonl:2: not valid JSON"),
])
def test_bad_score_files(tmp_path, line, msg):
    f = tmp_path / "s.jsonl"
    f.write_text('{"page_id": "x", "ned": 0.2}\n' + line + "\n")
    with pytest.raises(InputError, match=msg):
        read_scores(f)


def run(*a):
    return subprocess.run([sys.executable, "-m", "quantgate", *a], capture_output=True, text=True, timeout=120)


def test_cli_score_and_compare(tmp_path, synth_pageset):
    from quantgate.io.pageset import load_pageset

    ps = load_pageset(synth_pageset)
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.mkdir()
    bad.mkdir()
    for p in ps.split("all"):
        t = ps.truth_text(p)
        (good / f"{p.id}.md").write_text(t)
        (bad / f"{p.id}.md").write_text(t[: len(t) // 3])
    r = run("score", "--pages", str(synth_pageset), "--predictions", str(good), "-o", str(tmp_path / "g.jsonl"),
            "--split", "all", "--metrics", "ned,bow_f1")
    assert r.returncode == 0, r.stderr
    assert "ned" in r.stdout and "0 empty outputs" in r.stdout
    rows = [json.loads(x) for x in (tmp_path / "g.jsonl").read_text().splitlines()]
    assert len(rows) == 10 and all(x["ned"] == 0.0 for x in rows)
    run("score", "--pages", str(synth_pageset), "--predictions", str(bad), "-o", str(tmp_path / "b.jsonl"),
        "--split", "all", "--metrics", "ned,bow_f1")
    r = run("compare", str(tmp_path / "g.jsonl"), str(tmp_path / "b.jsonl"), "--metric", "ned", "--margin", "0.02", "--json")
    assert r.returncode == 2  # 10 pages: below the minimum for a calibrated interval (tests/integration/test_stats.py)
    v = json.loads(r.stdout)
    for k in ("verdict", "n", "delta", "ci_low", "ci_high", "margin", "noise_floor", "seed", "pages_needed"):
        assert k in v
    # pages_needed plans a pass at shift 0, never below the rare-failure count (149 pages at 0.02, D = 1)
    assert v["verdict"] == "inconclusive" and v["reason"] == "too_few_pages" and v["pages_needed"] >= 149
    assert v["rare_failure_pages"] == 149 and v["documents"] == 10
    assert v["noise_floor"] is None and v["n"] == 10 and v["pages_changed"] == 10 and v["delta"] > 0.3
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "unrelated.md").write_text("x")
    r = run("score", "--pages", str(synth_pageset), "--predictions", str(empty), "-o", str(tmp_path / "e.jsonl"))
    assert r.returncode == 65 and "unrelated.md: names no page of the page set" in r.stderr  # the file named
