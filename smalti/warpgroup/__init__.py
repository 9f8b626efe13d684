"""Warpgroup passes (warp specialisation, register budgets): not built yet."""
