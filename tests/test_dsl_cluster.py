"""Clusters in the DSL: `cluster=` on the kernel, where a block is (sd.cluster_id,
sd.block_id_in_cluster, sd.cluster_rank), TMA multicast (`sd.async_copy(...,
collective=axis)`), sd.cluster_barrier; and wgmma on f8 and tf32 operands with B given as
the transposed view of an (N, K) ref (`bt_smem.T`). Numbers come from the simulator (under
jax.jit where the runtime allows) against numpy; misuse errors name the user's line."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import export

import smalti.dsl as sd
from smalti.runtime import run_simulated
from smalti.runtime.cache import ptxas_available
from smalti.runtime.compiler import CompiledModule
from smalti.runtime.launcher import TARGET_NAME
from smalti.sim import SimError
from tests.dsl_helpers import isolated_cache, line_of  # noqa: F401
from tests.test_lowering_wgmma_types import error_bound, to_tf32

F32, BF16 = jnp.float32, jnp.bfloat16
THIS_FILE = __file__
POLICIES = [("eager", 0), ("latest", 0), ("random", 1), ("random", 2)]
BM, BN, BK = 128, 64, 64  # the multicast matmul's tiles: A (128 x 64 bf16) is one swizzle span


def simulate(kernel: sd.Kernel, *inputs: np.ndarray, **options) -> list[np.ndarray]:
    """The kernel's outputs, run by the simulator on numpy inputs (no JAX involved)."""
    traced, compiled = kernel.compile(*inputs)
    module = CompiledModule(compiled.ptx, {compiled.name: compiled.signature}, compiled.arch)
    outputs = [np.zeros(o.shape, o.dtype) for o in traced.outputs]
    return run_simulated(module, *inputs, *outputs, **options)[len(inputs):]


# A matmul whose two blocks per cluster share their A tile -------------------------------

@sd.kernel(grid=lambda a, b: (b.shape[1] // BN, a.shape[0] // BM), cluster=(2, 1, 1),
           out_shape=lambda a, b: jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), F32),
           smem=[sd.Barriers(1), sd.SMEM((BM, BK), BF16), sd.SMEM((BK, BN), BF16)])
def multicast_matmul(a_ref, b_ref, out_ref, bars, a_smem, b_smem):
    """Blocks (2 i, j) and (2 i + 1, j) form a cluster: both need rows j of A, so each
    loads half of the tile and multicasts it; each loads its own columns of B."""
    row = sd.program_id(1) * BM
    col = sd.program_id(0) * BN
    acc = sd.zeros((BM, BN))
    for k in range(a_ref.shape[1] // BK):  # one K tile per round, the buffers reused
        bars[0].arrive_expect_tx(a_smem.nbytes + b_smem.nbytes)
        sd.async_copy(a_ref.at[row:row + BM, k * BK:(k + 1) * BK], a_smem, bars[0],
                      collective=0)
        sd.async_copy(b_ref.at[k * BK:(k + 1) * BK, col:col + BN], b_smem, bars[0])
        bars[0].wait(k % 2)
        acc = sd.wgmma(acc, a_smem, b_smem)
        sd.cluster_barrier()  # the peer has read its A tile before either loads the next
    out_ref[row:row + BM, col:col + BN] = acc


def matmul_inputs(m: int, n: int, k: int) -> tuple[jax.Array, jax.Array]:
    keys = jax.random.split(jax.random.key(0), 2)
    return (jax.random.normal(keys[0], (m, k), F32).astype(BF16),
            jax.random.normal(keys[1], (k, n), F32).astype(BF16))


def test_the_kernel_carries_its_cluster_and_publishes_its_barrier_inits():
    a, b = matmul_inputs(256, 256, BK)
    traced = multicast_matmul.trace(a, b)
    assert traced.cluster == (2, 1, 1) and traced.grid == (4, 2)
    text = str(traced.module)
    assert "smalti.cluster = array<i64: 2, 1, 1>" in text
    # the barrier inits reach the peer before it multicasts into this block
    assert re.search(r'"smalti.initialize_barrier"[^\n]*\n\s*"smalti.cluster_barrier"', text)
    assert re.search(r'"smalti.async_load"[^\n]*\{collective = array<i64: 0>\}', text)
    assert text.count("collective") == 1

    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128,), F32))
    def plain(x_ref, out_ref):
        out_ref[...] = x_ref[...]

    plain_text = str(plain.trace(jax.ShapeDtypeStruct((128,), F32)).module)
    assert "smalti.cluster" not in plain_text


def test_multicast_matmul_under_jit_matches_jax_numpy():
    a, b = matmul_inputs(256, 256, 2 * BK)
    out = jax.jit(multicast_matmul)(a, b)
    expected = jnp.dot(a, b, preferred_element_type=F32)
    np.testing.assert_allclose(np.asarray(out), np.asarray(expected), rtol=1e-5, atol=1e-5)
    _, compiled = multicast_matmul.compile(a, b)
    assert ".reqnctapercluster 2, 1, 1" in compiled.ptx
    assert compiled.ptx.count(".multicast::cluster") == 2  # one A load per K tile
    # the A load is cut in two parts: its tensor map's box is half the tile
    assert sorted(r.box for r in compiled.signature.tensor_maps) == [(BK, BN), (BM // 2, BK)]


@pytest.mark.parametrize("policy, seed", POLICIES)
def test_multicast_matmul_holds_whenever_the_copies_complete(policy, seed):
    a, b = (np.asarray(x) for x in matmul_inputs(256, 128, 2 * BK))
    [out] = simulate(multicast_matmul, a, b, async_completion=policy, seed=seed)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_without_the_cluster_barrier_reusing_the_multicast_tile_is_a_race():
    @sd.kernel(grid=(2, 1), cluster=(2, 1, 1), out_shape=jax.ShapeDtypeStruct((BM, 2 * BN), F32),
               smem=[sd.Barriers(1), sd.SMEM((BM, BK), BF16), sd.SMEM((BK, BN), BF16)])
    def racy(a_ref, b_ref, out_ref, bars, a_smem, b_smem):
        col = sd.program_id(0) * BN
        acc = sd.zeros((BM, BN))
        for k in range(2):
            bars[0].arrive_expect_tx(a_smem.nbytes + b_smem.nbytes)
            sd.async_copy(a_ref.at[:, k * BK:(k + 1) * BK], a_smem, bars[0], collective=0)
            sd.async_copy(b_ref.at[k * BK:(k + 1) * BK, col:col + BN], b_smem, bars[0])
            bars[0].wait(k)
            acc = sd.wgmma(acc, a_smem, b_smem)
        out_ref[:, col:col + BN] = acc

    a, b = (np.asarray(x) for x in matmul_inputs(BM, 2 * BN, 2 * BK))
    with pytest.raises(SimError, match=r"shared-memory race|still owns"):
        simulate(racy, a, b, async_completion="latest")


@sd.kernel(grid=(2, 4), cluster=(2, 2, 1), out_shape=jax.ShapeDtypeStruct((8, 64, 32), F32),
           smem=[sd.Barriers(1), sd.SMEM((64, 32), F32), sd.SMEM((64, 32), F32)])
def shared_by_four(c_ref, rows_ref, out_ref, bars, c_smem, row_smem):
    """All four blocks of a 2x2 cluster share C (each loads 16 of its 64 rows); the two
    blocks along y share their row of `rows_ref`. out[block] = C + rows[x]."""
    x, y = sd.program_id(0), sd.program_id(1)
    bars[0].arrive_expect_tx(c_smem.nbytes + row_smem.nbytes)
    sd.async_copy(c_ref, c_smem, bars[0], collective=(0, 1))
    sd.async_copy(rows_ref.at[x, :, :], row_smem, bars[0], collective=1)
    bars[0].wait(0)
    out_ref[x + 2 * y, :, :] = c_smem[...] + row_smem[...]


@pytest.mark.parametrize("policy, seed", POLICIES)
def test_copies_shared_along_both_axes_of_a_2x2_cluster(policy, seed):
    rng = np.random.default_rng(1)
    c = rng.integers(0, 100, (64, 32)).astype(np.float32)
    rows = 100 * rng.integers(1, 100, (2, 64, 32)).astype(np.float32)
    [out] = simulate(shared_by_four, c, rows, async_completion=policy, seed=seed)
    expected = np.stack([c + rows[b % 2] for b in range(8)])
    np.testing.assert_array_equal(out, expected)
    _, compiled = shared_by_four.compile(c, rows)
    # each block copies a quarter of C and half of its row tile, multicast
    assert sorted(r.box for r in compiled.signature.tensor_maps) == [(1, 32, 32), (16, 32)]
    assert compiled.ptx.count(".multicast::cluster") == 2


@pytest.mark.skipif(not ptxas_available(), reason="ptxas not installed: no cubin to carry")
def test_export_for_cuda_launches_the_cluster():
    a, b = matmul_inputs(256, 256, BK)
    exported = export.export(jax.jit(multicast_matmul), platforms=["cuda"],
                             disabled_checks=[export.DisabledSafetyCheck.custom_call(
                                 TARGET_NAME)])(a, b)
    call = next(line for line in exported.mlir_module().splitlines()
                if f"custom_call @{TARGET_NAME}" in line)
    _, compiled = multicast_matmul.compile(a, b)
    smem = compiled.signature.smem_bytes
    # grid (4, 2, 1), block (128, 1, 1), cluster (2, 1, 1), dynamic shared memory
    assert f"launch = dense<[4, 2, 1, 128, 1, 1, 2, 1, 1, {smem}]>" in call
    assert compiled.cubin is not None and compiled.cubin.hex().upper() in call


@pytest.mark.skipif(not ptxas_available(), reason="ptxas not installed")
def test_ptxas_accepts_the_cluster_kernels():
    from smalti.ptx.toolchain import compile_ptx

    kernels = [(multicast_matmul, matmul_inputs(256, 256, 2 * BK)),
               (transposed_multicast, tf32_inputs(2 * BM, 2 * BN, BK))]
    for kernel, inputs in kernels:
        _, compiled = kernel.compile(*inputs)
        result = compile_ptx(compiled.ptx, arch="sm_90a")
        assert not re.search(r"C75\d\d", result.log), result.log


# Where a block is -----------------------------------------------------------------------

ID_CASES = [((4, 2, 1), (2, 2, 1)), ((2, 4, 2), (1, 2, 2)), ((8, 1, 1), (4, 1, 1)),
            ((2, 2, 2), (1, 1, 1))]


def ids_kernel(grid: tuple[int, int, int], cluster: tuple[int, int, int]) -> sd.Kernel:
    """Each block copies its tag row to out[cluster z, y, x, rank in the cluster]."""
    gx, gy, _ = grid
    clusters = tuple(g // c for g, c in zip(grid, cluster, strict=True))
    size = int(np.prod(cluster))

    @sd.kernel(grid=grid, cluster=cluster,
               out_shape=jax.ShapeDtypeStruct((*reversed(clusters), size, 128), F32))
    def where_am_i(tags_ref, out_ref):
        assert sd.cluster_shape() == cluster
        assert tuple(sd.num_clusters(axis) for axis in range(3)) == clusters
        block = sd.program_id(0) + gx * (sd.program_id(1) + gy * sd.program_id(2))
        out_ref[sd.cluster_id(2), sd.cluster_id(1), sd.cluster_id(0), sd.cluster_rank(), :] = \
            tags_ref[block, :]

    return where_am_i


@pytest.mark.parametrize("grid, cluster", ID_CASES, ids=[f"{g}-{c}" for g, c in ID_CASES])
def test_cluster_ids_place_every_block_as_numpy_says(grid, cluster):
    gx, gy, gz = grid
    cx, cy, cz = cluster
    blocks = gx * gy * gz
    tags = np.repeat(np.arange(blocks, dtype=np.float32)[:, None], 128, axis=1)
    out = np.asarray(jax.jit(ids_kernel(grid, cluster))(tags))
    expected = np.full(out.shape, -1.0, np.float32)
    for z in range(gz):
        for y in range(gy):
            for x in range(gx):
                rank = x % cx + cx * (y % cy + cy * (z % cz))
                expected[z // cz, y // cy, x // cx, rank] = x + gx * (y + gy * z)
    assert (expected >= 0).all()  # every place is some block's
    np.testing.assert_array_equal(out, expected)


def test_cluster_rank_is_x_fastest_over_the_clusters_axes():
    @sd.kernel(grid=(4, 2, 2), cluster=(2, 1, 2), out_shape=TILE)
    def ranks(x_ref, out_ref):
        out_ref[sd.cluster_rank(), :] = x_ref[0, :]

    text = str(ranks.trace(TILE).module)
    # x + 2 z: the axis of one block (y) is not read
    assert "gpu.cluster_block_id y" not in text
    assert re.search(r"(%\w+) = gpu.cluster_block_id x[^\n]*\n\s*(%\w+) = gpu.cluster_block_id "
                     r"z[^\n]*\n(.*\n)*?.*arith.muli \2, %c2[^\n]*\n.*arith.addi \1, ", text), text


# f8 and tf32 wgmma, B as a transposed view ----------------------------------------------

def wgmma_kernel(m: int, n: int, k: int, a_dtype, b_dtype) -> sd.Kernel:
    """out = A @ B for A (M, K) and B^T (N, K) in global memory, through TMA and wgmma."""

    @sd.kernel(out_shape=jax.ShapeDtypeStruct((m, n), F32),
               smem=[sd.Barriers(1), sd.SMEM((m, k), a_dtype), sd.SMEM((n, k), b_dtype)])
    def mm(a_ref, bt_ref, out_ref, bars, a_smem, bt_smem):
        bars[0].arrive_expect_tx(a_smem.nbytes + bt_smem.nbytes)
        sd.async_copy(a_ref, a_smem, bars[0])
        sd.async_copy(bt_ref, bt_smem, bars[0])
        bars[0].wait(0)
        out_ref[...] = sd.wgmma(sd.zeros((m, n)), a_smem, bt_smem.T)

    return mm


def values(rng: np.random.Generator, shape: tuple[int, int], dtype) -> np.ndarray:
    """Values over several binades, exact in `dtype` (tf32 for float32)."""
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-3, 4, shape))
    return to_tf32(x) if np.dtype(dtype) == np.float32 else x.astype(dtype)


def check_product(out: np.ndarray, a: np.ndarray, bt: np.ndarray) -> None:
    wide_a, wide_bt = a.astype(np.float64), bt.astype(np.float64)
    bound = error_bound(wide_a, wide_bt)
    error = np.abs(out - wide_a @ wide_bt.T)
    assert (error <= bound).all(), f"{int((error > bound).sum())} of {error.size} elements off"
    # tight enough to tell a K permutation (B read MN-major, a wrong descriptor step)
    assert (np.abs(out - wide_a @ np.roll(wide_bt, 1, axis=1).T) > bound).mean() > 0.9


E4M3, E5M2 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2
F8_CASES = [(64, 64, 128, E4M3, E4M3), (128, 128, 64, E5M2, E5M2), (64, 32, 96, E4M3, E5M2),
            (64, 64, 256, E5M2, E4M3)]


@pytest.mark.parametrize("m, n, k, a_dtype, b_dtype", F8_CASES,
                         ids=[f"{m}x{n}x{k}-{np.dtype(a).name}-{np.dtype(b).name}"
                              for m, n, k, a, b in F8_CASES])
def test_f8_wgmma_matches_numpy(m, n, k, a_dtype, b_dtype):
    rng = np.random.default_rng(5)
    a, bt = values(rng, (m, k), a_dtype), values(rng, (n, k), b_dtype)
    [out] = simulate(wgmma_kernel(m, n, k, a_dtype, b_dtype), a, bt,
                     async_completion="random", seed=3)
    check_product(out, a, bt)


@pytest.mark.parametrize("m, n, k", [(64, 128, 64), (128, 32, 8), (64, 256, 32)])
def test_tf32_wgmma_under_jit_matches_numpy(m, n, k):
    rng = np.random.default_rng(6)
    a, bt = values(rng, (m, k), np.float32), values(rng, (n, k), np.float32)
    out = jax.jit(wgmma_kernel(m, n, k, F32, F32))(a, bt)
    check_product(np.asarray(out), a, bt)


def test_bf16_b_may_be_a_transposed_view_too():
    """A K-major bf16 B (wgmma's own default) through `.T`: the same numbers as jnp."""
    rng = np.random.default_rng(8)
    a, bt = values(rng, (64, 128), BF16), values(rng, (128, 128), BF16)
    out = jax.jit(wgmma_kernel(64, 128, 128, BF16, BF16))(a, bt)
    check_product(np.asarray(out), a, bt)


def test_the_transposed_view_pins_both_views_to_the_same_tiles():
    traced = wgmma_kernel(64, 64, 128, E4M3, E5M2).trace(
        jax.ShapeDtypeStruct((64, 128), E4M3), jax.ShapeDtypeStruct((64, 128), E5M2))
    text = str(traced.module)
    views = re.findall(r'"smalti.slice_smem"\((%\w+)\)[^\n]*-> memref<(\d+x\d+)xf8E5M2', text)
    assert [shape for _, shape in views] == ["64x128", "128x64"]
    assert views[0][0] == views[1][0]  # one offset: the same bytes
    assert "transforms = [#smalti.tile<[64, 128]>, #smalti.swizzle<128>]" in text
    assert ("transforms = [#smalti.transpose<[1, 0]>, #smalti.tile<[64, 128]>, "
            "#smalti.swizzle<128>]") in text


def tf32_inputs(m: int, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(9)
    return values(rng, (m, k), np.float32), values(rng, (n, k), np.float32)


@sd.kernel(grid=(2, 2), cluster=(2, 1, 1), out_shape=jax.ShapeDtypeStruct((2 * BM, 2 * BN), F32),
           smem=[sd.Barriers(1), sd.SMEM((BM, BK), F32), sd.SMEM((BN, BK), F32)])
def transposed_multicast(a_ref, bt_ref, out_ref, bars, a_smem, bt_smem):
    """tf32: the blocks (0, j), (1, j) of a cluster share columns j of B, multicast into
    the (N, K) buffer that wgmma reads through its transposed view."""
    row = sd.program_id(0) * BM
    col = sd.program_id(1) * BN
    bars[0].arrive_expect_tx(a_smem.nbytes + bt_smem.nbytes)
    sd.async_copy(a_ref.at[row:row + BM, :], a_smem, bars[0])
    sd.async_copy(bt_ref.at[col:col + BN, :], bt_smem, bars[0], collective=0)
    bars[0].wait(0)
    out_ref[row:row + BM, col:col + BN] = sd.wgmma(sd.zeros((BM, BN)), a_smem, bt_smem.T)


def test_a_multicast_transposed_operand_under_jit_matches_numpy():
    a, bt = tf32_inputs(2 * BM, 2 * BN, BK)
    out = jax.jit(transposed_multicast)(a, bt)
    check_product(np.asarray(out), a, bt)
    _, compiled = transposed_multicast.compile(a, bt)
    # K spans two 128-byte swizzle spans, so the pinned tiles are 8 rows tall (see
    # smalti.dsl.smem_refs): each block's half of B^T (32 x 64) is 4 x 2 boxes
    assert sorted(r.box for r in compiled.signature.tensor_maps) == [(8, 32), (128, 32)]
    assert compiled.ptx.count(".multicast::cluster") == 8


# Misuse: errors that name the user's line ----------------------------------------------

def _raises_at(error_type, kernel, marker, *args, match=""):
    with pytest.raises(error_type, match=match) as info:
        kernel.trace(*args)
    message = str(info.value)
    assert message.startswith(f"{THIS_FILE}:{line_of(marker, kernel.fn)}:"), message
    return info.value


TILE = jax.ShapeDtypeStruct((128, 64), F32)


def copy_kernel(cluster, collective, rows=128, transposed=False):
    @sd.kernel(grid=(2, 2), cluster=cluster, out_shape=jax.ShapeDtypeStruct((128, 64), F32),
               smem=[sd.Barriers(1), sd.SMEM((rows, 64), F32)])
    def copy(x_ref, out_ref, bars, smem):
        dst = smem.T if transposed else smem
        sd.async_copy(x_ref.at[0:rows, :], dst, bars[0], collective=collective)  # MARK: copy

    return copy


@pytest.mark.parametrize("cluster, collective, rows, transposed, error, message", [
    ((1, 1, 1), 0, 128, False, ValueError,
     r"collective along axis 0, but kernel copy has one block per cluster along it "
     r"\(cluster=\(1, 1, 1\)\)"),
    ((2, 1, 1), 1, 128, False, ValueError, "collective along axis 1"),
    ((2, 1, 1), 3, 128, False, ValueError, "async_copy's collective axis must be 0, 1 or 2"),
    ((2, 2, 1), (0, 0), 128, False, ValueError, r"collective \(0, 0\) repeats an axis"),
    ((2, 2, 1), (0, 1), 6, False, ValueError,
     r"splits smem's leading dim \(6\) into 4 parts"),
    ((2, 1, 1), 0, 64, True, TypeError, "async_copy's destination cannot be the transposed view smem.T"),
])
def test_collective_misuse_names_the_users_line(cluster, collective, rows, transposed, error,
                                                message):
    x = jax.ShapeDtypeStruct((128, 64) if not transposed else (64, 64), F32)
    _raises_at(error, copy_kernel(cluster, collective, rows, transposed), "MARK: copy", x,
               match=message)


def test_f8_and_tf32_operands_must_be_k_major():
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((64, 64), F32),
               smem=[sd.SMEM((64, 32), E4M3), sd.SMEM((32, 64), E4M3)])
    def b_mn_major(out_ref, a_smem, b_smem):
        out_ref[...] = sd.wgmma(sd.zeros((64, 64)), a_smem, b_smem)  # MARK: B

    _raises_at(ValueError, b_mn_major, "MARK: B",
               match=r"reads float8_e4m3fn B only K-major .* declare B as \(64, 32\) in smem, K "
                     r"contiguous, and pass its transposed view, like bt_smem.T, instead of "
                     r"b_smem")

    @sd.kernel(out_shape=jax.ShapeDtypeStruct((64, 64), F32),
               smem=[sd.SMEM((8, 64), F32), sd.SMEM((64, 8), F32)])
    def a_mn_major(out_ref, at_smem, bt_smem):
        out_ref[...] = sd.wgmma(sd.zeros((64, 64)), at_smem.T, bt_smem.T)  # MARK: A

    _raises_at(ValueError, a_mn_major, "MARK: A",
               match=r"reads float32 \(as tf32\) A only K-major .* pass the \(M, K\) ref "
                     r"at_smem, not the transposed view at_smem.T")

    @sd.kernel(out_shape=jax.ShapeDtypeStruct((64, 64), F32),
               smem=[sd.SMEM((64, 4), F32), sd.SMEM((64, 4), F32)])
    def short_k(out_ref, a_smem, bt_smem):
        out_ref[...] = sd.wgmma(sd.zeros((64, 64)), a_smem, bt_smem.T)  # MARK: K

    # K (4 float32) is below one wgmma step (8), and below the 32 bytes a swizzled view spans
    _raises_at(ValueError, short_k, "MARK: K", match="rows of a multiple of 32 bytes")


def test_transposed_view_misuse_names_the_users_line():
    @sd.kernel(out_shape=TILE, smem=[sd.SMEM((128,), F32)])
    def one_d(x_ref, out_ref, v_smem):
        assert v_smem.T  # MARK: 1-D

    _raises_at(ValueError, one_d, "MARK: 1-D", TILE, match=r"v_smem.T needs a 2-D ref")

    @sd.kernel(out_shape=TILE, smem=[sd.SMEM((12, 64), F32)])
    def ragged(x_ref, out_ref, r_smem):
        assert r_smem.T  # MARK: ragged

    _raises_at(ValueError, ragged, "MARK: ragged", TILE, match="a multiple of 8 rows")

    @sd.kernel(out_shape=TILE)
    def global_ref(x_ref, out_ref):
        assert x_ref.T  # MARK: global

    _raises_at(TypeError, global_ref, "MARK: global", TILE, match="x_ref is a global ref")


def test_the_transposed_view_of_the_view_is_the_ref():
    @sd.kernel(out_shape=TILE, smem=[sd.SMEM((2, 64, 64), F32)])
    def views(x_ref, out_ref, s_smem):
        view = s_smem[1].T
        assert view.shape == (64, 64) and view.name == "s_smem[1].T"
        assert view.T is s_smem[1] and s_smem[1].T is view  # made once, then reused

    text = str(views.trace(TILE).module)
    assert text.count("smalti.with_transforms") == 2


def test_cluster_position_misuse_names_the_users_line():
    @sd.kernel(grid=(2,), cluster=(2,), out_shape=TILE)
    def bad_axis(x_ref, out_ref):
        sd.cluster_id(3)  # MARK: axis

    _raises_at(ValueError, bad_axis, "MARK: axis", TILE,
               match="cluster_id axis must be 0, 1 or 2, got 3")


def test_the_grid_must_be_whole_clusters_and_the_cluster_portable():
    @sd.kernel(grid=lambda x: (3,), cluster=(2,), out_shape=TILE)
    def odd(x_ref, out_ref):
        pass

    with pytest.raises(ValueError, match=r"kernel odd: grid \(3,\) is not a whole number of "
                                         r"clusters \(2, 1, 1\)"):
        odd.trace(TILE)
    with pytest.raises(ValueError, match="has 16 blocks; a portable cluster has at most 8"):
        sd.kernel(grid=(16,), cluster=(4, 4), out_shape=TILE)


def test_f8_wgmma_under_jit_matches_numpy():
    """float8 arguments through jax.jit: the CUDA branch's tensor-map attributes are built
    (and the simulator runs) for 1-byte ml_dtypes elements too."""
    rng = np.random.default_rng(9)
    a, bt = values(rng, (64, 128), E4M3), values(rng, (64, 128), E5M2)
    out = jax.jit(wgmma_kernel(64, 64, 128, E4M3, E5M2))(jnp.asarray(a), jnp.asarray(bt))
    check_product(np.asarray(out), a, bt)
