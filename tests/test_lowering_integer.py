"""Integer arithmetic (smalti.lowering.integer) in the simulator against exact Python
integers, for every width (i8 packed four to a register and computed in 16 bits, i16, i32,
i64), on vectors and uniform scalars, over edge cases: negative operands, the extremes,
remainders of both signs, shifts by the bit width and more. Every kernel assembles."""

from __future__ import annotations

import numpy as np
import pytest

from smalti.runtime import compile_mlir, run_simulated
from tests.kernels import elementwise_kernel

DTYPES = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64}


def _truncated(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


# op -> the result on Python ints (signed values a, b of `bits` bits), before wrapping
REFERENCES = {
    "arith.addi": lambda a, b, n: a + b,
    "arith.subi": lambda a, b, n: a - b,
    "arith.muli": lambda a, b, n: a * b,
    "arith.andi": lambda a, b, n: a & b,
    "arith.ori": lambda a, b, n: a | b,
    "arith.xori": lambda a, b, n: a ^ b,
    "arith.maxsi": lambda a, b, n: max(a, b),
    "arith.minsi": lambda a, b, n: min(a, b),
    "arith.maxui": lambda a, b, n: max(a % 2**n, b % 2**n),
    "arith.minui": lambda a, b, n: min(a % 2**n, b % 2**n),
    "arith.divsi": lambda a, b, n: _truncated(a, b),
    "arith.remsi": lambda a, b, n: a - _truncated(a, b) * b,
    "arith.divui": lambda a, b, n: a % 2**n // (b % 2**n),
    "arith.remui": lambda a, b, n: a % 2**n % (b % 2**n),
    "arith.ceildivsi": lambda a, b, n: -(-a // b),
    "arith.ceildivui": lambda a, b, n: -(-(a % 2**n) // (b % 2**n)),
    "arith.floordivsi": lambda a, b, n: a // b,
    # shifts by the width or more (poison in MLIR): 0, or the sign for shrsi (numpy's too)
    "arith.shli": lambda a, b, n: 0 if b % 2**n >= n else a << b % 2**n,
    "arith.shrsi": lambda a, b, n: a >> min(b % 2**n, n),
    "arith.shrui": lambda a, b, n: 0 if b % 2**n >= n else a % 2**n >> b % 2**n,
}
DIVISIONS = {op for op in REFERENCES if "div" in op or "rem" in op}
SHIFTS = {"arith.shli", "arith.shrsi", "arith.shrui"}


def _wrap(value: int, bits: int) -> int:
    value %= 2**bits
    return value - 2**bits if value >= 2**(bits - 1) else value


def _operands(op: str, dtype: type, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) over 4x128 with the edge cases first: extremes, signs, ties of division."""
    info = np.iinfo(dtype)
    bits = info.bits
    a = rng.integers(info.min, info.max, (4, 128), dtype=dtype, endpoint=True)
    a[0, :12] = [info.min, info.max, -1, 0, 1, -7, 7, -7, 7, info.min + 1, -8, 9]
    if op in SHIFTS:  # amounts 0 .. bits + 3, and negative ones (read unsigned: large)
        b = rng.integers(0, bits + 4, (4, 128)).astype(dtype)
        b[0, :12] = [0, 1, bits - 1, bits, bits + 1, -1, -bits, 3, 2, bits - 1, 4, 1]
        return a, b
    b = rng.integers(info.min, info.max, (4, 128), dtype=dtype, endpoint=True)
    b[1] = rng.integers(-9, 10, 128)
    b[0, :12] = [3, -3, 2, 5, -1, 2, 2, -2, -2, -1, info.min, info.max]
    if op in DIVISIONS:  # undefined in MLIR: division by zero, and MIN / -1 (signed)
        b[b == 0] = 1
        if op.endswith("si"):
            a[(a == info.min) & (b == -1)] = 0
    return a, b


@pytest.mark.parametrize("element", sorted(DTYPES))
@pytest.mark.parametrize("op", sorted(REFERENCES))
def test_vector_integer_ops_against_python_ints(op, element):
    dtype = DTYPES[element]
    bits = np.iinfo(dtype).bits
    a, b = _operands(op, dtype, np.random.default_rng(abs(hash((op, element))) % 2**32))
    compiled = compile_mlir(elementwise_kernel(op, element, 2), "integer.mlir")
    compiled.assemble()
    got = run_simulated(compiled, a, b, np.zeros_like(a))[-1]
    reference = REFERENCES[op]
    want = np.array([_wrap(reference(int(x), int(y), bits), bits)
                     for x, y in zip(a.ravel(), b.ravel(), strict=True)],
                    dtype=np.int64).astype(dtype).reshape(a.shape)
    bad = np.flatnonzero(got != want)
    assert not bad.size, (f"{op} on {element}: {bad.size} wrong, e.g. {a.flat[bad[0]]}, "
                          f"{b.flat[bad[0]]} -> {got.flat[bad[0]]}, want {want.flat[bad[0]]}")


@pytest.mark.parametrize("element", sorted(DTYPES))
def test_absi_wraps_the_most_negative_value(element):
    dtype = DTYPES[element]
    info = np.iinfo(dtype)
    a = np.random.default_rng(5).integers(info.min, info.max, (4, 128), dtype=dtype)
    a[0, :4] = [info.min, info.max, -1, 0]
    compiled = compile_mlir(elementwise_kernel("math.absi", element, 1), "absi.mlir")
    compiled.assemble()
    got = run_simulated(compiled, a, np.zeros_like(a))[-1]
    np.testing.assert_array_equal(got, np.abs(a))  # numpy's abs(MIN) is MIN too


@pytest.mark.parametrize(("op", "reference"), [
    ("arith.andi", np.logical_and), ("arith.ori", np.logical_or),
    ("arith.xori", np.logical_xor), ("arith.addi", np.logical_xor),
    ("arith.muli", np.logical_and), ("arith.maxsi", np.logical_and),  # true is -1 signed
    ("arith.minui", np.logical_and), ("arith.maxui", np.logical_or)])
def test_i1_vectors_compute_in_predicates(op, reference):
    rng = np.random.default_rng(6)
    a, b = rng.random((2, 4, 128)) < 0.5
    compiled = compile_mlir(elementwise_kernel(op, "i1", 2), "i1.mlir")
    compiled.assemble()
    got = run_simulated(compiled, a, b, np.zeros_like(a))[-1]
    np.testing.assert_array_equal(got, reference(a, b))


SCALAR_OPS = ["arith.divsi", "arith.remsi", "arith.floordivsi", "arith.ceildivsi",
              "arith.divui", "arith.remui", "arith.ceildivui", "arith.shli", "arith.shrsi",
              "arith.shrui", "arith.maxsi", "arith.minui", "arith.andi", "arith.xori",
              "arith.ori", "arith.minsi"]


def _scalar_kernel(element: str, x: str, y: str) -> str:
    """Block b computes every op of SCALAR_OPS on uniform scalars x(b), y(b) and stores each
    result, broadcast, into out[b, op, :]."""
    body = []
    for j, op in enumerate(SCALAR_OPS):
        body.append(f"""  %r{j} = {op} %x, %y : {element}
  %v{j} = vector.broadcast %r{j} : {element} to vector<1x1x128x{element}>
  %j{j} = arith.constant {j} : index
  "smalti.vector_store"(%v{j}, %out, %b, %j{j}, %c0) : (vector<1x1x128x{element}>, memref<8x{len(SCALAR_OPS)}x128x{element}>, index, index, index) -> ()""")
    lines = "\n".join(body)
    return f"""
func.func @k(%out: memref<8x{len(SCALAR_OPS)}x128x{element}>) attributes {{smalti.kernel, smalti.grid = array<i64: 8>}} {{
  %c0 = arith.constant 0 : index
  %b = gpu.block_id x
  %bi = arith.index_cast %b : index to i32
{x}
{y}
{lines}
  return
}}
"""


@pytest.mark.parametrize("constant", [False, True], ids=["uniform", "folded"])
def test_scalar_integer_ops(constant):
    """Uniform i32 scalars (block b: x = 7 (b - 4) - 1, y = b - 4 + (b == 4)), or constants
    that canonicalize and the lowering fold."""
    if constant:
        x = "  %x = arith.constant -7 : i32"
        y = "  %y = arith.constant 3 : i32"
        values = [(-7, 3)] * 8
    else:
        x = """  %four = arith.constant 4 : i32
  %seven = arith.constant 7 : i32
  %one = arith.constant 1 : i32
  %d = arith.subi %bi, %four : i32
  %x7 = arith.muli %d, %seven : i32
  %x = arith.subi %x7, %one : i32"""
        y = """  %zero = arith.constant 0 : i32
  %isz = arith.cmpi eq, %d, %zero : i32
  %bump = arith.select %isz, %one, %zero : i32
  %y = arith.addi %d, %bump : i32"""
        values = [(7 * (b - 4) - 1, (b - 4) or 1) for b in range(8)]
    compiled = compile_mlir(_scalar_kernel("i32", x, y), "scalars.mlir")
    compiled.assemble()
    out = run_simulated(compiled, np.zeros((8, len(SCALAR_OPS), 128), np.int32))[-1]
    for block, (a, c) in enumerate(values):
        for j, op in enumerate(SCALAR_OPS):
            want = _wrap(REFERENCES[op](a, c, 32), 32)
            assert (out[block, j] == want).all(), (op, a, c, out[block, j, 0], want)


POWER_OF_TWO_OPS = ["arith.divsi", "arith.remsi", "arith.floordivsi", "arith.ceildivsi",
                    "arith.divui", "arith.remui", "arith.ceildivui"]


@pytest.mark.parametrize("element", ["i32", "i64"])
@pytest.mark.parametrize("divisor", [1, 2, 8, 64, 2**30, 3, 5, 7, 132, 1000003, 2**31 - 1])
def test_division_by_a_constant_needs_no_division_instruction(element, divisor):
    """A constant divisor: by 2^k shifts, masks and a sign fix-up, by another d (unsigned)
    a multiply-high, instead of `div`/`rem` (ptxas keeps those a division routine); the
    same results as Python's for dividends of either sign, the extremes included (read at
    run time from a table: smalti.load_scalar)."""
    bits = int(element[1:])
    dtype = DTYPES[element]
    info = np.iinfo(dtype)
    dividends = np.array([min(max(v, info.min), info.max) for v in (
        info.min, -divisor - 1, -divisor, -1, 0, divisor - 1, divisor + 3, info.max)], dtype)
    ops = "\n".join(f"""  %r{j} = {op} %x, %y : {element}
  %v{j} = vector.broadcast %r{j} : {element} to vector<1x1x128x{element}>
  %j{j} = arith.constant {j} : index
  "smalti.vector_store"(%v{j}, %out, %b, %j{j}, %c0) : (vector<1x1x128x{element}>, memref<8x{len(POWER_OF_TWO_OPS)}x128x{element}>, index, index, index) -> ()"""
                    for j, op in enumerate(POWER_OF_TWO_OPS))
    source = f"""
func.func @k(%xs: memref<8x{element}>, %out: memref<8x{len(POWER_OF_TWO_OPS)}x128x{element}>) attributes {{smalti.kernel, smalti.grid = array<i64: 8>}} {{
  %c0 = arith.constant 0 : index
  %b = gpu.block_id x
  %x = "smalti.load_scalar"(%xs, %b) : (memref<8x{element}>, index) -> {element}
  %y = arith.constant {divisor} : {element}
{ops}
  return
}}
"""
    compiled = compile_mlir(source, "powers.mlir")
    body = compiled.ptx[compiled.ptx.index("ld.global"):]
    signs = "su" if divisor & (divisor - 1) == 0 else "u"
    assert not any(f"{kind}.{sign}{bits}" in body for kind in ("div", "rem") for sign in signs)
    compiled.assemble()
    out = run_simulated(compiled, dividends,
                        np.zeros((8, len(POWER_OF_TWO_OPS), 128), dtype))[-1]
    for block, a in enumerate(dividends.tolist()):
        for j, op in enumerate(POWER_OF_TWO_OPS):
            want = _wrap(REFERENCES[op](a, divisor, bits), bits)
            assert (out[block, j] == want).all(), (op, a, divisor, out[block, j, 0], want)
