"""The layout algebra: tilings, register layouts and (later) SMEM transforms."""

from smalti.tiling.layouts import (
    WARP_SIZE,
    WARPGROUP_SIZE,
    WGMMA_LAYOUT,
    Distribution,
    Layout,
    LayoutError,
    Replicated,
    ThreadTerm,
    TiledLayout,
    Tiling,
    WGSplatLayout,
    WGStridedLayout,
    check_layout_fits,
)

__all__ = [
    "WARPGROUP_SIZE", "WARP_SIZE", "WGMMA_LAYOUT", "Distribution", "Layout", "LayoutError",
    "Replicated", "ThreadTerm", "TiledLayout", "Tiling", "WGSplatLayout", "WGStridedLayout",
    "check_layout_fits",
]
