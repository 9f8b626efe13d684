"""Lowering of laid-out smalti IR to PTX, through per-op rules keyed by op class."""

from smalti.lowering.lower import LoweredModule, lower_kernel, lower_module
from smalti.lowering.registry import RULES, lowering_rule

__all__ = ["RULES", "LoweredModule", "lower_kernel", "lower_module", "lowering_rule"]
