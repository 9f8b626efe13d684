"""The multicast reference matmul (examples/matmul_256x128x64_multicast.mlir): clusters of two
CTAs share each B tile through TMA multicast and release pipeline stages to each other with
collective arrives; ptxas, SASS, simulator numbers, and bugs planted in the generated PTX
(a missing or misdirected release, a missing wait, an early exit); waits at CTA scope order
no generic access there, so they are no bug."""

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

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "matmul_256x128x64_multicast.mlir"
POLICIES = [("eager", 0), ("latest", 0), ("random", 3)]
RELEASE = r"\t@%p\d+ mbarrier\.arrive\.release\.cluster\.shared::cluster\.b64 _, \[%r\d+\];\n"


@cache
def compiled():
    return compile_mlir(EXAMPLE.read_text(), EXAMPLE.name)


def test_ptxas_compiles_without_spills_or_performance_warnings():
    result = compile_ptx(compiled().ptx, arch="sm_90a")
    assert "0 bytes spill stores, 0 bytes spill loads" in result.log
    assert not re.search(r"C75\d\d", result.log), result.log
    sass = disassemble(result.cubin)
    counts = sass_opcode_counts(sass)
    for opcode in ("HGMMA", "UTMALDG", "UTMASTG"):
        assert any(k.startswith(opcode) for k in counts), opcode
    # per stage: A alone, then the two boxes of this CTA's half of B, multicast
    assert len(re.findall(r"UTMALDG\.2D\.MULTICAST", sass)) == 8
    assert len(re.findall(r"UTMALDG\.2D ", sass)) == 4


def test_signature_cluster_and_tensor_maps():
    signature = compiled().signature()
    assert signature.grid == (4, 4, 1) and signature.cluster == (2, 1, 1)
    assert signature.block == (256, 1, 1)
    assert signature.smem_bytes == 132096
    boxes = {(r.arg, r.box, r.swizzle) for r in signature.tensor_maps}
    # B's box is a quarter of its tile: half the K rows (one CTA's part) by one swizzle span
    assert boxes == {(0, (128, 64), 128), (1, (32, 64), 128), (2, (128, 64), 128)}


def test_consumers_release_both_ctas_and_every_wait_acquires_cluster_wide():
    ptx = compiled().ptx
    assert ".reqnctapercluster 2, 1, 1" in ptx
    # one warpgroup meeting, then lanes 0 and 1 each release one CTA of the pair, per stage
    releases = re.findall(r"bar\.sync 2, 128;\n(?:\t[^\n]*\n)*?\t@(%p\d+) mapa\.shared::cluster"
                          r"\.u32 (%r\d+), %r\d+, (%r\d+);\n\t@\1 mbarrier\.arrive\.release"
                          r"\.cluster\.shared::cluster\.b64 _, \[\2\];", ptx)
    assert len(releases) == 4
    assert len({guard for guard, _, _ in releases}) == 1  # the peer rank is computed once
    assert len({rank for _, _, rank in releases}) == 1
    assert re.search(rf"setp\.lt\.u32 {releases[0][0]}, %r\d+, 2;", ptx)
    # the producer's empty waits and the consumer's full waits: peers signal both
    assert ptx.count("mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64") == 8
    assert ptx.count("mbarrier.try_wait") == 8


@pytest.mark.parametrize("policy, seed", POLICIES)
def test_simulator_matches_numpy_512(policy, seed):
    a, b, c = _inputs()
    out = run_simulated(compiled(), a, b, c, async_completion=policy, seed=seed)[-1]
    _assert_within_one_ulp(out, a, b)


def _run_ptx(ptx: str, policy: str = "latest", seed: int = 0) -> None:
    signature = compiled().signature()
    buffers = check_arguments(signature, _inputs())
    run_ptx(ptx, signature.name, signature.grid, signature.block,
            [*buffers, *sim_tensor_maps(signature, buffers)], signature.smem_bytes,
            async_completion=policy, seed=seed, cluster=signature.cluster)


def _planted(pattern: str, replacement: str = "") -> str:
    planted, count = re.subn(pattern, replacement, compiled().ptx, count=1)
    assert count == 1, f"pattern {pattern!r} not found in the generated PTX"
    return planted


def _wait_loop(n: int) -> str:
    return rf"\$wait_{n}:\n\tmbarrier\.try_wait[^\n]*\n\t@!%p\d+ bra \$wait_{n};\n"


def _released_to_itself() -> str:
    """The consumers' releases all map onto the CTA's own rank: each empty barrier still
    gets its two arrivals, but the peer never learns that this CTA is done with a stage."""
    ptx = compiled().ptx
    first = ptx.index("mapa.shared::cluster")
    own = re.findall(r"mov\.u32 (%r\d+), %cluster_ctarank;", ptx[:first])[-1]
    planted, count = re.subn(r"(mapa\.shared::cluster\.u32 %r\d+, %r\d+, )%r\d+;",
                             rf"\g<1>{own};", ptx)
    assert count == 4
    return planted


@pytest.mark.parametrize("policy, seed", POLICIES)
@pytest.mark.parametrize("bug, error", [
    # a stage's release (to both CTAs) is gone: the producers wait for it forever
    (lambda: _planted(RELEASE), "mbarrier deadlock"),
    # the producer refills stage 0 without waiting until both CTAs are done with it
    (lambda: _planted(_wait_loop(0)), "that the TMA load at line [0-9]+ still owns|1 arrivals"
     " on the mbarrier at shared address 0x0 whose current phase awaits only 0"),
], ids=["no-release", "no-empty-wait"])
def test_a_planted_bug_is_reported_under_every_policy(policy, seed, bug, error):
    with pytest.raises(SimError, match=error):
        _run_ptx(bug(), policy, seed)


def test_waits_at_cta_scope_order_no_generic_access_so_the_numbers_stand():
    """Waits acquiring at CTA scope do not synchronise with the peer's cluster-scope
    releases, but what those order (wgmma reads of a stage, the TMA multicast refilling it)
    moves through the async proxy, not generic accesses: no data race, and the result holds
    (sim/ops/mbarrier.py; a generic access they fail to order is a race, test_sim_cluster)."""
    ptx = compiled().ptx.replace("try_wait.parity.acquire.cluster", "try_wait.parity")
    signature = compiled().signature()
    a, b, c = _inputs()
    buffers = check_arguments(signature, (a, b, c))
    run_ptx(ptx, signature.name, signature.grid, signature.block,
            [*buffers, *sim_tensor_maps(signature, buffers)], signature.smem_bytes,
            cluster=signature.cluster)
    _assert_within_one_ulp(buffers[-1], a, b)


@pytest.mark.parametrize("bug, error", [
    # each CTA releases only itself: a producer multicasts into a stage the peer still reads
    (_released_to_itself, "that the TMA load at line [0-9]+ still owns"),
    # another stage's empty wait: the producer's next arrive_expect_tx overruns its phase
    (lambda: _planted(_wait_loop(2)), "arrivals on the mbarrier at shared address 0x10"),
    # no cluster barrier before exiting: a CTA's last release reaches a peer that has left
    (lambda: _planted(r"\tbarrier\.cluster\.arrive\.aligned;\n\tbarrier\.cluster\.wait\."
                      r"aligned;\n(\t\.loc [^\n]*\n)?\tret;", "\tret;"), "which has exited"),
], ids=["released-to-itself", "no-empty-wait-2", "no-final-cluster-barrier"])
def test_a_planted_bug_is_reported_when_the_ctas_drift_apart(bug, error):
    # under `latest`, one CTA's stage fills before its peer's: the pair runs out of step
    with pytest.raises(SimError, match=error):
        _run_ptx(bug())


@pytest.mark.parametrize("policy, seed", POLICIES)
def test_unplanted_ptx_runs_clean_through_the_same_harness(policy, seed):
    _run_ptx(compiled().ptx, policy, seed)
