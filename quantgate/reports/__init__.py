"""Reports: one report model (``schema.summary.Summary``) rendered to summary.json, report.md, report.html
and junit.xml. Imports no other stage (the gate, which makes the verdicts again from the study's files, lives
in ``quantgate.gate.check``; a tune's section registers itself in ``report.sections``)."""

from quantgate.reports import (
    families,  # noqa: F401  (registers the "Metric families" section)
    truthfree,  # noqa: F401  (registers the "Pages without truth" section)
)
from quantgate.reports.build import build_summary, write_reports
from quantgate.schema.summary import Summary, load_summary

__all__ = ["Summary", "build_summary", "load_summary", "write_reports"]
