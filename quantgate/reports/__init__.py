"""Reports: one report model (``schema.Summary``) rendered to summary.json, report.md, report.html
and junit.xml, and the gate. Imports no other stage."""

from quantgate.reports.gate import gate
from quantgate.reports.model import build_report, build_summary, rehash, write_reports
from quantgate.reports.schema import Summary, load_summary

__all__ = ["Summary", "build_report", "build_summary", "gate", "load_summary", "rehash", "write_reports"]
