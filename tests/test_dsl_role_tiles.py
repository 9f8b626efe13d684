"""Per-role persistent walks (`@sd.role_tiles`, smalti/dsl/launch_control.py) and TMEM shared
by a block's roles (`sd.TMEM(..., owner=w)`, smalti/dsl/tmem.py), run through the simulator
against numpy: every tile's work is done exactly once by each role (the roles accumulate,
so a tile done twice shows), with fewer clusters resident than the grid holds, alone and in
clusters of two; the shared TMEM region under register budgets; misuse located at the
user's line."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import smalti.dsl as sd
from smalti.runtime.compiler import compile_module
from smalti.runtime.simulate import run_simulated
from tests.dsl_helpers import isolated_cache, line_of  # noqa: F401

F32 = jnp.float32
THIS_FILE = __file__
ARCH = "sm_100a"
S = jax.ShapeDtypeStruct
ROWS, COLS = 64, 128
HALF = ROWS // 2
PASS = re.compile(r"\[block \((\d+), (\d+), 0\), warpgroup 1(?:, last of (\d+) runs)?\] "
                  r"pass (\d+)")
WALKED = re.compile(r"\[block \((\d+), (\d+), 0\), warpgroup 1\] walked (\d+)")


def two_roles(grid: tuple[int, int], cluster: int) -> sd.Kernel:
    """Warpgroup w (the first requests) adds 2 x to rows 32 w .. 32 w + 31 of each tile of
    out and prints its pass; a role doing a tile twice adds 4 x."""
    gx, gy = grid

    @sd.kernel(grid=grid, cluster=(cluster, 1, 1), warpgroups=2, arch=ARCH,
               out_shape=S((gy * ROWS, gx * COLS), F32),
               smem=[sd.SMEM((2, 16), jnp.int8), sd.Barriers(2),
                     sd.Barriers(2, arrival_count=2 * cluster)])
    def accumulate(x_ref, out_ref, responses, full, empty):
        def role(w):
            @sd.warpgroup_region(warpgroups=w, registers=(40, 232)[w])
            def _():
                @sd.role_tiles(responses, full, empty, request=w == 0)
                def tile(ids, n):
                    rows = slice(ids[1] * ROWS + HALF * w, ids[1] * ROWS + HALF * w + HALF)
                    cols = slice(ids[0] * COLS, ids[0] * COLS + COLS)
                    out_ref[rows, cols] = out_ref[rows, cols] + x_ref[rows, cols] * 2.0
                    if w == 1:
                        sd.debug_print("pass {}", n)

                if w == 1:
                    sd.debug_print("walked {}", tile)

        role(0)
        role(1)

    return accumulate


@pytest.mark.parametrize(("grid", "cluster", "resident"), [
    ((6, 1), 1, 1), ((5, 3), 1, 4), ((4, 2), 1, None), ((6, 2), 2, 1), ((4, 3), 2, 2)])
@pytest.mark.parametrize("policy", ["eager", "latest", "random"])
def test_each_role_does_every_tile_once(grid, cluster, resident, policy):
    gx, gy = grid
    kernel = two_roles(grid, cluster)
    shape = (gy * ROWS, gx * COLS)
    compiled = compile_module(kernel.trace(S(shape, F32)).module, arch=ARCH)
    rng = np.random.default_rng(gx * 5 + gy)
    x = rng.standard_normal(shape).astype(np.float32)
    init = rng.standard_normal(shape).astype(np.float32)
    lines: list[str] = []
    out = run_simulated(compiled, x, init, print_fn=lines.append, resident_clusters=resident,
                        async_completion=policy, seed=3)[1]
    np.testing.assert_array_equal(out, init + x * 2.0)  # each role did each tile once
    passes, walked = {}, {}
    for line in lines:
        if (found := WALKED.search(line)) is not None:
            walked[int(found[1]), int(found[2])] = int(found[3])
            continue
        found = PASS.search(line)
        assert found is not None, line
        passes[int(found[1]), int(found[2])] = int(found[3] or 1)
        assert int(found[4]) == int(found[3] or 1) - 1  # its pass count: 0, 1, ...
    assert walked == passes  # role_tiles' result: the passes the role ran
    assert sum(passes.values()) == gx * gy  # the last print of each block is its last pass
    if resident is not None:  # only the resident clusters ran: the others were canceled
        assert len(passes) == resident * cluster


def test_shared_tmem_under_register_budgets():
    """Warpgroup 1 (budget 232) owns the region: it stores x + 1 in it, reads it back and
    frees it; warpgroup 0 gives registers back (40)."""
    @sd.kernel(out_shape=S((128, 64), F32), arch=ARCH, warpgroups=2,
               smem=[sd.TMEM((128, 64), F32, owner=1)])
    def owned(x_ref, out_ref, tmem):
        @sd.warpgroup_region(0, registers=40)
        def _():
            pass

        @sd.warpgroup_region(1, registers=232)
        def _():
            tmem[:, 0:64] = x_ref[...] + 1.0
            out_ref[...] = tmem[:, 0:64]

    traced = owned.trace(S((128, 64), F32))
    ops = re.findall(r'"(smalti\.\w+)"', traced.mlir)
    assert ops.count("smalti.tmem_alloc_shared") == 1 and "smalti.tmem_alloc\"" not in traced.mlir
    assert ops.index("smalti.tmem_dealloc") > ops.index("smalti.tmem_load")  # in region 1
    x = np.random.default_rng(1).standard_normal((128, 64)).astype(np.float32)
    out = run_simulated(compile_module(traced.module, arch=ARCH), x, np.zeros_like(x))[1]
    np.testing.assert_array_equal(out, x + 1.0)


def _ring():
    return [sd.SMEM((2, 16), jnp.int8), sd.Barriers(2), sd.Barriers(2, arrival_count=2)]


@pytest.mark.parametrize(("misuse", "error", "message"), [
    ("top", ValueError, r"role_tiles must stand directly in a warpgroup_region"),
    ("dtype", TypeError, r"role_tiles' responses must be a \(D, 16\) int8 shared-memory array"),
    ("bars", TypeError, r"role_tiles' empty must be sd.Barriers\(2\) \(one per response slot\)"),
    ("request", TypeError, r"role_tiles' request must be a bool, got 1"),
])
def test_role_tiles_misuse_names_the_line(misuse, error, message):
    @sd.kernel(grid=(2,), out_shape=S((64, 64), F32), arch=ARCH, warpgroups=2,
               smem=[*_ring(), sd.SMEM((2, 4), F32), sd.Barriers(3)])
    def body(out_ref, responses, full, empty, f32_smem, three):
        match misuse:
            case "top":
                sd.role_tiles(responses, full, empty, request=True)  # MARK: misuse
            case _:
                @sd.warpgroup_region(0)
                def _():
                    match misuse:
                        case "dtype":
                            sd.role_tiles(f32_smem, full, empty)  # MARK: misuse
                        case "bars":
                            sd.role_tiles(responses, full, three)  # MARK: misuse
                        case "request":
                            sd.role_tiles(responses, full, empty, request=1)  # MARK: misuse

    with pytest.raises(error, match=message) as caught:
        body.trace()
    line = line_of(f'case "{misuse}"', body.fn) + 1
    assert str(caught.value).startswith(f"{THIS_FILE}:{line}:"), str(caught.value)


def test_tmem_owner_needs_its_own_region():
    @sd.kernel(out_shape=S((128, 32), F32), arch=ARCH, warpgroups=2,
               smem=[sd.TMEM((128, 32), F32, owner=1)])  # MARK: declared
    def unowned(out_ref, tmem):
        @sd.warpgroup_region((0, 1))
        def _():
            pass

    with pytest.raises(ValueError, match=r"TMEM owned by warpgroup 1 is freed at the end of "
                                         r"that warpgroup's own warpgroup_region") as caught:
        unowned.trace()
    line = line_of("MARK: declared", test_tmem_owner_needs_its_own_region)
    assert str(caught.value).startswith(f"{THIS_FILE}:{line}:")


def test_tmem_owner_must_be_a_warpgroup():
    with pytest.raises(TypeError, match=r"TMEM's owner must be a warpgroup index"):
        sd.TMEM((128, 32), F32, owner="epilogue")

    with pytest.raises(ValueError, match=r"TMEM owner 2 is not a warpgroup of kernel outside, "
                                         r"which has 2") as caught:
        @sd.kernel(out_shape=S((128, 32), F32), arch=ARCH, warpgroups=2,
                   smem=[sd.TMEM((128, 32), F32, owner=2)])  # MARK: declared
        def outside(out_ref, tmem):
            pass
    line = line_of("MARK: declared", test_tmem_owner_must_be_a_warpgroup)
    assert str(caught.value).startswith(f"{THIS_FILE}:{line}:")
