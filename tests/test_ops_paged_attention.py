"""smalti.ops.paged_attention through the simulator, inside jax.jit, against a jax reference
that gathers the pages with the page table and masks by length (softmax in f32): shuffled
page order; table entries past each sequence's pages pointing at NaN pages or out of the
pool, and NaN in the last page's rows past the length (reading any of them shows as NaN);
lengths of 0, 1, negative, past the table and not whole pages or blocks; grouped- and
multi-query heads, a group over 64 rows; head_dim 64 and 128, bf16 and f16, pages of 8 to
128 tokens; sequences split across blocks (flash decoding) with empty splits; the
ValueErrors at the call; 0 spills at sm_90a."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from smalti.ops import paged_attention
from smalti.ops.paged_attention import _kernel, splits_for

TOLERANCE = {jnp.bfloat16: 1e-2, jnp.float16: 2e-3}  # of the largest entry (outputs average
# hundreds of values: a tolerance of absolute size would miss wrong weights)


def assert_close(got, want, dtype):
    got, want = np.asarray(got, np.float32), np.asarray(want)
    np.testing.assert_allclose(got, want, rtol=0, atol=TOLERANCE[dtype] * np.abs(want).max())
POISONED = 3  # spare pages of the pool, filled with NaN
OUT_OF_POOL = (-7, 1 << 30)  # table entries past a sequence's pages may be anything


def reference(q, k_pages, v_pages, lengths, page_indices, scale):
    """Gather each sequence's pages (in f32), drop the keys and values at or past its length,
    softmax; zeros for a sequence of length 0."""
    batch, heads, head_dim = q.shape
    kv_heads, _, page_size, _ = k_pages.shape
    pages = page_indices.shape[1]
    safe = jnp.clip(page_indices, 0, k_pages.shape[1] - 1)
    valid = jnp.arange(pages * page_size)[None, :] < lengths[:, None]  # [batch, tokens]
    k, v = (jnp.where(valid[None, :, :, None],
                      x.astype(jnp.float32)[:, safe].reshape(kv_heads, batch, -1, head_dim), 0.0)
            for x in (k_pages, v_pages))
    q = q.astype(jnp.float32).reshape(batch, kv_heads, heads // kv_heads, head_dim)
    scores = jnp.einsum("bhgd,hbtd->bhgt", q, k) * scale
    scores = jnp.where(valid[:, None, None, :], scores, -jnp.inf)
    weights = jnp.nan_to_num(jax.nn.softmax(scores, axis=-1))  # length 0: all -inf, NaN
    out = jnp.einsum("bhgt,hbtd->bhgd", weights, v)
    return out.reshape(batch, heads, head_dim)


def inputs(batch, heads, kv_heads, head_dim, page_size, pages_per_sequence, lengths, dtype,
           seed=0):
    """q, K/V pages and a page table: every sequence's pages in a shuffled order over a pool
    with POISONED spare pages of NaN; table entries past a sequence's last page point at
    those, or out of the pool; the rows of a last page past the length are NaN too. Reading
    any of them makes the output NaN."""
    rng = np.random.default_rng(seed)
    total_pages = batch * pages_per_sequence + POISONED
    keys = jax.random.split(jax.random.key(seed), 3)
    q = jax.random.normal(keys[0], (batch, heads, head_dim), jnp.float32).astype(dtype)
    k_pages, v_pages = (np.array(jax.random.normal(
        key, (kv_heads, total_pages, page_size, head_dim), jnp.float32)) for key in keys[1:])
    order = rng.permutation(total_pages)
    spare = order[batch * pages_per_sequence:]
    table = order[:batch * pages_per_sequence].reshape(batch, pages_per_sequence)
    table = table.astype(np.int32)
    for b, length in enumerate(lengths):
        used = -(-length // page_size)
        for pages in (k_pages, v_pages):
            pages[:, table[b, used:]] = np.nan  # unused pages of the sequence: poison too
            if length % page_size:
                pages[:, table[b, used - 1], length % page_size:] = np.nan
        table[b, used:] = rng.choice([*spare, *OUT_OF_POOL], pages_per_sequence - used)
    for pages in (k_pages, v_pages):
        pages[:, spare] = np.nan
    return (q, jnp.asarray(k_pages, dtype), jnp.asarray(v_pages, dtype),
            jnp.asarray(lengths, jnp.int32), jnp.asarray(table))


CASES = [  # batch, heads, kv_heads, head_dim, page_size, pages_per_sequence, lengths, dtype
    (4, 8, 2, 64, 16, 9, [1, 100, 0, 144], jnp.bfloat16),  # GQA; 1, ragged, 0 and full
    (2, 4, 1, 128, 128, 2, [200, 65], jnp.float16),  # MQA, pages of two blocks
    (1, 6, 2, 64, 8, 20, [130], jnp.float16),  # groups of 3, 8 copies per block
    (2, 16, 2, 128, 32, 4, [64, 97], jnp.bfloat16),  # groups of 8
    # split along the sequence (flash decoding): 4 splits, then 3 with empty ones
    (1, 8, 1, 128, 64, 16, [1000], jnp.bfloat16),
    (3, 4, 2, 64, 32, 24, [700, 70, 0], jnp.float16),
]


@pytest.mark.parametrize(("batch", "heads", "kv_heads", "head_dim", "page_size",
                          "pages_per_sequence", "lengths", "dtype"), CASES, ids=str)
def test_paged_attention_matches_jax(batch, heads, kv_heads, head_dim, page_size,
                                     pages_per_sequence, lengths, dtype):
    args = inputs(batch, heads, kv_heads, head_dim, page_size, pages_per_sequence, lengths,
                  dtype)
    got = jax.jit(paged_attention)(*args)
    want = reference(*args, 1 / math.sqrt(head_dim))
    assert got.dtype == dtype and got.shape == (batch, heads, head_dim)
    assert_close(got, want, dtype)
    for b, length in enumerate(lengths):
        if length == 0:
            assert not np.asarray(got[b], np.float32).any()


def test_an_explicit_scale_and_a_group_over_64_rows():
    args = inputs(1, 72, 1, 64, 64, 2, [77], jnp.bfloat16, seed=1)
    got = jax.jit(lambda *a: paged_attention(*a, scale=0.3))(*args)
    assert_close(got, reference(*args, 0.3), jnp.bfloat16)


def test_lengths_are_clamped_to_the_page_table():
    """A negative length reads nothing (zeros); one past pages_per_sequence * page_size
    reads every page of the table, no further. One query head per K/V head."""
    q, k_pages, v_pages, _, table = inputs(2, 2, 2, 64, 16, 5, [0, 80], jnp.bfloat16, seed=2)
    got = jax.jit(paged_attention)(q, k_pages, v_pages, jnp.asarray([-3, 1 << 20], jnp.int32),
                                   table)
    want = reference(q, k_pages, v_pages, jnp.asarray([0, 80], jnp.int32), table, 1 / 8)
    assert_close(got, want, jnp.bfloat16)
    assert not np.asarray(got[0], np.float32).any()


BF16, I32 = jnp.bfloat16, jnp.int32


def call(q=(2, 8, 64), pages=(2, 6, 16, 64), v_pages=None, lengths=(2,), table=(2, 3),
         dtype=BF16, v_dtype=None, lengths_dtype=I32, **kwargs):
    return paged_attention(jnp.ones(q, dtype), jnp.ones(pages, dtype),
                           jnp.ones(v_pages or pages, v_dtype or dtype),
                           jnp.ones(lengths, lengths_dtype), jnp.ones(table, I32), **kwargs)


@pytest.mark.parametrize(("arguments", "message"), [
    (dict(q=(2, 1, 8, 64)), "q must be a non-empty [batch, heads, head_dim] array, got shape "
                            "(2, 1, 8, 64)"),
    (dict(pages=(2, 6, 16)), "k_pages must be a non-empty [kv_heads, total_pages, page_size, "
                             "head_dim] array, got shape (2, 6, 16)"),
    (dict(table=(2, 0)), "page_indices must be a non-empty [batch, pages_per_sequence] array"),
    (dict(dtype=jnp.float32), "q must be bfloat16 or float16, got float32"),
    (dict(v_dtype=jnp.float16), "v_pages must have q's dtype bfloat16, got float16"),
    (dict(lengths_dtype=jnp.int16), "lengths must be int32, got int16"),
    (dict(v_pages=(2, 7, 16, 64)), "k_pages and v_pages must have one shape, got "
                                   "(2, 6, 16, 64) and (2, 7, 16, 64)"),
    (dict(q=(2, 8, 96), pages=(2, 6, 16, 96)),
     "head_dim (the last axis of q) must be 64 or 128, got shape (2, 8, 96)"),
    (dict(pages=(2, 6, 16, 128)), "k_pages must have q's head_dim (64), got shape "
                                  "(2, 6, 16, 128)"),
    (dict(pages=(3, 6, 16, 64)), "k_pages' kv_heads (3) must divide q's heads (8)"),
    (dict(pages=(2, 6, 24, 64)), "page_size (axis 2 of k_pages) must be 8, 16, 32 or a "
                                 "multiple of 64, got 24"),
    (dict(pages=(2, 6, 96, 64)), "must be 8, 16, 32 or a multiple of 64, got 96"),
    (dict(lengths=(3,)), "lengths must have q's batch (2) as its first axis, got shape (3,)"),
    (dict(table=(1, 3)), "page_indices must have q's batch (2) as its first axis, got shape "
                         "(1, 3)"),
    (dict(scale=0.0), "scale must be a positive finite Python number"),
    (dict(scale=jnp.float32(0.5)), "scale must be a positive finite Python number"),
])
def test_bad_arguments_raise_naming_op_argument_and_constraint(arguments, message):
    with pytest.raises(ValueError) as raised:
        call(**arguments)
    assert str(raised.value).startswith("smalti.ops.paged_attention: ")
    assert message in str(raised.value)


@pytest.mark.parametrize(("head_dim", "page_size", "splits"),
                         [(64, 16, 1), (128, 64, 1), (64, 8, 3), (128, 32, 4)])
def test_kernels_assemble_without_spills_for_sm_90a(head_dim, page_size, splits):
    kernel = _kernel(1 / math.sqrt(head_dim), splits)
    q = jax.ShapeDtypeStruct((2, 2, 4, head_dim), BF16)
    pages = jax.ShapeDtypeStruct((2, 64, page_size, head_dim), BF16)
    lengths, table = jax.ShapeDtypeStruct((2,), I32), jax.ShapeDtypeStruct((2, 16), I32)
    report = kernel.compile(q, pages, pages, lengths, table)[1].report
    assert report.registers > 0
    assert (report.spill_stores, report.spill_loads, report.stack_frame) == (0, 0, 0)
    assert report.performance_failures == ()


@pytest.mark.parametrize(("batch", "kv_heads", "group", "max_tokens", "splits"), [
    (1, 1, 8, 1024, 4),  # one sequence of 16 blocks: 4 splits of 4
    (1, 8, 4, 1 << 16, 17),  # 8 programs: 17 splits make a wave of 132 SMs
    (64, 8, 4, 1 << 16, 1),  # 512 programs: a wave already
    (1, 1, 8, 255, 1),  # under 2 * 4 blocks: no split
])
def test_splits_fill_a_wave_of_blocks(batch, kv_heads, group, max_tokens, splits):
    assert splits_for(batch, kv_heads, group, max_tokens) == splits
