"""Quantize: classify modules, plan formats, calibrate on page images, run llmcompressor, verify."""

from quantgate.quantize.plan import Plan, format_plan_table, make_plan
from quantgate.quantize.run import MANIFEST, quantize, read_manifest

__all__ = ["MANIFEST", "Plan", "format_plan_table", "make_plan", "quantize", "read_manifest"]
