"""Programs without a single layout assignment compile: layout inference inserts the
cheapest relayouts (smalti/layout_inference/cuts.py), within warps whenever some set of
them suffices, and refuses, with the explanation of a minimal conflict, only what no
relayout resolves.

The .mlir programs are those of lit_tests/inference/inferred_relayouts.mlir (FileCheck
checks the casts inserted there); here they run through the simulator against numpy. The
issue-14 reproductions (/work/shared/repros/limitation_*.mlir) are among them, as written:
no cast by hand."""

from __future__ import annotations

import dataclasses
import os
import re
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from jaxlib.mlir import ir

import smalti.dsl as sd
from smalti.dialect import DiagnosticError, make_context, parse_module
from smalti.dialect.attributes import attr_to_layouts, layout_to_text
from smalti.layout_inference import explain_function
from smalti.layout_inference.conflicts import explain
from smalti.layout_inference.equations import (
    Variable,
    variables_of,
)
from smalti.layout_inference.materialise import split_per_user
from smalti.layout_inference.solver import (
    Unsatisfiable,
    fits,
    relayout_supported,
    solve,
    too_dear,
)
from smalti.passes import run_pipeline
from smalti.runtime import compile_mlir, run_simulated
from smalti.tiling import (
    WGMMA_COL_LAYOUT,
    WGMMA_LAYOUT,
    WGMMA_LAYOUT_8BIT,
    WGMMA_LAYOUT_TF32_A,
    WGMMA_ROW_LAYOUT,
    WGMMA_TRANSPOSED_LAYOUT,
    WGSplatLayout,
    WGStridedLayout,
)
from smalti.tiling.relayout import relayout_kind
from tests.constraint_oracle import constraint_holds
from tests.dsl_helpers import isolated_cache  # noqa: F401
from tests.test_inference_conflicts import _equations

LIT = Path(__file__).resolve().parents[1] / "lit_tests" / "inference"
INFER = "builtin.module(smalti-verify,canonicalize,cse,smalti-infer-layouts)"


def chunk(name: str, file: str = "inferred_relayouts.mlir") -> str:
    """The `// -----` chunk of a lit file defining `@name`."""
    return next(c for c in (LIT / file).read_text().split("// -----") if f"@{name}(" in c)


def inferred(text: str, name: str = "inferred.mlir") -> tuple[ir.Module, list[ir.Operation]]:
    """The module after layout inference, and the casts inference inserted."""
    context = make_context()
    module = parse_module(text, name, context)
    with context:
        run_pipeline(module, INFER)
    casts = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.operation.name == "smalti.layout_cast" and "inferred" in op.operation.attributes:
            casts.append(op.operation)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return module, casts


def kind(cast: ir.Operation) -> str:
    return ir.StringAttr(cast.attributes["inferred"]).value


def ints(shape: tuple[int, ...], seed: int, dtype=np.float32) -> np.ndarray:
    """Small integers (exact sums in f32)."""
    return np.random.default_rng(seed).integers(-8, 9, shape).astype(dtype)


# Relayouts within warps.

def test_row_plus_column_sums_casts_the_column_sums_with_shuffles():
    text = chunk("row_plus_column_sums")
    _, casts = inferred(text)
    assert [kind(c) for c in casts] == ["shuffles"]
    (cast,) = casts
    user = next(iter(cast.results[0].uses)).owner
    assert user.name == "arith.addf"
    assert str(cast.location) == str(user.location)  # at the user's line
    x = ints((128, 128), 0)
    compiled = compile_mlir(text, "rc.mlir")
    _, out = run_simulated(compiled, x, np.zeros(128, np.float32))
    np.testing.assert_array_equal(out, x.sum(0) + x.sum(1))
    # The shuffles the relayout emits carry the user's line in the PTX (.loc).
    line = int(re.search(r":(\d+):\d+", str(user.location)).group(1))
    at_line, loc = [], None
    for ptx_line in compiled.ptx.splitlines():
        if ptx_line.strip().startswith(".loc"):
            loc = int(ptx_line.split()[2])
        elif "shfl.sync" in ptx_line and loc == line:
            at_line.append(ptx_line)
    assert at_line


def test_tf32_a_plus_accumulator_matches_numpy():
    text = chunk("tf32_a_plus_accumulator")
    _, casts = inferred(text)
    assert [kind(c) for c in casts] == ["shuffles"]
    x, y = ints((64, 64), 1), ints((64, 64), 2)
    out = run_simulated(compile_mlir(text, "tf32.mlir"), x, y, np.zeros_like(x))[-1]
    np.testing.assert_array_equal(out, x + y)


def test_transpose_and_reshape_matches_numpy():
    """limitation_transpose_and_reshape.mlir, as written."""
    text = chunk("transpose_and_reshape")
    _, casts = inferred(text)
    assert [kind(c) for c in casts] == ["shuffles"]
    x = np.random.default_rng(3).standard_normal((128, 32)).astype(np.float16)
    _, t, flat = run_simulated(compile_mlir(text, "tr.mlir"), x, np.zeros((32, 128), np.float16),
                               np.zeros(4096, np.float16))
    np.testing.assert_array_equal(t, x.T)
    np.testing.assert_array_equal(flat, x.reshape(-1))


def test_a_splat_stored_is_made_in_registers():
    text = chunk("splat_stored")
    _, casts = inferred(text)
    assert [kind(c) for c in casts] == ["registers"]
    out = run_simulated(compile_mlir(text, "splat.mlir"), np.zeros((128, 128), np.float32))[-1]
    np.testing.assert_array_equal(out, np.full((128, 128), -1.5, np.float32))


# Relayouts across warps (through shared memory).

def test_x_plus_its_transpose_matches_numpy():
    """limitation_x_plus_xT.mlir (and misattributed_transpose_diagnostic.mlir): one
    relayout through shared memory, next to a part that needs none."""
    text = chunk("x_plus_x_transposed")
    _, casts = inferred(text)
    assert [kind(c) for c in casts] == ["smem"]
    x, y = ints((64, 64), 8), ints((64, 64), 9)
    acc = np.full(64, -100.0, np.float32)
    _, _, _, m, s = run_simulated(compile_mlir(text, "xt.mlir"), x, acc, y,
                                  np.zeros(64, np.float32), np.zeros_like(y))
    np.testing.assert_array_equal(m, np.maximum(x.max(1), acc))
    np.testing.assert_array_equal(s, y + y.T)


def test_explain_layouts_says_which_casts_inference_inserted():
    text = chunk("x_plus_x_transposed")
    context = make_context()
    module = parse_module(text, "xt.mlir", context)
    with context:
        remarks = explain_function(module.regions[0].blocks[0].operations[0])
    inserted = [r for r in remarks if "inserted by inference" in r.message]
    assert len(inserted) == 1, inserted
    assert inserted[0].severity == "remark"
    assert inserted[0].message.startswith(
        "result #0 of 'smalti.layout_cast' (inserted by inference: a relayout through shared "
        "memory) has #smalti.tiled<"), inserted[0].message


def test_many_conflicts_along_one_part_are_all_cut():
    """y + y.T six times over: six relayouts in one part, past the exact search's limits
    (its cores overlap along the chain); each is needed, and the numbers are right."""
    lines = ['func.func @k(%a: memref<64x64xf32>, %o: memref<64x64xf32>) '
             'attributes {smalti.kernel, smalti.grid = array<i64: 1>} {',
             '  %c0 = arith.constant 0 : index',
             '  %y0 = "smalti.vector_load"(%a, %c0, %c0) : (memref<64x64xf32>, index, index) '
             '-> vector<64x64xf32>']
    for i in range(6):
        lines += [f"  %t{i} = vector.transpose %y{i}, [1, 0] : vector<64x64xf32> to "
                  "vector<64x64xf32>",
                  f"  %y{i + 1} = arith.addf %y{i}, %t{i} : vector<64x64xf32>"]
    lines += ['  "smalti.vector_store"(%y6, %o, %c0, %c0) : (vector<64x64xf32>, '
              'memref<64x64xf32>, index, index) -> ()', "  return", "}"]
    text = "\n".join(lines)
    _, casts = inferred(text)
    assert [kind(c) for c in casts] == ["smem"] * 6
    x = ints((64, 64), 11)
    want = x
    for _ in range(6):
        want = want + want.T
    out = run_simulated(compile_mlir(text, "many.mlir"), x, np.zeros_like(x))[-1]
    np.testing.assert_array_equal(out, want)


def test_a_part_the_relaxed_search_gives_up_on_is_still_searched():
    """Found by the property test in tests/test_inference_conflicts.py: with every use cut,
    the search ran out of budget, and the part was refused as one no relayout resolves,
    though one relayout (of x.T before the product) does."""
    text = """func.func @k(%ref: memref<128x128xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %v1 = "smalti.vector_load"(%ref, %c0, %c0) : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  %v2 = arith.addf %v1, %v1 : vector<128x128xf32>
  %v3 = vector.transpose %v1, [1, 0] : vector<128x128xf32> to vector<128x128xf32>
  %v4 = arith.mulf %v3, %v1 : vector<128x128xf32>
  %v5 = arith.maximumf %v4, %v2 : vector<128x128xf32>
  %v6 = arith.constant dense<0.0> : vector<128xf32>
  %v7 = vector.multi_reduction <add>, %v3, %v6 [1] : vector<128x128xf32> to vector<128xf32>
  %v8 = "smalti.layout_cast"(%v7) {new_layout = #smalti.strided<vec = 1>} : (vector<128xf32>) -> vector<128xf32>
  "smalti.vector_store"(%v3, %ref, %c0, %c0) : (vector<128x128xf32>, memref<128x128xf32>, index, index) -> ()
  return
}"""
    context = make_context()
    module = parse_module(text, "relaxed.mlir", context)
    with context:  # as that test runs it: dead values kept, so the conflict stays
        run_pipeline(module, "builtin.module(smalti-verify,smalti-infer-layouts)")
    assert re.findall(r'inferred = "(\w+)"', str(module)) == ["smem"]


def test_a_users_cast_keeps_its_meaning():
    text = chunk("users_cast_stays")
    _, casts = inferred(text)
    assert casts == []
    x = ints((128, 128), 4)
    out = run_simulated(compile_mlir(text, "users.mlir"), x, np.zeros(128, np.float32))[-1]
    np.testing.assert_array_equal(out, x.sum(0) + x.sum(1))


# The DSL: what users write with numpy's semantics compiles as written.

@sd.kernel(grid=(1,), out_shape=jax.ShapeDtypeStruct((64, 64), jnp.float32))
def plus_transpose(y_ref, out_ref):
    y = y_ref[...]
    out_ref[...] = y + y.T  # inference relays y.T (or y) out through shared memory


@sd.kernel(grid=(1,), out_shape=jax.ShapeDtypeStruct((128,), jnp.float32))
def rows_plus_columns(x_ref, out_ref):
    x = x_ref[...]
    out_ref[...] = x.sum(axis=0) + x.sum(axis=1)  # the column sums, with shuffles


@sd.kernel(grid=(1,), out_shape=jax.ShapeDtypeStruct((128, 128), jnp.float32))
def self_outer(v_ref, out_ref):
    v = v_ref[...]
    out_ref[...] = v[:, None] * v[None, :]  # one vector in the row and column layouts


def test_dsl_y_plus_its_transpose_under_jit(isolated_cache):  # noqa: F811
    y = jax.random.normal(jax.random.key(0), (64, 64), jnp.float32)
    np.testing.assert_array_equal(np.asarray(jax.jit(plus_transpose)(y)),
                                  np.asarray(y) + np.asarray(y).T)


def test_dsl_row_sums_plus_column_sums_under_jit(isolated_cache):  # noqa: F811
    x = jax.random.randint(jax.random.key(1), (128, 128), -8, 9).astype(jnp.float32)
    np.testing.assert_array_equal(np.asarray(jax.jit(rows_plus_columns)(x)),
                                  np.asarray(x).sum(0) + np.asarray(x).sum(1))


def test_dsl_outer_product_of_a_vector_with_itself(isolated_cache):  # noqa: F811
    v = jax.random.normal(jax.random.key(2), (128,), jnp.float32)
    np.testing.assert_allclose(np.asarray(jax.jit(self_outer)(v)),
                               np.outer(np.asarray(v), np.asarray(v)), rtol=1e-6)


# Rule gaps: no data moves, so no cast.

@pytest.mark.parametrize("layout", [WGMMA_LAYOUT, WGMMA_LAYOUT_TF32_A, WGMMA_LAYOUT_8BIT],
                         ids=["wgmma", "tf32-a", "8bit"])
@pytest.mark.parametrize("axis", [0, 1])
def test_broadcast_back_in_every_fragment_layout(layout, axis):
    """limitation_broadcast_back_tf32.mlir in the accumulator, tf32 A and 8-bit A layouts,
    along either axis: x - sum(x, axis) broadcast back moves no data."""
    text = chunk("broadcast_back_tf32").replace(
        "#smalti.tiled<tiling = [[64, 4], [16, 4], [8, 4], [1]], warp = [-7], lane = [-3, -2], "
        "vector = -1>", f"#smalti.{layout_to_text(layout)}").replace(
        "%x, %z [1]", f"%x, %z [{axis}]").replace("array<i64: 0>", f"array<i64: {1 - axis}>")
    _, casts = inferred(text)
    assert casts == []
    x = ints((64, 64), 5)
    _, out, sums = run_simulated(compile_mlir(text, "bb.mlir"), x, np.zeros_like(x),
                                 np.zeros(64, np.float32))
    np.testing.assert_array_equal(sums, x.sum(axis))
    np.testing.assert_array_equal(out, x - np.expand_dims(x.sum(axis), axis))


def test_softmax_style_row_maxima_in_the_8bit_layout():
    text = chunk("broadcast_back_8bit")
    x = ints((64, 64), 6)
    out = run_simulated(compile_mlir(text, "b8.mlir"), x, np.zeros_like(x))[-1]
    np.testing.assert_array_equal(out, x - x.max(1)[:, None])


def test_a_slice_by_4_columns_matches_numpy():
    """limitation_slice_through_tiles.mlir and the differential finding
    mlir_slice_by_4_columns.mlir: x[:, 4:12] of a 64x16 tile, loaded in the tf32 A layout."""
    text = chunk("slice_by_4_columns")
    _, casts = inferred(text)
    assert casts == []
    x = ints((64, 16), 7)
    out = run_simulated(compile_mlir(text, "slice.mlir"), x, np.zeros((64, 8), np.float32))[-1]
    np.testing.assert_array_equal(out, x[:, 4:12])


def test_an_insert_of_one_splat_into_another_prints_its_elements():
    """The differential finding mlir_insert_into_splat.mlir."""
    printed: list[str] = []
    compiled = compile_mlir(chunk("insert_into_splat"), "insert.mlir")
    out = run_simulated(compiled, np.zeros((128, 128), np.int32), print_fn=printed.append)[-1]
    np.testing.assert_array_equal(out, np.full((128, 128), 2, np.int32))
    assert len(printed) == 1 and "4096" in printed[0] and " 2" in printed[0]


# What no relayout resolves is refused, explained, and leaves the IR as it came.

REFUSED = {
    "cast_to_splat": (  # a distributed value never becomes a splat
        """
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  %y = arith.negf %x : vector<128x128xf32>
  %s = "smalti.layout_cast"(%y) {new_layout = #smalti.splat} : (vector<128x128xf32>) -> vector<128x128xf32>
""", "this relayout is not supported"),
    "slice_through_every_tile": (  # columns [5, 57): no layout's tiles
        """
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  %s = "vector.extract_strided_slice"(%x) <{offsets = [0, 5], sizes = [64, 52], strides = [1, 1]}> : (vector<128x128xf32>) -> vector<64x52xf32>
""", "cuts through the layout's"),
    "i1_in_two_layouts": (  # relayouts move 8-, 16- and 32-bit elements, not i1
        """
  %m = memref.alloca() : memref<128x128xi1>
  %p = "smalti.vector_load"(%m, %c0, %c0) {out_layouts = [#smalti.strided<vec = 4>]} : (memref<128x128xi1>, index, index) -> vector<128x128xi1>
  %q = "smalti.vector_load"(%m, %c0, %c0) {out_layouts = [#smalti.strided<vec = 2>]} : (memref<128x128xi1>, index, index) -> vector<128x128xi1>
  %r = arith.andi %p, %q : vector<128x128xi1>
""", "conflicting layouts required for one value"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_no_relayout_resolves_is_refused_at_its_lines(name):
    body, message = REFUSED[name]
    text = ("func.func @k(%a: memref<128x128xf32>) {\n  %c0 = arith.constant 0 : index"
            + body + "  return\n}\n")
    context = make_context()
    module = parse_module(text, "refused.mlir", context)
    before = str(module)
    with context, pytest.raises(DiagnosticError) as failure:
        run_pipeline(module, "builtin.module(smalti-infer-layouts)")
    assert str(module) == before  # no cast left behind
    first, *notes = str(failure.value).splitlines()
    assert re.match(r"refused\.mlir:\d+:\d+: error: '[a-z_.]+' op cannot be given a layout", first)
    assert message in str(failure.value), str(failure.value)
    assert notes and all(re.match(r"refused\.mlir:\d+:\d+: note: ", n) for n in notes)


def test_a_conflict_at_the_end_of_a_long_chain_is_cut_quickly():
    """2,000 elementwise ops from a tf32 A value, then an add to an accumulator-layout
    value: one cast within warps, found in well under the time the chain takes to infer
    twice over."""
    ops = [f"%v{i} = arith.negf %v{i - 1} : vector<64x64xf32>" for i in range(1, 2001)]
    text = ("func.func @k(%a: memref<64x64xf32>) {\n  %c0 = arith.constant 0 : index\n"
            '  %v0 = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.'
            f'{layout_to_text(WGMMA_LAYOUT_TF32_A)}]}} : (memref<64x64xf32>, index, index) '
            "-> vector<64x64xf32>\n"
            '  %y = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.'
            f'{layout_to_text(WGMMA_LAYOUT)}]}} : (memref<64x64xf32>, index, index) '
            "-> vector<64x64xf32>\n" + "".join(f"  {op}\n" for op in ops) +
            "  %s = arith.addf %v2000, %y : vector<64x64xf32>\n"
            '  "smalti.vector_store"(%s, %a, %c0, %c0) : (vector<64x64xf32>, '
            "memref<64x64xf32>, index, index) -> ()\n  return\n}")
    start = time.perf_counter()
    _, casts = inferred(text, "chain.mlir")
    assert time.perf_counter() - start < 30
    assert [kind(c) for c in casts] == ["shuffles"]


def test_the_inserted_cast_is_in_the_solved_layouts():
    _, (cast,) = inferred(chunk("tf32_a_plus_accumulator"))
    (source,) = attr_to_layouts(cast.attributes["in_layouts"])
    (target,) = attr_to_layouts(cast.attributes["out_layouts"])
    assert (source, target) == (WGMMA_LAYOUT_TF32_A, WGMMA_LAYOUT)


# Random programs: transposes, reductions along both axes, broadcasts back, slices and
# shape_casts, combined elementwise so that values are asked for several layouts at once.

M, R, H, F = "vector<64x64xf32>", "vector<64xf32>", "vector<64x32xf32>", "vector<4096xf32>"
SHAPES = {M: (64, 64), R: (64,), H: (64, 32), F: (4096,)}
OUTPUTS = {M: "%om", R: "%or", H: "%oh", F: "%of"}
SIGNATURE = ("func.func @k(%a: memref<64x64xf32>, %b: memref<64x64xf32>, %om: memref<64x64xf32>, "
             "%or: memref<64xf32>, %oh: memref<64x32xf32>, %of: memref<4096xf32>) "
             "attributes {smalti.kernel, smalti.grid = array<i64: 1>} {")
COLUMN_OFFSETS = [0, 32, 0, 32, 8, 4, 2]  # 4: whole tf32 A tiles only; 2: no layout's tiles
EXAMPLES = int(os.environ.get("SMALTI_RELAYOUT_EXAMPLES", "40"))
LOADED_LAYOUTS = [None, None, WGMMA_LAYOUT, WGMMA_LAYOUT_TF32_A, WGMMA_LAYOUT_8BIT]


@st.composite
def relayout_programs(draw) -> tuple[str, dict]:
    """MLIR text of a kernel and numpy's values of its outputs (from inputs `a`, `b`)."""
    a, b = ints((64, 64), 10), ints((64, 64), 11)
    lines = [SIGNATURE, "  %c0 = arith.constant 0 : index"]
    values: dict[str, list[tuple[str, np.ndarray]]] = {M: [], R: [], H: [], F: []}
    count = 0

    def new(kind: str, value: np.ndarray) -> str:
        nonlocal count
        count += 1
        values[kind].append((f"%v{count}", value))
        return f"%v{count}"

    for ref, array in (("%a", a), ("%b", b)):
        layout = draw(st.sampled_from(LOADED_LAYOUTS))
        annotation = f" {{out_layouts = [#smalti.{layout_to_text(layout)}]}}" if layout else ""
        lines.append(f'  {new(M, array)} = "smalti.vector_load"({ref}, %c0, %c0){annotation} '
                     f": (memref<64x64xf32>, index, index) -> {M}")
    for _ in range(draw(st.integers(2, 9))):
        kinds = [k for k in (M, R, H, F) if values[k]]
        choice = draw(st.sampled_from(["binary", "binary", "transpose", "reduce", "reduce",
                                       "broadcast", "slice", "shape_cast"]))
        if choice == "binary":
            kind = draw(st.sampled_from(kinds))
            (x, xv), (y, yv) = (draw(st.sampled_from(values[kind])) for _ in range(2))
            op, fn = draw(st.sampled_from([("arith.addf", np.add), ("arith.subf", np.subtract),
                                           ("arith.maximumf", np.maximum)]))
            lines.append(f"  {new(kind, fn(xv, yv))} = {op} {x}, {y} : {kind}")
        elif choice == "transpose":
            x, xv = draw(st.sampled_from(values[M]))
            lines.append(f"  {new(M, xv.T)} = vector.transpose {x}, [1, 0] : {M} to {M}")
        elif choice == "reduce":
            x, xv = draw(st.sampled_from(values[M]))
            axis = draw(st.sampled_from([0, 1]))
            lines.append(f"  %z{count} = arith.constant dense<0.0> : {R}")
            lines.append(f"  {new(R, xv.sum(axis))} = vector.multi_reduction <add>, {x}, "
                         f"%z{count - 1} [{axis}] : {M} to {R}")
        elif choice == "broadcast" and values[R]:
            x, xv = draw(st.sampled_from(values[R]))
            dim = draw(st.sampled_from([0, 1, None]))  # None: vector.broadcast (leading)
            if dim is None:
                lines.append(f"  {new(M, np.broadcast_to(xv, (64, 64)).copy())} = "
                             f"vector.broadcast {x} : {R} to {M}")
            else:
                spread = np.broadcast_to(np.expand_dims(xv, 1 - dim), (64, 64)).copy()
                lines.append(f'  {new(M, spread)} = "smalti.broadcast_in_dim"({x}) '
                             f"{{broadcast_dimensions = array<i64: {dim}>}} : ({R}) -> {M}")
        elif choice == "slice":
            x, xv = draw(st.sampled_from(values[M]))
            offset = draw(st.sampled_from(COLUMN_OFFSETS))
            lines.append(f'  {new(H, xv[:, offset:offset + 32])} = '
                         f'"vector.extract_strided_slice"({x}) <{{offsets = [0, {offset}], '
                         f"sizes = [64, 32], strides = [1, 1]}}> : ({M}) -> {H}")
        elif choice == "shape_cast":
            if values[F] and draw(st.booleans()):
                x, xv = draw(st.sampled_from(values[F]))
                lines.append(f"  {new(M, xv.reshape(64, 64))} = vector.shape_cast {x} : "
                             f"{F} to {M}")
            else:
                x, xv = draw(st.sampled_from(values[M]))
                lines.append(f"  {new(F, xv.reshape(-1))} = vector.shape_cast {x} : {M} to {F}")
    expected = {}
    for kind, ref in OUTPUTS.items():
        if values[kind]:
            x, xv = values[kind][-1]
            starts = ", ".join(["%c0"] * len(SHAPES[kind]))
            lines.append(f'  "smalti.vector_store"({x}, {ref}, {starts}) : ({kind}, '
                         f"memref<{'x'.join(map(str, SHAPES[kind]))}xf32>, "
                         f"{', '.join(['index'] * len(SHAPES[kind]))}) -> ()")
            expected[kind] = xv
    lines += ["  return", "}"]
    return "\n".join(lines), expected


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(relayout_programs())
def test_random_programs_compile_and_match_numpy_or_no_relayout_resolves_them(program):
    text, expected = program
    try:
        _, casts = inferred(text, "random.mlir")
    except DiagnosticError as error:
        _check_refusal(text, str(error))
        event("refused")
        return
    kinds = sorted(kind(c) for c in casts)
    event(f"{len(casts)} relayouts inserted")
    for k in kinds:
        event(f"a relayout of kind {k}")
    if "smem" in kinds:
        _check_no_in_warp_resolution(text)
    compiled = compile_mlir(text, "random.mlir")
    outs = run_simulated(compiled, ints((64, 64), 10), ints((64, 64), 11),
                         *(np.zeros(SHAPES[k], np.float32) for k in OUTPUTS))[2:]
    for kind_, out in zip(OUTPUTS, outs, strict=True):
        want = expected.get(kind_, np.zeros(SHAPES[kind_], np.float32))
        np.testing.assert_array_equal(out, want, err_msg=f"{kind_}\n{text}")


# Independent checks of the claims above: the relaxation of a set of constraints at every
# use (each operand of an op, but at a user's layout_cast, read in a layout of its own,
# related to the value's by a relayout), searched exhaustively over a fixed universe of
# layouts, without the solver.

UNIVERSE = [*(WGStridedLayout(v) for v in (1, 2, 4, 8, 16)), WGMMA_LAYOUT,
            WGMMA_TRANSPOSED_LAYOUT, WGMMA_LAYOUT_8BIT, WGMMA_LAYOUT_TF32_A, WGMMA_ROW_LAYOUT,
            WGMMA_COL_LAYOUT, WGSplatLayout()]
IN_WARP_KINDS = ("none", "registers", "shuffles")


def _failed_parts(text: str):
    """The program's equation system (a constant per user, as inference sees it), its
    failed parts, and the module (keep it alive while they are used)."""
    context = make_context()
    module = parse_module(text, "random.mlir", context)
    with context:
        run_pipeline(module, "builtin.module(smalti-verify,canonicalize,cse)")
        func = module.regions[0].blocks[0].operations[0].operation
        split_per_user(func)
        system = _equations(func)  # annotations included
    try:
        solve(system)
    except Unsatisfiable as failure:
        return system, failure.failures, module
    return system, (), module


def _relaxed(constraints, in_warp: bool) -> list:
    """`constraints` with every use relaxed to a relayout (within warps if `in_warp`)."""
    fresh: dict[tuple, Variable] = {}
    out = []
    next_id = 1 + max(v.id for c in constraints for v in variables_of(c))
    for c in constraints:
        op = c.origin.op
        changes = {}
        for name in ("a", "b", "var", "target", "source"):
            var = getattr(c, name, None)
            if (not isinstance(var, Variable) or op is None or var.value is None
                    or op.name == "smalti.layout_cast"
                    or not any(o == var.value for o in op.operands)):
                continue
            if (op, var.id) not in fresh:
                fresh[(op, var.id)] = Variable(next_id, var.shape, var.bitwidth, var.value)
                next_id += 1
                out.append(("relayout", var, fresh[(op, var.id)], in_warp))
            changes[name] = fresh[(op, var.id)]
        out.append(dataclasses.replace(c, **changes) if changes else c)
    return out


def _holds(item, layout_of) -> bool:
    if isinstance(item, tuple):  # ("relayout", source, target, in_warp)
        _, source, target, in_warp = item
        a, b = layout_of(source), layout_of(target)
        if not relayout_supported(a, b, source.shape, source.bitwidth):
            return False
        return not in_warp or a == b or isinstance(a, WGSplatLayout) or relayout_kind(
            a, b, source.shape, source.bitwidth) in IN_WARP_KINDS
    return constraint_holds(item, layout_of)


def _vars(item) -> tuple:
    return item[1:3] if isinstance(item, tuple) else variables_of(item)


def _satisfiable(items, budget: int = 50_000) -> bool | None:
    """Plain backtracking over UNIVERSE (most connected variables first): True, False, or
    None when it ran out of budget."""
    variables = {v.id: v for item in items for v in _vars(item)}
    degree = {i: 0 for i in variables}
    for item in items:
        for v in _vars(item):
            degree[v.id] += 1
    order = sorted(variables, key=lambda i: -degree[i])
    position = {i: k for k, i in enumerate(order)}
    by_last: dict[int, list] = {}
    for item in items:
        by_last.setdefault(max((v.id for v in _vars(item)), key=position.get), []).append(item)
    candidates = {i: [lay for lay in UNIVERSE if fits(lay, variables[i].shape)
                      and too_dear(lay, variables[i]) is None] for i in order}
    assignment: dict[int, object] = {}
    tries = 0

    def extend(k: int) -> bool | None:
        nonlocal tries
        if k == len(order):
            return True
        i = order[k]
        for layout in candidates[i]:
            tries += 1
            if tries > budget:
                return None
            assignment[i] = layout
            if all(_holds(item, lambda v: assignment[v.id]) for item in by_last.get(i, ())):
                found = extend(k + 1)
                if found is not False:
                    return found
        assignment.pop(i, None)
        return False

    return extend(0)


def _check_refusal(text: str, report: str) -> None:
    """A refusal is located, and names a conflict no relayout resolves: its constraints,
    relaxed at every use, still have no layouts."""
    for line in report.splitlines():
        assert re.match(r"random\.mlir:\d+:\d+: (error|note): ", line), line
    assert "cannot be given a layout" in report and "no relayout resolves it" in report
    system, failures, module = _failed_parts(text)
    verdicts = []  # per failed part: can relayouts resolve it?
    for failure in failures:
        if _satisfiable(_relaxed(explain(system, failure).constraints, in_warp=False)) is False:
            verdicts.append(False)
        else:
            verdicts.append(_satisfiable(_relaxed(failure.constraints, in_warp=False)))
    errors = sum(" error: " in line for line in report.splitlines())
    # One error per part no relayout resolves; the parts relayouts resolve are not refused.
    assert 1 <= errors <= len(failures) - verdicts.count(True), (verdicts, report, text)
    if None in verdicts:
        event("a refusal not confirmed (search budget)")
    else:
        assert errors == verdicts.count(False), (verdicts, report, text)
    del module


def _check_no_in_warp_resolution(text: str) -> None:
    """A relayout through shared memory was chosen: no set of relayouts within warps
    resolves the program (some conflict stays one with every use relaxed within warps)."""
    system, failures, module = _failed_parts(text)
    for failure in failures:
        if _satisfiable(_relaxed(explain(system, failure).constraints, in_warp=True)) is False:
            return
        whole = _satisfiable(_relaxed(failure.constraints, in_warp=True))
        if whole is None:
            event("an in-warp resolution not ruled out (search budget)")
            return
        if whole is False:
            return
    raise AssertionError(f"a relayout through shared memory where in-warp ones do:\n{text}")
    del module
