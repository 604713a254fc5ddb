"""Quantize: classify modules, plan formats, calibrate on page images, run llmcompressor, verify."""

from quantgate.quantize.build import MANIFEST, quantize, read_manifest
from quantgate.quantize.plan import Plan, format_plan_table, make_plan

__all__ = ["MANIFEST", "Plan", "format_plan_table", "make_plan", "quantize", "read_manifest"]
