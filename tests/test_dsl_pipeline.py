"""`sd.emit_pipeline` and `sd.BlockSpec`: the pipelined matmul (examples/matmul_pipelined.py)
and pipelines over static and traced step counts, 1 to 4 stages, output blocks stored when
their index changes, carried values and scoped shared memory, run under jax.jit in the
simulator against numpy; its main loop in SASS against the hand-written matmul's; and misuse
errors that name the spec and the user's line."""

from __future__ import annotations

import re
from functools import cache

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxlib.mlir import ir

import smalti.dsl as sd
from smalti.ptx.toolchain import disassemble
from smalti.runtime.cache import ptxas_available
from smalti.tiling import SwizzleTransform, TileTransform
from tests.dsl_helpers import isolated_cache, line_of, load_example  # noqa: F401
from tests.test_matmul import _assert_within_one_ulp

BF16, F32 = jnp.bfloat16, jnp.float32
THIS_FILE = __file__


@cache
def example():
    return load_example("matmul_pipelined")


def operands(m: int, n: int, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k)).astype(BF16), rng.standard_normal((k, n)).astype(BF16))


def op_names(module: ir.Operation) -> list[str]:
    names = []

    def visit(op):
        names.append(op.operation.name)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return names


@pytest.mark.parametrize("m,n,k", [(256, 384, 192), (128, 128, 512)])
def test_pipelined_matmul_matches_numpy(m, n, k):
    a, b = operands(m, n, k)
    got = np.asarray(jax.jit(example().matmul)(a, b))
    _assert_within_one_ulp(got, a, b)


def test_pipelined_matmul_is_one_traced_loop_and_reuses_the_ring_for_its_epilogue():
    """K = 8 tiles, 2 stages: four rounds in one scf.for (not unrolled in Python), two
    wgmmas and two waits per round; the epilogue's C tile lands on the ring's bytes."""
    spec = jax.ShapeDtypeStruct((512, 512), BF16)
    traced = example().matmul.trace(spec, spec)
    names = op_names(traced.module)
    assert names.count("scf.for") == 1 and names.count("smalti.wgmma") == 2
    assert names.count("smalti.wait") == 2 and names.count("smalti.initialize_barrier") == 1
    # A and B rings (2 x 16 KiB each) and the barriers: 64 KiB + 16 B; C reuses offset 0.
    assert traced.smem_bytes == 65536 + 16


def stage_kernel(stages: int, k: int, block_k: int = 64):
    """A 128x128 matmul over k // block_k K steps with `stages` buffers per input."""

    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128, 128), F32))
    def matmul(a_ref, b_ref, c_ref):
        acc = sd.emit_pipeline(
            lambda _, a, b, acc: sd.wgmma(acc, a, b), grid=k // block_k,
            in_specs=[sd.BlockSpec((128, block_k), lambda j: (0, j)),
                      sd.BlockSpec((block_k, 128), lambda j: (j, 0))],
            max_concurrent_steps=stages, init_carry=sd.zeros((128, 128), F32))(a_ref, b_ref)
        c_ref[...] = acc

    return matmul


@pytest.mark.parametrize("stages", [1, 2, 3, 4])
def test_any_stage_count_over_steps_that_fill_no_whole_round(stages):
    """5 K steps: with 2, 3 or 4 stages the last round is partial; with 1 there is no
    prefetch at all."""
    a, b = operands(128, 128, 320, seed=stages)
    got = np.asarray(jax.jit(stage_kernel(stages, 320))(a, b))
    expected = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)


def test_a_traced_step_count():
    """Block i multiplies the first i + 2 K tiles (a step count known only on the GPU): the
    rounds run in one scf.for, the remaining step in a second, its stage chosen at run time."""
    blocks, block_k = 3, 64

    @sd.kernel(grid=(blocks,), out_shape=jax.ShapeDtypeStruct((blocks * 128, 128), F32))
    def prefix_matmul(a_ref, b_ref, c_ref):
        i = sd.program_id(0)
        acc = sd.emit_pipeline(
            lambda _, a, b, acc: sd.wgmma(acc, a, b), grid=i + 2,
            in_specs=[sd.BlockSpec((128, block_k), lambda j: (0, j)),
                      sd.BlockSpec((block_k, 128), lambda j: (j, 0))],
            max_concurrent_steps=2, init_carry=sd.zeros((128, 128), F32))(a_ref, b_ref)
        c_ref[i * 128:(i + 1) * 128, :] = acc

    a, b = operands(128, 128, (blocks + 1) * block_k, seed=7)
    names = op_names(prefix_matmul.trace(a, b).module)
    assert names.count("scf.for") == 2 and "smalti.select_stage" in names
    got = np.asarray(jax.jit(prefix_matmul)(a, b))
    wide_a, wide_b = a.astype(np.float32), b.astype(np.float32)
    for i in range(blocks):
        steps = (i + 2) * block_k
        np.testing.assert_allclose(got[i * 128:(i + 1) * 128],
                                   wide_a[:, :steps] @ wide_b[:steps], rtol=1e-5, atol=1e-4)


def test_output_blocks_are_stored_when_their_index_changes():
    """A 2-D pipeline grid over the (128, 128) blocks of x: each step writes a new output
    block (stored by TMA before the buffer is written again); the body reads its input
    blocks with its own threads before TMA refills them."""

    @sd.kernel(out_shape=jax.ShapeDtypeStruct((256, 384), F32))
    def affine(x_ref, o_ref):
        def step(indices, x_block, o_block):
            o_block[...] = x_block[...] * 2.0 + 1.0

        sd.emit_pipeline(step, grid=(2, 3),
                         in_specs=[sd.BlockSpec((128, 128), lambda i, j: (i, j))],
                         out_specs=[sd.BlockSpec((128, 128), lambda i, j: (i, j))])(x_ref, o_ref)

    x = np.random.default_rng(1).standard_normal((256, 384)).astype(np.float32)
    names = op_names(affine.trace(x).module)
    assert names.count("smalti.async_store") == 2  # 6 steps: rounds of 2 steps, no tail
    np.testing.assert_array_equal(np.asarray(jax.jit(affine)(x)), x * 2 + 1)


def test_an_output_block_that_stays_is_stored_once_with_the_carry_it_got():
    """Column sums of x's four (128, 64) blocks: the carry accumulates, the one output
    block (index (0, 0) at every step) is written each step and stored after the last."""

    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128, 64), F32))
    def block_sum(x_ref, o_ref):
        def step(indices, x_block, o_block, acc):
            acc = acc + x_block[...]
            o_block[...] = acc
            return acc

        sd.emit_pipeline(step, grid=4, in_specs=[sd.BlockSpec((128, 64), lambda j: (0, j))],
                         out_specs=[sd.BlockSpec((128, 64), lambda j: (0, 0))],
                         max_concurrent_steps=3,
                         init_carry=sd.zeros((128, 64), F32))(x_ref, o_ref)

    x = np.random.default_rng(2).standard_normal((128, 256)).astype(np.float32)
    names = op_names(block_sum.trace(x).module)
    assert names.count("smalti.async_store") == 1 and names.count("smalti.async_store_wait") == 1
    expected = x[:, :64] + x[:, 64:128] + x[:, 128:192] + x[:, 192:]
    np.testing.assert_allclose(np.asarray(jax.jit(block_sum)(x)), expected, rtol=1e-6)


def misuse_kernel(spec: sd.BlockSpec, stages: int = 2, k: int = 256):
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128, 128), F32))
    def misuse(a_ref, b_ref, c_ref):
        pipeline = sd.emit_pipeline(
            lambda _, a, b, acc: sd.wgmma(acc, a, b), grid=4,
            in_specs=[spec, sd.BlockSpec((64, 128), lambda j: (j, 0))],
            max_concurrent_steps=stages, init_carry=sd.zeros((128, 128), F32))
        acc = pipeline(a_ref, b_ref)  # MARK: pipeline call
        c_ref[...] = acc

    return misuse


@pytest.mark.parametrize("spec,stages,error,message", [
    (lambda: sd.BlockSpec((128, 64, 1), lambda j: (0, j, 0)), 2, ValueError,
     r"in_specs\[0\] \(a_ref, BlockSpec\(\(128, 64, 1\)\) at .*\): block shape "
     r"\(128, 64, 1\) has 3 dims, a_ref's shape \(128, 256\) has 2"),
    (lambda: sd.BlockSpec((128, 64), lambda i, j: (i, j)), 2, TypeError,
     r"in_specs\[0\] \(a_ref, .*\): index_map must take 1 step indices \(one per grid dim\), "
     r"its signature is \(i, j\)"),
    (lambda: sd.BlockSpec((128, 64), lambda j: j), 2, ValueError,
     r"in_specs\[0\] \(a_ref, .*\): index_map returns 1 block indices for the 2-D a_ref"),
    (lambda: sd.BlockSpec((128, 64), lambda j: (0, j)), 8, ValueError,
     r"emit_pipeline with max_concurrent_steps=8 needs more shared memory than is left .*"
     r"in_specs\[0\] \(a_ref, .*\): 8 x 16384 B; in_specs\[1\] \(b_ref, .*\): 8 x 16384 B"),
])
def test_misuse_is_a_located_error_naming_the_spec(spec, stages, error, message):
    kernel = misuse_kernel(spec(), stages)
    a, b = operands(128, 128, 256)
    with pytest.raises(error, match=message) as caught:
        kernel.trace(a, b)
    line = line_of("MARK: pipeline call", kernel.fn)
    assert str(caught.value).startswith(f"{THIS_FILE}:{line}:"), str(caught.value)


def test_block_specs_are_checked_where_they_are_written():
    with pytest.raises(ValueError, match=r"BlockSpec needs a block_shape of two or more "):
        sd.BlockSpec((128,), lambda j: (j,))
    with pytest.raises(TypeError, match=r"index_map must be callable"):
        sd.BlockSpec((128, 64), (0, 0))


def hgmma_loop_per_step(cubin: bytes) -> float:
    """SASS instructions per wgmma of the innermost loop holding an HGMMA (the measure of
    benchmarks/kernel_quality.py, normalised per K step instead of per 64-wide K tile)."""
    lines = [line for line in disassemble(cubin).splitlines()
             if re.search(r"/\*[0-9a-f]{4}\*/", line) or re.match(r"\s*\.L_x_\d+:", line)]
    labels = {m.group(1): i for i, line in enumerate(lines)
              if (m := re.match(r"\s*(\.L_x_\d+):", line))}
    first = next(i for i, line in enumerate(lines) if "HGMMA" in line)
    loops = [(labels[m.group(1)], i) for i, line in enumerate(lines)
             if (m := re.search(r"BRA[^`]*`\((\.L_x_\d+)\)", line)) and m.group(1) in labels
             and labels[m.group(1)] <= first <= i]
    start, end = min(loops, key=lambda span: span[1] - span[0])
    body = [line for line in lines[start:end + 1] if "/*" in line]
    return len(body) / sum("HGMMA" in line for line in body)


@pytest.mark.skipif(not ptxas_available(), reason="ptxas is not installed")
def test_main_loop_is_as_short_as_the_hand_written_one():
    """Same tile (128x128x64, 2 stages), 512x512x512: SASS per K step within 5%."""
    spec = jax.ShapeDtypeStruct((512, 512), BF16)
    generated = example().matmul.compile(spec, spec)[1].cubin
    by_hand = load_example("matmul").matmul.compile(spec, spec)[1].cubin
    ours, theirs = hgmma_loop_per_step(generated), hgmma_loop_per_step(by_hand)
    assert ours <= 1.05 * theirs, (ours, theirs)


def test_block_spec_transforms_fix_the_buffers_tiling():
    """Explicit 128-byte swizzled (64, 64) tiles for both wgmma operands: every stage of the
    ring is viewed through them, and the numbers are unchanged."""
    swizzled = (TileTransform((64, 64)), SwizzleTransform(128))

    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128, 128), F32))
    def matmul(a_ref, b_ref, c_ref):
        c_ref[...] = sd.emit_pipeline(
            lambda _, a, b, acc: sd.wgmma(acc, a, b), grid=3,
            in_specs=[sd.BlockSpec((128, 64), lambda j: (0, j), transforms=swizzled),
                      sd.BlockSpec((64, 128), lambda j: (j, 0), transforms=swizzled)],
            max_concurrent_steps=2, init_carry=sd.zeros((128, 128), F32))(a_ref, b_ref)

    a, b = operands(128, 128, 192, seed=3)
    assert op_names(matmul.trace(a, b).module).count("smalti.with_transforms") == 4
    np.testing.assert_allclose(np.asarray(jax.jit(matmul)(a, b)),
                               a.astype(np.float32) @ b.astype(np.float32), rtol=1e-5, atol=1e-4)


def test_scoped_smem_is_refused_inside_a_warpgroup_region():
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128, 128), F32), warpgroups=2)
    def regions(o_ref):
        @sd.warpgroup_region(warpgroups=0)
        def _():
            with sd.scoped_smem(sd.SMEM((128, 128), F32)) as (tile,):  # MARK: scoped
                tile[...] = sd.zeros((128, 128), F32)

    with pytest.raises(ValueError, match=r"scoped_smem cannot stand inside a "
                                         r"warpgroup_region") as caught:
        regions.trace()
    line = line_of("MARK: scoped", regions.fn)
    assert str(caught.value).startswith(f"{THIS_FILE}:{line}:"), str(caught.value)


@cache
def ws_example():
    return load_example("matmul_ws_pipelined")


@pytest.mark.parametrize("m,n,k", [(256, 512, 320), (128, 256, 512)])
def test_warp_specialized_matmul_matches_numpy(m, n, k):
    """5 K steps on 4 stages (a round and one step more), and 8 (two whole rounds)."""
    a, b = operands(m, n, k, seed=k)
    _assert_within_one_ulp(np.asarray(jax.jit(ws_example().matmul_ws)(a, b)), a, b)


def test_warp_specialized_pipeline_has_a_producer_and_consumers_with_their_budgets():
    spec = jax.ShapeDtypeStruct((512, 512), BF16)
    module = ws_example().matmul_ws.trace(spec, spec).module
    regions = []

    def visit(op):
        if op.operation.name == "smalti.warpgroup_region":
            attributes = op.operation.attributes
            regions.append((ir.IntegerAttr(attributes["warpgroup"]).value,
                            ir.IntegerAttr(attributes["max_registers"]).value))
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    assert regions == [(0, 40), (1, 232), (2, 232)]
    names = op_names(module)
    # Per round of 4 stages: the producer's 4 empty waits, the consumers' 2 x 4 full waits.
    assert names.count("smalti.wait") == 12 and names.count("smalti.arrive") == 8
    assert names.count("smalti.async_load") == 4 * 3  # A's two row halves and B, per stage


def test_warp_specialized_pipeline_over_a_traced_step_count():
    """Block i runs i + 3 K steps on 2 stages: a traced round count and a traced last step."""

    @sd.kernel(grid=(2,), warpgroups=3,
               out_shape=jax.ShapeDtypeStruct((256, 128), F32))
    def prefix(a_ref, b_ref, c_ref):
        i = sd.program_id(0)

        def store(consumer, acc):
            c_ref[i * 128 + consumer * 64:i * 128 + consumer * 64 + 64, :] = acc

        sd.emit_pipeline_warp_specialized(
            lambda _, a, b, acc: sd.wgmma(acc, a, b), grid=i + 3,
            in_specs=[sd.BlockSpec((128, 64), lambda j: (0, j)),
                      sd.BlockSpec((64, 128), lambda j: (j, 0))],
            split=(0, None), init_carry=lambda: sd.zeros((64, 128), F32),
            epilogue=store)(a_ref, b_ref)

    a, b = operands(128, 128, 256, seed=11)
    got = np.asarray(jax.jit(prefix)(a, b))
    wide_a, wide_b = a.astype(np.float32), b.astype(np.float32)
    for i in range(2):
        k = (i + 3) * 64
        np.testing.assert_allclose(got[i * 128:(i + 1) * 128], wide_a[:, :k] @ wide_b[:k],
                                   rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("warpgroups,split,error,message", [
    (1, (0, None), ValueError, r"needs a kernel of a producer and one or more consumer "
                               r"warpgroups"),
    (4, (1, None), ValueError, r"in_specs\[0\] \(a_ref, .*\): split along dim 1 does not "
                               r"divide block shape \(128, 64\) among 3 consumer warpgroups"),
])
def test_warp_specialized_misuse_names_the_line(warpgroups, split, error, message):
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128, 128), F32), warpgroups=warpgroups)
    def misuse(a_ref, b_ref, c_ref):
        pipeline = sd.emit_pipeline_warp_specialized(
            lambda _, a, b: None, grid=3, split=split,
            in_specs=[sd.BlockSpec((128, 64), lambda j: (0, j)),
                      sd.BlockSpec((64, 128), lambda j: (j, 0))])
        pipeline(a_ref, b_ref)  # MARK: ws call

    a, b = operands(128, 128, 192)
    with pytest.raises(error, match=message) as caught:
        misuse.trace(a, b)
    line = line_of("MARK: ws call", misuse.fn)
    assert str(caught.value).startswith(f"{THIS_FILE}:{line}:"), str(caught.value)


@pytest.mark.skipif(not ptxas_available(), reason="ptxas is not installed")
def test_warp_specialized_main_loop_is_as_short_as_the_hand_written_one():
    """128x256x64 tiles, 4 stages, 512x512x512: a consumer's SASS per K step within 5%."""
    spec = jax.ShapeDtypeStruct((512, 512), BF16)
    generated = ws_example().matmul_ws.compile(spec, spec)[1].cubin
    by_hand = load_example("matmul_ws").matmul_ws.compile(spec, spec)[1].cubin
    ours, theirs = hgmma_loop_per_step(generated), hgmma_loop_per_step(by_hand)
    assert ours <= 1.05 * theirs, (ours, theirs)
