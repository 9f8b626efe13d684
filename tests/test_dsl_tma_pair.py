"""TMA loads completing on the CTA pair leader's barrier (`sd.async_copy(...,
leader_barrier=True)`, `async_load {cta_group = 2}`, sm_100a): both CTAs of a pair load
their own tile and the even CTA's barrier counts both, run through the simulator against
numpy under late and random async completion; misuse is refused at the user's line."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import smalti.dsl as sd
from smalti.dialect.diagnostics import DiagnosticError
from smalti.runtime.compiler import compile_module
from smalti.runtime.simulate import run_simulated
from tests.dsl_helpers import isolated_cache, line_of  # noqa: F401

BF16 = jnp.bfloat16
S = jax.ShapeDtypeStruct
THIS_FILE = __file__
ROWS, COLS = 128, 64


def _pair_copy(arch: str = "sm_100a"):
    """out = x, by pairs of blocks: each loads its 128 rows, both completing on rank 0's
    barrier, which rank 0 arms with the pair's bytes and waits on; after the cluster
    meets, each block stores its rows."""

    @sd.kernel(grid=(4,), cluster=(2, 1, 1), arch=arch,
               out_shape=S((4 * ROWS, COLS), BF16),
               smem=[sd.Barriers(1), sd.SMEM((ROWS, COLS), BF16)])
    def pair_copy(x_ref, out_ref, bars, tile):
        rank = sd.block_id_in_cluster(0)
        row = sd.program_id(0) * ROWS
        sd.cluster_barrier()  # the leader's barrier is initialised before the peer's copy
        sd.when(rank == 0)(lambda: bars[0].arrive_expect_tx(2 * tile.nbytes))
        sd.async_copy(x_ref.at[row:row + ROWS, :], tile, bars[0], leader_barrier=True)
        sd.when(rank == 0)(lambda: bars[0].wait(0))
        sd.cluster_barrier()  # both tiles landed: the leader saw all their bytes
        sd.async_store(tile, out_ref.at[row:row + ROWS, :])
        sd.async_store_wait()

    return pair_copy


@pytest.mark.parametrize("policy", ["latest", "random"])
def test_both_tiles_complete_on_the_leaders_barrier(policy):
    x = np.random.default_rng(0).standard_normal((4 * ROWS, COLS)).astype(ml_dtypes.bfloat16)
    compiled = compile_module(_pair_copy().trace(S(x.shape, BF16)).module, arch="sm_100a")
    assert ".cta_group::2 " in compiled.ptx and "mapa.shared::cluster.u32" in compiled.ptx
    out = np.zeros_like(x)
    out = run_simulated(compiled, x, out, async_completion=policy, seed=3)[-1]
    np.testing.assert_array_equal(out, x)


def test_under_jit():
    x = np.random.default_rng(1).standard_normal((4 * ROWS, COLS)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(np.asarray(jax.jit(_pair_copy())(x)), x)


def test_hopper_has_no_pair_loads():
    with pytest.raises(DiagnosticError, match=r"'smalti.async_load' op needs sm_100a: sm_90a "
                                              r"has no TMA loads completing on the pair "
                                              r"leader's barrier"):
        compile_module(_pair_copy("sm_90a").trace(S((4 * ROWS, COLS), BF16)).module,
                       arch="sm_90a")


@pytest.mark.parametrize(("misuse", "message"), [
    ("unpaired", r"async_copy\(..., leader_barrier=True\) completes on the barrier of the "
                 r"block pair's leader, but kernel body has a cluster of 3 block\(s\)"),
    ("multicast", r"async_copy cannot both multicast \(collective\) and complete on the pair "
                  r"leader's barrier \(leader_barrier\)"),
])
def test_misuse_names_the_users_line(misuse, message):
    cluster = (3, 1, 1) if misuse == "unpaired" else (2, 1, 1)

    @sd.kernel(grid=(6,), cluster=cluster, arch="sm_100a", out_shape=S((ROWS, COLS), BF16),
               smem=[sd.Barriers(1), sd.SMEM((ROWS, COLS), BF16)])
    def body(x_ref, out_ref, bars, tile):
        match misuse:
            case "unpaired":
                sd.async_copy(x_ref.at[0:ROWS, :], tile, bars[0], leader_barrier=True)
            case "multicast":
                sd.async_copy(x_ref.at[0:ROWS, :], tile, bars[0], collective=0,
                              leader_barrier=True)

    with pytest.raises(ValueError, match=message) as caught:
        body.trace(S((ROWS, COLS), BF16))
    line = line_of(f'case "{misuse}"', body.fn) + 1
    assert str(caught.value).startswith(f"{THIS_FILE}:{line}:"), str(caught.value)
