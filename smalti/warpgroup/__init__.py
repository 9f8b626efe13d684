"""The smalti-warpgroup pass: warp-specialised regions, per-role register budgets, and the
check that warpgroup-collective ops are reached by whole warpgroups."""

from smalti.warpgroup.pass_ import REGISTER_BUDGETS_ATTR, check_warpgroups

__all__ = ["REGISTER_BUDGETS_ATTR", "check_warpgroups"]
