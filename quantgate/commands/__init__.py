"""CLI verbs, one module per stage. Each ``register`` adds its subparsers; handlers import the
library lazily so ``quantgate --help`` starts in well under a second."""

from quantgate.commands import doctor, lmeval, pages, quantize, scoring, sensitivity, serve, study


def register(sub) -> None:
    for mod in (study, pages, quantize, sensitivity, serve, scoring, lmeval, doctor):
        mod.register(sub)
