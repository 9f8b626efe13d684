"""The warp-specialised reference matmul (examples/matmul_128x256x64_ws.mlir): one producer
and two consumer warpgroups with register budgets; ptxas, SASS, simulator numbers, and
hazards planted by removing one wait or fence from the generated PTX."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from smalti.ptx.toolchain import compile_ptx, disassemble, sass_opcode_counts
from smalti.runtime import compile_mlir, run_simulated
from smalti.runtime.simulate import check_arguments
from smalti.runtime.tensor_maps import sim_tensor_maps
from smalti.sim import SimError, run_ptx
from tests.test_matmul import _assert_within_one_ulp, _inputs

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "matmul_128x256x64_ws.mlir"


@cache
def compiled():
    return compile_mlir(EXAMPLE.read_text(), EXAMPLE.name)


def test_ptxas_honours_the_budgets_without_spills_or_warnings():
    result = compile_ptx(compiled().ptx, arch="sm_90a")
    assert "0 bytes spill stores, 0 bytes spill loads" in result.log
    assert not re.search(r"C75\d\d", result.log), result.log
    assert re.search(r"Used \d+ registers", result.log)
    counts = sass_opcode_counts(disassemble(result.cubin))
    for opcode in ("HGMMA", "UTMALDG", "UTMASTG"):
        assert any(k.startswith(opcode) for k in counts), opcode


def test_roles_branch_on_the_warpgroup_index_and_set_budgets():
    ptx = compiled().ptx
    assert ".maxntid 384, 1, 1\n.minnctapersm 1\n" in ptx
    roles = re.findall(r"setp\.eq\.u32 %p\d+, %r\d+, (\d);\n\t@!%p\d+ bra \$role_end_\d+;\n"
                       r"\tsetmaxnreg\.(inc|dec)\.sync\.aligned\.u32 (\d+);", ptx)
    assert roles == [("0", "dec", "40"), ("1", "inc", "232"), ("2", "inc", "232")]
    # Each consumer meets on its own named barrier (1 + warpgroup) before its TMA store.
    assert re.findall(r"bar\.sync (\d+), 128;", ptx) == ["2", "2", "3", "3"]


def test_signature_and_recorded_budgets():
    signature = compiled().signature()
    assert signature.block == (384, 1, 1) and signature.grid == (4, 2, 1)
    assert signature.smem_bytes == 197632 <= 227 * 1024
    boxes = {(r.arg, r.box, r.swizzle) for r in signature.tensor_maps}
    assert boxes == {(0, (64, 64), 128), (1, (64, 64), 128), (2, (64, 64), 128)}


@pytest.mark.parametrize("policy", ["eager", "latest", "random"])
def test_simulator_matches_numpy_512(policy):
    a, b, c = _inputs()
    out = run_simulated(compiled(), a, b, c, async_completion=policy, seed=3)[-1]
    _assert_within_one_ulp(out, a, b)


def _run_ptx(ptx: str) -> None:
    signature = compiled().signature()
    buffers = check_arguments(signature, _inputs())
    run_ptx(ptx, signature.name, signature.grid, signature.block,
            [*buffers, *sim_tensor_maps(signature, buffers)], signature.smem_bytes,
            async_completion="latest")


def _wait_loop(n: int) -> str:
    return rf"\$wait_{n}:\n\tmbarrier\.try_wait[^\n]*\n\t@!%p\d+ bra \$wait_{n};\n"


@pytest.mark.parametrize("pattern", [
    _wait_loop(0),   # the producer refills a stage the consumers still read
    _wait_loop(4),   # consumer 1 reads a stage before TMA filled it
    _wait_loop(9),   # consumer 2 likewise (another stage)
    r"\twgmma\.wait_group\.sync\.aligned 0;\n",   # wgmma results read early
    r"\tfence\.proxy\.async\.shared::cta;\n",      # st.shared invisible to the TMA store
], ids=["producer-empty", "consumer1-full", "consumer2-full", "wgmma", "fence"])
def test_removing_a_wait_or_fence_is_reported(pattern):
    planted, count = re.subn(pattern, "", compiled().ptx, count=1)
    assert count == 1, f"pattern {pattern!r} not found in the generated PTX"
    with pytest.raises(SimError):
        _run_ptx(planted)


def test_unplanted_ptx_runs_clean_through_the_same_harness():
    _run_ptx(compiled().ptx)
