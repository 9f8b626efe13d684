"""smalti.ops.dot_product_attention through the simulator, inside jax.jit, against
jax.nn.dot_product_attention in f32: grouped- and multi-query heads, head_dim 64 and 128,
bf16 and f16, sequence lengths that are not whole tiles (and of one), causal and not; the
saved log-sum-exp (the gradients: tests/test_ops_attention_grad.py); the ValueErrors at
the call; 0 spills at sm_90a."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from smalti.ops import attention, dot_product_attention, dot_product_attention_with_lse

TOLERANCE = {jnp.bfloat16: 2e-2, jnp.float16: 4e-3}


def inputs(batch, q_len, kv_len, heads, kv_heads, head_dim, dtype, seed=0):
    keys = jax.random.split(jax.random.key(seed), 3)
    q = jax.random.normal(keys[0], (batch, q_len, heads, head_dim), jnp.float32)
    k, v = (jax.random.normal(key, (batch, kv_len, kv_heads, head_dim), jnp.float32)
            for key in keys[1:])
    return tuple(x.astype(dtype) for x in (q, k, v))


def f32(*arrays):
    return tuple(x.astype(jnp.float32) for x in arrays)


def reference_lse(q, k, v, scale, causal):
    """log-sum-exp over keys of the scaled, masked scores, [batch, heads, q_len]."""
    q, k = f32(q, k)
    k = jnp.repeat(k, q.shape[2] // k.shape[2], axis=2)  # the reference may copy heads
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) * scale
    if causal:
        scores = jnp.where(jnp.tril(jnp.ones(scores.shape[-2:], bool)), scores, -jnp.inf)
    return jax.nn.logsumexp(scores, axis=-1)


CASES = [  # batch, q_len, kv_len, heads, kv_heads, head_dim, dtype, causal
    (1, 100, 200, 8, 2, 64, jnp.bfloat16, False),  # GQA, both tails ragged
    (1, 100, 200, 8, 2, 64, jnp.bfloat16, True),
    (2, 70, 130, 4, 1, 128, jnp.float16, True),  # MQA
    (1, 130, 70, 2, 2, 128, jnp.bfloat16, True),  # causal, query longer than the keys
    (1, 64, 128, 2, 1, 64, jnp.float16, False),  # whole tiles: no masked step
    (1, 1, 100, 4, 2, 64, jnp.bfloat16, False),  # one query row (decoding)
    (1, 1, 1, 2, 1, 128, jnp.float16, True),  # one key
    (1, 40, 1, 2, 2, 64, jnp.bfloat16, False),
]


@pytest.mark.parametrize(("batch", "q_len", "kv_len", "heads", "kv_heads", "head_dim",
                          "dtype", "causal"), CASES, ids=str)
def test_attention_matches_jax(batch, q_len, kv_len, heads, kv_heads, head_dim, dtype,
                               causal):
    q, k, v = inputs(batch, q_len, kv_len, heads, kv_heads, head_dim, dtype)
    got = jax.jit(lambda *a: dot_product_attention(*a, is_causal=causal))(q, k, v)
    want = jax.nn.dot_product_attention(*f32(q, k, v), is_causal=causal)
    assert got.dtype == q.dtype and got.shape == q.shape
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want),
                               rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])


@pytest.mark.parametrize("causal", [False, True])
def test_log_sum_exp_and_an_explicit_scale(causal):
    q, k, v = inputs(1, 90, 150, 4, 2, 64, jnp.bfloat16, seed=1)
    out, lse = jax.jit(lambda *a: dot_product_attention_with_lse(*a, scale=0.3,
                                                                 is_causal=causal))(q, k, v)
    want = jax.nn.dot_product_attention(*f32(q, k, v), scale=0.3, is_causal=causal)
    np.testing.assert_allclose(np.asarray(out, np.float32), np.asarray(want), atol=2e-2)
    assert lse.shape == (1, 4, 90) and lse.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(lse), np.asarray(reference_lse(q, k, v, 0.3, causal)),
                               rtol=1e-5, atol=1e-5)


BF16 = jnp.bfloat16


@pytest.mark.parametrize(("call", "message"), [
    (lambda: dot_product_attention(jnp.ones((2, 8, 64), BF16), jnp.ones((2, 8, 64), BF16),
                                   jnp.ones((2, 8, 64), BF16)),
     "smalti.ops.dot_product_attention: query must be a non-empty [batch, seq, heads, "
     "head_dim] array, got shape (2, 8, 64)"),
    (lambda: dot_product_attention(*(jnp.ones((1, 8, 2, 64)),) * 3),
     "smalti.ops.dot_product_attention: query must be bfloat16 or float16, got float32"),
    (lambda: dot_product_attention(jnp.ones((1, 8, 2, 64), BF16),
                                   *(jnp.ones((1, 8, 2, 64), jnp.float16),) * 2),
     "query, key and value must share one dtype, got bfloat16, float16, float16"),
    (lambda: dot_product_attention(*(jnp.ones((1, 8, 2, 96), BF16),) * 3),
     "head_dim (the last axis of query) must be 64 or 128, got shape (1, 8, 2, 96)"),
    (lambda: dot_product_attention(jnp.ones((1, 8, 4, 64), BF16), jnp.ones((1, 8, 3, 64), BF16),
                                   jnp.ones((1, 8, 3, 64), BF16)),
     "key's heads (3) must divide query's heads (4)"),
    (lambda: dot_product_attention(jnp.ones((1, 8, 4, 64), BF16), jnp.ones((1, 8, 2, 64), BF16),
                                   jnp.ones((1, 9, 2, 64), BF16)),
     "key and value must have one shape [batch, kv_seq, kv_heads, head_dim], got "
     "(1, 8, 2, 64) and (1, 9, 2, 64)"),
    (lambda: dot_product_attention(jnp.ones((1, 8, 4, 64), BF16),
                                   *(jnp.ones((2, 8, 2, 64), BF16),) * 2),
     "key must have query's batch and head_dim"),
    (lambda: dot_product_attention(*(jnp.ones((1, 8, 2, 64), BF16),) * 3, scale=-1.0),
     "scale must be a positive finite Python number"),
    (lambda: dot_product_attention(*(jnp.ones((1, 8, 2, 64), BF16),) * 3, is_causal=1),
     "is_causal must be a Python bool, got 1"),
])
def test_bad_arguments_raise_naming_op_argument_and_constraint(call, message):
    with pytest.raises(ValueError) as raised:
        call()
    assert message in str(raised.value)


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_kernels_assemble_without_spills_for_sm_90a(head_dim, causal):
    kernel = attention._forward(1 / math.sqrt(head_dim), causal, 200)
    assert kernel.arch == "sm_90a"
    q = jax.ShapeDtypeStruct((1, 200, 8, head_dim), BF16)
    kv = jax.ShapeDtypeStruct((1, 256, 2, head_dim), BF16)
    report = kernel.compile(q, kv, kv)[1].report
    assert report.registers > 0
    assert (report.spill_stores, report.spill_loads, report.stack_frame) == (0, 0, 0)
    assert report.performance_failures == ()
