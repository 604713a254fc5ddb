"""A candidate served in another parallel layout than the baseline (TP/DP) is judged beside a
noise floor measured in that layout, or its verdict says the floor was not measured there.

The noise floor is how far BF16 moves when served again (``judge.compare``: e = baseline' − baseline). For a
candidate at TP=2 against a baseline at TP=1, what moves BF16 in the comparison is the layout, so the floor
that belongs beside it is BF16 served in the candidate's layout against the baseline: a **layout twin** — a
variant with the baseline's recipe, server flags and environment, in the candidate's layout. When the study
has one (a fixed design: a sequential twin stops early and covers fewer pages), its scores at the verdict
level are the candidate's noise run and ``noise_layout`` is ``measured``; otherwise the baseline's own noise
run is used and ``noise_layout`` is ``not_measured``, with a sentence in the message saying so. A candidate in
the baseline's layout is unchanged (``noise_layout`` absent)."""

from __future__ import annotations

from quantgate.schema.placement import ParallelSettings


def layout_of(st, v) -> ParallelSettings:
    from quantgate.study.placement import parallel_of, variant_backend

    return parallel_of(variant_backend(st.backend, v))


def layout_twin(st, v):
    """The study's variant that serves the baseline's recipe in ``v``'s layout, or None."""
    by_name = {w.name: w for w in st.variants}
    base = by_name[st.baseline]
    want = layout_of(st, v)
    if want == layout_of(st, base) or st.sequential is not None:
        return None
    return next((w for w in st.variants if w.name not in (v.name, base.name) and w.recipe == base.recipe
                 and w.server_args == base.server_args and w.server_env == base.server_env
                 and layout_of(st, w) == want), None)


def layout_note(st, v, twin) -> tuple[str | None, str | None]:
    """(``noise_layout``, the sentence added to the verdict's message by ``VariantVerdict.marked``), or (None, None) in
    the baseline's layout."""
    base = next(w for w in st.variants if w.name == st.baseline)
    lb, lc = layout_of(st, base), layout_of(st, v)
    if lb == lc:
        return None, None
    if twin is not None:
        return "measured", (f"Noise floor measured in this variant's layout ({lc.label()}): {twin.name} "
                            f"({base.recipe} at {lc.label()}) against {base.name}.")
    parts = ", ".join(f"{k}: {val}" for k, val in lc.model_dump().items() if val != 1) or "tensor_parallel_size: 1"
    return "not_measured", (f"The noise floor was measured with {base.name} at {lb.label()}, not in this variant's "
                            f"layout ({lc.label()}); to measure it there add a variant {{recipe: {base.recipe}, "
                            f"backend: {{{parts}}}}}" + (" to a fixed (not sequential) study." if st.sequential
                                                          else "."))
