"""Every lowering rule, run through the PTX simulator and compared with numpy exactly."""

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from smalti.runtime import compile_mlir, run_simulated
from tests.kernels import copy_kernel, elementwise_kernel

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
BF16 = ml_dtypes.bfloat16
WGMMA = ("#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], "
         "lane = [-3, -2], vector = -1>")


def assert_same(got, expected):
    """Exact equality, NaN matching NaN (16-bit floats compare through exact f32 widening)."""
    assert got.dtype == expected.dtype
    if expected.dtype.kind == "V" or expected.dtype.itemsize < 4:
        got, expected = got.astype(np.float32), expected.astype(np.float32)
    np.testing.assert_array_equal(got, expected)


def _random(shape, dtype, rng, positive=False):
    values = rng.standard_normal(shape).astype(np.float32)
    if positive:
        values = np.abs(values) + 0.25
    # Values with 8-bit mantissas keep f32 fma exact in float64 (one rounding, like PTX).
    return values.astype(BF16).astype(dtype)


def _run(text: str, *inputs):
    compiled = compile_mlir(text, "test.mlir")
    out_arg = compiled.signature().args[-1]
    from smalti.runtime import NUMPY_DTYPES

    out = np.zeros(out_arg.shape, NUMPY_DTYPES[out_arg.dtype])
    return run_simulated(compiled, *inputs, out)[-1]


@pytest.mark.parametrize(("name", "dtype"), [("pointwise_f32", np.float32),
                                             ("pointwise_bf16", BF16)])
def test_example_pointwise_matches_numpy_exactly(name, dtype):
    compiled = compile_mlir((EXAMPLES / f"{name}.mlir").read_text(), f"{name}.mlir")
    shape = compiled.signature().args[0].shape
    rng = np.random.default_rng(1)
    a, b, c = (rng.standard_normal(shape).astype(dtype) for _ in range(3))
    out = run_simulated(compiled, a, b, c, np.zeros(shape, dtype))[-1]
    assert_same(out, a * b + c)


FLOAT_OPS = {
    "arith.addf": (2, np.add),
    "arith.subf": (2, np.subtract),
    "arith.mulf": (2, np.multiply),
    "arith.divf": (2, np.divide),
    "arith.maximumf": (2, np.maximum),
    "arith.minimumf": (2, np.minimum),
    "arith.maxnumf": (2, np.fmax),
    "arith.minnumf": (2, np.fmin),
    "arith.negf": (1, np.negative),
    "math.absf": (1, np.abs),
    "math.sqrt": (1, np.sqrt),
    "math.fma": (3, None),
}


@pytest.mark.parametrize("dtype", [np.float32, BF16], ids=["f32", "bf16"])
@pytest.mark.parametrize("op", sorted(FLOAT_OPS))
def test_float_ops(op, dtype):
    arity, reference = FLOAT_OPS[op]
    element = "f32" if dtype == np.float32 else "bf16"
    rng = np.random.default_rng(abs(hash(op)) % 2**32)
    inputs = [_random((4, 128), dtype, rng, positive=(op == "math.sqrt")) for _ in range(arity)]
    if op in ("arith.maximumf", "arith.minimumf", "arith.maxnumf", "arith.minnumf"):
        inputs[0][0, :3] = np.nan  # NaN propagation differs between the two families
    got = _run(elementwise_kernel(op, element, arity), *inputs)
    if reference is None:  # fma: exact product and sum in float64, one rounding
        wide = [x.astype(np.float64) for x in inputs]
        expected = (wide[0] * wide[1] + wide[2]).astype(dtype)
    else:
        with np.errstate(invalid="ignore"):
            expected = reference(*inputs)
    assert_same(got, expected)


INT_OPS = {"arith.addi": np.add, "arith.subi": np.subtract, "arith.muli": np.multiply,
           "arith.andi": np.bitwise_and, "arith.ori": np.bitwise_or,
           "arith.xori": np.bitwise_xor, "arith.maxsi": np.maximum, "arith.minsi": np.minimum,
           "arith.maxui": lambda a, b: np.maximum(a.view(np.uint32), b.view(np.uint32)).view(
               np.int32),
           "arith.minui": lambda a, b: np.minimum(a.view(np.uint32), b.view(np.uint32)).view(
               np.int32)}


@pytest.mark.parametrize("op", sorted(INT_OPS))
def test_i32_ops_wrap_like_numpy(op):
    rng = np.random.default_rng(7)
    a, b = (rng.integers(-2**31, 2**31, (4, 128), dtype=np.int32) for _ in range(2))
    got = _run(elementwise_kernel(op, "i32", 2), a, b)
    with np.errstate(over="ignore"):
        assert_same(got, INT_OPS[op](a, b))


@pytest.mark.parametrize(("op", "source", "target"), [("arith.extf", "bf16", "f32"),
                                                      ("arith.truncf", "f32", "bf16"),
                                                      ("arith.extf", "f16", "f32"),
                                                      ("arith.truncf", "f32", "f16")])
def test_float_conversions_round_to_nearest_even(op, source, target):
    dtypes = {"f32": np.float32, "bf16": BF16, "f16": np.float16}
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((4, 128)) * 100).astype(dtypes[source])
    got = _run(elementwise_kernel(op, source, 1, result_element=target), x)
    assert_same(got, x.astype(dtypes[target]))


def test_splat_constants_and_casts():
    text = """
func.func @k(%a: memref<4x128xbf16>, %out: memref<4x128xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %half = arith.constant dense<0.5> : vector<4x128xbf16>
  %three = arith.constant dense<3.0> : vector<4x128xf32>
  %s = "smalti.layout_cast"(%three) {new_layout = #smalti.splat} : (vector<4x128xf32>) -> vector<4x128xf32>
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128xbf16>, index, index) -> vector<4x128xbf16>
  %h = arith.mulf %x, %half : vector<4x128xbf16>
  %w = arith.extf %h : vector<4x128xbf16> to vector<4x128xf32>
  %t = "smalti.layout_cast"(%s) {new_layout = #smalti.strided<vec = 4>} : (vector<4x128xf32>) -> vector<4x128xf32>
  %g = arith.addf %w, %t : vector<4x128xf32>
  %n = arith.truncf %g : vector<4x128xf32> to vector<4x128xbf16>
  "smalti.vector_store"(%n, %out, %c0, %c0) : (vector<4x128xbf16>, memref<4x128xbf16>, index, index) -> ()
  return
}
"""
    x = np.random.default_rng(5).standard_normal((4, 128)).astype(BF16)
    expected = ((x * BF16(0.5)).astype(np.float32) + np.float32(3.0)).astype(BF16)
    assert_same(_run(text, x), expected)


@pytest.mark.parametrize(("element", "dtype"), [("f32", np.float32), ("bf16", BF16),
                                                ("i32", np.int32)])
@pytest.mark.parametrize(("source_shape", "tile", "grid", "offset", "layout"), [
    ((8, 512), (8, 128), 3, 128, None),          # aligned: 16-byte accesses
    ((8, 520), (8, 128), 4, 1, None),            # unaligned start: narrower accesses
    ((2, 384), (2, 64), 5, 64, None),            # strided rows that carry (slow path)
    ((64, 48), (64, 8), 4, 8, WGMMA),            # the wgmma accumulator layout
    ((2, 1280), (1, 1024), 1, 256, None),        # one row, several registers
])
def test_copies_in_every_layout_and_alignment(element, dtype, source_shape, tile, grid,
                                              offset, layout):
    rng = np.random.default_rng(11)
    if dtype == np.int32:
        src = rng.integers(-1000, 1000, source_shape, dtype=np.int32)
    else:
        src = rng.standard_normal(source_shape).astype(dtype)
    text = copy_kernel(element, source_shape, tile, grid, layout, offset)
    got = _run(text, src)
    width = tile[-1]
    rows = tuple(slice(0, t) for t in tile[:-1])
    expected = np.concatenate(
        [src[(*rows, slice(i * width + offset, (i + 1) * width + offset))] for i in range(grid)],
        axis=-1)
    assert_same(got, expected)


APPROXIMATE_OPS = {  # op -> (numpy reference, input range); PTX's .approx units err ~2^-22
    "math.exp": (np.exp, (-8, 8)),
    "math.exp2": (np.exp2, (-8, 8)),
    "math.log": (np.log, (0.01, 100)),
    "math.log2": (np.log2, (0.01, 100)),
    "math.rsqrt": (lambda x: 1 / np.sqrt(x), (0.01, 100)),
    "math.tanh": (np.tanh, (-4, 4)),
}


@pytest.mark.parametrize("dtype", [np.float32, BF16], ids=["f32", "bf16"])
@pytest.mark.parametrize("op", sorted(APPROXIMATE_OPS))
def test_approximate_math(op, dtype):
    reference, (low, high) = APPROXIMATE_OPS[op]
    element = "f32" if dtype == np.float32 else "bf16"
    x = np.random.default_rng(9).uniform(low, high, (4, 128)).astype(dtype)
    got = _run(elementwise_kernel(op, element, 1), x).astype(np.float64)
    expected = reference(x.astype(np.float64))
    if dtype == np.float32:
        # tanh.approx is the coarsest unit (about 2^-11 relative); the others about 2^-21.
        rtol = 2**-10 if op == "math.tanh" else 2**-20
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=1e-30)
    else:  # one rounding to bf16 of a close f32 value: within one bf16 ulp
        np.testing.assert_allclose(got, expected, rtol=2**-7)


def test_broadcast_of_a_loaded_row_without_hints():
    text = """
func.func @k(%a: memref<128xf32>, %out: memref<128x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0) : (memref<128xf32>, index) -> vector<128xf32>
  %w = vector.broadcast %v : vector<128xf32> to vector<128x128xf32>
  "smalti.vector_store"(%w, %out, %c0, %c0) : (vector<128x128xf32>, memref<128x128xf32>, index, index) -> ()
  return
}
"""
    a = np.random.default_rng(4).standard_normal(128).astype(np.float32)
    assert_same(_run(text, a), np.broadcast_to(a, (128, 128)))


CMPF_PREDICATES = {"oeq": np.equal, "ogt": np.greater, "oge": np.greater_equal,
                   "olt": np.less, "ole": np.less_equal,
                   "one": lambda a, b: (a != b) & ~np.isnan(a) & ~np.isnan(b),
                   "une": np.not_equal, "ult": lambda a, b: ~(a >= b),
                   "uno": lambda a, b: np.isnan(a) | np.isnan(b)}


def _select_kernel(compare: str, element: str, rows: int = 4) -> str:
    """out = select(compare(a, b), a, b) over one tile."""
    v = f"vector<{rows}x128x{element}>"
    m = f"memref<{rows}x128x{element}>"
    return f"""
func.func @k(%a: {m}, %b: {m}, %out: {m}) attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : ({m}, index, index) -> {v}
  %y = "smalti.vector_load"(%b, %c0, %c0) : ({m}, index, index) -> {v}
  %p = {compare} %x, %y : {v}
  %r = arith.select %p, %x, %y : vector<{rows}x128xi1>, {v}
  "smalti.vector_store"(%r, %out, %c0, %c0) : ({v}, {m}, index, index) -> ()
  return
}}
"""


@pytest.mark.parametrize("dtype", [np.float32, BF16], ids=["f32", "bf16"])
@pytest.mark.parametrize("predicate", sorted(CMPF_PREDICATES))
def test_vector_cmpf_and_select(predicate, dtype):
    element = "f32" if dtype == np.float32 else "bf16"
    rng = np.random.default_rng(13)
    a = rng.integers(-3, 3, (4, 128)).astype(dtype)  # small integers: many ties
    b = rng.integers(-3, 3, (4, 128)).astype(dtype)
    a[0, :5] = np.nan
    got = _run(_select_kernel(f"arith.cmpf {predicate},", element), a, b)
    with np.errstate(invalid="ignore"):
        mask = CMPF_PREDICATES[predicate](a.astype(np.float32), b.astype(np.float32))
    assert_same(got, np.where(mask, a, b))


@pytest.mark.parametrize(("predicate", "reference"), [
    ("slt", np.less), ("sge", np.greater_equal), ("eq", np.equal), ("ne", np.not_equal),
    ("ult", lambda a, b: a.view(np.uint32) < b.view(np.uint32))])
def test_vector_cmpi_and_select(predicate, reference):
    rng = np.random.default_rng(17)
    a, b = (rng.integers(-4, 4, (4, 128), dtype=np.int32) for _ in range(2))
    got = _run(_select_kernel(f"arith.cmpi {predicate},", "i32"), a, b)
    assert_same(got, np.where(reference(a, b), a, b))


@pytest.mark.parametrize(("op", "source", "target"), [
    ("arith.sitofp", "i32", "f32"), ("arith.fptosi", "f32", "i32"),
    ("arith.sitofp", "i32", "bf16")])
def test_vector_int_float_conversions(op, source, target):
    dtypes = {"i32": np.int32, "f32": np.float32, "bf16": BF16}
    rng = np.random.default_rng(19)
    if source == "i32":
        x = rng.integers(-100000, 100000, (4, 128), dtype=np.int32)
        expected = x.astype(np.float32).astype(dtypes[target])  # exact to f32, one rounding
        if target == "bf16":  # cvt.rn.bf16.s32 rounds once from the integer
            expected = np.array([[float(v) for v in row] for row in x]).astype(BF16)
    else:
        x = (rng.standard_normal((4, 128)) * 1000).astype(np.float32)
        expected = np.trunc(x).astype(np.int32)
    got = _run(elementwise_kernel(op, source, 1, result_element=target), x)
    assert_same(got, expected)
