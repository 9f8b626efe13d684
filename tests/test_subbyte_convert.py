"""4-bit vectors (i4, f4E2M1FN) in the simulator against numpy/ml_dtypes: global loads and
stores (two elements per byte), and their conversions to bf16, f16 and f32 over every 4-bit
value in every nibble of a register (compared bit for bit, so -0.0 counts)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from smalti.dialect.diagnostics import DiagnosticError
from smalti.runtime import check_arguments, compile_mlir, run_simulated
from tests.kernels import copy_kernel, elementwise_kernel

DTYPES = {"i4": ml_dtypes.int4, "f4E2M1FN": ml_dtypes.float4_e2m1fn,
          "bf16": ml_dtypes.bfloat16, "f16": np.float16, "f32": np.float32}
UNSIGNED = np.dtype(ml_dtypes.uint4)


def every_value(shape: tuple[int, int], element: str) -> np.ndarray:
    """4-bit codes such that every byte (every pair of codes) lies at each of the four byte
    positions of a register: byte k of row r is (k + 37 r) % 256."""
    rows, pairs = np.indices((shape[0], shape[1] // 2))
    packed = ((pairs + 37 * rows) % 256).astype(np.uint8)
    for position in range(4):
        assert len(np.unique(packed[:, position::4])) == 256
    codes = np.stack([packed & 0xF, packed >> 4], axis=-1).reshape(shape)
    return codes.view(DTYPES[element])


def _compile(text: str):
    compiled = compile_mlir(text, "subbyte.mlir")
    compiled.assemble()  # ptxas accepts every sequence
    return compiled


def _bits(array: np.ndarray) -> np.ndarray:
    return array.view(np.uint16 if array.dtype.itemsize == 2 else np.uint32)


@pytest.mark.parametrize("target", ["bf16", "f16", "f32"])
@pytest.mark.parametrize(("op", "source"), [
    ("arith.sitofp", "i4"), ("arith.uitofp", "i4"), ("arith.extf", "f4E2M1FN")])
def test_conversions_of_every_value(op, source, target):
    x = every_value((16, 256), source)
    kernel = _compile(elementwise_kernel(op, source, 1, (16, 256), target))
    got = run_simulated(kernel, x, np.zeros(x.shape, DTYPES[target]))[-1]
    numbers = x.view(np.uint8).view(UNSIGNED) if op == "arith.uitofp" else x
    want = numbers.astype(np.float32).astype(DTYPES[target])
    np.testing.assert_array_equal(_bits(got), _bits(want))


@pytest.mark.parametrize("element", ["i4", "f4E2M1FN"])
@pytest.mark.parametrize(("source_shape", "tile", "grid", "offset"), [
    ((8, 1024), (8, 256), 3, 256),  # 16-byte accesses of 32 elements
    ((8, 272), (8, 128), 2, 8),     # 4-byte aligned starts: one register per access
    ((2, 4, 512), (2, 4, 128), 4, 0),
])
def test_global_copies_keep_two_elements_per_byte(element, source_shape, tile, grid, offset):
    src = np.random.default_rng(4).integers(0, 16, source_shape).astype(np.uint8).view(
        DTYPES[element])
    compiled = _compile(copy_kernel(element, source_shape, tile, grid, None, offset))
    out = np.zeros((*tile[:-1], tile[-1] * grid), src.dtype)
    got = run_simulated(compiled, src, out)[-1]
    width, rows = tile[-1], tuple(slice(0, t) for t in tile[:-1])
    want = np.concatenate([src[(*rows, slice(i * width + offset, (i + 1) * width + offset))]
                           for i in range(grid)], axis=-1)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_device_buffers_hold_two_elements_per_byte():
    """run_simulated packs a 4-bit argument into its device buffer (element 2i in the low
    nibble of byte i) and unpacks it after the run; a copy returns every code pair."""
    x = every_value((16, 256), "i4")
    compiled = _compile(copy_kernel("i4", (16, 256), (16, 256), 1))
    device = check_arguments(compiled.signature("copy"), (x, np.zeros_like(x)))[0]
    low, high = x.view(np.uint8).reshape(-1)[0::2], x.view(np.uint8).reshape(-1)[1::2]
    np.testing.assert_array_equal(device, (low & 0xF) | (high & 0xF) << 4)
    got = run_simulated(compiled, x, np.zeros_like(x))[-1]
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got.view(np.uint8), x.view(np.uint8))


def test_odd_slice_start_is_refused_at_the_op():
    text = copy_kernel("i4", (8, 264), (8, 128), 2, None, 1)
    with pytest.raises(DiagnosticError, match="must start at a byte"):
        _compile(text)


def test_vectors_shorter_than_a_register_are_refused_at_the_op():
    text = copy_kernel("f4E2M1FN", (8, 512), (8, 512), 1, "#smalti.strided<vec = 4>")
    with pytest.raises(DiagnosticError, match="8 elements per register"):
        _compile(text)


@pytest.mark.parametrize("target", ["bf16", "f16", "f32"])
@pytest.mark.parametrize("op", ["arith.sitofp", "arith.uitofp"])
def test_int8_conversions_of_every_value(op, target):
    """i8 four to a register converts by magic numbers (smalti/lowering/int8_floats.py)."""
    rows, cols = np.indices((8, 256))
    x = ((rows * 7 + cols) % 256).astype(np.uint8).view(np.int8)  # every byte, every lane
    kernel = _compile(elementwise_kernel(op, "i8", 1, (8, 256), target))
    assert "prmt.b32" in kernel.ptx and "cvt.rn.f16.s8" not in kernel.ptx
    got = run_simulated(kernel, x, np.zeros(x.shape, DTYPES[target]))[-1]
    numbers = x.view(np.uint8) if op == "arith.uitofp" else x
    want = numbers.astype(np.float32).astype(DTYPES[target])
    np.testing.assert_array_equal(_bits(got), _bits(want))
