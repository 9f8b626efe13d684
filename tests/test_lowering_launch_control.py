"""persistent_tiles (smalti/dialect/ops_launch_control.py) compiled for sm_100a and run in the
simulator against numpy: each tile adds twice its input into the output (a tile done twice
or never shows in the numbers) and records which block did it; with fewer clusters resident
than the grid holds, the running blocks cancel the rest and do their tiles. Also: the lit
kernels assemble and run, and the wrong arch is a located error."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from smalti.dialect import DiagnosticError
from smalti.runtime import compile_mlir
from smalti.runtime.simulate import run_simulated

ROOT = Path(__file__).resolve().parents[1]
LIT_FILE = ROOT / "lit_tests" / "lowering" / "launch_control.mlir"
ARCH = "sm_100a"
ROWS, COLS = 32, 128  # one tile


def tiles_kernel(grid: tuple[int, int], cluster: tuple[int, int] = (1, 1)) -> str:
    """out[tile] += 2 * a[tile] over (grid y * 32) x (grid x * 128) f32; owner[tile row, tile
    columns] = the linear id of the block that did the tile."""
    gx, gy = grid
    shape = f"{gy * ROWS}x{gx * COLS}"
    owners = f"{gy}x{gx * COLS}"
    return f"""
func.func @tiles(%a: memref<{shape}xf32>, %out: memref<{shape}xf32>,
                 %owner: memref<{owners}xi32>)
    attributes {{smalti.kernel, smalti.grid = array<i64: {gx}, {gy}>,
                 smalti.cluster = array<i64: {cluster[0]}, {cluster[1]}>}} {{
  "smalti.persistent_tiles"() ({{
  ^bb0(%x: index, %y: index, %z: index):
    %c128 = arith.constant {COLS} : index
    %c32 = arith.constant {ROWS} : index
    %gx = arith.constant {gx} : index
    %col = arith.muli %x, %c128 : index
    %row = arith.muli %y, %c32 : index
    %v = "smalti.vector_load"(%a, %row, %col) : (memref<{shape}xf32>, index, index) -> vector<32x128xf32>
    %o = "smalti.vector_load"(%out, %row, %col) : (memref<{shape}xf32>, index, index) -> vector<32x128xf32>
    %twice = arith.addf %v, %v : vector<32x128xf32>
    %sum = arith.addf %o, %twice : vector<32x128xf32>
    "smalti.vector_store"(%sum, %out, %row, %col) : (vector<32x128xf32>, memref<{shape}xf32>, index, index) -> ()
    %bx = gpu.block_id x
    %by = gpu.block_id y
    %lin = arith.muli %by, %gx : index
    %me = arith.addi %lin, %bx : index
    %me32 = arith.index_cast %me : index to i32
    %mine = vector.broadcast %me32 : i32 to vector<1x128xi32>
    "smalti.vector_store"(%mine, %owner, %y, %col) : (vector<1x128xi32>, memref<{owners}xi32>, index, index) -> ()
  }}) : () -> ()
  return
}}
"""


def _run(grid: tuple[int, int], cluster: tuple[int, int] = (1, 1), **options) -> np.ndarray:
    """Run the kernel; check every tile was done once; the owner of each tile (gy, gx)."""
    gx, gy = grid
    compiled = compile_mlir(tiles_kernel(grid, cluster), "tiles.mlir", arch=ARCH)
    rng = np.random.default_rng(gx * 10 + gy)
    a = rng.standard_normal((gy * ROWS, gx * COLS)).astype(np.float32)
    out = rng.standard_normal(a.shape).astype(np.float32)
    owner = np.full((gy, gx * COLS), -1, np.int32)
    result, owners = run_simulated(compiled, a, out, owner, **options)[1:]
    np.testing.assert_array_equal(result, out + (a + a))
    owners = owners.reshape(gy, gx, COLS)
    assert (owners == owners[..., :1]).all()
    return owners[..., 0]


@pytest.mark.parametrize("grid, resident", [((4, 1), None), ((6, 1), 1), ((5, 2), 3),
                                            ((3, 3), 4)])
@pytest.mark.parametrize("policy", ["eager", "random"])
def test_every_tile_once(grid, resident, policy):
    owners = _run(grid, resident_clusters=resident, async_completion=policy, seed=1)
    tiles = grid[0] * grid[1]
    running = tiles if resident is None else resident
    assert set(owners.ravel().tolist()) <= set(range(running))
    if running == tiles:
        np.testing.assert_array_equal(owners.ravel(), np.arange(tiles))
    if resident == 1:  # one block runs, and takes every other tile
        assert (owners == 0).all()


@pytest.mark.parametrize("grid, resident", [((4, 1), 1), ((6, 2), 2), ((4, 3), None)])
def test_clusters_of_two(grid, resident):
    """Clusters of 2 along x: each CTA does the tile of its rank in every canceled cluster."""
    owners = _run(grid, (2, 1), resident_clusters=resident)
    gx = grid[0]
    x, y = owners % gx, owners // gx
    assert (x % 2 == np.arange(gx) % 2).all()  # the CTA of the tile's rank did it
    if resident is not None:  # only the first clusters in launch order (x fastest) ran
        assert (x // 2 + gx // 2 * y < resident).all()


def test_lit_kernels_run():
    """The kernels of the lowering lit test, compiled and simulated: out = 2 * a."""
    chunks = LIT_FILE.read_text().split("// -----")
    for chunk, shape in zip(chunks, [(1024,), (64, 256)], strict=True):
        compiled = compile_mlir(chunk, LIT_FILE.name, arch=ARCH)
        a = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        out = run_simulated(compiled, a, np.zeros_like(a), resident_clusters=1)[1]
        np.testing.assert_array_equal(out, a + a)


def test_sm_90a_is_a_located_error():
    with pytest.raises(DiagnosticError) as info:
        compile_mlir(tiles_kernel((2, 1)), "tiles.mlir", arch="sm_90a")
    assert re.search(r"tiles\.mlir:\d+:\d+: error: 'smalti\.persistent_tiles' op needs "
                     r"sm_100a: sm_90a has no cluster launch control", str(info.value))
