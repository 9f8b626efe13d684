"""gpu.cluster_id, gpu.cluster_block_id, gpu.cluster_dim and gpu.cluster_dim_blocks lowered
to PTX (%clusterid, %cluster_ctaid; the extents are constants of the launch) and run by the
simulator over several grid and cluster shapes: each block copies its row of `tags` to the
row the cluster ids give it, an order (rank in the cluster, then cluster) that the block ids
alone do not give, checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from smalti.runtime import compile_mlir, run_simulated

COLS = 128
# (grid, cluster)
CASES = [((4, 4, 1), (2, 1, 1)), ((4, 2, 2), (2, 2, 1)), ((2, 2, 4), (1, 2, 2)),
         ((8, 1, 1), (8, 1, 1)), ((4, 1, 1), (1, 1, 1))]


def ids_kernel(grid: tuple[int, int, int], cluster: tuple[int, int, int]) -> str:
    """Block (x, y, z) copies tags[x + gx (y + gy z)] to out[rank * clusters + cluster]."""
    blocks = int(np.prod(grid))
    rows = f"memref<{blocks}x{COLS}xf32>"
    ops = []
    for name in ("cluster_id", "cluster_block_id", "cluster_dim", "cluster_dim_blocks",
                 "block_id"):
        ops += [f"  %{name}_{d} = gpu.{name} {d}" for d in "xyz"]

    def linear(prefix: str, extents: list[str], out: str) -> list[str]:
        """out = prefix_x + extent_x * (prefix_y + extent_y * prefix_z)."""
        return [f"  %{out}_t0 = arith.muli %{prefix}_z, %{extents[1]} : index",
                f"  %{out}_t1 = arith.addi %{out}_t0, %{prefix}_y : index",
                f"  %{out}_t2 = arith.muli %{out}_t1, %{extents[0]} : index",
                f"  %{out} = arith.addi %{out}_t2, %{prefix}_x : index"]

    gx, gy, _ = grid
    ops += [f"  %gx = arith.constant {gx} : index", f"  %gy = arith.constant {gy} : index"]
    ops += linear("block_id", ["gx", "gy"], "block")
    ops += linear("cluster_block_id", ["cluster_dim_blocks_x", "cluster_dim_blocks_y"], "rank")
    ops += linear("cluster_id", ["cluster_dim_x", "cluster_dim_y"], "cluster")
    ops += ["  %nxy = arith.muli %cluster_dim_x, %cluster_dim_y : index",
            "  %clusters = arith.muli %nxy, %cluster_dim_z : index",
            "  %by_rank = arith.muli %rank, %clusters : index",
            "  %row = arith.addi %by_rank, %cluster : index"]
    body = "\n".join(ops)
    attributes = (f"smalti.grid = array<i64: {', '.join(map(str, grid))}>, smalti.cluster = "
                  f"array<i64: {', '.join(map(str, cluster))}>")
    return f"""
func.func @ids(%tags: {rows}, %out: {rows}) attributes {{smalti.kernel, {attributes}}} {{
  %c0 = arith.constant 0 : index
{body}
  %v = "smalti.vector_load"(%tags, %block, %c0) : ({rows}, index, index) -> vector<1x{COLS}xf32>
  "smalti.vector_store"(%v, %out, %row, %c0) : (vector<1x{COLS}xf32>, {rows}, index, index) -> ()
  return
}}
"""


def expected_rows(grid: tuple[int, int, int], cluster: tuple[int, int, int]) -> np.ndarray:
    """Which tags row each out row receives, from the definitions of the ids."""
    (gx, gy, gz), (cx, cy, cz) = grid, cluster
    nx, ny, nz = gx // cx, gy // cy, gz // cz
    source = np.full(gx * gy * gz, -1)
    for z in range(gz):
        for y in range(gy):
            for x in range(gx):
                rank = x % cx + cx * (y % cy + cy * (z % cz))
                index = x // cx + nx * (y // cy + ny * (z // cz))
                source[rank * nx * ny * nz + index] = x + gx * (y + gy * z)
    return source


@pytest.mark.parametrize("grid, cluster", CASES, ids=[f"{g}-{c}" for g, c in CASES])
def test_cluster_ids_order_the_blocks_as_numpy_says(grid, cluster):
    compiled = compile_mlir(ids_kernel(grid, cluster), "ids.mlir")
    assert compiled.signature().cluster == cluster
    blocks = int(np.prod(grid))
    tags = np.repeat(np.arange(blocks, dtype=np.float32)[:, None], COLS, axis=1)
    out = run_simulated(compiled, tags, np.full((blocks, COLS), -1, np.float32))[-1]
    source = expected_rows(grid, cluster)
    assert sorted(source) == list(range(blocks))  # a permutation: every row written once
    np.testing.assert_array_equal(out, tags[source])
    # a cluster of one block along an axis reads no %cluster_ctaid for it
    for axis, size in enumerate(cluster):
        assert (f"%cluster_ctaid.{'xyz'[axis]}" in compiled.ptx) == (size > 1)


def test_the_order_tells_the_ids_apart_from_the_block_ids():
    """With clusters of more than one block along some axes but not all, the expected order
    differs from the block order, so block ids in place of cluster ids fail the test above."""
    for grid, cluster in CASES[:3]:
        assert list(expected_rows(grid, cluster)) != list(range(int(np.prod(grid))))


def test_ptxas_accepts_the_cluster_special_registers():
    from smalti.runtime.cache import ptxas_available

    if not ptxas_available():
        pytest.skip("ptxas is not installed")
    result = compile_mlir(ids_kernel(*CASES[1]), "ids.mlir").assemble()
    assert "C75" not in result.log, result.log
