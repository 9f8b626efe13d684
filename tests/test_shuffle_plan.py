"""The shuffle plans of relayouts within warps, executed on element tables in plain Python:
every destination position receives the element its layout names, no round asks a lane to
send two different words, and the rounds are the fewest any exchange of 32-bit words needs.
"""

from collections import Counter

import numpy as np
import pytest

from smalti.tiling import (
    WGMMA_COL_LAYOUT,
    WGMMA_LAYOUT,
    WGMMA_LAYOUT_8BIT,
    WGMMA_LAYOUT_TF32_A,
    WGMMA_LAYOUT_UPCAST_2X,
    WGMMA_LAYOUT_UPCAST_4X,
    WGMMA_ROW_LAYOUT,
    WGMMA_TRANSPOSED_LAYOUT,
    LayoutError,
    Replicated,
    TiledLayout,
    Tiling,
)
from smalti.tiling.shuffles import plan_shuffles

ROWS_IN_REGISTERS = TiledLayout(Tiling(((64, 64), (16, 64), (8, 64), (1,))), (-7,),
                                (-3, Replicated(4)), -1)
COLUMNS_LANE_BITS_SWAPPED = TiledLayout(Tiling(((8,), (2,))), (Replicated(4),),
                                        (-2, Replicated(8)), -1)
ROWS_QUAD_FIRST = TiledLayout(Tiling(((64,), (16,), (8,), (1,))), (-4,),
                              (Replicated(4), -2), -1)

# (source, destination, shape, bits per element)
CASES = [
    (WGMMA_LAYOUT, WGMMA_LAYOUT_8BIT, (64, 64), 8),
    (WGMMA_LAYOUT, WGMMA_LAYOUT_8BIT, (128, 96), 8),
    (WGMMA_LAYOUT, WGMMA_LAYOUT_8BIT, (64, 32), 16),
    (WGMMA_LAYOUT, WGMMA_LAYOUT_8BIT, (64, 32), 32),
    (WGMMA_LAYOUT_8BIT, WGMMA_LAYOUT, (64, 64), 8),
    (WGMMA_LAYOUT, WGMMA_LAYOUT_TF32_A, (64, 32), 32),
    (WGMMA_LAYOUT_UPCAST_2X, WGMMA_LAYOUT, (64, 64), 8),
    (WGMMA_LAYOUT_UPCAST_4X, WGMMA_LAYOUT_UPCAST_2X, (64, 64), 4),
    (WGMMA_LAYOUT, ROWS_IN_REGISTERS, (64, 64), 32),
    (WGMMA_COL_LAYOUT, COLUMNS_LANE_BITS_SWAPPED, (64,), 32),
    (WGMMA_ROW_LAYOUT, ROWS_QUAD_FIRST, (64,), 16),
]
IDS = [f"case{i}-{bits}bit" for i, (*_, bits) in enumerate(CASES)]


def word_table(layout, shape, bits):
    """[thread, word, position]: each register vector's elements, 32 // bits per word."""
    index = layout.element_index(shape)
    flat = np.ravel_multi_index(tuple(np.moveaxis(index, -1, 0)), shape)
    threads, registers, length = flat.shape
    per_word = 32 // bits
    words = -(-length // per_word)
    table = np.full((threads, registers, words * per_word), -1, dtype=np.int64)
    table[:, :, :length] = flat
    return table.reshape(threads, registers * words, per_word)


def execute(plan, src):
    """What each destination position holds after running the plan's rounds."""
    threads = src.shape[0]
    registers = [src[:, w] for w in range(src.shape[1])]
    for k in range(plan.rounds):
        sent = np.full(src.shape[::2], -1, dtype=np.int64)
        for t in range(threads):
            for c, (w, pos) in enumerate(plan.sends[k, t].tolist()):
                if w >= 0:
                    sent[t, c] = src[t, w, pos]
        partner = [t if x < 0 else (t & ~31) | ((t & 31) ^ x)
                   for t, x in enumerate(plan.lane_xor[k].tolist())]
        registers.append(sent[partner])
    out = np.full(plan.gathers.shape[:3], -1, dtype=np.int64)
    for j, t, c in zip(*np.nonzero(plan.gathers[..., 0] >= 0), strict=True):
        reg, pos = plan.gathers[j, t, c]
        out[j, t, c] = registers[reg][t, pos]
    return out.transpose(1, 0, 2)


def least_rounds(src, dst):
    """The most 32-bit words a lane must receive from, or send to, other lanes, each
    sender's elements for one receiver packed `positions` to a word (single holders)."""
    holder = {e: t for t, words in enumerate(src.tolist()) for word in words for e in word
              if e >= 0}
    pairs = Counter()
    for t, words in enumerate(dst.tolist()):
        for word in words:
            for e in word:
                if e >= 0 and holder[e] != t:
                    pairs[(t, holder[e])] += 1
    per_word = src.shape[2]
    received, sent = Counter(), Counter()
    for (t, p), n in pairs.items():
        received[t] += -(-n // per_word)
        sent[p] += -(-n // per_word)
    return max([*received.values(), *sent.values()], default=0)


@pytest.mark.parametrize(("src_layout", "dst_layout", "shape", "bits"), CASES, ids=IDS)
def test_the_plan_delivers_every_element(src_layout, dst_layout, shape, bits):
    src, dst = word_table(src_layout, shape, bits), word_table(dst_layout, shape, bits)
    plan = plan_shuffles(src, dst)
    got = execute(plan, src)
    wanted = dst >= 0
    np.testing.assert_array_equal(got[wanted], dst[wanted])


@pytest.mark.parametrize(("src_layout", "dst_layout", "shape", "bits"),
                         [c for c in CASES if c[0] not in (WGMMA_COL_LAYOUT, WGMMA_ROW_LAYOUT)],
                         ids=[i for i, c in zip(IDS, CASES, strict=True)
                              if c[0] not in (WGMMA_COL_LAYOUT, WGMMA_ROW_LAYOUT)])
def test_the_plan_takes_the_fewest_rounds(src_layout, dst_layout, shape, bits):
    src, dst = word_table(src_layout, shape, bits), word_table(dst_layout, shape, bits)
    assert plan_shuffles(src, dst).rounds == least_rounds(src, dst)


def test_one_sender_one_word_per_round():
    """A lane read by two receivers in one round would have to send two words at once."""
    shape = (128, 64)
    plan = plan_shuffles(word_table(WGMMA_LAYOUT, shape, 8),
                         word_table(WGMMA_LAYOUT_8BIT, shape, 8))
    for k in range(plan.rounds):
        senders = [(t & ~31) | ((t & 31) ^ x) for t, x in enumerate(plan.lane_xor[k].tolist())
                   if x >= 0]
        assert len(senders) == len(set(senders))
        needed = set(senders)
        assert all((plan.sends[k, t] >= 0).any() == (t in needed) for t in range(128))


def test_the_accumulator_to_8bit_plan_is_the_same_in_every_quad():
    """Lanes that hold the same role in their quad do the same thing in every round: the
    lowering's per-lane choices then depend on the two quad bits only."""
    plan = plan_shuffles(word_table(WGMMA_LAYOUT, (64, 64), 8),
                         word_table(WGMMA_LAYOUT_8BIT, (64, 64), 8))
    assert plan.rounds == 8
    for table in (plan.lane_xor, plan.sends, plan.gathers):
        per_thread = np.moveaxis(table, 1, 0)
        np.testing.assert_array_equal(per_thread, per_thread[np.arange(128) % 4])


def test_elements_from_another_warp_are_refused():
    with pytest.raises(LayoutError, match="no thread of its warp holds"):
        plan_shuffles(word_table(WGMMA_LAYOUT, (64, 64), 32),
                      word_table(WGMMA_TRANSPOSED_LAYOUT, (64, 64), 32))
