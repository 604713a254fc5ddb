"""The verbs of quantgate's command line, one module per verb group: each ``register``s its parsers and
handles its arguments by calling the library (``quantgate.cli`` parses and dispatches)."""
