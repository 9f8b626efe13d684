"""The backward of smalti.ops.ragged_dot through the simulator: jax.grad against jax.grad of
jax.lax.ragged_dot for lhs and rhs inside jax.jit (empty and single-row groups, groups
spanning row windows and tiles or sharing them, sums below and above m, one group, ragged
k and n, bf16 and f16, every output dtype); group_sizes' cotangent as jax's; rows of other
groups and rows past the sum adding nothing even when they hold NaN; 0 spills at sm_90a."""

from __future__ import annotations

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from smalti.ops import ragged_dot

module = importlib.import_module("smalti.ops.ragged_dot")  # the function shadows it

BF16, F16, F32 = jnp.bfloat16, jnp.float16, jnp.float32


def operands(m, k, n, groups, dtype, seed):
    """lhs, rhs and the loss's f32 weights on the output (the cotangent)."""
    keys = jax.random.split(jax.random.key(seed), 3)
    return (jax.random.normal(keys[0], (m, k), F32).astype(dtype),
            jax.random.normal(keys[1], (groups, k, n), F32).astype(dtype),
            jax.random.normal(keys[2], (m, n), F32))


def gradients(op, lhs, rhs, sizes, weights, out_dtype):
    """jax.grad in lhs and rhs of sum(op(...) * weights), inside jax.jit."""
    def loss(lhs, rhs, sizes):
        out = op(lhs, rhs, sizes, preferred_element_type=out_dtype)
        return jnp.sum(out.astype(F32) * weights)
    return jax.jit(jax.grad(loss, argnums=(0, 1)))(lhs, rhs, sizes)


def check_close(got, want, bound, dtype):
    """Two ulps of the gradients' dtype, plus the cotangent's rounding to the inputs' dtype
    (relative 2^-8 of the sum of |products|) and f32 summation order."""
    assert got.shape == want.shape and got.dtype == jnp.dtype(dtype)
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    ulp = np.spacing(np.abs(want).astype(dtype)).astype(np.float32)
    np.testing.assert_array_less(np.abs(got - want), 2 * ulp + 2.0**-8 * bound + 1e-6)


def check_gradients(got, lhs, rhs, sizes, weights, out_dtype):
    """got (d_lhs, d_rhs) against jax.lax.ragged_dot's, bounded by the same pullback of the
    absolute values: the sums of |products| of each gradient."""
    want = gradients(jax.lax.ragged_dot, lhs, rhs, sizes, weights, out_dtype)
    _, pullback = jax.vjp(lambda lhs, rhs: jax.lax.ragged_dot(lhs, rhs, sizes),
                          jnp.abs(lhs.astype(F32)), jnp.abs(rhs.astype(F32)))
    bounds = pullback(jnp.abs(weights))
    for got_one, want_one, bound in zip(got, want, bounds, strict=True):
        check_close(got_one, want_one, np.asarray(bound), lhs.dtype)


@pytest.mark.parametrize("m, k, n, sizes, dtype, out_dtype", [
    # empty groups, a single-row group, one spanning two tile boundaries, groups sharing a
    # 64-row window, none aligned; rows 244..299 in no group; ragged K and N (two N tiles)
    (300, 72, 136, [0, 1, 150, 37, 0, 56, 0], BF16, None),
    # one group: ragged N; f32 output, so a f32 cotangent rounded for the tensor cores
    (136, 64, 120, [136], F16, F32),
    # a group of 9 windows (two rounds of the 4-stage ring, then one more), groups aligned
    # to the windows, two K tiles of d_rhs (the second ragged), a tiny N
    (600, 136, 8, [64, 3, 0, 533], BF16, BF16),
    (40, 136, 64, [30, 30], F16, None),  # the sum past m clips the last group
    (136, 64, 128, [0, 0], BF16, F16),  # no rows in any group: zero gradients
])
def test_gradients_match_jax(m, k, n, sizes, dtype, out_dtype):
    lhs, rhs, weights = operands(m, k, n, len(sizes), dtype, seed=m + k + n)
    sizes = jnp.asarray(sizes, jnp.int32)
    got = gradients(ragged_dot, lhs, rhs, sizes, weights, out_dtype)
    check_gradients(got, lhs, rhs, sizes, weights, out_dtype)
    if not sizes.any():
        assert not np.asarray(got[0], np.float32).any()
        assert not np.asarray(got[1], np.float32).any()


def test_group_sizes_cotangent_is_jax_s():
    """jax.vjp in all three arguments: group_sizes' cotangent is float0 zeros, as jax's."""
    lhs, rhs, weights = operands(64, 64, 64, 2, BF16, seed=3)
    sizes = jnp.asarray([20, 30], jnp.int32)
    cotangent = weights.astype(BF16)
    got = jax.vjp(ragged_dot, lhs, rhs, sizes)[1](cotangent)
    want = jax.vjp(jax.lax.ragged_dot, lhs, rhs, sizes)[1](cotangent)
    assert jax.tree.structure(got) == jax.tree.structure(want)
    assert [(g.shape, g.dtype) for g in got] == [(w.shape, w.dtype) for w in want]
    assert got[2].dtype == jax.dtypes.float0


def test_other_rows_add_nothing_even_nan():
    """NaN in the rows past the sum (lhs and cotangent) and in group 0's rows of lhs: the
    windows shared with group 0 or with the unowned rows are zeroed before the products, so
    group 1's d_rhs and every d_lhs row outside group 0 stay exact (numpy per group)."""
    m, k, n, sizes = 200, 64, 64, [37, 100]
    lhs, rhs, weights = operands(m, k, n, len(sizes), BF16, seed=7)
    lhs = lhs.at[:37].set(jnp.nan).at[137:].set(jnp.nan)
    cotangent = weights.astype(BF16).at[137:].set(jnp.nan)
    d_lhs, d_rhs, _ = jax.jit(lambda *args: jax.vjp(ragged_dot, *args)[1](cotangent))(
        lhs, rhs, jnp.asarray(sizes, jnp.int32))
    x, w, dy = (np.asarray(a, np.float32) for a in (lhs, rhs, cotangent))
    want_rhs = x[37:137].T @ dy[37:137]
    want_lhs = dy[37:137] @ w[1].T
    check_close(d_rhs[1], want_rhs, np.abs(x[37:137]).T @ np.abs(dy[37:137]), BF16)
    check_close(d_lhs[37:137], want_lhs, np.abs(dy[37:137]) @ np.abs(w[1]).T, BF16)
    assert not np.asarray(d_lhs[137:], np.float32).any()  # rows past the sum: zeros


def test_group_sizes_are_read_at_run_time():
    """One compiled gradient, two sets of sizes: the kernels are not specialised to them."""
    lhs, rhs, weights = operands(200, 64, 64, 3, F16, seed=1)
    traces = []

    def loss(lhs, rhs, sizes):
        traces.append(sizes)
        return jnp.sum(ragged_dot(lhs, rhs, sizes).astype(F32) * weights)

    call = jax.jit(jax.grad(loss, argnums=(0, 1)))
    for sizes in ([128, 0, 72], [5, 190, 3]):
        sizes = jnp.asarray(sizes, jnp.int32)
        check_gradients(call(lhs, rhs, sizes), lhs, rhs, sizes, weights, None)
    assert len(traces) == 1


@pytest.mark.parametrize("kernel, specs", [
    (module.ragged_dot_kernel(jnp.dtype(BF16), module.RhsOperand(transposed=True)),
     [(4096, 4096), (8, 4096, 4096), (module.max_items(4096, 8), 3)]),
    (module.ragged_dot_rhs_grad_kernel(jnp.dtype(BF16)),
     [(4096, 4096), (4096, 4096), (9,)]),
], ids=["d_lhs", "d_rhs"])
def test_backward_kernels_assemble_without_spills_for_sm_90a(kernel, specs):
    dtypes = (BF16, BF16, jnp.int32)
    report = kernel.compile(*(jax.ShapeDtypeStruct(shape, dtype)
                              for shape, dtype in zip(specs, dtypes, strict=True)))[1].report
    assert kernel.arch == "sm_90a" and report.registers > 0
    assert (report.spill_stores, report.spill_loads, report.stack_frame) == (0, 0, 0)
    assert report.performance_failures == ()
