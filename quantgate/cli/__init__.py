"""quantgate's command line: ``main`` parses, calls the library, and turns typed errors into one line and
an exit code; one module per verb group."""

from quantgate.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
