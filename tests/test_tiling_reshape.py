"""Tiled layouts across reshapes of unit dims (smalti/tiling/reshape.py): every element stays
in the same thread, register and slot, checked on the element maps, and reshapes that would
move elements are refused."""

from __future__ import annotations

import numpy as np
import pytest

from smalti.tiling import (
    WGMMA_COL_LAYOUT,
    WGMMA_LAYOUT,
    WGMMA_ROW_LAYOUT,
    Replicated,
    TiledLayout,
    Tiling,
)
from smalti.tiling.reshape import reshape_tiled


def _same(a: TiledLayout, shape, b: TiledLayout, new_shape) -> bool:
    ia, ib = a.element_index(shape), b.element_index(new_shape)
    keep_a = [d for d, n in enumerate(shape) if n != 1]
    keep_b = [d for d, n in enumerate(new_shape) if n != 1]
    return np.array_equal(ia[..., keep_a], ib[..., keep_b])


@pytest.mark.parametrize(("layout", "shape", "new_shape"), [
    (WGMMA_ROW_LAYOUT, (64,), (64, 1)),
    (WGMMA_ROW_LAYOUT, (128,), (1, 128)),
    (WGMMA_ROW_LAYOUT, (64,), (1, 64, 1)),
    (WGMMA_COL_LAYOUT, (128,), (1, 128)),
    (WGMMA_COL_LAYOUT, (256,), (256, 1)),
    (WGMMA_LAYOUT, (64, 128), (64, 1, 128)),
    (WGMMA_LAYOUT, (128, 64), (1, 128, 64)),
    (WGMMA_LAYOUT, (64, 128), (64, 128, 1)),
])
def test_unit_dims_come_and_go_without_moving_elements(layout, shape, new_shape):
    grown = reshape_tiled(layout, shape, new_shape)
    assert grown is not None
    assert _same(layout, shape, grown, new_shape)
    back = reshape_tiled(grown, new_shape, shape)
    assert back is not None
    assert back.element_index(shape).tolist() == layout.element_index(shape).tolist()


def test_the_identity_is_the_layout_itself():
    assert reshape_tiled(WGMMA_LAYOUT, (64, 128), (64, 128)) is WGMMA_LAYOUT


@pytest.mark.parametrize(("layout", "shape", "new_shape"), [
    (WGMMA_LAYOUT, (64, 128), (128, 64)),  # not a reshape of unit dims
    (WGMMA_LAYOUT, (64, 128), (8192,)),
    (WGMMA_ROW_LAYOUT, (64,), (8, 8)),
])
def test_other_reshapes_are_refused(layout, shape, new_shape):
    assert reshape_tiled(layout, shape, new_shape) is None


def test_a_tile_that_splits_a_unit_dim_cannot_drop_it():
    """A (2, 64) layout whose tiling splits dim 0 into 1 x 2 ... has no unit dim to drop;
    one over (1, 128) whose tile holds the unit dim drops it."""
    layout = TiledLayout(Tiling(((1, 128), (1, 32), (1, 1))), warp_dims=(-5,),
                         lane_dims=(-3,), vector_dim=-1)
    squeezed = reshape_tiled(layout, (1, 512), (512,))
    assert squeezed is not None and _same(layout, (1, 512), squeezed, (512,))
    assert squeezed.tiling.tiles == ((128,), (32,), (1,))
    replicated = TiledLayout(Tiling(((64,), (16,), (8,), (1,))), warp_dims=(-4,),
                             lane_dims=(-2, Replicated(4)), vector_dim=-1)
    assert reshape_tiled(replicated, (64,), (64, 1)) is not None
