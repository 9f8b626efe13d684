"""smalti.custom_primitive (smalti/dialect/ops_custom.py, smalti/lowering/custom_primitive.py)
run in the simulator against numpy: the lit kernels (row sums by hand-written shuffles in the
WGMMA layout, bf16 elements split and joined, a tiled shared-memory ref read by address);
inference adapting the kernel to the declared layouts (relayouts where one value is wanted
in two); the lit kernels assemble with ptxas."""

from __future__ import annotations

import re
from pathlib import Path

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import smalti.dsl as sd
from smalti.dialect import make_context, parse_module
from smalti.passes.registry import run_pipeline
from smalti.runtime import compile_mlir
from smalti.runtime.simulate import run_simulated
from tests.dsl_helpers import load_example

LIT_FILE = Path(__file__).resolve().parents[1] / "lit_tests" / "lowering" / "custom_primitive.mlir"
CHUNKS = {re.search(r"func\.func @(\w+)", chunk).group(1): chunk
          for chunk in LIT_FILE.read_text().split("// -----")}
RNG = np.random.default_rng(19)
WGMMA = ("#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], "
         "lane = [-3, -2], vector = -1>")


def _run(text: str, name: str, *arrays: np.ndarray, outputs: int = 1) -> list[np.ndarray]:
    compiled = compile_mlir(text, f"{LIT_FILE}:{name}")
    outs = [np.zeros_like(arrays[0]) for _ in range(outputs)]
    return list(run_simulated(compiled, *arrays, *outs)[len(arrays):])


def test_row_sums_by_shuffles_in_the_wgmma_layout():
    x = RNG.random((64, 8), dtype=np.float32) + 0.5
    [got] = _run(CHUNKS["row_normalise"], "row_normalise", x)
    np.testing.assert_allclose(got, x / x.sum(axis=1, keepdims=True), rtol=1e-6)


def test_bf16_elements_split_and_joined():
    x = RNG.standard_normal(256).astype(ml_dtypes.bfloat16)
    [got] = _run(CHUNKS["swap_pairs"], "swap_pairs", x)
    want = np.empty_like(x)
    want[0::2] = np.maximum(x[0::2], x[1::2])
    want[1::2] = (x[0::2].astype(np.float32) * 0.5).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(got, want)


def test_tiled_smem_ref_read_by_address():
    """The declared tile<[8, 8]> reaches the vector_store that fills the ref; the body reads
    the tiles by address and yields the array as it was."""
    x = RNG.standard_normal((16, 16)).astype(np.float32)
    [got] = _run(CHUNKS["tiled_read"], "tiled_read", x)
    np.testing.assert_array_equal(got, x)


def _scale_and_shift(layout_y: str, layout_z: str) -> str:
    """x loaded once, doubled by a custom_primitive declaring `layout_y` and incremented by
    one declaring `layout_z`."""
    vec, ref = "vector<64x8xf32>", "memref<64x8xf32>"

    def primitive(layout: str, op: str, constant: str) -> str:
        args = ", ".join(f"%e{i}: f32" for i in range(4))
        body = "\n".join(f"    %o{i} = arith.{op} %e{i}, %k : f32" for i in range(4))
        yielded = ", ".join(f"%o{i}" for i in range(4))
        return (f'"smalti.custom_primitive"(%x) ({{\n  ^bb0({args}):\n'
                f"    %k = arith.constant {constant} : f32\n{body}\n"
                f'    "smalti.custom_yield"({yielded}) : (f32, f32, f32, f32) -> ()\n'
                f"  }}) {{in_layouts = [{layout}], out_layouts = [{layout}]}} : ({vec}) -> {vec}")

    return f"""
func.func @two_layouts(%a: {ref}, %y_out: {ref}, %z_out: {ref})
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : ({ref}, index, index) -> {vec}
  %y = {primitive(layout_y, "mulf", "2.0")}
  %z = {primitive(layout_z, "addf", "1.0")}
  "smalti.vector_store"(%y, %y_out, %c0, %c0) : ({vec}, {ref}, index, index) -> ()
  "smalti.vector_store"(%z, %z_out, %c0, %c0) : ({vec}, {ref}, index, index) -> ()
  return
}}
"""


def _inferred(text: str) -> str:
    context = make_context()
    with context:
        module = parse_module(text, "two_layouts.mlir", context)
        run_pipeline(module)
        return str(module)


def test_the_kernel_adapts_to_a_declared_layout():
    """One custom_primitive: the load takes its WGMMA layout, no relayout."""
    text = _scale_and_shift(WGMMA, WGMMA)
    ir_text = _inferred(text)
    assert "smalti.layout_cast" not in ir_text
    load = next(line for line in ir_text.splitlines() if "smalti.vector_load" in line)
    assert "warp = [-7], lane = [-3, -2]" in load


def test_one_value_in_two_declared_layouts_is_relaid_out():
    """The operand is wanted in the WGMMA layout and in a strided one: inference inserts
    relayouts (where it finds them cheapest); both results are right."""
    text = _scale_and_shift(WGMMA, "#smalti.strided<vec = 2>")
    ir_text = _inferred(text)
    assert re.search(r'"smalti\.layout_cast".*inferred', ir_text)
    x = RNG.standard_normal((64, 8)).astype(np.float32)
    y, z = _run(text, "two_layouts", x, outputs=2)
    np.testing.assert_array_equal(y, x * 2)
    np.testing.assert_array_equal(z, x + 1)


@pytest.mark.parametrize("name", sorted(CHUNKS))
def test_lit_kernels_assemble(name):
    """ptxas takes the bodies (shuffles in { } scopes, bf16 arithmetic, shared loads)."""
    compile_mlir(CHUNKS[name], f"{LIT_FILE}:{name}").assemble()


# ---- the DSL: sd.custom_primitive ---------------------------------------------------------

ROWS, COLS = 64, 32
LOG2_E = 1.4426950408889634


def _shfl_xor(value: sd.Register, mask: int) -> sd.Register:
    return sd.inline_ptx(f"shfl.sync.bfly.b32 $0, $1, {mask}, 0x1f, 0xffffffff;", "=f,f",
                         value, result_dtypes=jnp.float32)


@sd.custom_primitive(in_layouts=["wgmma"], out_layouts=["wgmma"],
                     out_shapes=[jax.ShapeDtypeStruct((ROWS, COLS), jnp.float32)])
def _row_softmax(t, x):
    """Softmax of each row of a 64 x N array in the WGMMA layout: thread t holds, of row
    16 (t // 32) + (t % 32) // 4 (and 8 below it), the elements its register pairs 0, 2, 4...
    (1, 3, 5...) hold; the four lanes of a quad share a row: two butterfly shuffles."""
    del t
    out = list(x)
    for half in (0, 1):
        ks = [k for k in range(len(x)) if (k // 2) % 2 == half]
        largest = x[ks[0]]
        for k in ks[1:]:
            largest = largest.maximum(x[k])
        for mask in (1, 2):
            largest = largest.maximum(_shfl_xor(largest, mask))
        for k in ks:
            scaled = (x[k] - largest) * LOG2_E
            out[k] = sd.inline_ptx("ex2.approx.f32 $0, $1;", "=f,f", scaled,
                                   result_dtypes=jnp.float32)
        total = out[ks[0]]
        for k in ks[1:]:
            total = total + out[k]
        for mask in (1, 2):
            total = total + _shfl_xor(total, mask)
        for k in ks:
            out[k] = out[k] / total
    return out


@sd.kernel(grid=(1,), out_shape=jax.ShapeDtypeStruct((ROWS, COLS), jnp.float32))
def _softmax_kernel(x_ref, out_ref):
    out_ref[...] = _row_softmax(x_ref[...])


def test_dsl_row_softmax_by_hand_written_shuffles():
    x = RNG.standard_normal((ROWS, COLS)).astype(np.float32) * 4
    got = np.asarray(jax.jit(_softmax_kernel)(x))
    want = np.exp(x - x.max(axis=1, keepdims=True))
    want /= want.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)


def test_dsl_thread_indices_and_a_shared_ref():
    """The body reads a 128-entry table in shared memory at its thread index and adds it to
    its elements (strided layout: thread t holds elements 2t and 2t + 1)."""

    @sd.custom_primitive(in_layouts=["#smalti.strided<vec = 2>"], out_layouts=["strided<vec = 2>"],
                         out_shapes=[jax.ShapeDtypeStruct((256,), jnp.float32)],
                         in_transforms=[()])
    def add_entry(t, x, table):
        address = table + t.thread * 4
        entry = sd.inline_ptx("ld.shared.f32 $0, [$1];", "=f,r", address,
                              result_dtypes=jnp.float32)
        return [x[0] + entry, x[1] + entry]

    @sd.kernel(grid=(1,), out_shape=jax.ShapeDtypeStruct((256,), jnp.float32),
               smem=[sd.SMEM((128,), jnp.float32)])
    def kernel(x_ref, table_ref, out_ref, table_smem):
        table_smem[...] = table_ref[...]
        out_ref[...] = add_entry(x_ref[...], table_smem)

    x = RNG.standard_normal(256).astype(np.float32)
    table = RNG.standard_normal(128).astype(np.float32)
    got = np.asarray(jax.jit(kernel)(x, table))
    np.testing.assert_array_equal(got, x + np.repeat(table, 2))


def test_dsl_thread_warp_and_lane():
    """No operands: thread t yields its index and its warp and lane, for elements 2t, 2t + 1."""

    @sd.custom_primitive(in_layouts=[], out_layouts=["strided<vec = 2>"],
                         out_shapes=[jax.ShapeDtypeStruct((256,), jnp.int32)])
    def indices(t):
        return [t.thread, t.warp * 100 + t.lane]

    @sd.kernel(grid=(1,), out_shape=jax.ShapeDtypeStruct((256,), jnp.int32))
    def kernel(out_ref):
        out_ref[...] = indices()

    got = np.asarray(jax.jit(kernel)())
    threads = np.arange(128)
    np.testing.assert_array_equal(got[0::2], threads)
    np.testing.assert_array_equal(got[1::2], threads // 32 * 100 + threads % 32)


def _traced_with(body, *, in_layouts=("strided<vec = 2>",), out_layouts=("strided<vec = 2>",),
                 shape=(256,), operands=1):
    """Trace a kernel calling a custom_primitive over `operands` (256,) f32 arrays."""
    primitive = sd.custom_primitive(in_layouts=list(in_layouts), out_layouts=list(out_layouts),
                                    out_shapes=[jax.ShapeDtypeStruct(shape, jnp.float32)])(body)

    @sd.kernel(grid=(1,), out_shape=jax.ShapeDtypeStruct(shape, jnp.float32))
    def kernel(x_ref, out_ref):
        out_ref[...] = primitive(*([x_ref[...]] * operands))

    kernel.trace(jax.ShapeDtypeStruct((256,), jnp.float32))


@pytest.mark.parametrize(("kind", "options", "message"), [
    (ValueError, {}, r"result #0 needs 2 registers per thread \(#smalti.strided<vec = 2> "
                     r"over \(256,\)\); the body returned 1"),
    (ValueError, {"in_layouts": ("wgmma-sideways",)}, "unknown layout #smalti.wgmma-sideways; .*or a canonical layout: wgmma, "),
    (ValueError, {"out_layouts": ("wgmma",)}, "cannot hold a result of shape"),
    (ValueError, {"operands": 2}, "declares 1 in_layouts for 2 Array operands"),
])
def test_dsl_errors_are_located(kind, options, message):
    with pytest.raises(kind, match=message) as info:
        _traced_with(lambda t, x: [x[0]], **options)
    assert "test_custom_primitive.py:" in str(info.value)


def test_dsl_register_dtypes_must_agree():
    with pytest.raises(TypeError, match=r"'\+' of float32 and int32 registers") as info:
        _traced_with(lambda t, x: [x[0] + t.lane, x[1]])
    assert "test_custom_primitive.py:" in str(info.value)


def test_dsl_body_stores_to_shared_memory():
    """A side-effecting text with no result stores each thread's first element into the
    table at its index (reversed); the kernel then loads the table as an array: the body's
    shared-memory writes are ordered before the load (the warpgroup meets)."""

    @sd.custom_primitive(in_layouts=["strided<vec = 2>"], out_layouts=["strided<vec = 2>"],
                         out_shapes=[jax.ShapeDtypeStruct((256,), jnp.float32)],
                         in_transforms=[()])
    def scatter(t, x, table):
        address = table + (127 - t.thread) * 4
        sd.inline_ptx("st.shared.f32 [$0], $1;", "r,f", address, x[0], result_dtypes=(),
                      has_side_effects=True)
        return list(x)

    @sd.kernel(grid=(1,), out_shape=(jax.ShapeDtypeStruct((256,), jnp.float32),
                                     jax.ShapeDtypeStruct((128,), jnp.float32)),
               smem=[sd.SMEM((128,), jnp.float32)])
    def kernel(x_ref, out_ref, table_out_ref, table_smem):
        out_ref[...] = scatter(x_ref[...], table_smem)
        table_out_ref[...] = table_smem[...]

    x = RNG.standard_normal(256).astype(np.float32)
    same, table = (np.asarray(r) for r in jax.jit(kernel)(x))
    np.testing.assert_array_equal(same, x)
    np.testing.assert_array_equal(table, x[0::2][::-1])
    ptx = kernel.compile(jax.ShapeDtypeStruct((256,), jnp.float32))[1].ptx
    store = ptx.index("st.shared.f32")
    assert "bar.sync 1, 128;" in ptx[store:ptx.index("ld.shared", store)]


def test_dsl_register_math_on_bf16_and_f32():
    """Float functions and conversions on registers: bf16 elements widened, sqrt and exp in
    f32, the bf16 result rounded once; max and abs on bf16 natively."""

    @sd.custom_primitive(in_layouts=["strided<vec = 2>"], out_layouts=["strided<vec = 2>"],
                         out_shapes=[jax.ShapeDtypeStruct((256,), jnp.bfloat16)])
    def mixed(t, x):
        wide = x[0].astype(jnp.float32)
        return [(wide.abs().sqrt() + wide.exp()).astype(jnp.bfloat16),
                x[1].abs().maximum(x[0])]

    @sd.kernel(grid=(1,), out_shape=jax.ShapeDtypeStruct((256,), jnp.bfloat16))
    def kernel(x_ref, out_ref):
        out_ref[...] = mixed(x_ref[...])

    x = RNG.standard_normal(256).astype(ml_dtypes.bfloat16)
    got = np.asarray(jax.jit(kernel)(x)).astype(np.float32)
    first = x[0::2].astype(np.float32)
    np.testing.assert_allclose(got[0::2], np.sqrt(np.abs(first)) + np.exp(first), rtol=1e-2)
    np.testing.assert_array_equal(got[1::2], np.maximum(np.abs(x[1::2]), x[0::2])
                                  .astype(np.float32))


def test_softmax_example_matches_jax_nn_softmax():
    """examples/custom_primitive_softmax.py, on shapes of several row blocks and widths."""
    example = load_example("custom_primitive_softmax")
    for rows, cols in ((128, 64), (64, 24)):
        x = RNG.standard_normal((rows, cols)).astype(np.float32) * 3
        got = np.asarray(jax.jit(example.softmax)(x))
        np.testing.assert_allclose(got, np.asarray(jax.nn.softmax(x, axis=-1)), rtol=2e-6,
                                   atol=1e-7)
