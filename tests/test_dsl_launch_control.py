"""Persistent kernels in the DSL (smalti/dsl/launch_control.py): `@sd.persistent_tiles` runs
its function for every block id of the grid exactly once, by the block itself or by a running
block that canceled its cluster, run through the simulator against numpy: under jax.jit
(every cluster resident: each block does its own tile) and with fewer clusters resident than
the grid holds (the running ones take the rest, which never run). Misuse gives errors located
at the user's line."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import smalti.dsl as sd
from smalti.dialect import DiagnosticError
from smalti.runtime.compiler import compile_module
from smalti.runtime.simulate import run_simulated
from tests.dsl_helpers import isolated_cache, line_of  # noqa: F401

F32 = jnp.float32
THIS_FILE = __file__
ARCH = "sm_100a"
S = jax.ShapeDtypeStruct
ROWS, COLS = 64, 128
RUNS = re.compile(r"\[block \((\d+), (\d+), 0\)(?:, last of (\d+) runs)?\] tile")


def accumulate_kernel(grid: tuple[int, int], cluster: tuple[int, int] = (1, 1)) -> sd.Kernel:
    """out[tile] += 2 * x[tile] for the tile of block ids (x, y), 64 x 128 elements each; every
    pass prints its tile's x id (the simulator reports each block's last print and count)."""
    gx, gy = grid

    @sd.kernel(grid=grid, cluster=cluster, out_shape=S((gy * ROWS, gx * COLS), F32), arch=ARCH)
    def accumulate(x_ref, out_ref):
        @sd.persistent_tiles
        def tile(ids):
            rows = slice(ids[1] * ROWS, ids[1] * ROWS + ROWS)
            cols = slice(ids[0] * COLS, ids[0] * COLS + COLS)
            out_ref[rows, cols] = out_ref[rows, cols] + x_ref[rows, cols] * 2.0
            sd.debug_print("tile {}", ids[0])

    return accumulate


def _run_resident(grid: tuple[int, int], cluster: tuple[int, int] = (1, 1), **options
                  ) -> dict[tuple[int, int], int]:
    """Run with `options`; check each tile was accumulated once; {block: passes it ran}."""
    gx, gy = grid
    kernel = accumulate_kernel(grid, cluster)
    shape = (gy * ROWS, gx * COLS)
    traced = kernel.trace(S(shape, F32))
    compiled = compile_module(traced.module, arch=ARCH)
    rng = np.random.default_rng(gx * 7 + gy)
    x = rng.standard_normal(shape).astype(np.float32)
    init = rng.standard_normal(shape).astype(np.float32)
    lines: list[str] = []
    out = run_simulated(compiled, x, init, print_fn=lines.append, **options)[1]
    np.testing.assert_array_equal(out, init + x * 2.0)  # each tile once: twice adds 4x
    passes = {}
    for line in lines:
        found = RUNS.search(line)
        assert found is not None, line
        passes[int(found[1]), int(found[2])] = int(found[3] or 1)
    assert sum(passes.values()) == gx * gy
    return passes


def test_under_jit_every_block_does_its_tile():
    @sd.kernel(grid=(4, 2), out_shape=S((2 * ROWS, 4 * COLS), F32), arch=ARCH)
    def double(x_ref, out_ref):
        @sd.persistent_tiles
        def tile(ids):
            rows = slice(ids[1] * ROWS, ids[1] * ROWS + ROWS)
            cols = slice(ids[0] * COLS, ids[0] * COLS + COLS)
            out_ref[rows, cols] = x_ref[rows, cols] * 2.0 + 1.0

    x = np.random.default_rng(0).standard_normal((2 * ROWS, 4 * COLS)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(jax.jit(double)(x)), x * 2.0 + 1.0)


@pytest.mark.parametrize("grid, resident", [((6, 1), 1), ((6, 1), 2), ((5, 3), 4),
                                            ((8, 1), None)])
@pytest.mark.parametrize("policy", ["eager", "latest", "random"])
def test_more_tiles_than_resident_blocks(grid, resident, policy):
    """Only the first `resident` blocks run; between them they do every tile once."""
    passes = _run_resident(grid, resident_clusters=resident, async_completion=policy, seed=2)
    gx, gy = grid
    running = gx * gy if resident is None else resident
    assert {x + gx * y for x, y in passes} <= set(range(running))
    if resident is None:
        assert set(passes.values()) == {1}


def test_clusters_of_two_take_clusters_together():
    """Clusters of 2 along x, one resident: its two blocks do the tiles of their rank."""
    passes = _run_resident((6, 2), (2, 1), resident_clusters=1)
    assert passes == {(0, 0): 6, (1, 0): 6}


def test_two_warpgroups_share_the_loop():
    """Both warpgroups of a block run every pass (each writes the tile, the same values);
    the block meets after each, so none starts the next pass while a request is open."""
    @sd.kernel(grid=(5,), out_shape=S((ROWS, 5 * COLS), F32), arch=ARCH, warpgroups=2)
    def both(x_ref, out_ref):
        @sd.persistent_tiles
        def tile(ids):
            cols = slice(ids[0] * COLS, ids[0] * COLS + COLS)
            out_ref[:, cols] = x_ref[:, cols] * 2.0 + 1.0

    x = np.random.default_rng(4).standard_normal((ROWS, 5 * COLS)).astype(np.float32)
    compiled = compile_module(both.trace(S(x.shape, F32)).module, arch=ARCH)
    out = run_simulated(compiled, x, np.zeros_like(x), resident_clusters=2,
                        async_completion="random", seed=3)[1]
    np.testing.assert_array_equal(out, x * 2.0 + 1.0)


def test_inside_fori_is_a_located_error():
    @sd.kernel(grid=(2,), out_shape=S((ROWS, 2 * COLS), F32), arch=ARCH)
    def nested(x_ref, out_ref):
        def step(i, carry):
            @sd.persistent_tiles  # MARK: nested
            def tile(ids):
                out_ref[...] = x_ref[...]

        sd.fori(0, 2, step)

    with pytest.raises(ValueError, match="persistent_tiles must stand at the top level") as info:
        nested.trace(S((ROWS, 2 * COLS), F32))
    line = line_of("MARK: nested", test_inside_fori_is_a_located_error)
    assert f"{THIS_FILE}:{line}" in str(info.value)


def test_sm_90a_names_the_line():
    @sd.kernel(grid=(2,), out_shape=S((ROWS, 2 * COLS), F32))
    def hopper(x_ref, out_ref):
        @sd.persistent_tiles  # MARK: hopper
        def tile(ids):
            out_ref[:, ids[0] * COLS:ids[0] * COLS + COLS] = x_ref[:, 0:COLS]

    with pytest.raises(DiagnosticError) as caught:
        hopper(np.zeros((ROWS, 2 * COLS), np.float32))
    line = line_of("MARK: hopper", test_sm_90a_names_the_line)
    assert re.search(rf"{re.escape(THIS_FILE)}:{line}:\d+: error: 'smalti\.persistent_tiles' "
                     r"op needs sm_100a: sm_90a has no cluster launch control",
                     str(caught.value))


def test_twice_is_a_located_error():
    @sd.kernel(grid=(2,), out_shape=S((ROWS, 2 * COLS), F32), arch=ARCH)
    def twice(x_ref, out_ref):
        @sd.persistent_tiles
        def first(ids):
            out_ref[:, ids[0] * COLS:ids[0] * COLS + COLS] = x_ref[:, 0:COLS]

        @sd.persistent_tiles  # MARK: second
        def second(ids):
            out_ref[:, ids[0] * COLS:ids[0] * COLS + COLS] = x_ref[:, 0:COLS]

    with pytest.raises(DiagnosticError) as caught:
        twice(np.zeros((ROWS, 2 * COLS), np.float32))
    line = line_of("MARK: second", test_twice_is_a_located_error)
    assert re.search(rf"{re.escape(THIS_FILE)}:{line}:\d+: error: .*second persistent_tiles",
                     str(caught.value))


def test_a_result_or_a_non_function_is_refused():
    @sd.kernel(grid=(2,), out_shape=S((ROWS, 2 * COLS), F32), arch=ARCH)
    def returns(x_ref, out_ref):
        @sd.persistent_tiles
        def tile(ids):
            return x_ref[...]

    with pytest.raises(TypeError, match="persistent_tiles must return None"):
        returns.trace(S((ROWS, 2 * COLS), F32))

    @sd.kernel(grid=(2,), out_shape=S((ROWS, 2 * COLS), F32), arch=ARCH)
    def not_a_function(x_ref, out_ref):
        sd.persistent_tiles(3)

    with pytest.raises(TypeError, match="persistent_tiles decorates a function, got int"):
        not_a_function.trace(S((ROWS, 2 * COLS), F32))
