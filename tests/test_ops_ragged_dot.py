"""smalti.ops.ragged_dot through the simulator against jax.lax.ragged_dot, inside jax.jit
with the group sizes as run-time values: empty and single-row groups, groups spanning
several tiles or sharing one, sums below and above m, one group; the work-item table; the
ValueErrors at the call; and 0 spills at sm_90a."""

from __future__ import annotations

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from smalti.ops import ragged_dot

module = importlib.import_module("smalti.ops.ragged_dot")  # the function shadows it

BF16, F16, F32 = jnp.bfloat16, jnp.float16, jnp.float32


def operands(m, k, n, groups, dtype, seed=0):
    keys = jax.random.split(jax.random.key(seed), 2)
    lhs = jax.random.normal(keys[0], (m, k), F32).astype(dtype)
    rhs = jax.random.normal(keys[1], (groups, k, n), F32).astype(dtype)
    return lhs, rhs


def check_close(out, lhs, rhs, sizes, out_dtype):
    """out against jax.lax.ragged_dot (f32, rounded to out_dtype): one ulp of the output
    type plus f32 summation order."""
    sizes = jnp.asarray(sizes, jnp.int32)
    want = jax.lax.ragged_dot(lhs, rhs, sizes, preferred_element_type=F32)
    bound = jax.lax.ragged_dot(jnp.abs(lhs.astype(F32)), jnp.abs(rhs.astype(F32)), sizes)
    assert out.shape == want.shape and out.dtype == jnp.dtype(out_dtype)
    want = np.asarray(want.astype(out_dtype), np.float32)
    got = np.asarray(out, np.float32)
    ulp = np.spacing(np.abs(want).astype(out_dtype)).astype(np.float32)
    np.testing.assert_array_less(np.abs(got - want), ulp + 2.0**-18 * np.asarray(bound) + 1e-6)


@pytest.mark.parametrize("m, k, n, sizes, dtype, out_dtype", [
    # empty groups, a single-row group, one spanning two tile boundaries, groups sharing a
    # tile, none aligned to the tiles; rows 244..299 in no group; ragged K and N
    (300, 72, 136, [0, 1, 150, 37, 0, 56, 0], BF16, None),
    # a group over three tiles, the middle one wholly its own; three groups share the last
    (300, 64, 128, [0, 1, 260, 0, 20, 0], F16, BF16),
    (136, 64, 120, [136], F16, F32),
    (72, 520, 64, [30, 0, 42], BF16, F32),  # 9 K steps: 2 rounds of 4 stages, then 1 more  # one group: whole tiles by TMA, the tail masked
    (40, 136, 8, [30, 30], BF16, F16),  # the sum past m clips the last group; N of 8
    (136, 64, 128, [0, 0], F16, None),  # no rows in any group: zeros, by TMA and masked
])
def test_ragged_dot_matches_jax(m, k, n, sizes, dtype, out_dtype):
    lhs, rhs = operands(m, k, n, len(sizes), dtype, seed=m + k)
    call = jax.jit(lambda lhs, rhs, sizes: ragged_dot(
        lhs, rhs, sizes, preferred_element_type=out_dtype))
    out = call(lhs, rhs, jnp.asarray(sizes, jnp.int32))
    check_close(out, lhs, rhs, sizes, out_dtype or dtype)


def test_group_sizes_are_read_at_run_time():
    """One compiled function, two sets of sizes: the kernel is not specialised to them."""
    lhs, rhs = operands(200, 64, 128, 3, BF16, seed=1)
    traces = []

    def traced(lhs, rhs, sizes):
        traces.append(sizes)
        return ragged_dot(lhs, rhs, sizes)

    call = jax.jit(traced)
    for sizes in ([128, 0, 72], [5, 190, 3]):
        check_close(call(lhs, rhs, jnp.asarray(sizes, jnp.int32)), lhs, rhs, sizes, BF16)
    assert len(traces) == 1


@pytest.mark.parametrize("m, sizes", [
    (300, [0, 1, 150, 37, 0, 56, 0]), (256, [128, 128]), (10, [20, 3]), (129, [0, 0, 0]),
    (1000, [1] * 9 + [127, 129, 0, 300]), (5, [-3, 4, 2]),
])
def test_work_items_partition_the_rows_into_group_tiles(m, sizes):
    table = np.asarray(module.work_items(jnp.asarray(sizes, jnp.int32), m))
    assert table.shape == (module.max_items(m, len(sizes)), 3)
    ends = np.maximum.accumulate(np.clip(np.cumsum(sizes), 0, m))
    owner = np.searchsorted(ends, np.arange(m), side="right")  # len(sizes): no group
    covered = np.zeros(m, int)
    for group, lo, hi in table:
        if lo == hi:
            continue
        assert 0 <= lo < hi <= m and (hi - 1) // module.BLOCK_M == lo // module.BLOCK_M
        assert (owner[lo:hi] == group).all()
        covered[lo:hi] += 1
    np.testing.assert_array_equal(covered, 1)
    real = table[:, 2] > table[:, 1]
    assert not (real[1:] & ~real[:-1]).any()  # the real items come first


@pytest.mark.parametrize("call, message", [
    (lambda: ragged_dot(jnp.ones((16, 8), F32), jnp.ones((1, 8, 8), F32), jnp.ones(1, int)),
     "smalti.ops.ragged_dot: lhs must be bfloat16 or float16, got float32"),
    (lambda: ragged_dot(jnp.ones((16, 8), BF16), jnp.ones((1, 8, 8), F16), jnp.ones(1, int)),
     "smalti.ops.ragged_dot: lhs and rhs must have the same dtype, got bfloat16 and float16"),
    (lambda: ragged_dot(jnp.ones((16, 8), BF16), jnp.ones((8, 8), BF16), jnp.ones(1, int)),
     "smalti.ops.ragged_dot: rhs must be a non-empty 3-D array, got shape (8, 8)"),
    (lambda: ragged_dot(jnp.ones((16, 8), BF16), jnp.ones((2, 16, 8), BF16), jnp.ones(2, int)),
     "smalti.ops.ragged_dot: rhs must have shape (g, 8, n) (its dim 1 lhs's columns), got "
     "(2, 16, 8)"),
    (lambda: ragged_dot(jnp.ones((16, 12), BF16), jnp.ones((2, 12, 8), BF16), jnp.ones(2, int)),
     "smalti.ops.ragged_dot: lhs's columns and rhs's last dim must be multiples of 8"),
    (lambda: ragged_dot(jnp.ones((16, 8), BF16), jnp.ones((2, 8, 8), BF16), jnp.ones(3, int)),
     "smalti.ops.ragged_dot: group_sizes must have shape (2,) (rhs's groups), got (3,)"),
    (lambda: ragged_dot(jnp.ones((16, 8), BF16), jnp.ones((2, 8, 8), BF16), jnp.ones(2, F32)),
     "smalti.ops.ragged_dot: group_sizes must be an integer array, got float32"),
    (lambda: ragged_dot(jnp.ones((16, 8), BF16), jnp.ones((2, 8, 8), BF16), jnp.ones(2, int),
                        preferred_element_type=jnp.int8),
     "smalti.ops.ragged_dot: preferred_element_type must be float32, bfloat16 or float16"),
])
def test_bad_arguments_raise_naming_op_argument_and_constraint(call, message):
    with pytest.raises(ValueError) as raised:
        jax.jit(call)()
    assert message in str(raised.value)


@pytest.mark.parametrize("out_dtype", [jnp.dtype(BF16), jnp.dtype(F32)])
def test_kernel_assembles_without_spills_for_sm_90a(out_dtype):
    m, k, n, groups = 4096, 4096, 4096, 8
    kernel = module.ragged_dot_kernel(out_dtype)
    specs = [jax.ShapeDtypeStruct((m, k), BF16), jax.ShapeDtypeStruct((groups, k, n), BF16),
             jax.ShapeDtypeStruct((module.max_items(m, groups), 3), jnp.int32)]
    assert kernel.arch == "sm_90a"
    report = kernel.compile(*specs)[1].report
    assert report.registers > 0
    assert (report.spill_stores, report.spill_loads, report.stack_frame) == (0, 0, 0)
    assert report.performance_failures == ()
