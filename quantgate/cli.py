"""quantgate's command line. Thin on purpose: parse, call the library, turn typed errors into one
line and an exit code. Heavy imports (torch, transformers, llmcompressor) happen inside commands."""

from __future__ import annotations

import argparse
import os
import sys

from quantgate import __version__
from quantgate.commands import (
    attest,
    doctor,
    init,
    lmeval,
    pages,
    quantize,
    scoring,
    sensitivity,
    serve,
    speed,
    study,
    tune,
    warm,
)
from quantgate.commands._fields import describe_verbs, emit_deprecations
from quantgate.errors import QuantgateError, UsageError, exit_code_table

EPILOG = """\
the flow:
  pages synth|import  →  quantize  →  serve  →  score  →  compare  →  report / gate
  or all at once from one YAML:  quantgate study STUDY.yaml

examples:
  quantgate init --model ./model --pages ./pdfs --truth ./truth -o study.yaml   # a commented study, then:
  quantgate study study.yaml
  quantgate pages import ./pdfs -o pages --truth ./truth        # your pages, split 80/20
  quantgate plan ./model --recipe mixed                          # which layer gets which format
  quantgate quantize ./model --recipe fp8-dynamic -o ./model-fp8
  quantgate serve ./model-fp8 --pages pages --concurrency 1,8 -o runs/fp8
  quantgate score --pages pages --predictions runs/fp8 -o runs/fp8/scores.jsonl
  quantgate compare runs/bf16/scores.jsonl runs/fp8/scores.jsonl --metric ned --noise runs/bf16-c8/scores.jsonl

exit codes (every verb):
""" + exit_code_table() + "\n"


class _Parser(argparse.ArgumentParser):
    def parse_known_args(self, args=None, namespace=None):
        ns, rest = super().parse_known_args(args, namespace)
        emit_deprecations(ns)  # after the whole line parsed: a refused one shows only its error
        return ns, rest

    def error(self, message: str):  # one line, no usage dump; argparse's own code (2) is the inconclusive verdict's
        self.exit(UsageError.exit_code, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="quantgate", description="Is a quantized document-parsing VLM as good as BF16 on your "
                "pages, and how much faster? Quantize, serve, score and gate — with statistics you can re-check.",
                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"quantgate {__version__}")
    sub = p.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    for verb in (init, study, attest, pages, quantize, sensitivity, tune, serve, speed, scoring, lmeval, doctor, warm):
        verb.register(sub)  # handlers import the library lazily: `quantgate --help` starts in well under a second
    describe_verbs(p)
    return p


def _one_line_deprecations() -> None:
    """An old flag or study key still read (``errors.DeprecatedSpelling``) is said as one ``warning:`` line, not as
    Python's warning with a source line; other warnings are shown as before."""
    import warnings

    from quantgate.errors import DeprecatedSpelling

    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, DeprecatedSpelling):
            print(f"quantgate: warning: {message}", file=sys.stderr)
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show


def main(argv: list[str] | None = None) -> int:
    # The process-wide settings the library leaves alone, set here for the command line: llmcompressor logs every
    # lifecycle step at INFO (keep its warnings; set the variable to override), and the tune's report section
    # joins every report this process writes (quantgate.reports.sections).
    os.environ.setdefault("LLM_COMPRESSOR_LOG_LEVEL", "WARNING")
    import quantgate.speed.report  # noqa: F401
    import quantgate.tune.report  # noqa: F401
    _one_line_deprecations()
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0 if args.verb is None else UsageError.exit_code  # a verb group without its verb (`pages`)
    try:
        rc = args.func(args)
        return int(rc or 0)
    except QuantgateError as e:
        print(f"quantgate {args.verb}: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print(f"quantgate {args.verb}: interrupted; what was finished is kept — rerun the same command to resume",
              file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as e:  # a full disk in a write no stage wraps (a library's own file): one line, not a traceback
        from quantgate.io.fileio import disk_full, disk_full_error

        if not disk_full(e):
            raise
        err = disk_full_error(os.path.dirname(os.path.abspath(e.filename)) if e.filename else os.getcwd(), e)
        print(f"quantgate {args.verb}: error: {err}", file=sys.stderr)
        return err.exit_code

