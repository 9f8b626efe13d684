"""Collective arrives through the simulator: CTAs that share a multicast tile release it to
each other (`smalti.arrive` with `collective`) before any of them multicasts into it again,
over several cluster shapes and collective dims; the arrival count they need; ptxas."""

from __future__ import annotations

import math

import numpy as np
import pytest

from smalti.lowering import barriers
from smalti.runtime import compile_mlir, run_simulated
from smalti.sim import SimError
from tests.test_lowering_multicast import POLICIES, SMEM, TILE_BYTES

ROWS, COLS = 64, 32


def reuse_kernel(grid: tuple[int, int], cluster: tuple[int, int], dims: tuple[int, ...],
                 count: int | None = None, rounds: int = 3) -> str:
    """Each round, the CTAs along `dims` load rows [64 i, 64 i + 64) of A collectively into
    one SMEM tile, copy it to out[block][i], and release the tile to each other; a round
    after the first waits for the release of the one before (arrival count `count`,
    default the n CTAs sharing the tile)."""
    n = math.prod((*cluster, 1)[d] for d in dims)
    count = n if count is None else count
    gx, gy = grid
    blocks = gx * gy
    tile, bars = f"memref<{ROWS}x{COLS}xf32, {SMEM}>", f"memref<1xi64, {SMEM}>"
    a_t = f"memref<{rounds * ROWS}x{COLS}xf32>"
    out_t = f"memref<{blocks * rounds * ROWS}x{COLS}xf32>"
    vec = f"vector<{ROWS}x{COLS}xf32>"
    attrs = f"{{collective = array<i64: {', '.join(map(str, dims))}>}}"
    body = []
    for i in range(rounds):
        if i:
            body.append(f'''  %e{i} = arith.constant {(i - 1) & 1} : i32
  "smalti.wait"(%empty, %c0, %e{i}) : ({bars}, index, i32) -> ()''')
        body.append(f'''  %row{i} = arith.constant {ROWS * i} : index
  %o{i} = arith.addi %orow, %row{i} : index
  "smalti.arrive_expect_tx"(%full, %c0) {{bytes = {TILE_BYTES} : i64}} : ({bars}, index) -> ()
  "smalti.async_load"(%a, %s, %full, %c0, %row{i}, %c0) {attrs} : ({a_t}, {tile}, {bars}, index, index, index) -> ()
  %p{i} = arith.constant {i & 1} : i32
  "smalti.wait"(%full, %c0, %p{i}) : ({bars}, index, i32) -> ()
  %v{i} = "smalti.vector_load"(%s, %c0, %c0) : ({tile}, index, index) -> {vec}
  "smalti.vector_store"(%v{i}, %out, %o{i}, %c0) : ({vec}, {out_t}, index, index) -> ()
  "smalti.arrive"(%empty, %c0) {attrs} : ({bars}, index) -> ()''')
    body = "\n".join(body)
    return f"""
func.func @reuse(%a: {a_t}, %out: {out_t}) attributes {{smalti.kernel,
    smalti.grid = array<i64: {gx}, {gy}>,
    smalti.cluster = array<i64: {cluster[0]}, {cluster[1]}, 1>}} {{
  %c0 = arith.constant 0 : index
  %gx = arith.constant {gx} : index
  %block_rows = arith.constant {rounds * ROWS} : index
  %o_empty = arith.constant 64 : index
  %o_s = arith.constant 1024 : index
  %full = "smalti.slice_smem"(%c0) : (index) -> {bars}
  %empty = "smalti.slice_smem"(%o_empty) : (index) -> {bars}
  %s = "smalti.slice_smem"(%o_s) : (index) -> {tile}
  "smalti.initialize_barrier"(%full) {{arrival_count = 1 : i64}} : ({bars}) -> ()
  "smalti.initialize_barrier"(%empty) {{arrival_count = {count} : i64}} : ({bars}) -> ()
  "smalti.cluster_barrier"() : () -> ()
  %x = gpu.block_id x
  %y = gpu.block_id y
  %yx = arith.muli %y, %gx : index
  %block = arith.addi %yx, %x : index
  %orow = arith.muli %block, %block_rows : index
{body}
  "smalti.cluster_barrier"() : () -> ()
  return
}}
"""


# (grid, cluster, dims): a pair along x, a 2x2 cluster sharing along both dims or along y
# only (two groups of two per cluster), and four CTAs along x.
CASES = {
    "2x1-x": ((4, 2), (2, 1), (0,)),
    "2x2-xy": ((2, 4), (2, 2), (0, 1)),
    "2x2-y": ((2, 4), (2, 2), (1,)),
    "4x1-x": ((4, 1), (4, 1), (0,)),
}


def _inputs(grid: tuple[int, int], rounds: int = 3) -> list[np.ndarray]:
    a = np.arange(rounds * ROWS * COLS, dtype=np.float32).reshape(rounds * ROWS, COLS)
    return [a, np.zeros((grid[0] * grid[1] * rounds * ROWS, COLS), np.float32)]


@pytest.mark.parametrize("policy, seed", POLICIES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_collective_releases_let_the_ctas_reuse_a_multicast_tile(case, policy, seed):
    grid, cluster, dims = CASES[case]
    compiled = compile_mlir(reuse_kernel(grid, cluster, dims), "reuse.mlir")
    assert compiled.ptx.count("mbarrier.arrive.release.cluster.shared::cluster.b64") == 3
    a, out = _inputs(grid)
    out = run_simulated(compiled, a, out, async_completion=policy, seed=seed)[-1]
    np.testing.assert_array_equal(out, np.tile(a, (grid[0] * grid[1], 1)))


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_arrival_count_short_of_the_peers_is_a_deadlock(case):
    # the empty barrier expects one more release than the n CTAs give
    grid, cluster, dims = CASES[case]
    n = math.prod((*cluster, 1)[d] for d in dims)
    compiled = compile_mlir(reuse_kernel(grid, cluster, dims, count=n + 1), "reuse.mlir")
    with pytest.raises(SimError, match=rf"mbarrier deadlock: .*of {n + 1} arrivals pending"):
        run_simulated(compiled, *_inputs(grid))


@pytest.mark.parametrize("case", sorted(CASES))
def test_releasing_only_itself_lets_a_peer_overwrite_an_unread_tile(case, monkeypatch):
    # every thread k arrives on its own CTA: the count is met without the peers' releases;
    # under `latest` the CTAs run out of step and a multicast lands on a tile not yet read
    original = barriers._peer_rank

    def own_rank(ctx, dims):
        _, guard = original(ctx, dims)
        return ctx.builder.special("%cluster_ctarank"), guard

    monkeypatch.setattr(barriers, "_peer_rank", own_rank)
    grid, cluster, dims = CASES[case]
    compiled = compile_mlir(reuse_kernel(grid, cluster, dims), "reuse.mlir")
    with pytest.raises(SimError, match=r"that the TMA load at line [0-9]+ still owns"):
        run_simulated(compiled, *_inputs(grid), async_completion="latest")


def test_ptxas_accepts_collective_arrives():
    from smalti.runtime.cache import ptxas_available

    if not ptxas_available():
        pytest.skip("ptxas is not installed")
    for grid, cluster, dims in CASES.values():
        result = compile_mlir(reuse_kernel(grid, cluster, dims), "reuse.mlir").assemble()
        assert "C75" not in result.log, result.log
