"""Tracing the DSL into the dialect: the IR each construct produces (FileCheck-style string
checks), the user's file:line on every op, and misuse errors that name the user's line."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxlib.mlir import ir

import smalti.dsl as sd
from smalti.dialect.diagnostics import DiagnosticError
from smalti.tiling import WGMMA_LAYOUT, WGStridedLayout
from tests.dsl_helpers import isolated_cache, line_of  # noqa: F401

F32 = jnp.float32
M128 = jax.ShapeDtypeStruct((128, 128), F32)
V128 = jax.ShapeDtypeStruct((128,), F32)
THIS_FILE = __file__


def check(text: str, *patterns: str) -> None:
    """FileCheck's CHECK: each regex matches, in order, after the previous match."""
    position = 0
    for pattern in patterns:
        match = re.compile(pattern).search(text, position)
        assert match, f"no match for {pattern!r} after offset {position} in:\n{text}"
        position = match.end()


def body_ops(traced: sd.Traced) -> list:
    ops = []

    def visit(op):
        if op.operation.name not in ("builtin.module", "func.func", "func.return"):
            ops.append(op.operation)
        return ir.WalkResult.ADVANCE

    traced.module.walk(visit)
    return ops


@sd.kernel(grid=(2, 2), out_shape=jax.ShapeDtypeStruct((256, 256), F32))
def scale_shift(x_ref, scale_ref, shift_ref, out_ref):
    row = sd.program_id(1) * 128
    col = sd.program_id(0) * 128
    x = x_ref[row:row + 128, col:col + 128]
    out_ref[row:row + 128, col:col + 128] = x * scale_ref[col:col + 128] + shift_ref[row:row + 128][:, None]


def scale_shift_specs():
    return (jax.ShapeDtypeStruct((256, 256), F32), jax.ShapeDtypeStruct((256,), F32),
            jax.ShapeDtypeStruct((256,), F32))


def test_pointwise_traces_to_kernel_loads_elementwise_ops_and_store():
    text = str(scale_shift.trace(*scale_shift_specs()).module)
    check(text,
          r"func.func @scale_shift\(%arg0: memref<256x256xf32>, %arg1: memref<256xf32>, "
          r"%arg2: memref<256xf32>, %arg3: memref<256x256xf32>\)",
          r"smalti.grid = array<i64: 2, 2>", r"smalti.kernel",
          r"gpu.block_id y", r"gpu.block_id x",
          r'"smalti.vector_load"\(%arg0, %\w+, %\w+\) : \(memref<256x256xf32>, index, index\) '
          r"-> vector<128x128xf32>",
          r'"smalti.vector_load"\(%arg1, %\w+\) : .* -> vector<128xf32>',
          r"vector.broadcast %\w+ : vector<128xf32> to vector<128x128xf32>",
          r"arith.mulf %\w+, %\w+ : vector<128x128xf32>",
          r'"smalti.vector_load"\(%arg2, %\w+\)',
          r'"smalti.broadcast_in_dim"\(%\w+\) <?\{broadcast_dimensions = array<i64: 0>\}>? : '
          r"\(vector<128xf32>\) -> vector<128x128xf32>",
          r"arith.addf", r'"smalti.vector_store"\(%\w+, %arg3, %\w+, %\w+\)', r"return")


def test_every_op_carries_the_users_file_and_line():
    traced = scale_shift.trace(*scale_shift_specs())
    lines = {line_of(marker, scale_shift.fn) for marker in
             ("program_id(1)", "program_id(0)", "x = x_ref", "out_ref[row")}
    seen = set()
    for op in body_ops(traced):
        match = re.fullmatch(r'loc\("(.*)":(\d+):(\d+)\)', str(op.location))
        assert match, f"{op.name} has location {op.location}"
        assert match.group(1) == THIS_FILE
        seen.add(int(match.group(2)))
    assert seen == lines
    assert f'"{THIS_FILE}"' in traced.mlir


def test_slice_bounds_use_index_arithmetic_with_static_lengths():
    @sd.kernel(grid=(4,), out_shape=V128)
    def strip(x_ref, out_ref):
        j = sd.program_id(0) * 64 + 32
        out_ref[...] = x_ref[j - 32:j + 96]

    text = str(strip.trace(jax.ShapeDtypeStruct((512,), F32)).module)
    check(text, r"gpu.block_id x", r"arith.muli %\w+, %c64", r'"smalti.vector_load"\(%arg0, '
                r"%\w+\) : \(memref<512xf32>, index\) -> vector<128xf32>")


def test_reductions_and_keepdims_broadcast():
    @sd.kernel(out_shape=(M128, V128))
    def normalize(x_ref, out_ref, max_ref):
        x = x_ref[...]
        out_ref[...] = x - x.max(axis=1, keepdims=True)
        max_ref[...] = x.sum(axis=-1) + x.min(0)

    text = str(normalize.trace(M128).module)
    check(text, r"arith.constant dense<0xFF800000> : vector<128xf32>",
          r"vector.multi_reduction <maximumf>, %\w+, %\w+ \[1\] : vector<128x128xf32> to "
          r"vector<128xf32>",
          r'"smalti.broadcast_in_dim"\(%\w+\) <?\{broadcast_dimensions = array<i64: 0>',
          r"arith.subf", r"vector.multi_reduction <add>, %\w+, %\w+ \[1\]",
          r"arith.constant dense<0x7F800000>", r"vector.multi_reduction <minimumf>, %\w+, %\w+ "
          r"\[0\]", r"arith.addf %\w+, %\w+ : vector<128xf32>")


def test_fori_carries_arrays_through_scf_for():
    @sd.kernel(out_shape=V128)
    def row_sums(x_ref, out_ref):
        def step(j, total):
            return total + x_ref[:, j * 128:j * 128 + 128].sum(axis=1)

        out_ref[...] = sd.fori(0, x_ref.shape[1] // 128, step, sd.zeros((128,)))

    text = str(row_sums.trace(jax.ShapeDtypeStruct((128, 512), F32)).module)
    check(text, r"%(\w+) = scf.for %(\w+) = %c0 to %c4 step %c1 iter_args\(%\w+ = %\w+\) -> "
                r"\(vector<128xf32>\)",
          r'"smalti.vector_load"\(%arg0, %c0\w*, %\w+\)', r"vector.multi_reduction <add>",
          r"scf.yield %\w+ : vector<128xf32>", r'"smalti.vector_store"')


def test_casts_math_and_layout_cast():
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128, 128), jnp.bfloat16))
    def math_ops(x_ref, out_ref):
        x = sd.layout_cast(x_ref[...].astype(F32), WGMMA_LAYOUT)
        y = sd.maximum(sd.sqrt(abs(x)), sd.exp(-x)) / 2.0
        out_ref[...] = sd.minimum(1.0, y).astype(jnp.bfloat16)

    text = str(math_ops.trace(jax.ShapeDtypeStruct((128, 128), jnp.bfloat16)).module)
    check(text, r"arith.extf %\w+ : vector<128x128xbf16> to vector<128x128xf32>",
          r'"smalti.layout_cast"\(%\w+\) <?\{new_layout = #smalti.tiled<tiling = \[\[64, 8\]',
          r"math.absf", r"math.sqrt", r"arith.negf", r"math.exp", r"arith.maximumf",
          r"arith.constant dense<2.000000e\+00>", r"arith.divf",
          r"arith.constant dense<1.000000e\+00>", r"arith.minimumf",
          r"arith.truncf %\w+ : vector<128x128xf32> to vector<128x128xbf16>")


def test_iota_comparisons_and_where_trace_to_iota_cmp_and_select():
    @sd.kernel(out_shape=(M128, jax.ShapeDtypeStruct((128, 128), jnp.int32)))
    def masks(x_ref, out_ref, count_ref):
        x = x_ref[...]
        rows, cols = sd.iota((128, 128), dimension=0), sd.iota((128, 128), F32, dimension=-1)
        out_ref[...] = sd.where(cols <= x, x, -np.inf) + sd.where(rows > 3, 1.0, 0.0)
        count_ref[...] = (x != 0.5).astype(jnp.int32) + (rows <= 2).astype(jnp.int32)

    text = str(masks.trace(M128).module)
    check(text, r'"smalti.iota"\(\) <?\{dimension = 0 : i64\}>? : \(\) -> vector<128x128xi32>',
          r'"smalti.iota"\(\) <?\{dimension = 1 : i64\}>? : \(\) -> vector<128x128xi32>',
          r"arith.sitofp %\w+ : vector<128x128xi32> to vector<128x128xf32>",
          r"arith.cmpf ole, %\w+, %\w+ : vector<128x128xf32>",
          r"arith.constant dense<0xFF800000> : vector<128x128xf32>",
          r"arith.select %\w+, %\w+, %\w+ : vector<128x128xi1>, vector<128x128xf32>",
          r"arith.constant dense<3> : vector<128x128xi32>", r"arith.cmpi sgt",
          r"arith.select", r"arith.addf",
          # != is unordered (true on NaN), as numpy's; bool -> int selects 1 or 0.
          r"arith.cmpf une", r"arith.constant dense<1> : vector<128x128xi32>",
          r"arith.constant dense<0> : vector<128x128xi32>", r"arith.select",
          r"arith.cmpi sle, %\w+, %\w+ : vector<128x128xi32>", r"arith.select", r"arith.addi")


def test_integer_index_drops_a_dim_and_array_slices_are_static():
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((64,), F32))
    def pick(x_ref, out_ref):
        row = x_ref[3, :]
        out_ref[...] = row[0:64] + row[64:128]

    text = str(pick.trace(jax.ShapeDtypeStruct((8, 128), F32)).module)
    check(text, r'"smalti.vector_load"\(%arg0, %c3, %c0\) : .* -> vector<1x128xf32>',
          r"vector.shape_cast %\w+ : vector<1x128xf32> to vector<128xf32>",
          r"vector.extract_strided_slice %\w+ \{?offsets = \[0\], sizes = \[64\], strides = \[1\]",
          r"offsets = \[64\]", r"arith.addf")


def test_num_programs_and_grid_from_inputs():
    @sd.kernel(grid=lambda x: (x.shape[0] // 128,), out_shape=lambda x: x)
    def copy(x_ref, out_ref):
        assert sd.num_programs(0) == x_ref.shape[0] // 128
        i = sd.program_id(0) * 128
        out_ref[i:i + 128] = x_ref[i:i + 128]

    traced = copy.trace(jax.ShapeDtypeStruct((512,), F32))
    assert traced.grid == (4,)
    assert "smalti.grid = array<i64: 4>" in str(traced.module)


# Misuse: errors that name the user's line ----------------------------------------------

def _raises_at(error_type, fn, marker, *args, match=""):
    with pytest.raises(error_type, match=match) as info:
        fn.trace(*args) if isinstance(fn, sd.Kernel) else fn(*args)
    assert f"{THIS_FILE}:{line_of(marker, fn.fn)}:" in str(info.value), str(info.value)
    return info.value


def test_shape_mismatch_names_the_users_line():
    @sd.kernel(out_shape=M128)
    def bad(a_ref, b_ref, out_ref):
        out_ref[...] = a_ref[...] + b_ref[:, 0:64]  # the bad line

    _raises_at(ValueError, bad, "the bad line", M128, M128, match="do not broadcast")


def test_dtype_mismatch_names_the_users_line():
    @sd.kernel(out_shape=M128)
    def bad(a_ref, b_ref, out_ref):
        out_ref[...] = a_ref[...] * b_ref[...]  # the bad line

    _raises_at(TypeError, bad, "the bad line", M128,
               jax.ShapeDtypeStruct((128, 128), jnp.bfloat16), match="bfloat16")


def test_out_of_bounds_window_and_dynamic_length_name_the_users_line():
    @sd.kernel(out_shape=M128)
    def outside(a_ref, out_ref):
        out_ref[...] = a_ref[:, 64:192]  # the bad line

    _raises_at(IndexError, outside, "the bad line", M128, match="out of bounds")

    @sd.kernel(grid=(2,), out_shape=M128)
    def dynamic(a_ref, out_ref):
        i = sd.program_id(0)
        out_ref[...] = a_ref[i:2 * i + 128, :]  # the bad line

    _raises_at(IndexError, dynamic, "the bad line", M128, match="static positive length")


def test_layout_that_cannot_fit_names_the_users_line():
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((32, 32), F32))
    def bad(a_ref, out_ref):
        out_ref[...] = sd.layout_cast(a_ref[...], WGMMA_LAYOUT)  # the bad line

    _raises_at(ValueError, bad, "the bad line", jax.ShapeDtypeStruct((32, 32), F32),
               match="cannot hold an array of shape")


def test_fori_carry_mismatch_names_the_users_line():
    @sd.kernel(out_shape=V128)
    def bad(a_ref, out_ref):
        out_ref[...] = sd.fori(0, 2, lambda i, c: c.astype(jnp.bfloat16),  # the bad line
                               a_ref[...])

    _raises_at(TypeError, bad, "the bad line", V128, match="carried value #0")


def test_casts_in_conflict_meet_through_a_relayout_inference_inserts():
    """Two casts the user wrote meet at an add: inference relays one operand out (through
    shared memory: wgmma and strided<vec = 2> differ across warps) and the sum is right."""
    @sd.kernel(out_shape=M128)
    def conflict(a_ref, b_ref, out_ref):
        x = sd.layout_cast(a_ref[...], WGMMA_LAYOUT)
        y = sd.layout_cast(b_ref[...], WGStridedLayout(2))
        out_ref[...] = x + y

    rng = np.random.default_rng(5)
    a, b = (rng.standard_normal((128, 128)).astype(np.float32) for _ in range(2))
    np.testing.assert_array_equal(np.asarray(conflict(a, b)), a + b)


def test_layout_conflict_no_relayout_resolves_names_the_users_lines():
    @sd.kernel(out_shape=M128)
    def conflict(a_ref, out_ref):
        x = a_ref[...]  # the load
        y = sd.layout_cast(x, "#smalti.splat")  # splat cast
        out_ref[...] = y + 1.0

    with pytest.raises(DiagnosticError, match="no relayout resolves it") as info:
        conflict.compile(M128)
    message = str(info.value)
    assert message.startswith(f"{THIS_FILE}:{line_of('splat cast', conflict.fn)}:"), message
    assert f"{THIS_FILE}:{line_of('the load', conflict.fn)}:" in message


def test_comparison_where_and_iota_misuse_names_the_users_line():
    i32 = jax.ShapeDtypeStruct((128, 128), jnp.int32)

    @sd.kernel(out_shape=M128)
    def mixed(a_ref, b_ref, out_ref):
        out_ref[...] = sd.where(a_ref[...] < b_ref[...], a_ref[...], 0.0)  # the bad line

    _raises_at(TypeError, mixed, "the bad line", M128, i32, match="different dtypes")

    @sd.kernel(out_shape=M128)
    def not_bool(a_ref, out_ref):
        out_ref[...] = sd.where(a_ref[...], a_ref[...], 0.0)  # the bad line

    _raises_at(TypeError, not_bool, "the bad line", M128, match="condition must be a bool")

    @sd.kernel(out_shape=M128)
    def branches(a_ref, b_ref, out_ref):
        out_ref[...] = sd.where(a_ref[...] > 0.0, a_ref[...], b_ref[...])  # the bad line

    _raises_at(TypeError, branches, "the bad line", M128, i32,
               match="x and y have different dtypes float32 and int32")

    @sd.kernel(out_shape=M128)
    def shapes(a_ref, out_ref):
        out_ref[...] = sd.where(a_ref[:, 0:64] > 0.0, a_ref[...], 0.0)  # the bad line

    _raises_at(ValueError, shapes, "the bad line", M128, match="do not broadcast")

    @sd.kernel(out_shape=M128)
    def bools(a_ref, out_ref):
        positive = a_ref[...] > 0.0
        out_ref[...] = sd.where(positive == positive, a_ref[...], 0.0)  # the bad line

    _raises_at(TypeError, bools, "the bad line", M128, match="does not compare bool arrays")

    @sd.kernel(out_shape=M128)
    def no_dimension(a_ref, out_ref):
        out_ref[...] = a_ref[...] + sd.iota((128, 128), F32)  # the bad line

    _raises_at(ValueError, no_dimension, "the bad line", M128, match="needs `dimension`")

    @sd.kernel(out_shape=M128)
    def bad_dimension(a_ref, out_ref):
        out_ref[...] = a_ref[...] + sd.iota((128, 128), F32, 2)  # the bad line

    _raises_at(ValueError, bad_dimension, "the bad line", M128, match="not an axis")

    @sd.kernel(out_shape=M128)
    def float_bound(a_ref, out_ref):
        out_ref[...] = sd.where(sd.iota((128, 128), dimension=0) < 0.5,  # the bad line
                                a_ref[...], 0.0)

    _raises_at(TypeError, float_bound, "the bad line", M128, match="the float 0.5")


def test_dsl_ops_outside_a_kernel_body_raise():
    with pytest.raises(RuntimeError, match="only valid inside the body"):
        sd.program_id(0)


def test_call_checks_name_the_argument_before_anything_runs():
    @sd.kernel(out_shape=M128, in_specs=(M128, V128))
    def add(a_ref, b_ref, out_ref):
        out_ref[...] = a_ref[...] + b_ref[...]

    a, b = jnp.zeros((128, 128), F32), jnp.zeros((128,), F32)
    with pytest.raises(TypeError, match="argument 'b_ref' of kernel add must have dtype "
                                        "float32, got bfloat16"):
        add(a, b.astype(jnp.bfloat16))
    with pytest.raises(ValueError, match=r"argument 'a_ref' of kernel add must have shape "
                                         r"\(128, 128\), got \(64, 128\)"):
        add(a[:64], b)
    with pytest.raises(TypeError, match="argument 'b_ref' of kernel add must be an array"):
        add(a, 3.0)
    with pytest.raises(TypeError, match="takes 2 input arrays, got 1"):
        add(a)
    with pytest.raises(TypeError, match=r"dtype float32, got float16"):
        add(a.astype(jnp.float16), b)


def test_kernel_arity_must_match_inputs_and_outputs():
    @sd.kernel(out_shape=(M128, M128))
    def one_output_ref(a_ref, out_ref):
        out_ref[...] = a_ref[...]

    with pytest.raises(TypeError, match=r"takes 2 refs \(a_ref, out_ref\) but is called with "
                                        r"1 inputs and declares 2 outputs"):
        one_output_ref.trace(M128)


def test_splat_identities_are_the_reduction_neutral_elements():
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128,), jnp.int32))
    def int_max(x_ref, out_ref):
        out_ref[...] = x_ref[...].max(axis=1)

    text = str(int_max.trace(jax.ShapeDtypeStruct((128, 64), jnp.int32)).module)
    check(text, rf"arith.constant dense<{np.iinfo(np.int32).min}> : vector<128xi32>",
          r"vector.multi_reduction <maxsi>")
