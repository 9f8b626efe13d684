"""jax.grad through smalti.ops.dot_product_attention (its backward kernels, through the
simulator, inside jax.jit) against jax.grad of jax.nn.dot_product_attention in f32:
grouped- and multi-query heads, head_dim 64 and 128, sequence lengths that are not whole
tiles, bf16 and f16, causal (also with the query longer than the keys) and not; lengths
shorter than a tile or one row past whole tiles, for the query and the keys independently
(nothing is padded: the tiles hanging over the arrays' ends are zero-filled by TMA and their
rows masked, and the simulator faults on any unmasked access past an end); the lse's
cotangent; 0 spills at sm_90a for the backward kernels."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from smalti.ops import attention_backward, dot_product_attention, dot_product_attention_with_lse

BF16 = jnp.bfloat16


def inputs(batch, q_len, kv_len, heads, kv_heads, head_dim, dtype=BF16, seed=0):
    """Q, K, V in dtype and an f32 weight for the loss sum(O * weight)."""
    keys = jax.random.split(jax.random.key(seed), 4)
    q = jax.random.normal(keys[0], (batch, q_len, heads, head_dim)).astype(dtype)
    k, v = (jax.random.normal(key, (batch, kv_len, kv_heads, head_dim)).astype(dtype)
            for key in keys[1:3])
    return q, k, v, jax.random.normal(keys[3], (batch, q_len, heads, head_dim))


def assert_close(got, want):
    """bf16/f16 gradients: an error under 2% of the gradient's largest entry (or of 1e-3
    where the gradient is 0: a single key's dQ is rounding)."""
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w),
                                   atol=2e-2 * max(float(jnp.abs(w).max()), 1e-3), rtol=0)


CASES = [  # batch, q_len, kv_len, heads, kv_heads, head_dim, dtype, causal
    (1, 100, 130, 4, 2, 64, BF16, False),  # GQA 4/2, both tails ragged
    (1, 100, 130, 4, 2, 64, BF16, True),
    (2, 70, 70, 2, 1, 128, BF16, True),  # MQA, head_dim 128
    (1, 50, 100, 2, 1, 128, jnp.float16, False),  # a query shorter than one tile
    (1, 130, 70, 2, 2, 64, BF16, True),  # causal, query longer than the keys
    (1, 128, 192, 2, 1, 64, BF16, True),  # whole tiles; keys from 128 on seen by no query
]

TAILS = [  # q_len, kv_len, heads, kv_heads, causal: lengths not whole 64-row tiles
    (1, 7, 2, 1, False),  # both shorter than one tile
    (7, 1, 2, 1, True),  # causal, one key: the query's rows 1.. see it all (split off)
    (63, 65, 4, 2, False),
    (63, 65, 4, 2, True),
    (65, 63, 2, 1, False),
    (130, 1, 2, 1, False),
    (1, 130, 4, 2, True),  # causal: keys from the query's one tile on get no gradient
    (130, 130, 2, 1, True),
]


def grads(q, k, v, weight, causal):
    """smalti's gradients (jitted) and jax.grad of jax.nn.dot_product_attention in f32 of
    the loss sum(O * weight)."""
    def loss(attend, *args):
        return (attend(*args, is_causal=causal).astype(jnp.float32) * weight).sum()

    got = jax.jit(jax.grad(lambda *a: loss(dot_product_attention, *a), argnums=(0, 1, 2)))(
        q, k, v)
    want = jax.grad(lambda *a: loss(jax.nn.dot_product_attention, *a), argnums=(0, 1, 2))(
        *(x.astype(jnp.float32) for x in (q, k, v)))
    return got, want


@pytest.mark.parametrize(("batch", "q_len", "kv_len", "heads", "kv_heads", "head_dim",
                          "dtype", "causal"), CASES, ids=str)
def test_grad_matches_jax(batch, q_len, kv_len, heads, kv_heads, head_dim, dtype, causal):
    q, k, v, weight = inputs(batch, q_len, kv_len, heads, kv_heads, head_dim, dtype)
    got, want = grads(q, k, v, weight, causal)
    assert [g.dtype for g in got] == [dtype] * 3
    assert_close(got, want)


@pytest.mark.parametrize(("q_len", "kv_len", "heads", "kv_heads", "causal"), TAILS, ids=str)
def test_grad_with_lengths_that_are_not_whole_tiles(q_len, kv_len, heads, kv_heads, causal):
    """Batch 2, so that a head's tail rows of the flat lse/delta are followed by the next
    head's (a load past the run must read 0, not them) and the last head's by the end."""
    q, k, v, weight = inputs(2, q_len, kv_len, heads, kv_heads, 64, seed=q_len + kv_len)
    got, want = grads(q, k, v, weight, causal)
    assert all(bool(jnp.isfinite(g).all()) for g in got)
    assert_close(got, want)


def test_grad_through_the_log_sum_exp():
    """The lse's cotangent adds P * d_lse to dS (it folds into delta)."""
    q, k, v, weight = inputs(1, 80, 100, 2, 1, 64, seed=1)

    def smalti_loss(q, k, v):
        out, lse = dot_product_attention_with_lse(q, k, v)
        return (out.astype(jnp.float32) * weight).sum() + (lse ** 2).sum()

    def jax_loss(q, k, v):
        out = jax.nn.dot_product_attention(q, k, v)
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, jnp.repeat(k, 2, axis=2)) / 8.0
        return (out * weight).sum() + (jax.nn.logsumexp(scores, axis=-1) ** 2).sum()

    got = jax.jit(jax.grad(smalti_loss, argnums=(0, 1, 2)))(q, k, v)
    want = jax.grad(jax_loss, argnums=(0, 1, 2))(*(x.astype(jnp.float32) for x in (q, k, v)))
    assert_close(got, want)


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_backward_kernels_assemble_without_spills_for_sm_90a(head_dim, causal):
    scale = 1 / math.sqrt(head_dim)
    for q_len, kv_len in ((256, 256), (200, 230)):  # whole tiles; masked tails
        q = jax.ShapeDtypeStruct((1, q_len, 8, head_dim), BF16)
        kv = jax.ShapeDtypeStruct((1, kv_len, 2, head_dim), BF16)
        rows = jax.ShapeDtypeStruct((8 * q_len,), jnp.float32)
        for kernel in (attention_backward._dq(scale, causal, kv_len),
                       attention_backward._dkdv(scale, causal)):
            assert kernel.arch == "sm_90a"
            report = kernel.compile(q, q, kv, kv, rows, rows)[1].report
            assert report.registers > 0
            assert (report.spill_stores, report.spill_loads, report.stack_frame) == (0, 0, 0), \
                (kernel, q_len, kv_len)
            assert report.performance_failures == ()
