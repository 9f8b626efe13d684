"""i16, i8 and i1 vectors in the simulator against numpy: loads and stores in every layout
and alignment, global and shared (an i1 is a byte in memory, as numpy's bool), the
conversions from and to them, and comparisons and selects of them. Every kernel assembles
(ptxas rejects `ld.global.v16.b1` and crashes on `ld.global.v8.b16`, which these once
were)."""

from __future__ import annotations

import operator

import ml_dtypes
import numpy as np
import pytest

from smalti.runtime import compile_mlir, run_simulated
from tests.kernels import copy_kernel
from tests.test_lowering_smem import roundtrip_kernel

BF16 = ml_dtypes.bfloat16
DTYPES = {"i16": np.int16, "i8": np.int8, "i1": np.bool_, "f32": np.float32, "bf16": BF16,
          "f16": np.float16, "i32": np.int32}
WGMMA = ("#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], "
         "lane = [-3, -2], vector = -1>")


def _values(element: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if element == "i1":
        return rng.random(shape) < 0.5
    info = np.iinfo(DTYPES[element])
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(DTYPES[element])


def _compile(text: str):
    compiled = compile_mlir(text, "narrow.mlir")
    compiled.assemble()
    return compiled


@pytest.mark.parametrize("element", ["i16", "i8", "i1"])
@pytest.mark.parametrize(("source_shape", "tile", "grid", "offset", "layout"), [
    ((8, 512), (8, 128), 3, 128, None),          # aligned: 16-byte accesses
    ((8, 520), (8, 128), 4, 1, None),            # unaligned start: narrower accesses
    ((2, 384), (2, 64), 5, 64, None),            # strided rows that carry (slow path)
    ((64, 48), (64, 8), 4, 8, WGMMA),            # the wgmma accumulator layout
    ((2, 1280), (1, 1024), 1, 256, None),        # one row, several registers
    ((4, 4096), (4, 2048), 2, 0, None),          # 16 elements per thread: grouped units
])
def test_global_copies(element, source_shape, tile, grid, offset, layout):
    src = _values(element, source_shape, np.random.default_rng(21))
    compiled = _compile(copy_kernel(element, source_shape, tile, grid, layout, offset))
    out = np.zeros((*tile[:-1], tile[-1] * grid), src.dtype)
    got = run_simulated(compiled, src, out)[-1]
    width = tile[-1]
    rows = tuple(slice(0, t) for t in tile[:-1])
    want = np.concatenate([src[(*rows, slice(i * width + offset, (i + 1) * width + offset))]
                           for i in range(grid)], axis=-1)
    np.testing.assert_array_equal(got, want)
    assert ".v8." not in compiled.ptx and ".v16." not in compiled.ptx


def test_i1_bytes_other_than_one_read_as_true():
    """A bool buffer holding bytes other than 0/1 (a view of uint8 data) reads as numpy's
    bool view does: nonzero is true; stores write 1."""
    raw = np.random.default_rng(22).integers(0, 4, (8, 128), dtype=np.uint8)
    compiled = _compile(copy_kernel("i1", (8, 128), (8, 128), 1))
    got = run_simulated(compiled, raw.view(np.bool_), np.zeros((8, 128), np.bool_))[-1]
    np.testing.assert_array_equal(got.view(np.uint8), (raw != 0).astype(np.uint8))


@pytest.mark.parametrize(("shape", "element", "transforms"), [
    ("8x128", "i16", ""), ("16x128", "i8", ""), ("8x128", "i1", ""),
    ("64x128", "i16", "#smalti.tile<[8, 64]>, #smalti.swizzle<128>"),
    ("32x128", "i8", "#smalti.tile<[8, 128]>, #smalti.swizzle<128>"),
])
def test_shared_memory_roundtrips(shape, element, transforms):
    dims = tuple(int(d) for d in shape.split("x"))
    a = _values(element, dims, np.random.default_rng(23))
    compiled = _compile(roundtrip_kernel(shape, element, transforms))
    np.testing.assert_array_equal(run_simulated(compiled, a, np.zeros_like(a))[-1], a)


def _convert_kernel(op: str, source: str, target: str) -> str:
    v, w = f"vector<4x128x{source}>", f"vector<4x128x{target}>"
    m, n = f"memref<4x128x{source}>", f"memref<4x128x{target}>"
    return f"""
func.func @k(%a: {m}, %out: {n}) attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : ({m}, index, index) -> {v}
  %y = {op} %x : {v} to {w}
  "smalti.vector_store"(%y, %out, %c0, %c0) : ({w}, {n}, index, index) -> ()
  return
}}
"""


def _low_bit(x: np.ndarray) -> np.ndarray:
    return np.trunc(x.astype(np.float64)).astype(np.int64) % 2 == 1


CONVERSIONS = [  # (op, source, target, reference); out-of-range float -> int is poison
    ("arith.sitofp", "i1", "f32", lambda x: np.where(x, -1.0, 0.0)),  # a set i1 is -1
    ("arith.uitofp", "i1", "f32", lambda x: x.astype(np.float64)),
    ("arith.sitofp", "i1", "bf16", lambda x: np.where(x, -1.0, 0.0)),
    ("arith.uitofp", "i1", "f16", lambda x: x.astype(np.float64)),
    ("arith.fptosi", "f32", "i1", _low_bit),
    ("arith.fptoui", "bf16", "i1", _low_bit),
    ("arith.sitofp", "i8", "f32", lambda x: x.astype(np.float64)),
    ("arith.sitofp", "i8", "bf16", lambda x: x.astype(np.float64)),
    ("arith.uitofp", "i8", "bf16", lambda x: x.view(np.uint8).astype(np.float64)),
    ("arith.sitofp", "i8", "f16", lambda x: x.astype(np.float64)),
    ("arith.fptosi", "f32", "i8", lambda x: np.trunc(x).astype(np.int8)),
    ("arith.fptosi", "bf16", "i8", lambda x: np.trunc(x.astype(np.float32)).astype(np.int8)),
    ("arith.fptoui", "f16", "i8", lambda x: np.trunc(x.astype(np.float32)).astype(np.uint8)),
    ("arith.sitofp", "i16", "bf16", lambda x: x.astype(np.float64)),
    ("arith.extsi", "i8", "i32", lambda x: x.astype(np.int32)),
    ("arith.extui", "i8", "i32", lambda x: x.view(np.uint8).astype(np.int32)),
    ("arith.extsi", "i8", "i16", lambda x: x.astype(np.int16)),
    ("arith.trunci", "i32", "i8", lambda x: x.astype(np.int8)),
    ("arith.trunci", "i16", "i8", lambda x: x.astype(np.int8)),
    ("arith.extsi", "i1", "i8", lambda x: -x.astype(np.int8)),
    ("arith.extui", "i1", "i16", lambda x: x.astype(np.int16)),
    ("arith.trunci", "i8", "i1", lambda x: x % 2 == 1),
]


@pytest.mark.parametrize(("op", "source", "target", "reference"), CONVERSIONS,
                         ids=[f"{op[6:]}-{s}-{t}" for op, s, t, _ in CONVERSIONS])
def test_conversions_from_and_to_narrow_integers(op, source, target, reference):
    rng = np.random.default_rng(24)
    if source in ("i1", "i8", "i16", "i32"):
        x = _values(source, (4, 128), rng)
    else:  # floats whose integer part the target holds (the rest is poison in MLIR)
        unsigned = op == "arith.fptoui"
        low, high = ((0.0, 2.0) if unsigned else (-2.0, 1.0)) if target == "i1" else \
            ((0.0, 255.0) if unsigned else (-128.0, 127.0))
        x = rng.uniform(low, high, (4, 128)).astype(DTYPES[source])
        x[0, :4] = [0.0, -0.0, 0.75, 1.5] if unsigned else [0.0, -0.75, -1.5, -1.0]
    compiled = _compile(_convert_kernel(op, source, target))
    got = run_simulated(compiled, x, np.zeros((4, 128), DTYPES[target]))[-1]
    want = np.asarray(reference(x)).astype(DTYPES[target])
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


def _signed(x: np.ndarray) -> np.ndarray:
    return -x.astype(np.int64) if x.dtype == np.bool_ else x.astype(np.int64)


def _unsigned(x: np.ndarray) -> np.ndarray:
    return x.astype(np.int64) % (1 << (8 * x.dtype.itemsize)) if x.dtype != np.bool_ \
        else x.astype(np.int64)


PREDICATES = {"eq": operator.eq, "ne": operator.ne, "slt": operator.lt, "sle": operator.le,
              "sgt": operator.gt, "sge": operator.ge, "ult": operator.lt,
              "ule": operator.le, "ugt": operator.gt, "uge": operator.ge}


@pytest.mark.parametrize("element", ["i1", "i8"])
@pytest.mark.parametrize("predicate", sorted(PREDICATES))
def test_cmpi_of_narrow_integers(element, predicate):
    """i8 compares widened to 16 bits (no 8-bit setp), i1 as predicate logic (true is 1
    unsigned and -1 signed)."""
    text = f"""
func.func @k(%a: memref<4x128x{element}>, %b: memref<4x128x{element}>, %out: memref<4x128xi1>)
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128x{element}>, index, index) -> vector<4x128x{element}>
  %y = "smalti.vector_load"(%b, %c0, %c0) : (memref<4x128x{element}>, index, index) -> vector<4x128x{element}>
  %r = arith.cmpi {predicate}, %x, %y : vector<4x128x{element}>
  "smalti.vector_store"(%r, %out, %c0, %c0) : (vector<4x128xi1>, memref<4x128xi1>, index, index) -> ()
  return
}}
"""
    rng = np.random.default_rng(25)
    a, b = _values(element, (4, 128), rng), _values(element, (4, 128), rng)
    b[0] = a[0]  # equal pairs too
    got = run_simulated(_compile(text), a, b, np.zeros((4, 128), np.bool_))[-1]
    convert = _unsigned if predicate[0] == "u" else _signed
    np.testing.assert_array_equal(got, PREDICATES[predicate](convert(a), convert(b)))


def test_select_of_i1_vectors_by_vector_and_by_scalar():
    text = """
func.func @k(%m: memref<4x128xi1>, %a: memref<4x128xi1>, %b: memref<4x128xi1>, %flag: i1,
             %out: memref<4x128xi1>, %out2: memref<4x128xi1>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c = "smalti.vector_load"(%m, %c0, %c0) : (memref<4x128xi1>, index, index) -> vector<4x128xi1>
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128xi1>, index, index) -> vector<4x128xi1>
  %y = "smalti.vector_load"(%b, %c0, %c0) : (memref<4x128xi1>, index, index) -> vector<4x128xi1>
  %r = arith.select %c, %x, %y : vector<4x128xi1>, vector<4x128xi1>
  %s = arith.select %flag, %x, %y : vector<4x128xi1>
  "smalti.vector_store"(%r, %out, %c0, %c0) : (vector<4x128xi1>, memref<4x128xi1>, index, index) -> ()
  "smalti.vector_store"(%s, %out2, %c0, %c0) : (vector<4x128xi1>, memref<4x128xi1>, index, index) -> ()
  return
}
"""
    m, a, b = np.random.default_rng(26).random((3, 4, 128)) < 0.5
    compiled = _compile(text)
    for flag in (True, False):
        outs = run_simulated(compiled, m, a, b, np.bool_(flag), np.zeros((4, 128), np.bool_),
                             np.zeros((4, 128), np.bool_))
        np.testing.assert_array_equal(outs[-2], np.where(m, a, b))
        np.testing.assert_array_equal(outs[-1], a if flag else b)
