"""The Blackwell bf16 matmul example (examples/blackwell_matmul.py): TMA into a 4-stage ring,
tcgen05 MMAs into a TMEM accumulator, commits releasing the stages. Numbers under jax.jit
through the simulator against jnp.dot and numpy, no hazard when async work completes late,
the ops it traces to, and ptxas for sm_100a: no spills, the tensor-core, TMA and TMEM
instructions in the SASS."""

from __future__ import annotations

import re
from functools import cache

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jaxlib.mlir import ir

from smalti.ptx.toolchain import compile_ptx, disassemble, sass_opcode_counts
from smalti.runtime import run_simulated
from smalti.runtime.cache import ptxas_available
from smalti.runtime.compiler import CompiledModule, compile_module
from tests.dsl_helpers import (  # noqa: F401
    bf16_matmul_specs,
    isolated_cache,
    line_of,
    load_example,
    normal_bf16_operands,
)
from tests.test_matmul import _assert_within_one_ulp

BF16 = jnp.bfloat16
ARCH = "sm_100a"
needs_ptxas = pytest.mark.skipif(not ptxas_available(), reason="ptxas is not installed")


@cache
def example():
    return load_example("blackwell_matmul")


@cache
def compiled(m: int, n: int, k: int) -> CompiledModule:
    return compile_module(example().matmul.trace(*bf16_matmul_specs(m, n, k)).module, arch=ARCH)


def test_matmul_under_jit_matches_jnp_dot():
    a, b = normal_bf16_operands(1, 256, 256, 512)
    out = jax.jit(example().matmul)(a, b)
    assert out.shape == (256, 256) and out.dtype == BF16
    _assert_within_one_ulp(np.asarray(out), np.asarray(a), np.asarray(b))
    got = np.asarray(out, np.float32)
    want = np.asarray(example().reference(a, b), np.float32)
    ulp = np.spacing(np.abs(want).astype(ml_dtypes.bfloat16)).astype(np.float32)
    assert (np.abs(got - want) <= ulp).all()


@pytest.mark.parametrize(("policy", "k"), [("latest", 256), ("random", 512), ("eager", 1024)])
def test_no_hazard_when_async_work_completes_late(policy, k):
    """The simulator reports a stage refilled while an MMA may still read it, or the
    accumulator read before the MMAs finished, as a SimError; "latest" completes every TMA
    copy and MMA as late as allowed. K = 256 is one trip around the ring (no refills)."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((128, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((k, 256)).astype(ml_dtypes.bfloat16)
    c = np.zeros((128, 256), ml_dtypes.bfloat16)
    out = run_simulated(compiled(128, 256, k), a, b, c, async_completion=policy, seed=5)[-1]
    _assert_within_one_ulp(out, a, b)


def test_traces_to_tmem_allocation_a_ring_of_mmas_and_an_epilogue():
    traced = example().matmul.trace(*bf16_matmul_specs(256, 256, 512))
    assert traced.grid == (2, 2)
    text = traced.mlir
    ops = re.findall(r'"(smalti\.\w+)"', text)
    assert ops.index("smalti.tmem_alloc") < ops.index("smalti.tmem_relinquish_alloc_permit") \
        < ops.index("smalti.async_load") < ops.index("smalti.tcgen05_mma")
    assert ops[-3:] == ["smalti.async_store", "smalti.async_store_wait", "smalti.tmem_dealloc"]
    assert ops.count("smalti.tcgen05_mma") == 4  # one per stage, in the ring's trip
    assert ops.count("smalti.tcgen05_commit") == 5  # and the last, for the epilogue
    assert ops.count("smalti.tmem_load") == 4  # 32 columns at a time
    assert 'memref<128x128xf32, "tmem">' in text
    lines: dict[str, set[int]] = {}

    def visit(op):
        match = re.fullmatch(r'loc\(".*blackwell_matmul.py":(\d+):\d+\)', str(op.location))
        if match:
            lines.setdefault(op.operation.name, set()).add(int(match.group(1)))
        return ir.WalkResult.ADVANCE

    traced.module.walk(visit)
    fn = example().matmul.fn
    expected = {"smalti.tcgen05_mma": ["sd.tcgen05_mma(acc"],
                "smalti.tcgen05_commit": ["sd.tcgen05_commit(free", "sd.tcgen05_commit(done"],
                "smalti.tmem_alloc": ["sd.TMEM(("], "smalti.tmem_dealloc": ["sd.TMEM(("],
                "smalti.tmem_load": ["part = acc["]}
    for name, markers in expected.items():
        assert lines[name] == {line_of(m, fn) for m in markers}, name


@needs_ptxas
def test_ptxas_for_sm_100a_without_spills():
    result = compile_ptx(compiled(512, 512, 1024).ptx, arch=ARCH)
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in result.log
    registers = int(re.search(r"Used (\d+) registers", result.log).group(1))
    assert registers <= 96, result.log  # the epilogue loads 32 accumulator columns at a time
    counts = sass_opcode_counts(disassemble(result.cubin))
    # 4 stages x 4 K steps of 16; TMA loads (2 per stage) and the store; tcgen05.ld.
    assert counts["UTCHMMA"] == 16
    assert counts["UTMALDG"] > 0 and counts["UTMASTG"] > 0 and counts["LDTM"] == 4
    assert counts["STS"] <= 20  # the epilogue's 16-byte stores, not one per element


def test_shapes_that_do_not_tile_are_refused():
    with pytest.raises(ValueError, match=r"K a multiple of 256"):
        example().matmul.trace(*bf16_matmul_specs(128, 128, 128))
