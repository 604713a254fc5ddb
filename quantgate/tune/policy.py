"""What the loop does after a trial: stop (every verdict within noise), score more pages (an
inconclusive verdict that more pages would decide, when the page set has them), or promote the
groups that most likely did the damage one format up and solve again under the same budget.

Which groups: a trial quantizes every group at once, so its held-out pages cannot say which group
hurt; the sensitivity file's KL ranks them (largest first). How many: the measured per-page score
changes say how far the recipe missed — the pessimistic end of the paired interval in margins —
and, taking the measured change as proportional to the summed KL (the additive model the
recommendation already rests on), the loop promotes groups until the summed KL falls to the share
that would put that end at half the margin, skipping any promotion that would leave no recipe under
the budget — and stopping when what still fits would not cover half of that cut (the groups that carry
the damage cannot move). Pure functions: no serving, no files."""

from __future__ import annotations

from collections.abc import Callable

from quantgate.schema.sensitivity import SensitivityFile
from quantgate.schema.tune import Action, Measured, Outcome

FAILING = ("regression", "not_equivalent", "inconclusive")
# reasons where the interval, not the recipe, is the problem: more pages can decide them
MORE_PAGES_REASONS = ("too_few_pages", "ci_straddles_margin", "noise_exceeds_margin")
HEADROOM = 0.5  # aim the pessimistic end of the interval at this share of the margin
# promotions that fit the budget must cover this share of the KL cut the miss asks for, else the loop stops
MIN_COVER = 0.5


def outcome(measured: list[Measured]) -> Outcome:
    names = {m.verdict for m in measured}
    if names & {"regression", "not_equivalent"}:
        return "regression"
    if "inconclusive" in names or not measured:
        return "inconclusive"
    return "within_noise"


def _kl(sens: SensitivityFile, group: str, fmt: str) -> float:
    return 0.0 if fmt == "bf16" else sens.table()[(group, fmt)].kl_mean


def _bytes(sens: SensitivityFile, group: str, fmt: str) -> int:
    if fmt == "bf16":
        return next(g.bf16_bytes for g in sens.groups if g.name == group)
    return sens.table()[(group, fmt)].bytes


def one_up(sens: SensitivityFile, group: str, fmt: str, formats: list[str], exclude: dict[str, list[str]]) -> str:
    """The next larger format this group may still take that the sensitivity file says hurts less
    (BF16 at the top): a larger format with more KL — nvfp4 above w4a16 on some groups — is no promotion."""
    allowed = [f for f in formats if f not in exclude.get(group, [])] + ["bf16"]
    larger = [f for f in allowed if _bytes(sens, group, f) > _bytes(sens, group, fmt)
              and _kl(sens, group, f) < _kl(sens, group, fmt)]
    return min(larger, key=lambda f: _bytes(sens, group, f))


def banned(sens: SensitivityFile, group: str, fmt: str, formats: list[str], exclude: dict[str, list[str]]) -> list[str]:
    """What promoting ``group`` out of ``fmt`` forbids: that format, every smaller one, and every one the
    sensitivity file says hurts at least as much."""
    cap, kl = _bytes(sens, group, fmt), _kl(sens, group, fmt)
    return sorted(f for f in formats if f not in exclude.get(group, [])
                  and (_bytes(sens, group, f) <= cap or _kl(sens, group, f) >= kl))


def promote(sens: SensitivityFile, assignment: dict[str, str], formats: list[str], exclude: dict[str, list[str]],
            failing: list[Measured], feasible: Callable[[dict[str, list[str]]], bool] | None = None) -> Action:
    """Forbid the current (and every smaller) format of the most damaging groups. ``feasible(exclude)``
    says whether a recipe under the budget still exists; a promotion that leaves none is skipped."""
    quantized = sorted((g for g, f in assignment.items() if f != "bf16"), key=lambda g: -_kl(sens, g, assignment[g]))
    if not quantized:
        return Action(kind="stop", text="the recipe quantizes no group and still fails: nothing to promote (the "
                      "baseline's own noise or the study's margins decide this, not the recipe)")
    now = sum(_kl(sens, g, assignment[g]) for g in quantized)
    ratios = [(m.worse_bound / m.margin, m) for m in failing if m.margin > 0]
    worst, wm = max(ratios, key=lambda t: t[0]) if ratios else (0.0, None)
    share = min(1.0, HEADROOM / worst) if worst > 0 else 1.0
    target = now * share
    new: dict[str, list[str]] = {}
    after = now
    moves, skipped = [], []
    for g in quantized:
        if new and after <= target:
            break
        f = assignment[g]
        up = one_up(sens, g, f, formats, exclude)
        ban = banned(sens, g, f, formats, exclude)
        if feasible is not None and not feasible(merge_exclude(exclude, {**new, g: ban})):
            skipped.append(g)
            continue
        new[g] = ban
        after += _kl(sens, g, up) - _kl(sens, g, f)
        moves.append(f"{g} ({f} → at least {up}; KL {_kl(sens, g, f):.2e} → {_kl(sens, g, up):.2e})")
    if wm is not None and worst > 0:
        why = (f"{wm.metric} {wm.verdict} (Δ {wm.delta:+.4f}, worst end {wm.worse_bound:+.4f} = {worst:.2f}× the margin "
               f"{wm.margin:g}); taking the change as proportional to the summed KL, aim the worst end at "
               f"{HEADROOM:g}× the margin: summed KL {now:.2e} → at most {target:.2e}")
    else:
        why = (f"{', '.join(sorted({m.metric for m in failing}))} {failing[0].verdict if failing else 'failed'} with no "
               "interval beyond the margin to scale by: promote the most damaging group")
    fits = f"; no recipe under the budget would be left promoting {_few(skipped)}" if skipped else ""
    if not new:
        return Action(kind="stop", target_kl=target, text=f"{why}{fits}: no promotion fits the budget")
    if skipped and now - after < (now - target) * MIN_COVER:
        # the groups that carry the predicted damage cannot move; promoting the rest would spend a trial on
        # a recipe that differs from this one by a negligible predicted amount
        return Action(kind="stop", target_kl=target,
                      text=f"{why}{fits}; what fits ({', '.join(new)}) would cut the summed KL by {now - after:.2e} "
                           f"of the {now - target:.2e} needed: no promotion under this budget addresses the damage")
    short = "" if after <= target else f" (the target is out of reach under the budget: {after:.2e} predicted)"
    return Action(kind="promote", promote=new, target_kl=target,
                  text=f"{why}; promoted {len(new)} group(s) by sensitivity KL: {'; '.join(moves)}{short}{fits}")


def _few(names: list[str], k: int = 3) -> str:
    return ", ".join(names[:k]) + (f" and {len(names) - k} more" if len(names) > k else "")


def next_action(sens: SensitivityFile, assignment: dict[str, str], measured: list[Measured], *, formats: list[str],
                exclude: dict[str, list[str]], limit: int | None, available: int | None,
                feasible: Callable[[dict[str, list[str]]], bool] | None = None) -> Action:
    """``limit``: the pages per variant this trial used (None: the whole split); ``available``: pages
    in the study's split."""
    failing = [m for m in measured if m.verdict in FAILING]
    if not failing:
        if not measured:
            return Action(kind="stop", text="the study gave no verdict for this variant")
        return Action(kind="done", text=f"every verdict within noise ({len(measured)})")
    used = max(m.n for m in measured)
    more = [m for m in failing if m.source == "pages" and m.verdict == "inconclusive"
            and m.reason in MORE_PAGES_REASONS and m.pages_needed]
    if len(more) == len(failing):
        need = max(m.pages_needed for m in more)
        asks = "; ".join(f"{m.metric} {m.reason}, ≈{m.pages_needed} pages" for m in more)
        if available is not None and used < need <= available:
            return Action(kind="tighten", limit=need, text=f"inconclusive, and more pages would decide it ({asks}): "
                          f"the split has {available}; the same recipe again on {need} pages")
        have = "" if available is None else f"; the split has {available}"
        prefix = (f"inconclusive; ≈{need} pages would decide it ({asks}{have}) — add pages to the page set to "
                  "decide this recipe; meanwhile ")
        act = promote(sens, assignment, formats, exclude, failing, feasible)
        return act.model_copy(update={"text": prefix + act.text})
    return promote(sens, assignment, formats, exclude, failing, feasible)


def merge_exclude(exclude: dict[str, list[str]], new: dict[str, list[str]]) -> dict[str, list[str]]:
    out = {g: sorted(set(fs)) for g, fs in exclude.items()}
    for g, fs in new.items():
        out[g] = sorted(set(out.get(g, [])) | set(fs))
    return dict(sorted(out.items()))
