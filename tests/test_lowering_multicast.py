"""TMA multicast within a cluster, through the simulator: `smalti.cluster` kernels whose CTAs
share `collective` async_loads (each loads a part and multicasts it to its peers), checked
against numpy; and planted bugs (a wrong ctaMask, a missing part, no cluster barrier after
the barrier inits) that the simulator must catch."""

from __future__ import annotations

import math

import numpy as np
import pytest

from smalti.lowering import tma
from smalti.ptx import Immediate
from smalti.runtime import compile_mlir, run_simulated
from smalti.sim import SimError

SMEM = "#gpu.address_space<workgroup>"
ROWS, COLS = 64, 32  # one f32 tile: 128-byte rows, what a 128-byte swizzle spans
TILE_BYTES = ROWS * COLS * 4
POLICIES = [("eager", 0), ("latest", 0), ("random", 1), ("random", 2)]


def _collective(dims: tuple[int, ...]) -> str:
    return f" {{collective = array<i64: {', '.join(map(str, dims))}>}}" if dims else ""


def multicast_kernel(grid: tuple[int, int], cluster: tuple[int, int], a_dims: tuple[int, ...],
                     b_dims: tuple[int, ...], c_dims: tuple[int, ...],
                     cluster_barrier: bool = True) -> str:
    """Block (x, y) writes A[x] + B[y] + C into out[y * gx + x] (each a 64x32 f32 tile):
    A's tile is the same along cluster dim y, B's along x, C everywhere, so their loads may
    be collective along those dims."""
    gx, gy = grid
    a_t, b_t = f"memref<{gx * ROWS}x{COLS}xf32>", f"memref<{gy * ROWS}x{COLS}xf32>"
    c_t, out_t = f"memref<{ROWS}x{COLS}xf32>", f"memref<{gx * gy * ROWS}x{COLS}xf32>"
    tile, bars = f"memref<{ROWS}x{COLS}xf32, {SMEM}>", f"memref<1xi64, {SMEM}>"
    vec = f"vector<{ROWS}x{COLS}xf32>"
    load = ('  "smalti.async_load"(%{g}, %{s}, %bars, %c0, %{row}, %c0){attrs} : ({gt}, {tile}, '
            '{bars}, index, index, index) -> ()')
    loads = "\n".join(load.format(g=g, s=s, row=row, attrs=_collective(dims), gt=gt,
                                  tile=tile, bars=bars)
                      for g, s, row, dims, gt in (("a", "sa", "arow", a_dims, a_t),
                                                  ("b", "sb", "brow", b_dims, b_t),
                                                  ("c", "sc", "c0", c_dims, c_t)))
    meet = '  "smalti.cluster_barrier"() : () -> ()' if cluster_barrier else ""
    return f"""
func.func @multicast(%a: {a_t}, %b: {b_t}, %c: {c_t}, %out: {out_t})
    attributes {{smalti.kernel, smalti.grid = array<i64: {gx}, {gy}>,
                 smalti.cluster = array<i64: {cluster[0]}, {cluster[1]}, 1>}} {{
  %c0 = arith.constant 0 : index
  %gx = arith.constant {gx} : index
  %rows = arith.constant {ROWS} : index
  %o_bars = arith.constant 0 : index
  %o_a = arith.constant 1024 : index
  %o_b = arith.constant {1024 + TILE_BYTES} : index
  %o_c = arith.constant {1024 + 2 * TILE_BYTES} : index
  %bars = "smalti.slice_smem"(%o_bars) : (index) -> {bars}
  %sa = "smalti.slice_smem"(%o_a) : (index) -> {tile}
  %sb = "smalti.slice_smem"(%o_b) : (index) -> {tile}
  %sc = "smalti.slice_smem"(%o_c) : (index) -> {tile}
  "smalti.initialize_barrier"(%bars) {{arrival_count = 1 : i64}} : ({bars}) -> ()
{meet}
  %x = gpu.block_id x
  %y = gpu.block_id y
  %arow = arith.muli %x, %rows : index
  %brow = arith.muli %y, %rows : index
  %yx = arith.muli %y, %gx : index
  %block = arith.addi %yx, %x : index
  %orow = arith.muli %block, %rows : index
  "smalti.arrive_expect_tx"(%bars, %c0) {{bytes = {3 * TILE_BYTES} : i64}} : ({bars}, index) -> ()
{loads}
  %p = arith.constant 0 : i32
  "smalti.wait"(%bars, %c0, %p) : ({bars}, index, i32) -> ()
  %va = "smalti.vector_load"(%sa, %c0, %c0) : ({tile}, index, index) -> {vec}
  %vb = "smalti.vector_load"(%sb, %c0, %c0) : ({tile}, index, index) -> {vec}
  %vc = "smalti.vector_load"(%sc, %c0, %c0) : ({tile}, index, index) -> {vec}
  %ab = arith.addf %va, %vb : {vec}
  %abc = arith.addf %ab, %vc : {vec}
  "smalti.vector_store"(%abc, %out, %orow, %c0) : ({vec}, {out_t}, index, index) -> ()
  return
}}
"""


# (grid, cluster, collective dims of A, B, C): A may be shared along y, B along x, C along any.
CASES = {
    "2x1x1": ((2, 2), (2, 1), (), (0,), (0,)),
    "2x2x1": ((2, 4), (2, 2), (1,), (0,), (0, 1)),
    "4x1x1": ((4, 1), (4, 1), (), (0,), (0,)),
}


def _inputs(grid: tuple[int, int]) -> list[np.ndarray]:
    """Small integers at distinct scales, so that every sum is exact and tells its terms."""
    rng = np.random.default_rng(0)
    gx, gy = grid
    a = rng.integers(0, 100, (gx * ROWS, COLS)).astype(np.float32)
    b = 100 * rng.integers(0, 100, (gy * ROWS, COLS)).astype(np.float32)
    c = 10000 * rng.integers(0, 100, (ROWS, COLS)).astype(np.float32)
    return [a, b, c, np.zeros((gx * gy * ROWS, COLS), np.float32)]


def expected(grid: tuple[int, int], a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    gx, gy = grid
    return np.concatenate([a[x * ROWS:(x + 1) * ROWS] + b[y * ROWS:(y + 1) * ROWS] + c
                           for y in range(gy) for x in range(gx)])


def _compile(case: str, **options):
    grid, cluster, *dims = CASES[case]
    return compile_mlir(multicast_kernel(grid, cluster, *dims, **options), "multicast.mlir")


@pytest.mark.parametrize("policy, seed", POLICIES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_collective_loads_fill_every_cta_of_the_cluster(case, policy, seed):
    grid, cluster, *dims = CASES[case]
    compiled = _compile(case)
    signature = compiled.signature()
    assert signature.cluster == (*cluster, 1)
    # each collective load is cut into parts: its tensor map's box is one part
    parts = sorted(math.prod((*cluster, 1)[d] for d in ds) for ds in dims)
    boxes = sorted(ROWS // record.box[0] for record in signature.tensor_maps
                   if record.arg < 3)
    assert boxes == parts
    assert compiled.ptx.count(".multicast::cluster") == sum(1 for ds in dims if ds)
    inputs = _inputs(grid)
    out = run_simulated(compiled, *inputs, async_completion=policy, seed=seed)[-1]
    np.testing.assert_array_equal(out, expected(grid, *inputs[:3]))


def test_the_launch_cluster_comes_from_the_kernel_and_must_agree():
    compiled = _compile("2x1x1")
    assert ".reqnctapercluster 2, 1, 1" in compiled.ptx
    inputs = _inputs((2, 2))
    out = run_simulated(compiled, *inputs, cluster=(2, 1, 1))[-1]
    np.testing.assert_array_equal(out, expected((2, 2), *inputs[:3]))
    with pytest.raises(ValueError, match=r"compiled for clusters of \(2, 1, 1\)"):
        run_simulated(compiled, *inputs, cluster=(1, 1, 1))


def _planted(monkeypatch, part=None, pattern=None) -> None:
    """Make the lowering compute a wrong part index or ctaMask pattern."""
    original = tma._part_and_mask

    def planted(ctx, collective):
        index, mask = original(ctx, collective)
        if part is not None:
            index = ctx.builder.compute("mov.u32", "u32", Immediate(part))
        if pattern is not None:
            mask = ctx.builder.compute("mov.u16", "u16", Immediate(pattern(collective)))
        return index, mask

    monkeypatch.setattr(tma, "_part_and_mask", planted)


def test_a_mask_missing_peers_never_completes_their_phase(monkeypatch):
    # only the CTA at rank 0 of each group receives the parts: the others wait forever
    _planted(monkeypatch, pattern=lambda collective: 1)
    with pytest.raises(SimError, match="mbarrier deadlock"):
        run_simulated(_compile("2x1x1"), *_inputs((2, 2)))


@pytest.mark.parametrize("policy, seed", POLICIES)
def test_a_mask_not_shifted_to_the_cta_overwrites_another_groups_part(monkeypatch, policy,
                                                                     seed):
    # A is shared along y: the CTAs at x = 1 must multicast to ranks 1 and 3, not to 0 and 2,
    # where the CTAs at x = 0 already load the same parts
    _planted(monkeypatch, pattern=lambda collective: collective.pattern)
    with pytest.raises(SimError, match=r"that the TMA load at line [0-9]+ still owns"):
        run_simulated(_compile("2x2x1"), *_inputs((2, 4)), async_completion=policy, seed=seed)


@pytest.mark.parametrize("policy, seed", POLICIES)
def test_a_missing_part_is_reported(monkeypatch, policy, seed):
    # every CTA loads part 0: the barriers count the full bytes, but the multicasts overlap
    # on part 0 and the other rows of shared memory are never written
    _planted(monkeypatch, part=0)
    with pytest.raises(SimError, match=r"that the TMA load at line [0-9]+ still owns"):
        run_simulated(_compile("2x1x1"), *_inputs((2, 2)), async_completion=policy, seed=seed)


def two_rounds_kernel(between: str) -> str:
    """Two CTAs load A[0:64] then A[64:128] collectively into the same SMEM tile and copy
    each round to out[128 x : 128 x + 128]; `between` is the op separating the rounds."""
    tile, bars = f"memref<64x32xf32, {SMEM}>", f"memref<1xi64, {SMEM}>"
    a_t, out_t, vec = "memref<128x32xf32>", "memref<256x32xf32>", "vector<64x32xf32>"
    rounds = []
    for i in range(2):
        rounds.append(f"""
  %row{i} = arith.constant {64 * i} : index
  %o{i} = arith.addi %orow, %row{i} : index
  "smalti.arrive_expect_tx"(%bars, %c0) {{bytes = {TILE_BYTES} : i64}} : ({bars}, index) -> ()
  "smalti.async_load"(%a, %s, %bars, %c0, %row{i}, %c0) {{collective = array<i64: 0>}} : ({a_t}, {tile}, {bars}, index, index, index) -> ()
  %p{i} = arith.constant {i} : i32
  "smalti.wait"(%bars, %c0, %p{i}) : ({bars}, index, i32) -> ()
  %v{i} = "smalti.vector_load"(%s, %c0, %c0) : ({tile}, index, index) -> {vec}
  "smalti.vector_store"(%v{i}, %out, %o{i}, %c0) : ({vec}, {out_t}, index, index) -> ()""")
    return f"""
func.func @rounds(%a: {a_t}, %out: {out_t}) attributes {{smalti.kernel,
    smalti.grid = array<i64: 2>, smalti.cluster = array<i64: 2>}} {{
  %c0 = arith.constant 0 : index
  %c128 = arith.constant 128 : index
  %o_s = arith.constant 1024 : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> {bars}
  %s = "smalti.slice_smem"(%o_s) : (index) -> {tile}
  "smalti.initialize_barrier"(%bars) {{arrival_count = 1 : i64}} : ({bars}) -> ()
  "smalti.cluster_barrier"() : () -> ()
  %x = gpu.block_id x
  %orow = arith.muli %x, %c128 : index
{rounds[0]}
  "{between}"() : () -> ()
{rounds[1]}
  return
}}
"""


@pytest.mark.parametrize("policy, seed", POLICIES)
def test_a_cluster_barrier_lets_the_ctas_reuse_a_multicast_tile(policy, seed):
    a = np.arange(128 * 32, dtype=np.float32).reshape(128, 32)
    compiled = compile_mlir(two_rounds_kernel("smalti.cluster_barrier"), "rounds.mlir")
    out = run_simulated(compiled, a, np.zeros((256, 32), np.float32), async_completion=policy,
                        seed=seed)[-1]
    np.testing.assert_array_equal(out, np.concatenate([a, a]))


@pytest.mark.parametrize("policy, seed", POLICIES)
def test_reusing_a_multicast_tile_after_a_warpgroup_barrier_is_a_race(policy, seed):
    # the peer may still read its tile when this CTA's next multicast overwrites it
    a = np.arange(128 * 32, dtype=np.float32).reshape(128, 32)
    compiled = compile_mlir(two_rounds_kernel("smalti.warpgroup_barrier"), "rounds.mlir")
    with pytest.raises(SimError, match=r"shared-memory race|still owns"):
        run_simulated(compiled, a, np.zeros((256, 32), np.float32), async_completion=policy,
                      seed=seed)


def test_ptxas_accepts_the_multicast_kernels():
    from smalti.runtime.cache import ptxas_available

    if not ptxas_available():
        pytest.skip("ptxas is not installed")
    kernels = [multicast_kernel(*CASES[case]) for case in CASES]
    kernels.append(two_rounds_kernel("smalti.cluster_barrier"))
    for text in kernels:
        result = compile_mlir(text, "multicast.mlir").assemble()
        assert "C75" not in result.log, result.log


def test_a_jax_call_launches_the_kernels_cluster(tmp_path, monkeypatch):
    import jax

    from smalti.dialect.context import make_context, parse_module
    from smalti.runtime.cache import compile_kernel
    from smalti.runtime.jax_integration import call_kernel

    monkeypatch.setenv("SMALTI_CACHE_DIR", str(tmp_path / "cache"))
    grid, cluster, *dims = CASES["2x2x1"]
    module = parse_module(multicast_kernel(grid, cluster, *dims), "multicast.mlir",
                          make_context())
    compiled = compile_kernel(module)
    assert compiled.signature.cluster == (2, 2, 1)
    *inputs, out = _inputs(grid)
    outputs = [(out.shape, out.dtype)]
    [result] = jax.jit(lambda *xs: call_kernel(compiled, xs, outputs))(*inputs)
    np.testing.assert_array_equal(np.asarray(result), expected(grid, *inputs))
    [same] = call_kernel(compiled, inputs, outputs, cluster=(2, 2))
    np.testing.assert_array_equal(np.asarray(same), expected(grid, *inputs))
    with pytest.raises(ValueError, match=r"compiled for clusters of \(2, 2, 1\)"):
        call_kernel(compiled, inputs, outputs, cluster=(4, 1, 1))
