"""The layout algebra against the PTX ISA's fragment definitions and against itself."""

import numpy as np
import pytest

from smalti.tiling import (
    WGMMA_A_LAYOUTS,
    WGMMA_LAYOUT,
    WGMMA_LAYOUT_TF32_A,
    LayoutError,
    Replicated,
    TiledLayout,
    Tiling,
    WGSplatLayout,
    WGStridedLayout,
    check_layout_fits,
)
from smalti.tiling.layouts import _element_index


@pytest.mark.parametrize("n", range(8, 257, 8))
def test_wgmma_accumulator_matches_the_isa_formula(n):
    index = WGMMA_LAYOUT.element_index((64, n)).reshape(128, n // 2, 2)
    t = np.arange(128)[:, None]
    i = np.arange(n // 2)[None, :]
    row = 16 * (t // 32) + (t % 32) // 4 + 8 * ((i >> 1) & 1)
    col = 2 * (t % 4) + (i & 1) + 8 * (i >> 2)
    np.testing.assert_array_equal(index[..., 0], row)
    np.testing.assert_array_equal(index[..., 1], col)


@pytest.mark.parametrize("k", range(8, 129, 8))
def test_tf32_a_layout_matches_the_isa_k8_a_fragment(k):
    """wgmma .m64nNk8 .tf32 A (PTX ISA figure "register fragment layout for matrix A";
    CUTLASS ALayout_64x8): register i of thread t at row 16w + g + 8*(i & 1), column
    q + 4*(i >> 1), the next K step's four registers 8 columns on."""
    index = WGMMA_LAYOUT_TF32_A.element_index((64, k))[:, :, 0, :]
    t = np.arange(128)[:, None]
    i = np.arange(k // 2)[None, :]
    row = 16 * (t // 32) + (t % 32) // 4 + 8 * (i & 1)
    col = t % 4 + 4 * (i >> 1)
    np.testing.assert_array_equal(index[..., 0], row)
    np.testing.assert_array_equal(index[..., 1], col)


@pytest.mark.parametrize("bits", sorted(WGMMA_A_LAYOUTS))
def test_a_layouts_hold_what_the_simulated_wgmma_reads(bits):
    """Each thread's four .b32 registers of one instruction (64 rows, 32 bytes of K) in the
    A layout of `bits` hold the elements the simulator's wgmma takes from them."""
    from smalti.sim.ops.wgmma import a_fragment_coords

    per = 32 // bits
    k = 32 * 8 // bits
    rows, ks = a_fragment_coords(bits // 8)  # [thread, register, element]
    index = WGMMA_A_LAYOUTS[bits].element_index((64, k)).reshape(128, 4, per, 2)
    np.testing.assert_array_equal(index[..., 0], rows)
    np.testing.assert_array_equal(index[..., 1], ks)


def test_wgmma_layout_covers_a_128_row_tile_exactly_once():
    index = WGMMA_LAYOUT.element_index((128, 64)).reshape(-1, 2)
    flat = index[:, 0] * 64 + index[:, 1]
    assert sorted(flat.tolist()) == list(range(128 * 64))


@pytest.mark.parametrize(("shape", "vec"), [((128, 128), 4), ((256, 64), 8), ((2, 320), 1),
                                            ((3, 128), 1), ((1024,), 8)])
def test_strided_distribution_agrees_with_the_flat_definition(shape, vec):
    layout = WGStridedLayout(vec)
    direct = layout.element_index(shape)
    flat = np.ravel_multi_index(tuple(np.moveaxis(direct, -1, 0)), shape)
    expected = ((np.arange(flat.shape[1])[None, :, None] * 128 + np.arange(128)[:, None, None])
                * vec + np.arange(vec)[None, None, :])
    np.testing.assert_array_equal(flat, expected)
    dist = layout.distribution(shape)
    if dist.separable:
        np.testing.assert_array_equal(_element_index(dist), direct)


def test_strided_layout_reports_when_parts_would_carry():
    assert WGStridedLayout(4).distribution((128, 128)).separable
    assert not WGStridedLayout(1).distribution((2, 320)).separable


def test_tiled_shape_and_entries():
    tiling = Tiling(((64, 8), (8, 8), (2,)))
    assert tiling.tile_shape((128, 64)) == (2, 8, 8, 1, 8, 4, 2)
    with pytest.raises(LayoutError, match="does not divide"):
        tiling.tile_shape((100, 64))


def test_replicated_lanes_hold_the_same_elements():
    layout = TiledLayout(Tiling(((8, 16), (1, 4))), warp_dims=(Replicated(4),),
                         lane_dims=(-4, -3), vector_dim=-1)
    index = layout.element_index((8, 16))
    np.testing.assert_array_equal(index[0:32], index[32:64])


@pytest.mark.parametrize(("layout", "shape", "message"), [
    (WGStridedLayout(4), (3, 5), "multiple of 4"),
    (WGMMA_LAYOUT, (64, 12), "does not divide"),
    (TiledLayout(Tiling(((64, 8), (16, 8), (8, 8), (2,))), (-7,), (-3,), -1), (64, 8),
     "not 32"),
])
def test_layouts_reject_shapes_they_do_not_fit(layout, shape, message):
    with pytest.raises(LayoutError, match=message):
        check_layout_fits(layout, shape)


def test_splat_fits_everything():
    check_layout_fits(WGSplatLayout(), (3, 7))


def test_tiled_layout_rejects_reused_or_positive_dims():
    with pytest.raises(LayoutError, match="twice"):
        TiledLayout(Tiling(((8, 8),)), (-1,), (-1,), -2)
    with pytest.raises(LayoutError, match="negative"):
        TiledLayout(Tiling(((8, 8),)), (0,), (-1,), -2)


def test_strided_element_map_is_exact_for_every_thread():
    """Guards the numpy 2.4 unravel_index defect (wrong indices on (128, 128, 1) inputs)."""
    index = WGStridedLayout(1).element_index((128, 128))
    t = np.arange(128)[:, None]
    r = np.arange(128)[None, :]
    np.testing.assert_array_equal(index[:, :, 0, 0], r + 0 * t)
    np.testing.assert_array_equal(index[:, :, 0, 1], t + 0 * r)
