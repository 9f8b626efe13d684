"""The persistent 2-CTA warp-specialised Blackwell matmul (examples/blackwell_matmul_persistent.py):
numbers under jax.jit and, with fewer clusters resident than the grid has tiles (so the
running pairs cancel the rest and take their tiles), through the simulator against numpy,
under adversarial async completion; the ops it traces to; ptxas for sm_100a: no spills, no
performance warnings, the tensor-core instructions in the SASS."""

from __future__ import annotations

import re
from functools import cache

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from smalti.ptx.toolchain import compile_ptx, disassemble, sass_opcode_counts
from smalti.runtime import run_simulated
from smalti.runtime.cache import ptxas_available
from smalti.runtime.compiler import CompiledModule, compile_module
from smalti.sim.cluster_launch import ClusterLaunch
from tests.dsl_helpers import (  # noqa: F401
    bf16_matmul_specs,
    isolated_cache,
    load_example,
    normal_bf16_operands,
)
from tests.test_matmul import _assert_within_one_ulp

BF16 = jnp.bfloat16
ARCH = "sm_100a"
needs_ptxas = pytest.mark.skipif(not ptxas_available(), reason="ptxas is not installed")
NAN = np.float32(np.nan).astype(ml_dtypes.bfloat16)


@cache
def example():
    return load_example("blackwell_matmul_persistent")


@cache
def compiled(m: int, n: int, k: int) -> CompiledModule:
    return compile_module(example().matmul.trace(*bf16_matmul_specs(m, n, k)).module, arch=ARCH)


def test_matmul_under_jit_matches_jnp_dot():
    a, b = normal_bf16_operands(2, 512, 512, 256)
    out = jax.jit(example().matmul)(a, b)
    assert out.shape == (512, 512) and out.dtype == BF16
    _assert_within_one_ulp(np.asarray(out), np.asarray(a), np.asarray(b))
    want = np.asarray(example().reference(a, b), np.float32)
    assert np.mean(np.asarray(out, np.float32) == want) > 0.99


@pytest.mark.parametrize(("shape", "resident", "policy"), [
    ((1024, 512, 256), 1, "eager"),  # one pair does all 8 tiles: each buffer used 4 times
    ((512, 1024, 512), 1, "latest"),  # two trips of the ring per tile
    ((768, 768, 256), 2, "random"),  # 9 tiles over 2 pairs, completing in random order
    ((512, 512, 256), 3, "random"),  # 4 tiles, 3 pairs: one cancels the fourth
])
def test_resident_pairs_take_every_tile(shape, resident, policy):
    """Only `resident` clusters launch at first; they cancel the others and do their tiles.
    C starts as NaN, so a tile no pair computed shows; the simulator reports a stage
    refilled while an MMA reads it, the accumulator reused before an epilogue loaded it, a
    response slot overwritten before every role read it, or a CTA exiting while its peer
    may still signal it, as a SimError."""
    m, n, k = shape
    rng = np.random.default_rng(m + n + k + resident)
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
    c = np.full((m, n), NAN, ml_dtypes.bfloat16)
    out = run_simulated(compiled(m, n, k), a, b, c, resident_clusters=resident,
                        async_completion=policy, seed=7)[-1]
    _assert_within_one_ulp(out, a, b)


def test_one_resident_pair_cancels_every_other_cluster(monkeypatch):
    """With one cluster resident, its pair takes the 7 other tiles of a 1024 x 512 C by
    canceling their clusters, each once, in launch order; the eighth request fails."""
    taken: list[int | None] = []
    cancel = ClusterLaunch.cancel

    def recording(self, device):
        taken.append(cancel(self, device))
        return taken[-1]

    monkeypatch.setattr(ClusterLaunch, "cancel", recording)
    rng = np.random.default_rng(11)
    a = rng.standard_normal((1024, 256)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((256, 512)).astype(ml_dtypes.bfloat16)
    c = np.full((1024, 512), NAN, ml_dtypes.bfloat16)
    out = run_simulated(compiled(1024, 512, 256), a, b, c, resident_clusters=1)[-1]
    _assert_within_one_ulp(out, a, b)
    assert taken == [1, 2, 3, 4, 5, 6, 7, None]


def test_traces_to_roles_walking_one_response_ring():
    traced = example().matmul.trace(*bf16_matmul_specs(512, 512, 256))
    assert traced.grid == (4, 2) and traced.cluster == (2, 1, 1)
    text = traced.mlir
    ops = re.findall(r'"(smalti\.\w+)"', text)
    assert ops.count("smalti.warpgroup_region") == 3
    assert ops.count("smalti.role_tiles") == 3 and text.count("request = true") == 1
    assert ops.count("smalti.tmem_alloc_shared") == 1 and "smalti.tmem_alloc\"" not in text
    assert ops.index("smalti.tmem_alloc_shared") < ops.index("smalti.warpgroup_region")
    last_load = max(i for i, name in enumerate(ops) if name == "smalti.tmem_load")
    assert ops.index("smalti.tmem_dealloc") > last_load  # the epilogue frees it, last
    assert 'memref<128x512xf32, "tmem">' in text
    # one ring trip, into accumulator buffer n % 2 (a TMEM stage chosen at run time)
    assert ops.count("smalti.tcgen05_mma") == 4 and ops.count("smalti.tmem_stage") == 2
    assert text.count("collective = true") >= 4 + 4 + 1  # MMAs and their commits
    # both CTAs' loads complete on the leader's barrier: no relay of rank 1's stages
    assert ops.count("smalti.async_load") == text.count("cta_group = 2") == 2 * 4


@needs_ptxas
def test_ptxas_for_sm_100a_without_spills_or_warnings():
    result = compile_ptx(compiled(1024, 1024, 1024).ptx, arch=ARCH)
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in result.log
    assert not re.search(r"C75\d\d|[Ww]arning", result.log), result.log
    counts = sass_opcode_counts(disassemble(result.cubin))
    # 4 stages x 4 K steps of 16, M = 256 N = 256 each, into either accumulator buffer
    assert counts["UTCHMMA"] == 16
    assert counts["USETMAXREG"] == 3  # each role sets its budget
    assert counts["LDTM"] == 8  # 32 of 256 columns at a time, from either buffer
    assert counts["UTMALDG"] > 0 and counts["UTMASTG"] > 0


def test_epilogue_fences_its_tmem_reads_before_releasing_the_accumulator():
    """PTX ISA "tcgen05.fence": the epilogue's tcgen05.ld (waited) is ordered before the
    arrive that lets the pair's MMAs overwrite the buffer by tcgen05.fence::before_thread_sync
    (the issuer's MMA hand-off after its wait has the matching ::after_thread_sync)."""
    lines = [line.strip() for line in compiled(512, 512, 256).ptx.splitlines()
             if line.strip() and not line.strip().startswith(".loc")]
    releases = [i for i, line in enumerate(lines)
                if line.startswith(("mbarrier.arrive.release.cluster", "@"))
                and "mbarrier.arrive.release.cluster" in line]
    loads = [i for i, line in enumerate(lines) if line.startswith("tcgen05.ld.")]
    release = next(i for i in releases if i > loads[-1])  # acc_empty, after the last load
    between = lines[loads[-1]:release]
    assert "tcgen05.wait::ld.sync.aligned;" in between
    assert "tcgen05.fence::before_thread_sync;" in between[between.index(
        "tcgen05.wait::ld.sync.aligned;"):]


def test_shapes_that_do_not_tile_are_refused():
    with pytest.raises(ValueError, match=r"M a multiple of 256"):
        example().matmul.trace(*bf16_matmul_specs(128, 256, 256))
