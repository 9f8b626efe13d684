"""TMA in the simulator: tensor-map rules, swizzled loads, out-of-bounds fill, stores, reduces."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from smalti.sim import SimError, TensorMap, run_ptx
from tests.async_kernels import tma_load_kernel, tma_store_kernel

POLICIES = [("eager", 0), ("latest", 0), ("random", 1), ("random", 7)]


def swizzle_formula(a: np.ndarray, span: int | None) -> np.ndarray:
    """NOTES.md: 128B a ^ (((a>>7)&7)<<4), 64B a ^ (((a>>7)&3)<<4), 32B a ^ (((a>>7)&1)<<4)."""
    bits = {None: 0, 32: 1, 64: 3, 128: 7}[span]
    return a ^ (((a >> 7) & bits) << 4)


def load(tm: TensorMap, loads, smem_bytes: int, policy=("eager", 0), **kw) -> np.ndarray:
    out = np.zeros(tm.tile_bytes * len(loads), np.uint8)
    ptx = tma_load_kernel(tm.rank, loads, tm.tile_bytes, smem_bytes, **kw)
    run_ptx(ptx, "tma_load", 1, 128, [tm, out], async_completion=policy[0], seed=policy[1])
    return out


@pytest.mark.parametrize("policy", POLICIES)
def test_64x64_swizzle128_load_matches_h100_record(policy):
    # LLVM mlir/test/Integration/GPU/CUDA/sm90/tma_load_64x64_swizzle128b.mlir: a 64x128 f16
    # matrix holding (i*128 + j) // 8 (the 16-byte chunk number), loaded as two 64x64 boxes
    # with 128B swizzle at shared offsets 0 and 8192 (coordinates {0, 0} and {64, 0}), then
    # printed as a 64x128 shared matrix on an H100. Chunk values of three printed rows:
    recorded = {
        0: [0, 1, 2, 3, 4, 5, 6, 7, 17, 16, 19, 18, 21, 20, 23, 22],
        1: [34, 35, 32, 33, 38, 39, 36, 37, 51, 50, 49, 48, 55, 54, 53, 52],
        40: [264, 265, 266, 267, 268, 269, 270, 271, 281, 280, 283, 282, 285, 284, 287, 286],
    }
    i, j = np.indices((64, 128))
    rhs = ((i * 128 + j) // 8).astype(np.float16)
    tm = TensorMap(rhs, box=(64, 64), swizzle=128)
    out = load(tm, [(0, (0, 0)), (8192, (64, 0))], 16384, policy)
    printed = out.view(np.float16).reshape(64, 128)
    chunks = printed[:, ::8].astype(np.int64)
    assert (printed.reshape(64, 16, 8) == printed[:, ::8, None]).all()
    for row, values in recorded.items():
        assert chunks[row].tolist() == values
    # The whole record follows: physical chunk = logical chunk XOR (box row % 8).
    r = np.arange(64)[:, None]
    half = np.arange(16)[None, :] // 8
    box_row = 2 * (r % 32) + half
    physical = np.arange(16)[None, :] % 8
    expected = box_row * 16 + 8 * (r // 32) + (physical ^ (box_row % 8))
    assert (chunks == expected).all()


@pytest.mark.parametrize("span", [None, 32, 64, 128])
def test_swizzle_address_map_matches_formula_on_every_byte(span):
    inner = span or 64
    rows = 2 * 1024 // inner  # two repeats of the 8-row pattern (one for 1024B spans ... )
    data = (np.arange(rows * inner) % 251).astype(np.uint8).reshape(rows, inner)
    data = data + (np.arange(rows)[:, None] % 3).astype(np.uint8)  # rows differ
    tm = TensorMap(data, box=(rows, inner), swizzle=span)
    out = load(tm, [(0, (0, 0))], rows * inner)
    logical = np.arange(rows * inner)
    assert (out[swizzle_formula(logical, span)] == data.reshape(-1)).all()


def test_out_of_bounds_elements_are_zero_or_nan_and_count_as_tx_bytes():
    a = np.arange(40 * 24, dtype=np.float32).reshape(40, 24) + 1
    for fill, value in (("zero", 0.0), ("nan", np.nan)):
        tm = TensorMap(a, box=(16, 8), oob_fill=fill)
        out = load(tm, [(0, (20, 30))], 512).view(np.float32).reshape(16, 8)
        expected = np.full((16, 8), value, np.float32)
        expected[:10, :4] = a[30:40, 20:24]
        np.testing.assert_array_equal(out, expected)
    tm = TensorMap(a, box=(16, 8))
    out = load(tm, [(0, (-4, -2))], 512).view(np.float32).reshape(16, 8)
    expected = np.zeros((16, 8), np.float32)
    expected[2:, 4:] = a[:14, :4]
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("policy", POLICIES)
def test_3d_load_with_element_strides(policy):
    a = (np.arange(5 * 12 * 16) % 97).astype(np.uint16).reshape(5, 12, 16)
    tm = TensorMap(a, box=(2, 6, 8), element_strides=(1, 2, 1))
    out = load(tm, [(0, (8, 1, 3))], 1024, policy)
    np.testing.assert_array_equal(out.view(np.uint16).reshape(2, 3, 8), a[3:5, 1:7:2, 8:16])


@pytest.mark.parametrize("policy", POLICIES)
def test_store_skips_out_of_bounds_elements(policy):
    dst = np.full((20, 12), -1.0, np.float32)
    tile = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    tm = TensorMap(dst, box=(16, 8))
    run_ptx(tma_store_kernel(2, (8, 10), tile.nbytes), "tma_store", 1, 128,
            [tm, tile.copy()], async_completion=policy[0], seed=policy[1])
    expected = np.full((20, 12), -1.0, np.float32)
    expected[10:20, 8:12] = tile[:10, :4]
    np.testing.assert_array_equal(dst, expected)


def test_swizzled_store_undoes_the_load_swizzle():
    src = np.arange(32 * 64, dtype=np.uint16).astype(ml_dtypes.bfloat16).reshape(32, 64)
    physical = np.zeros(src.nbytes, np.uint8)
    logical = np.arange(src.nbytes)
    physical[swizzle_formula(logical, 128)] = src.view(np.uint8).reshape(-1)
    dst = np.zeros_like(src)
    tm = TensorMap(dst, box=(32, 64), swizzle=128)
    run_ptx(tma_store_kernel(2, (0, 0), src.nbytes), "tma_store", 1, 128, [tm, physical])
    np.testing.assert_array_equal(dst.view(np.uint16), src.view(np.uint16))


@pytest.mark.parametrize("op", ["add", "min", "max"])
def test_reduce(op):
    dst = (np.arange(8 * 16, dtype=np.int32).reshape(8, 16) * 3) % 17
    tile = (np.arange(8 * 16, dtype=np.int32).reshape(8, 16) * 5) % 13
    expected = {"add": dst + tile, "min": np.minimum(dst, tile), "max": np.maximum(dst, tile)}
    want = expected[op].copy()
    tm = TensorMap(dst, box=(8, 16))
    run_ptx(tma_store_kernel(2, (0, 0), tile.nbytes, reduce=op), "tma_store", 1, 128,
            [tm, tile])
    np.testing.assert_array_equal(dst, want)


@pytest.mark.parametrize(("kwargs", "rule"), [
    (dict(array=np.zeros((4, 4, 4, 4, 4, 4), np.float32), box=(1,) * 6), "rank"),
    (dict(array=np.zeros((8, 32), np.float32), box=(8, 300)), "box dimensions"),
    (dict(array=np.zeros((8, 32), np.float32), box=(8, 2)), "multiple of 16 bytes"),
    (dict(array=np.zeros((8, 6), np.float32), box=(8, 4)), "strides"),
    (dict(array=np.zeros((8, 64), np.float32), box=(8, 64), swizzle=128), "swizzle span"),
    (dict(array=np.zeros((8, 64), np.float32), box=(8, 32), swizzle=48), "swizzle must"),
    (dict(array=np.zeros((8, 64), np.int32), box=(8, 32), oob_fill="nan"), "floating"),
    (dict(array=np.zeros((8, 64), np.float32)[:, ::2], box=(8, 4)), "contiguous"),
    (dict(array=np.zeros(65, np.uint8)[1:], box=(16,)), "16-byte aligned"),
    (dict(array=np.zeros((8, 64), np.float32), box=(8, 4), element_strides=(9, 1)),
     "element strides"),
    (dict(array=np.zeros((8, 64), np.float32), box=(8, 4), interleave=32), "interleave"),
])
def test_tensor_map_rules(kwargs, rule):
    with pytest.raises(ValueError, match=rule):
        TensorMap(**kwargs)


def test_tensor_map_needs_a_128_byte_parameter():
    a = np.zeros((8, 8), np.float32)
    ptx = tma_load_kernel(2, [(0, (0, 0))], 256, 256).replace("tmap[128]", "tmap[64]")
    with pytest.raises(SimError, match="TensorMap is 128"):
        run_ptx(ptx, "tma_load", 1, 128, [TensorMap(a, box=(8, 8)), np.zeros(256, np.uint8)])
