"""CLI verbs, one module per stage. Each ``register`` adds its subparsers; handlers import the
library lazily so ``quantgate --help`` starts in well under a second."""

from quantgate.commands import attest, doctor, init, lmeval, pages, quantize, scoring, sensitivity, serve, study, tune


def register(sub) -> None:
    for mod in (init, study, attest, pages, quantize, sensitivity, tune, serve, scoring, lmeval, doctor):
        mod.register(sub)
