"""Canonical layouts against the PTX ISA, element maps against their inverses, and the
reduce / broadcast / transpose algebra against brute force over the element maps."""

import itertools

import numpy as np
import pytest

from smalti.tiling import (
    WGMMA_COL_LAYOUT,
    WGMMA_LAYOUT,
    WGMMA_LAYOUT_8BIT,
    WGMMA_LAYOUT_16BIT,
    WGMMA_LAYOUT_UPCAST_2X,
    WGMMA_LAYOUT_UPCAST_4X,
    WGMMA_ROW_LAYOUT,
    WGMMA_TRANSPOSED_LAYOUT,
    LayoutError,
    Replicated,
    TiledLayout,
    Tiling,
    WGSplatLayout,
    WGStridedLayout,
    broadcast_layout,
    reduce_layout,
    same_elements,
    transpose_layout,
)

T = np.arange(128)
WARP, G, Q = T // 32, (T % 32) // 4, T % 4

GENERAL = TiledLayout(Tiling(((8, 16), (1, 4))), (Replicated(4),), (-4, -3), -1)
THREE_D = TiledLayout(Tiling(((2, 64, 8), (16, 8), (8, 8), (2,))), (-7,), (-3, -2), -1)

MAPPED = [
    (WGMMA_LAYOUT, (128, 64)), (WGMMA_LAYOUT, (64, 8)), (WGMMA_ROW_LAYOUT, (128,)),
    (WGMMA_COL_LAYOUT, (48,)), (WGMMA_TRANSPOSED_LAYOUT, (24, 128)),
    (WGMMA_LAYOUT_8BIT, (64, 64)), (WGMMA_LAYOUT_UPCAST_2X, (64, 32)),
    (WGMMA_LAYOUT_UPCAST_4X, (128, 64)), (GENERAL, (8, 32)), (THREE_D, (4, 64, 16)),
    (WGStridedLayout(4), (4, 256)), (WGStridedLayout(1), (3, 128)),
]


def held(layout, shape, thread):
    """The set of elements (index tuples) one thread holds."""
    return set(map(tuple, layout.element_index(shape)[thread].reshape(-1, len(shape)).tolist()))


@pytest.mark.parametrize(("layout", "shape"), MAPPED)
def test_owners_invert_the_element_map(layout, shape):
    index = layout.element_index(shape)
    owners = layout.owners(shape)
    assert owners.shape[:-2] == shape and owners.shape[-1] == 3
    for element in np.ndindex(*shape):
        for t, r, s in owners[element]:
            assert tuple(index[t, r, s]) == element
    slots = {tuple(o) for o in owners.reshape(-1, 3).tolist()}
    assert len(slots) == owners.size // 3 == index.size // len(shape)


def test_replicated_elements_have_one_owner_per_copy():
    owners = WGMMA_ROW_LAYOUT.owners((64,))
    assert owners.shape == (64, 4, 3)
    np.testing.assert_array_equal(owners[5, :, 0], [20, 21, 22, 23])  # row 5: quad 5, warp 0
    assert WGMMA_COL_LAYOUT.owners((16,)).shape == (16, 32, 3)


def test_splat_is_owned_everywhere():
    owners = WGSplatLayout().owners((2, 3))
    assert owners.shape == (2, 3, 128, 3)
    np.testing.assert_array_equal(owners[1, 2, :, 0], np.arange(128))
    assert not owners[..., 1:].any()
    assert WGSplatLayout().element_index((2, 3)).shape == (128, 1, 1, 2)


def test_sixteen_bit_values_share_the_wgmma_layout():
    assert WGMMA_LAYOUT_16BIT == WGMMA_LAYOUT
    assert WGMMA_LAYOUT_16BIT.distribution((64, 64)).vector_length == 2


@pytest.mark.parametrize("n", range(32, 257, 32))
def test_8bit_layout_matches_the_isa_k32_a_fragment(n):
    index = WGMMA_LAYOUT_8BIT.element_index((64, n)).reshape(128, n // 2, 2)
    i = np.arange(n // 2)[None, :]
    row = 16 * WARP[:, None] + G[:, None] + 8 * ((i >> 2) & 1)
    col = 4 * Q[:, None] + (i & 3) + 16 * (i >> 3)
    np.testing.assert_array_equal(index[..., 0], row)
    np.testing.assert_array_equal(index[..., 1], col)


@pytest.mark.parametrize(("layout", "width", "columns"), [
    (WGMMA_LAYOUT_UPCAST_2X, 16, lambda q: 8 * (q & 1) + 4 * (q >> 1) + np.arange(4)),
    (WGMMA_LAYOUT_UPCAST_4X, 32, lambda q: 8 * q + np.arange(8)),
])
def test_upcast_layouts_hold_the_documented_columns(layout, width, columns):
    index = layout.element_index((64, 2 * width))
    for t in range(128):
        rows = {16 * (t // 32) + (t % 32) // 4 + h for h in (0, 8)}
        wanted = {(r, c + width * j) for r in rows for c in columns(t % 4) for j in range(2)}
        assert held(layout, (64, 2 * width), t) == wanted
        assert np.all(np.diff(index[t, :, :, 1], axis=-1) == 1)  # vectors run along columns


@pytest.mark.parametrize("n", range(8, 257, 8))
def test_row_and_column_layouts_match_the_isa(n):
    rows = WGMMA_ROW_LAYOUT.element_index((64,))[..., 0]
    np.testing.assert_array_equal(rows[:, :, 0],
                                  16 * WARP[:, None] + G[:, None] + 8 * np.arange(2)[None, :])
    cols = WGMMA_COL_LAYOUT.element_index((n,))[..., 0].reshape(128, -1)
    i = np.arange(n // 4)[None, :]
    np.testing.assert_array_equal(cols, 2 * Q[:, None] + (i & 1) + 8 * (i >> 1))


@pytest.mark.parametrize("n", range(8, 257, 8))
@pytest.mark.parametrize(("axis", "named"), [(1, WGMMA_ROW_LAYOUT), (0, WGMMA_COL_LAYOUT)])
def test_wgmma_reductions_are_the_named_layouts(n, axis, named):
    assert reduce_layout(WGMMA_LAYOUT, (64, n), (axis,)) == named


def brute_force_reduction_holds(layout, shape, axes, reduced):
    """Each thread holds exactly the projections of the elements it held."""
    kept = [d for d in range(len(shape)) if d not in axes]
    small = tuple(shape[d] for d in kept)
    reduced.owners(small)  # a well-formed layout: every element held equally often
    for t in range(128):
        projected = {tuple(e[d] for d in kept) for e in held(layout, shape, t)}
        assert held(reduced, small, t) == projected, t


@pytest.mark.parametrize(("layout", "shape", "axes"), [
    (WGMMA_LAYOUT, (64, 8), (1,)), (WGMMA_LAYOUT, (128, 256), (1,)),
    (WGMMA_LAYOUT, (64, 24), (0,)), (WGMMA_LAYOUT, (192, 64), (0,)),
    (WGMMA_LAYOUT_8BIT, (64, 64), (1,)), (WGMMA_LAYOUT_8BIT, (64, 64), (0,)),
    (WGMMA_TRANSPOSED_LAYOUT, (16, 64), (0,)), (WGMMA_TRANSPOSED_LAYOUT, (16, 64), (1,)),
    (WGMMA_LAYOUT_UPCAST_2X, (64, 32), (0,)), (GENERAL, (8, 32), (0,)), (GENERAL, (8, 32), (1,)),
    (THREE_D, (2, 64, 8), (0,)), (THREE_D, (2, 64, 8), (1,)), (THREE_D, (4, 64, 16), (2,)),
    (THREE_D, (2, 64, 8), (0, 2)),
])
def test_reduction_agrees_with_brute_force(layout, shape, axes):
    reduced = reduce_layout(layout, shape, axes)
    assert isinstance(reduced, TiledLayout)
    brute_force_reduction_holds(layout, shape, axes, reduced)


def test_reducing_every_dim_leaves_a_splat():
    assert reduce_layout(WGMMA_LAYOUT, (64, 64), (0, 1)) == WGSplatLayout()
    assert reduce_layout(WGStridedLayout(4), (512,), (0,)) == WGSplatLayout()
    assert reduce_layout(WGMMA_LAYOUT, (64, 64), ()) == WGMMA_LAYOUT


@pytest.mark.parametrize(("shape", "axes", "expected"), [
    ((4, 512), (0,), WGStridedLayout(4)),
    ((2, 4, 512), (0, 1), WGStridedLayout(4)),
    ((4, 512), (1,), None),
    ((8, 256), (0,), None),  # a row of 256 is not a multiple of 128 * 4
])
def test_strided_reduction(shape, axes, expected):
    assert reduce_layout(WGStridedLayout(4), shape, axes) == expected
    if expected is not None:
        brute_force_reduction_holds(WGStridedLayout(4), shape, axes, expected)


def test_splat_survives_every_shape_operation():
    splat = WGSplatLayout()
    assert reduce_layout(splat, (4, 4), (1,)) == splat
    assert broadcast_layout(splat, (4,), (3, 4)) == splat
    assert transpose_layout(splat, (4, 3), (1, 0)) == splat


def test_layouts_that_do_not_fit_give_none_and_bad_axes_raise():
    assert reduce_layout(WGMMA_LAYOUT, (64, 12), (1,)) is None
    assert transpose_layout(WGMMA_LAYOUT, (64, 12), (1, 0)) is None
    with pytest.raises(LayoutError, match="axes"):
        reduce_layout(WGMMA_LAYOUT, (64, 64), (2,))
    with pytest.raises(LayoutError, match="axes"):
        reduce_layout(WGMMA_LAYOUT, (64, 64), (1, -1))


@pytest.mark.parametrize("n", range(8, 257, 8))
def test_transposed_layout_holds_what_the_wgmma_layout_held(n):
    assert transpose_layout(WGMMA_LAYOUT, (64, n), (1, 0)) == WGMMA_TRANSPOSED_LAYOUT
    np.testing.assert_array_equal(WGMMA_TRANSPOSED_LAYOUT.element_index((n, 64)),
                                  WGMMA_LAYOUT.element_index((64, n))[..., ::-1])


@pytest.mark.parametrize(("layout", "shape"), [
    (WGMMA_LAYOUT, (128, 32)), (WGMMA_LAYOUT_8BIT, (64, 32)), (GENERAL, (8, 16)),
    (WGMMA_ROW_LAYOUT, (64,)), (WGMMA_LAYOUT_UPCAST_2X, (64, 48)),
])
def test_transpose_twice_is_the_identity(layout, shape):
    once = transpose_layout(layout, shape, tuple(reversed(range(len(shape)))))
    assert once is not None
    twice = transpose_layout(once, shape[::-1], tuple(reversed(range(len(shape)))))
    assert same_elements(twice, layout, shape)


@pytest.mark.parametrize("perm", list(itertools.permutations(range(3))))
def test_three_d_transpose_agrees_with_brute_force(perm):
    shape = (2, 64, 16)
    result = transpose_layout(THREE_D, shape, perm)
    assert result is not None
    new_shape = tuple(shape[p] for p in perm)
    np.testing.assert_array_equal(result.element_index(new_shape),
                                  THREE_D.element_index(shape)[..., list(perm)])


def test_strided_transposes_only_trivially():
    assert transpose_layout(WGStridedLayout(2), (2, 128), (0, 1)) == WGStridedLayout(2)
    assert transpose_layout(WGStridedLayout(2), (2, 128), (1, 0)) is None


@pytest.mark.parametrize("n", [8, 64, 256])
def test_row_and_column_vectors_broadcast_back_to_the_accumulator(n):
    assert broadcast_layout(WGMMA_ROW_LAYOUT, (64,), (64, n), (1,)) == WGMMA_LAYOUT
    assert broadcast_layout(WGMMA_COL_LAYOUT, (n,), (64, n)) == WGMMA_LAYOUT
    assert broadcast_layout(WGMMA_COL_LAYOUT, (n,), (64, n), (0,)) == WGMMA_LAYOUT


@pytest.mark.parametrize(("layout", "shape", "new_shape", "axes"), [
    (WGMMA_ROW_LAYOUT, (64,), (64, 4), (1,)),  # WGMMA does not fit 4 columns: registers
    (GENERAL, (8, 16), (3, 8, 16), (0,)),
    (GENERAL, (8, 16), (8, 5, 16), (1,)),
    (GENERAL, (8, 16), (8, 16, 2), (2,)),
    (THREE_D, (2, 64, 8), (2, 64, 3, 8), (2,)),
])
def test_broadcast_reduces_back_to_its_operand(layout, shape, new_shape, axes):
    result = broadcast_layout(layout, shape, new_shape, axes)
    assert result is not None
    assert same_elements(reduce_layout(result, new_shape, axes), layout, shape)
    brute_force_reduction_holds(result, new_shape, axes, layout)


def test_size_one_dims_are_stretched():
    column = broadcast_layout(WGMMA_ROW_LAYOUT, (64,), (64, 1), (1,))
    assert column is not None
    assert broadcast_layout(column, (64, 1), (64, 32)) == WGMMA_LAYOUT


def test_strided_broadcasts_along_leading_dims_only():
    assert broadcast_layout(WGStridedLayout(2), (256,), (4, 256)) == WGStridedLayout(2)
    assert broadcast_layout(WGStridedLayout(2), (256,), (256, 4), (1,)) is None
    assert broadcast_layout(WGStridedLayout(2), (256,), (4,)) is None
