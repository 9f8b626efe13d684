"""Relayout costs against hand counts and against a plain-Python reading of the maps."""

import math
from collections import defaultdict

import pytest

from smalti.tiling import (
    WGMMA_COL_LAYOUT,
    WGMMA_LAYOUT,
    WGMMA_LAYOUT_8BIT,
    WGMMA_LAYOUT_UPCAST_2X,
    WGMMA_LAYOUT_UPCAST_4X,
    WGMMA_ROW_LAYOUT,
    WGMMA_TRANSPOSED_LAYOUT,
    LayoutError,
    RelayoutCost,
    Replicated,
    TiledLayout,
    Tiling,
    WGSplatLayout,
    WGStridedLayout,
    broadcast_layout,
    lowers_without_smem,
    relayout_cost,
)
from smalti.tiling.smem_relayout import plan_smem_relayout

# Each thread of a quad holds both of its rows entirely (what a row vector broadcasts to
# when the WGMMA layout does not fit): 64 f32 registers per row.
ROWS_IN_REGISTERS = TiledLayout(Tiling(((64, 64), (16, 64), (8, 64), (1,))), (-7,),
                                (-3, Replicated(4)), -1)


def reference_kind(src, dst, shape):
    """The tier, read off the element maps with dictionaries (no numpy tricks)."""
    holders = defaultdict(set)
    for t, registers in enumerate(src.element_index(shape).tolist()):
        for vector in registers:
            for element in vector:
                holders[tuple(element)].add(t)
    local = warp = True
    for t, registers in enumerate(dst.element_index(shape).tolist()):
        for vector in registers:
            for element in vector:
                owners = holders[tuple(element)]
                local &= t in owners
                warp &= any(o // 32 == t // 32 for o in owners)
    return "registers" if local else "shuffles" if warp else "smem"


PAIRS = [
    (WGMMA_LAYOUT, WGMMA_TRANSPOSED_LAYOUT, (64, 64)),
    (WGMMA_LAYOUT, WGStridedLayout(2), (64, 64)),
    (WGStridedLayout(8), WGStridedLayout(4), (128, 128)),
    (WGMMA_LAYOUT_UPCAST_2X, WGMMA_LAYOUT, (64, 32)),
    (WGMMA_LAYOUT_UPCAST_4X, WGMMA_LAYOUT_UPCAST_2X, (64, 64)),
    (WGMMA_LAYOUT_8BIT, WGMMA_LAYOUT, (64, 64)),
    (WGMMA_LAYOUT, ROWS_IN_REGISTERS, (64, 64)),
    (ROWS_IN_REGISTERS, WGMMA_LAYOUT, (64, 64)),
    (WGMMA_ROW_LAYOUT, TiledLayout(Tiling(((64,), (16,), (8,), (1,))), (-4,),
                                   (Replicated(4), -2), -1), (64,)),
]


@pytest.mark.parametrize(("src", "dst", "shape"), PAIRS)
def test_tier_agrees_with_the_reference(src, dst, shape):
    cost = relayout_cost(src, dst, shape, 32)
    expected = reference_kind(src, dst, shape)
    assert cost.kind == expected or (cost.kind == "none" and expected == "registers")
    assert lowers_without_smem(src, dst, shape, 32) == (expected != "smem")


@pytest.mark.parametrize("layout", [WGMMA_LAYOUT, WGStridedLayout(4), WGMMA_ROW_LAYOUT])
def test_same_layout_costs_nothing(layout):
    shape = (64,) if layout == WGMMA_ROW_LAYOUT else (128, 64)
    assert relayout_cost(layout, layout, shape, 16) == RelayoutCost("none")


@pytest.mark.parametrize(("bitwidth", "registers"), [(32, 32), (16, 16), (8, 16), (64, 64)])
def test_splat_to_wgmma_fills_every_register(bitwidth, registers):
    # (64, 64) in WGMMA: 32 elements per thread, in 16 vectors of 2.
    assert relayout_cost(WGSplatLayout(), WGMMA_LAYOUT, (64, 64), bitwidth) == RelayoutCost(
        "registers", registers_moved=registers)


def test_splat_to_strided_and_nothing_to_splat():
    assert relayout_cost(WGSplatLayout(), WGStridedLayout(8), (1024,), 16).registers_moved == 4
    assert relayout_cost(WGSplatLayout(), WGSplatLayout(), (4,), 32).kind == "none"
    with pytest.raises(LayoutError, match="splat"):
        relayout_cost(WGMMA_LAYOUT, WGSplatLayout(), (64, 8), 32)


def test_strided_vec8_to_vec4_crosses_warps():
    # Thread 32 needs flat elements 128..131, which vec 8 gives to thread 16 (warp 0).
    cost = relayout_cost(WGStridedLayout(8), WGStridedLayout(4), (64, 128), 16)
    plan = plan_smem_relayout(WGStridedLayout(8), WGStridedLayout(4), (64, 128), 16)
    assert cost == RelayoutCost("smem", smem_bytes=64 * 128 * 2, smem_accesses=plan.accesses,
                                smem_rounds=1)


def test_transposing_the_wgmma_layout_in_place_needs_smem():
    cost = relayout_cost(WGMMA_LAYOUT, WGMMA_TRANSPOSED_LAYOUT, (64, 64), 32)
    assert (cost.kind, cost.smem_bytes, cost.smem_rounds) == ("smem", 64 * 64 * 4, 1)
    assert cost.smem_accesses == plan_smem_relayout(WGMMA_LAYOUT, WGMMA_TRANSPOSED_LAYOUT,
                                                    (64, 64), 32).accesses
    assert not lowers_without_smem(WGMMA_LAYOUT, WGStridedLayout(2), (64, 64), 32)


def test_row_vector_broadcast_in_registers_then_to_wgmma():
    assert broadcast_layout(WGMMA_ROW_LAYOUT, (64,), (64, 4), (1,)) is not None
    # Every WGMMA element is already in its thread: f32 needs no code at all, bf16 packs.
    assert relayout_cost(ROWS_IN_REGISTERS, WGMMA_LAYOUT, (64, 64), 32).kind == "none"
    assert relayout_cost(ROWS_IN_REGISTERS, WGMMA_LAYOUT, (64, 64), 16) == RelayoutCost(
        "registers", registers_moved=16)


def test_gathering_rows_from_the_quad_takes_shuffles():
    # Each thread needs the 96 elements of its rows held by the 3 other lanes of its quad,
    # one per (source register, lane): 32 registers x 3 lanes.
    assert relayout_cost(WGMMA_LAYOUT, ROWS_IN_REGISTERS, (64, 64), 32) == RelayoutCost(
        "shuffles", registers_moved=96, shuffles=96)


@pytest.mark.parametrize(("src", "dst", "bitwidth", "source_registers"), [
    (WGMMA_LAYOUT_UPCAST_2X, WGMMA_LAYOUT, 8, 8),
    (WGMMA_LAYOUT_UPCAST_4X, WGMMA_LAYOUT_UPCAST_2X, 4, 4),
])
def test_upcast_layouts_reach_the_next_moving_half_of_each_register(src, dst, bitwidth,
                                                                    source_registers):
    # Each lane keeps half of every source register and needs the other half of its
    # partner's (lane q ^ 1, resp. q ^ 2): half a register each, packed two to a word.
    cost = relayout_cost(src, dst, (64, 64), bitwidth)
    assert cost.kind == "shuffles"
    assert cost.shuffles == source_registers // 2


@pytest.mark.parametrize(("bitwidth", "shape", "shuffles"), [
    (8, (64, 64), 8), (8, (128, 256), 64), (16, (64, 64), 16), (32, (64, 32), 16)])
def test_accumulator_to_8bit_a_layout_takes_one_shuffle_per_destination_word(
        bitwidth, shape, shuffles):
    # Lanes 1 and 2 of each quad hold none of the columns WGMMA_LAYOUT_8BIT gives them
    # (lane 1 needs columns 4..7, held by lanes 2 and 3), so they receive every word they
    # end with: one shuffle per destination .b32 of a thread, the least possible.
    words = math.prod(shape) * bitwidth // 32 // 128
    cost = relayout_cost(WGMMA_LAYOUT, WGMMA_LAYOUT_8BIT, shape, bitwidth)
    assert cost == RelayoutCost("shuffles", registers_moved=words, shuffles=shuffles)
    assert shuffles == words


def test_column_vector_with_its_lane_bits_swapped_takes_shuffles():
    # Lane bits swapped: lane 4 now needs the columns of quad position 1 (lane 1's).
    cols = TiledLayout(Tiling(((8,), (2,))), (Replicated(4),), (-2, Replicated(8)), -1)
    assert relayout_cost(WGMMA_COL_LAYOUT, cols, (64,), 32).kind == "shuffles"
    assert lowers_without_smem(WGMMA_COL_LAYOUT, cols, (64,), 32)
