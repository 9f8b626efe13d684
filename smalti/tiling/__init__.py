"""The layout algebra: tilings, register layouts, canonical layouts, relayout costs and SMEM
transforms."""

from smalti.tiling.algebra import (
    broadcast_layout,
    reduce_layout,
    same_elements,
    transpose_layout,
)
from smalti.tiling.canonical import (
    BROADCAST_TARGETS,
    CANONICAL_LAYOUTS,
    TMEM_LAYOUT,
    TMEM_LAYOUT_16X256B,
    TMEM_LAYOUT_M64,
    WGMMA_A_LAYOUTS,
    WGMMA_COL_LAYOUT,
    WGMMA_LAYOUT_8BIT,
    WGMMA_LAYOUT_16BIT,
    WGMMA_LAYOUT_TF32_A,
    WGMMA_LAYOUT_UPCAST_2X,
    WGMMA_LAYOUT_UPCAST_4X,
    WGMMA_ROW_LAYOUT,
    WGMMA_TRANSPOSED_LAYOUT,
)
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
from smalti.tiling.relayout import RelayoutCost, lowers_without_smem, relayout_cost
from smalti.tiling.smem import (
    SwizzleTransform,
    TileTransform,
    Transform,
    TransposeTransform,
    physical_address,
    physical_shape,
    tma_compatible,
    tma_incompatibility,
    wgmma_operand_transforms,
)
from smalti.tiling.tmem import (
    TMEM_COLUMNS,
    TMEM_LANES,
    TMEM_SHAPES,
    TmemAccess,
    is_tmem_layout,
    tmem_accesses,
    tmem_layout,
)

__all__ = [
    "BROADCAST_TARGETS", "CANONICAL_LAYOUTS", "TMEM_COLUMNS", "TMEM_LANES", "TMEM_LAYOUT",
    "TMEM_LAYOUT_16X256B", "TMEM_LAYOUT_M64", "TMEM_SHAPES", "WARPGROUP_SIZE", "WARP_SIZE",
    "WGMMA_A_LAYOUTS",
    "WGMMA_COL_LAYOUT", "WGMMA_LAYOUT", "WGMMA_LAYOUT_8BIT", "WGMMA_LAYOUT_16BIT",
    "WGMMA_LAYOUT_TF32_A", "WGMMA_LAYOUT_UPCAST_2X",
    "WGMMA_LAYOUT_UPCAST_4X", "WGMMA_ROW_LAYOUT", "WGMMA_TRANSPOSED_LAYOUT", "Distribution",
    "Layout", "LayoutError", "RelayoutCost", "Replicated", "SwizzleTransform", "ThreadTerm",
    "TileTransform", "TiledLayout", "Tiling", "TmemAccess", "Transform", "TransposeTransform",
    "WGSplatLayout", "WGStridedLayout", "broadcast_layout", "check_layout_fits",
    "is_tmem_layout", "lowers_without_smem", "physical_address", "physical_shape",
    "reduce_layout", "relayout_cost", "same_elements", "tma_compatible", "tma_incompatibility",
    "tmem_accesses", "tmem_layout", "transpose_layout", "wgmma_operand_transforms",
]
