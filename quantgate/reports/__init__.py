"""Reports: one report model rendered to summary.json, report.md, report.html and junit.xml, and
the gate. Imports no other stage."""

from quantgate.reports.gate import gate
from quantgate.reports.model import build_report, load_summary, rehash, write_reports

__all__ = ["build_report", "gate", "load_summary", "rehash", "write_reports"]
