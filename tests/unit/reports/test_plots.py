"""The report's plots say what its tables say. The verdict plot is scaled to the margins, the noise floors and the
interval ends the bootstrap bounded: an end it could not bound (``lower_bound_from: unbounded``, which the record
holds at the metric's whole range) is an arrow at the edge, not a bar to ±1.0 that squashes the margin against zero.
The throughput plot leaves out a variant the speed table calls "BF16 kernels: not a quantized speed" (a quantized
checkpoint that transformers serve dequantizes). Verdicts come from the judge itself (``compare_scores``); the
figures are the matplotlib objects ``reports.html`` draws, read before they become SVG."""

from __future__ import annotations

import pytest

from quantgate.judge.compare import compare_scores
from quantgate.reports import html
from quantgate.reports.speed import BF16_KERNELS, speedup_text
from quantgate.schema.metrics import METRICS
from quantgate.schema.run import FormatNumerics, LevelStats, RunNumerics, SpeedLevel
from quantgate.schema.scores import ScoreRow
from quantgate.schema.settings import VerdictSettings
from quantgate.schema.summary import Provenance, Summary, VariantSummary, VariantVerdict, VerdictInputs

PAGES = 300  # single-page documents, the size of a small held-out split
VERDICT_PLOT, THROUGHPUT = "Verdicts", "Throughput and p90 latency against concurrency"


def _verdict(variant: str, metric: str, lone_damage: float = 0.0, shift: float = 0.0, pages: int = PAGES) -> VariantVerdict:
    """The judge's verdict on ``metric`` over ``pages`` single-page documents: every page ``shift`` better (metric
    units), one page damaged by ``lone_damage`` — a lone damaged document leaves the worse end without spread, so the
    bootstrap cannot bound it.
    The baseline's second run differs from it by a small jitter, which gives the verdict a noise floor."""
    hib = METRICS[metric].higher_is_better
    sign = 1 if hib else -1
    base = {f"p{i}": ScoreRow(page_id=f"p{i}", **{metric: 0.5 + 0.01 * (i % 7)}) for i in range(pages)}
    noise = {k: ScoreRow(page_id=k, **{metric: getattr(r, metric) + 0.002 * ((i % 3) - 1)})
             for i, (k, r) in enumerate(base.items())}
    cand = {k: ScoreRow(page_id=k, **{metric: getattr(r, metric) + sign * (shift - (lone_damage if k == "p7" else 0))})
            for k, r in base.items()}
    settings = VerdictSettings(metric=metric, higher_is_better=hib, margin=METRICS[metric].margin, n_resamples=1000)
    v = compare_scores(base, cand, settings, noise=noise)
    return VariantVerdict(**v.model_dump(), variant=variant)


def _level(c: int, pages_per_s: float) -> dict:
    return LevelStats(concurrency=c, n_requests=8, n_errors=0, wall_s=8 / pages_per_s, pages_per_s=pages_per_s,
                      output_tokens_per_s=100 * pages_per_s, per_request_tokens_per_s_p50=20.0,
                      ttft_s={"p50": 0.1, "p90": 0.2, "p99": 0.3},
                      latency_s={"p50": 1.0, "p90": 2.0 / c, "p99": 3.0}).model_dump()


def _variant(name: str, numerics: RunNumerics | None, pages_per_s: float, waves: bool) -> dict:
    levels = [_level(1, pages_per_s), _level(4, 3 * pages_per_s)]
    speed = [SpeedLevel(concurrency=lv["concurrency"], per_wave=8, ignore_eos=True,  # two waves, their mean the level's
                        waves=[LevelStats.model_validate(_level(lv["concurrency"], k * lv["pages_per_s"]))
                               for k in (0.9, 1.1)]).model_dump() for lv in levels] if waves else []
    return VariantSummary(name=name, recipe=name, recipe_sha256="0" * 64, path=f"variants/{name}", weights_bytes=10**6,
                          compression=None, formats=None, vision_bf16=True, files={}, kernels={}, numerics=numerics,
                          notes=[], server_version=None, levels=levels, max_concurrency_within_slo=4,
                          calibration_pages=0, speedup={"1": pages_per_s}, speed=speed).model_dump()


def _numerics(backend: str) -> RunNumerics:
    return RunNumerics(backend=backend, quantized=True, formats={"fp8": FormatNumerics(format="fp8")})


def _summary(verdicts: list[VariantVerdict], variants: list[dict] | None = None) -> Summary:
    metrics = list(dict.fromkeys(v.metric for v in verdicts))
    names = ["bf16", *dict.fromkeys(v.variant for v in verdicts)]
    variants = variants or [_variant(n, None, 1.0, waves=False) for n in names]
    study = {"name": "plots", "baseline": "bf16", "variants": [{"name": v["name"]} for v in variants],
             "metrics": metrics, "margins": {m: METRICS[m].margin for m in metrics}, "split": "heldout",
             "bootstrap_seed": 0, "resamples": 1000, "min_pages": 30, "test": "non_inferiority", "slo_s": 10.0}
    return Summary(created="2026-12-05T00:00:00Z", study=study, baseline="bf16", compare_level=1, noise_level=2,
                   complete=True, verdicts=verdicts, lm_eval=None, variants=variants, worst_pages={},
                   provenance=Provenance(packages={}, git_commit=None, pageset_sha256="0" * 64, statistics="x"),
                   inputs=VerdictInputs(margins={m: METRICS[m].margin for m in metrics}, pages="pages/pages.jsonl",
                                        files={}))


def _figures(r: Summary, monkeypatch) -> dict:
    """The report's figures by title, as matplotlib drew them (each one's SVG text replaced by its index)."""
    figs: list = []
    monkeypatch.setattr(html, "figure_svg", lambda fig: figs.append(fig) or str(len(figs) - 1))
    return {title: figs[int(i)] for title, i in html._figures(r)}


def _arrows(ax, row: int) -> set[str]:
    """The arrow marks drawn on a verdict row: '<' (an end past the left edge) and '>' (past the right)."""
    return {ln.get_marker() for ln in ax.get_lines()
            if ln.get_marker() in ("<", ">") and list(ln.get_ydata()) == [row]}


def _bar(ax, row: int) -> tuple[float, float]:
    """The interval bar drawn on a row (the one thick line there)."""
    (bar,) = [ln for ln in ax.get_lines() if ln.get_linewidth() == 4 and list(ln.get_ydata()) == [row, row]]
    return tuple(bar.get_xdata())


@pytest.fixture(scope="module")
def unbounded():
    """A lone page damaged by 0.3, on each direction of metric: the worse end is unbounded."""
    return {m: _verdict("fp8", m, lone_damage=0.3) for m in ("ned", "bow_f1")}


def test_the_judge_holds_an_unbounded_end_at_the_metrics_whole_range(unbounded):
    """What the plot is given: the worse end — ci_high for ned (lower is better), ci_low for bow_f1 — at ±1."""
    assert {m: v.lower_bound_from for m, v in unbounded.items()} == {"ned": "unbounded", "bow_f1": "unbounded"}
    assert unbounded["ned"].ci_high == 1.0 and abs(unbounded["ned"].ci_low) < 0.01
    assert unbounded["bow_f1"].ci_low == -1.0 and abs(unbounded["bow_f1"].ci_high) < 0.01


@pytest.mark.parametrize("metric, worse", [("ned", ">"), ("bow_f1", "<")])
def test_an_unbounded_end_is_an_arrow_and_the_axis_follows_the_margin(unbounded, metric, worse, monkeypatch):
    v = unbounded[metric]
    ax = _figures(_summary([v]), monkeypatch)[VERDICT_PLOT].axes[0]
    lo, hi = ax.get_xlim()
    assert lo == -hi
    bounded = v.ci_high if worse == "<" else v.ci_low
    held = max(v.margin, v.noise_floor, abs(v.delta), abs(bounded))
    assert held == v.margin  # the window the margin sets: the noise floor, delta and the bounded end fall inside it
    # the margin, the noise floor and the bounded end are drawn inside the window, with room, and the window is the
    # margin's scale — not the unbounded end's 1.0, which would squash a 0.01 margin into a sliver beside zero
    assert held < hi <= 1.5 * held
    assert _arrows(ax, 0) == {worse}
    assert "bound beyond the plot" in [t.get_text() for t in ax.get_legend().get_texts()]
    b_lo, b_hi = _bar(ax, 0)
    assert (b_lo, b_hi) == ((-hi / 1.04, v.ci_high) if worse == "<" else (v.ci_low, hi / 1.04))


@pytest.mark.parametrize("metric", ["ned", "bow_f1"])
def test_a_bounded_end_past_the_margin_is_drawn_where_it_is(metric, monkeypatch):
    """Twelve documents, each 0.03 better but one, which is damaged alone: the worse end is unbounded, the better
    end bounded past the margin and the mean — the window reaches it, and only the unbounded end is an arrow (a
    bounded end is never drawn as one "beyond the plot")."""
    v = _verdict("fp8", metric, lone_damage=0.3, shift=0.03, pages=12)
    assert v.lower_bound_from == "unbounded"
    better = v.ci_high if v.higher_is_better else v.ci_low
    assert 2 * max(v.margin, abs(v.delta)) < abs(better) < 1.0
    ax = _figures(_summary([v]), monkeypatch)[VERDICT_PLOT].axes[0]
    _, hi = ax.get_xlim()
    assert abs(better) < hi <= 1.5 * abs(better)
    assert _arrows(ax, 0) == {"<" if v.higher_is_better else ">"}
    assert better in _bar(ax, 0)


def test_rows_bounded_at_both_ends_have_no_arrow(unbounded, monkeypatch):
    """Beside an unbounded row, a row the bootstrap bounded on both sides is drawn whole, without arrows."""
    plain = _verdict("int8", "ned", shift=0.0)
    assert plain.lower_bound_from != "unbounded" and max(abs(plain.ci_low), abs(plain.ci_high)) < plain.margin
    ax = _figures(_summary([unbounded["ned"], plain]), monkeypatch)[VERDICT_PLOT].axes[0]
    assert _arrows(ax, 0) == {">"} and _arrows(ax, 1) == set()
    assert _bar(ax, 1) == (plain.ci_low, plain.ci_high)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["fp8", "int8"]


@pytest.mark.parametrize("waves", [False, True], ids=["accuracy-pass", "timed-waves"])
def test_the_throughput_plot_leaves_out_a_speed_the_table_calls_bf16_kernels(waves, monkeypatch):
    """fp8 served by vLLM runs its own kernels: plotted. w8 served by transformers serve is dequantized to BF16:
    the speed table says so, and the plot (both panels) leaves it out, timed waves or not."""
    variants = [_variant("bf16", None, 1.0, waves), _variant("fp8", _numerics("vllm"), 2.0, waves),
                _variant("w8", _numerics("transformers"), 1.1, waves)]
    r = _summary([_verdict(n, "ned") for n in ("fp8", "w8")], variants)
    table = {v.name: speedup_text(v, 1) for v in r.variants}
    assert table["w8"] == BF16_KERNELS and BF16_KERNELS not in (table["bf16"], table["fp8"])
    figs = _figures(r, monkeypatch)
    (title,) = [t for t in figs if t.startswith(THROUGHPUT)]
    assert title.endswith("(timed waves, their means)") == waves
    for ax in figs[title].axes:
        assert [ln.get_label() for ln in ax.get_lines() if not ln.get_label().startswith("_")
                and ln.get_label() != "SLO"] == ["bf16", "fp8"]
    assert [t.get_text() for t in figs["Accuracy versus speed"].axes[0].texts] == ["bf16", "fp8"]  # the same rule
    fp8 = next(ln for ln in figs[title].axes[0].get_lines() if ln.get_label() == "fp8")
    assert list(fp8.get_ydata()) == pytest.approx([2.0, 6.0])  # its own measured pages/s (the waves' mean: the same)
