"""smalti.inline_ptx (smalti/dialect/ops_inline.py, sd.inline_ptx) run in the simulator
against numpy: an f32 fma, bf16 pairs through max.bf16x2 (pack = 2, from registers that
hold pairs and, after a layout that holds single elements, regrouped), an integer lop3 with
two results; the lit kernels assemble with ptxas; and the DSL's located errors."""

from __future__ import annotations

import re
from pathlib import Path

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import smalti.dsl as sd
from smalti.runtime import compile_mlir
from smalti.runtime.simulate import run_simulated

LIT_FILE = Path(__file__).resolve().parents[1] / "lit_tests" / "lowering" / "inline_ptx.mlir"
CHUNKS = LIT_FILE.read_text().split("// -----")
SHAPE = (16, 128)
RNG = np.random.default_rng(19)


def _kernel(element: str, operands: int, body: str, results: int = 1) -> str:
    """A kernel loading `operands` 16x128 vectors %v0.. of `element`, running `body` (which
    defines %r0..), and storing the `results` %r0.. to the buffers after the operands."""
    vec = f"vector<16x128x{element}>"
    ref = f"memref<16x128x{element}>"
    args = ", ".join(f"%a{i}: {ref}" for i in range(operands + results))
    loads = "\n".join(
        f'  %v{i} = "smalti.vector_load"(%a{i}, %c0, %c0) : ({ref}, index, index) -> {vec}'
        for i in range(operands))
    stores = "\n".join(
        f'  "smalti.vector_store"(%r{i}, %a{operands + i}, %c0, %c0) : ({vec}, {ref}, index, '
        "index) -> ()" for i in range(results))
    return (f"func.func @k({args}) attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} "
            f"{{\n  %c0 = arith.constant 0 : index\n{loads}\n{body}\n{stores}\n  return\n}}\n")


def _run(text: str, *arrays: np.ndarray, results: int = 1) -> list[np.ndarray]:
    compiled = compile_mlir(text, "inline_ptx.mlir")
    outs = [np.zeros_like(arrays[0]) for _ in range(results)]
    return list(run_simulated(compiled, *arrays, *outs)[len(arrays):])


def test_fma_f32_matches_numpy():
    body = ('  %r0 = "smalti.inline_ptx"(%v0, %v1, %v2) {ptx = "fma.rn.f32 $0, $1, $2, $3;", '
            'constraints = "=f,f,f,f"} : (vector<16x128xf32>, vector<16x128xf32>, '
            "vector<16x128xf32>) -> vector<16x128xf32>")
    a, b, c = (RNG.standard_normal(SHAPE).astype(np.float32) for _ in range(3))
    [got] = _run(_kernel("f32", 3, body), a, b, c)
    want = (a.astype(np.float64) * b + c).astype(np.float32)  # one rounding, as fma
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("layout", [None, "#smalti.strided<vec = 1>"])
def test_max_bf16x2_with_pack_2(layout):
    """Pairs straight from the registers, and (vec = 1: one element per register) joined
    into pairs and split back."""
    vec = "vector<16x128xbf16>"
    cast = ""
    names = ("%v0", "%v1")
    if layout is not None:
        cast = "\n".join(f'  %w{i} = "smalti.layout_cast"(%v{i}) {{new_layout = {layout}}} '
                         f": ({vec}) -> {vec}" for i in range(2)) + "\n"
        names = ("%w0", "%w1")
    body = (cast + f'  %r0 = "smalti.inline_ptx"({names[0]}, {names[1]}) '
            '{ptx = "max.bf16x2 $0, $1, $2;", constraints = "=r,r,r", pack = 2 : i64} : '
            f"({vec}, {vec}) -> {vec}")
    a, b = (RNG.standard_normal(SHAPE).astype(ml_dtypes.bfloat16) for _ in range(2))
    [got] = _run(_kernel("bf16", 2, body), a, b)
    np.testing.assert_array_equal(got, np.maximum(a, b))


def test_lop3_i32_two_results():
    vec = "vector<16x128xi32>"
    body = ('  %r0, %r1 = "smalti.inline_ptx"(%v0, %v1, %v2) {ptx = "lop3.b32 $0, $2, $3, '
            '$4, 0xE8;\\n not.b32 $1, $2;", constraints = "=r,=r,r,r,r"} : '
            f"({vec}, {vec}, {vec}) -> ({vec}, {vec})")
    a, b, c = (RNG.integers(-2**31, 2**31, SHAPE, dtype=np.int32) for _ in range(3))
    majority, inverted = _run(_kernel("i32", 3, body, results=2), a, b, c, results=2)
    np.testing.assert_array_equal(majority, (a & b) | (a & c) | (b & c))  # 0xE8: majority
    np.testing.assert_array_equal(inverted, ~a)


@sd.kernel(grid=(1,), out_shape=[jax.ShapeDtypeStruct(SHAPE, jnp.bfloat16)])
def _dsl_max(x_ref, y_ref, out_ref):
    out_ref[...] = sd.inline_ptx("max.bf16x2 $0, $1, $2;", "=r,r,r", x_ref[...], y_ref[...],
                                 result_dtypes=jnp.bfloat16, pack=2)


def test_dsl_inline_ptx_under_jit():
    a, b = (RNG.standard_normal(SHAPE).astype(ml_dtypes.bfloat16) for _ in range(2))
    [got] = jax.jit(_dsl_max)(a, b)
    np.testing.assert_array_equal(np.asarray(got), np.maximum(a, b))


@pytest.mark.parametrize(("constraints", "pack", "message"), [
    ("=r,r,r", 1, r"result #0 \(\$0\) has 1 x bf16 per register \(16 bits\), which "
                  r"constraint 'r' \(b32\) cannot hold"),
    ("=r,r", 2, "1 result and 1 operand constraints for 1 results and 2 operands"),
    ("=r,r,q", 2, "constraint 'q' is not one of"),
    ("=r,r,r", 3, "pack must be 1, 2 or 4"),
])
def test_dsl_errors_are_located(constraints, pack, message):
    @sd.kernel(grid=(1,), out_shape=[jax.ShapeDtypeStruct(SHAPE, jnp.bfloat16)])
    def bad(x_ref, y_ref, out_ref):
        out_ref[...] = sd.inline_ptx("max.bf16x2 $0, $1, $2;", constraints, x_ref[...],
                                     y_ref[...], result_dtypes=jnp.bfloat16, pack=pack)

    a = np.zeros(SHAPE, ml_dtypes.bfloat16)
    with pytest.raises(ValueError, match=message) as info:
        jax.jit(bad)(a, a)
    assert "test_inline_ptx.py:" in str(info.value)


def test_dsl_placeholder_out_of_range():
    @sd.kernel(grid=(1,), out_shape=[jax.ShapeDtypeStruct(SHAPE, jnp.float32)])
    def bad(x_ref, out_ref):
        out_ref[...] = sd.inline_ptx("mov.b32 $0, $2;", "=r,r", x_ref[...],
                                     result_dtypes=jnp.float32)

    with pytest.raises(ValueError, match=r"placeholder \$2 is out of range"):
        jax.jit(bad)(np.zeros(SHAPE, np.float32))


@pytest.mark.parametrize("index", range(len(CHUNKS)))
def test_lit_kernels_assemble(index):
    """ptxas takes the text in its { } scopes and the moves around it."""
    chunk = CHUNKS[index]
    name = re.search(r"func\.func @(\w+)", chunk).group(1)
    compiled = compile_mlir(chunk, f"{LIT_FILE}:{name}")
    compiled.assemble()
    assert re.search(r"^\t\{$", compiled.ptx, re.MULTILINE)  # an inner scope, indented


def _chunk(name: str) -> str:
    return next(c for c in CHUNKS if f"func.func @{name}(" in c)


def test_pure_text_merged_side_effecting_kept_numbers():
    """The lit kernel `effects`: the merged pure result is stored twice, both side-effecting
    copies run (smalti-cse keeps them), and the numbers are right."""
    x = RNG.standard_normal((1, 128)).astype(np.float32)
    compiled = compile_mlir(_chunk("effects"), "effects.mlir")
    assert compiled.ptx.count("mul.rn.f32") == 1 and compiled.ptx.count("add.rn.f32") == 2
    assert "neg.f32" in compiled.ptx and "sub.rn.f32" not in compiled.ptx
    outs = run_simulated(compiled, x, *(np.zeros_like(x) for _ in range(4)))[1:]
    for got, want in zip(outs, (x * 2, x * 2, x + 1, x + 1), strict=True):
        np.testing.assert_array_equal(got, want)


def test_scalar_operands_numbers():
    """`scaled_by_block`: x * block + 3, the block index a register and 3 an immediate."""
    x = RNG.integers(-1000, 1000, (2, 128), dtype=np.int32)
    compiled = compile_mlir(_chunk("scaled_by_block"), "scaled_by_block.mlir")
    [got] = run_simulated(compiled, x, np.zeros_like(x))[1:]
    np.testing.assert_array_equal(got, x * np.array([[0], [1]], np.int32) + 3)


@sd.kernel(grid=(2,), out_shape=jax.ShapeDtypeStruct((2, 128), jnp.int32))
def _dsl_scalars(x_ref, out_ref):
    row = sd.program_id(0)
    out_ref[row, :] = sd.inline_ptx("mad.lo.s32 $0, $1, $2, $3;", "=r,r,r,r", x_ref[row, :],
                                    row, 7, result_dtypes=jnp.int32)


def test_dsl_index_and_int_operands():
    x = RNG.integers(-1000, 1000, (2, 128), dtype=np.int32)
    got = np.asarray(jax.jit(_dsl_scalars)(x))
    np.testing.assert_array_equal(got, x * np.array([[0], [1]], np.int32) + 7)


@sd.kernel(grid=(1,), out_shape=[jax.ShapeDtypeStruct(SHAPE, jnp.float32)] * 4)
def _dsl_effects(x_ref, a_ref, b_ref, c_ref, d_ref):
    x = x_ref[...]
    a_ref[...] = sd.inline_ptx("mul.rn.f32 $0, $1, 0f40000000;", "=f,f", x,
                               result_dtypes=jnp.float32)
    b_ref[...] = sd.inline_ptx("mul.rn.f32 $0, $1, 0f40000000;", "=f,f", x,
                               result_dtypes=jnp.float32)
    c_ref[...] = sd.inline_ptx("add.rn.f32 $0, $1, 0f3F800000;", "=f,f", x,
                               result_dtypes=jnp.float32, has_side_effects=True)
    d_ref[...] = sd.inline_ptx("add.rn.f32 $0, $1, 0f3F800000;", "=f,f", x,
                               result_dtypes=jnp.float32, has_side_effects=True)


def test_dsl_side_effecting_copies_survive_and_pure_ones_merge():
    _, compiled = _dsl_effects.compile(jax.ShapeDtypeStruct(SHAPE, jnp.float32))
    groups = 16 * 128 // 128  # registers per thread
    assert compiled.ptx.count("mul.rn.f32") == groups
    assert compiled.ptx.count("add.rn.f32") == 2 * groups
    x = RNG.standard_normal(SHAPE).astype(np.float32)
    a, b, c, d = (np.asarray(r) for r in jax.jit(_dsl_effects)(x))
    for got, want in zip((a, b, c, d), (x * 2, x * 2, x + 1, x + 1), strict=True):
        np.testing.assert_array_equal(got, want)
