"""CUTLASS 4.2's sm100 GEMMs, compiled by nvcc 13.0 (tests/fixtures/cutlass_sm100: the PTX as
emitted, the launch and Params struct CUTLASS's own host code built), run in the simulator and
match numpy: dense bf16 on one SM (static and cluster-launch-control tile schedulers) and on a
CTA pair (tcgen05 .cta_group::2), block-scaled MXFP8 and NVFP4 on one SM. Each computes
D = alpha * A @ B + beta * C with f32 C and D.

Tolerance (`check`): products of the inputs are exact in float64. Each tcgen05.mma sums its K
slice's products in float64 and adds them to the f32 accumulator with one rounding
(sim/ops/tcgen05_mma.py), so the K / k_mma MMAs of a tile round partial sums no larger than
S = sum_k |a_mk b_kn| (times |alpha|), each by at most 2^-24 of it; the epilogue's
alpha * acc + beta * C adds at most two roundings of terms below |alpha| S + |beta C|. Hence
|D - exact| <= (K / k_mma + 2) * 2^-24 * (|alpha| S + |beta C|) element by element.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from smalti.sim import ParamStruct, SimError, TensorMapEncodeTiled, run_ptx

FIXTURES = Path(__file__).parent / "fixtures" / "cutlass_sm100"
MARKER_SHIFT = 40  # CUTLASS's host code ran on marker addresses 0xA << 40 (A) ... 0xF << 40


@dataclass(frozen=True)
class Fixture:
    """One kernel: its PTX and what its launch needs (NAME.json, from generate.py)."""

    ptx: str
    launch: dict

    @classmethod
    def load(cls, name: str) -> Fixture:
        return cls((FIXTURES / f"{name}.ptx").read_text(),
                   json.loads((FIXTURES / f"{name}.json").read_text()))

    def params(self, tensors: dict[int, np.ndarray]) -> ParamStruct:
        """CUTLASS's Params bytes with the device addresses of `tensors` (keyed by marker
        nibble) and the tensor maps encoded as CUTLASS asked the driver to."""
        low = (1 << MARKER_SHIFT) - 1
        maps = {e["offset"]: TensorMapEncodeTiled(
            tensors[e["address"] >> MARKER_SHIFT], e["data_type"], tuple(e["global_dim"]),
            tuple(e["global_strides"]), tuple(e["box_dim"]), tuple(e["element_strides"]),
            e["interleave"], e["swizzle"], e["l2_promotion"], e["oob_fill"],
            offset=e["address"] & low) for e in self.launch["tensor_maps"]}
        pointers = {p["offset"]: tensors[p["address"] >> MARKER_SHIFT]
                    for p in self.launch["pointers"]}
        return ParamStruct(bytes.fromhex(self.launch["params_hex"]), pointers, maps)

    def run(self, tensors: dict[int, np.ndarray], every_cluster_resident: bool = False) -> None:
        """Launch on a device of `sm_count` SMs, as the host code planned: that many CTAs
        resident, the others (CLC's grid covers every tile) launching as those finish; or,
        `every_cluster_resident`, with the whole grid running at once (run_ptx's default)."""
        launch = self.launch
        resident = None if every_cluster_resident else (
            launch["sm_count"] // int(np.prod(launch["cluster"])))
        run_ptx(self.ptx, launch["kernel"], tuple(launch["grid"]), tuple(launch["block"]),
                [self.params(tensors)], launch["shared_bytes"], cluster=tuple(launch["cluster"]),
                resident_clusters=resident)


def c_and_d(fixture: Fixture, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    m, n, _ = fixture.launch["problem"]
    return rng.standard_normal((m, n)).astype(np.float32), np.zeros((m, n), np.float32)


def check(fixture: Fixture, d: np.ndarray, a: np.ndarray, bt: np.ndarray, c: np.ndarray,
          k_mma: int) -> None:
    """D against alpha * a @ bt.T + beta * c (a, bt the operands' values as float64, scales
    applied) within the rounding bound of the module docstring; k_mma: K of one MMA."""
    launch = fixture.launch
    alpha, beta = launch["alpha"], launch["beta"]
    exact = alpha * (a @ bt.T) + beta * c.astype(np.float64)
    magnitude = abs(alpha) * (np.abs(a) @ np.abs(bt).T) + np.abs(beta * c.astype(np.float64))
    bound = (a.shape[1] // k_mma + 2) * 2.0 ** -24 * magnitude
    error = np.abs(d - exact)
    worst = divmod(int(np.argmax(error - bound)), d.shape[1])
    assert (error <= bound).all(), (f"D{list(worst)} = {d[worst]} is {error[worst]:.3g} from "
                                    f"{exact[worst]}, beyond the bound {bound[worst]:.3g}")


def run_dense(fixture: Fixture, every_cluster_resident: bool = False) -> None:
    """Run a dense bf16 fixture on random operands and check D against numpy."""
    m, n, k = fixture.launch["problem"]
    rng = np.random.default_rng(16)
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)  # row-major A
    bt = rng.standard_normal((n, k)).astype(ml_dtypes.bfloat16)  # column-major B
    c, d = c_and_d(fixture, rng)
    fixture.run({0xA: a, 0xB: bt, 0xC: c, 0xD: d}, every_cluster_resident)
    check(fixture, d, a.astype(np.float64), bt.astype(np.float64), c, k_mma=16)


def test_dense_bf16_gemm_1sm() -> None:
    run_dense(Fixture.load("dense_1sm"))


def test_dense_bf16_gemm_1sm_with_cluster_launch_control() -> None:
    """CUTLASS's default sm100 tile scheduler: a grid of every tile's CTA, two resident; each
    asks `clusterlaunchcontrol.try_cancel` for a CTA that has not started and computes its
    tile instead."""
    fixture = Fixture.load("dense_1sm_clc")
    assert fixture.launch["grid"] == [2, 2, 1]  # four tiles, one CTA each
    assert "clusterlaunchcontrol.try_cancel" in fixture.ptx
    run_dense(fixture)


def test_dense_bf16_gemm_1sm_with_cluster_launch_control_and_every_cta_resident() -> None:
    """With the whole grid resident no request can cancel a CTA: each CTA's first
    try_cancel fails, and CUTLASS decodes the response's first ctaid with a
    `query_cancel.get_first_ctaid` predicated on success, so on failure it computes a next
    tile from registers nothing wrote -- unspecified values, not undefined behaviour -- and
    uses it only if the request succeeded. The simulator carries those undefined values
    through the arithmetic without a fault (sim/poison.py) and the result matches numpy."""
    fixture = Fixture.load("dense_1sm_clc")
    predicated = re.findall(r"@p1 clusterlaunchcontrol\.query_cancel\.get_first_ctaid", fixture.ptx)
    assert predicated
    run_dense(fixture, every_cluster_resident=True)


# CUTLASS's cross-CTA pipeline signals: ClusterBarrier::arrive(cta_id) on a peer's mbarrier,
# and the waits that observe them, at the ISA's default .cta scope.
REMOTE_ARRIVE = "mbarrier.arrive.shared::cluster.b64"
DEFAULT_WAIT = "mbarrier.try_wait.parity.shared::cta.b64"


def test_dense_bf16_gemm_2sm() -> None:
    """As emitted, the 2-SM kernel's epilogue in the odd CTA tells the even CTA's MMA warp the
    accumulator is free with an arrive at the default .cta scope, which establishes no
    happens-before with the wait in the other CTA; that is harmless because what it guards
    moves through the async proxy (tcgen05.ld, tcgen05.mma, TMA), never through a generic
    access the simulator would report as a race (sim/ops/mbarrier.py, sim/hazards.py)."""
    fixture = Fixture.load("dense_2sm")
    assert REMOTE_ARRIVE in fixture.ptx and DEFAULT_WAIT in fixture.ptx
    run_dense(fixture)


# The teardown handshake: the odd CTA arrives on the even CTA's barrier at smem + 336, which
# the even CTA waits on before it releases the odd CTA in turn.
HANDSHAKE_ARRIVE = ("\tmapa.shared::cluster.u32  remAddr32, %r1197, %r8;\n"
                    "\tmbarrier.arrive.shared::cluster.b64  _, [remAddr32];")
HANDSHAKE_WAIT = "mbarrier.try_wait.parity.shared::cta.b64 P1, [%r1227]"
EVEN_CTA_GOES_ON = "@%p214 bra \t$L__BB0_106;"


def _planted_handoff(scope: bool) -> str:
    """dense_2sm with a generic word handed over by the handshake: the odd CTA stores it into
    the even CTA's shared memory (past the barriers) before its arrive, the even CTA loads it
    after its wait; `scope`: that arrive and wait synchronise at .cluster scope."""
    ptx = Fixture.load("dense_2sm").ptx
    assert ptx.count(HANDSHAKE_ARRIVE) == 1 and ptx.count(EVEN_CTA_GOES_ON) == 1
    arrive = "mbarrier.arrive.release.cluster" if scope else "mbarrier.arrive"
    ptx = ptx.replace(HANDSHAKE_ARRIVE, HANDSHAKE_ARRIVE.replace(
        "\tmbarrier.arrive", f"\tst.shared::cluster.u32 [remAddr32+40], 7;\n\t{arrive}"))
    ptx = ptx.replace(EVEN_CTA_GOES_ON, EVEN_CTA_GOES_ON + "\n\t{\n\t.reg .b32 planted;\n"
                      "\tld.shared.u32 planted, [%r1227+40];\n\t}")
    if scope:
        ptx = ptx.replace(HANDSHAKE_WAIT, HANDSHAKE_WAIT.replace(".parity", ".parity.acquire.cluster"))
    return ptx


def test_dense_bf16_gemm_2sm_reports_a_planted_generic_race_between_its_ctas() -> None:
    """A generic store the default-scope handshake is meant to order before the peer's load
    is a data race, reported at the load with the store's line and the missing scope; at
    .cluster scope the same kernel runs and matches numpy."""
    fixture = Fixture.load("dense_2sm")
    ptx = _planted_handoff(scope=False)
    lines = ptx.split("\n")
    store = next(i for i, t in enumerate(lines) if "st.shared::cluster.u32 [remAddr32+40]" in t)
    with pytest.raises(SimError, match=rf"race: read .* \(another CTA's write at line "
                                       rf"{store + 1}\); the mbarrier wait at line \d+ "
                                       r"\(\.acquire\.cta\) .*\(\.release\.cta\).* arrive with "
                                       r"\.release\.cluster and wait with \.acquire\.cluster") as info:
        run_dense(Fixture(ptx, fixture.launch))
    assert "ld.shared.u32 planted" in info.value.text
    run_dense(Fixture(_planted_handoff(scope=True), fixture.launch))


def test_cutlass_2sm_kernel_uses_cta_pairs() -> None:
    """The 2-SM kernel is what its name says: pair MMAs and TMA loads over a 2x1 cluster."""
    fixture = Fixture.load("dense_2sm")
    assert fixture.launch["cluster"] == [2, 1, 1]
    assert "tcgen05.mma.cta_group::2.kind::f16" in fixture.ptx
    assert "cp.async.bulk.tensor.3d.cta_group::2" in fixture.ptx


def scale_layout(fixture: Fixture, operand: str, rows: int, k: int) -> np.ndarray:
    """Where CUTLASS's interleaved layout puts the scale of (row, K block), as its host code
    reported (rows x K / vector element offsets)."""
    vector = fixture.launch["scale_vector"]
    return np.array(fixture.launch[f"sf{operand}_offsets"], np.int64).reshape(rows, k // vector)


def scale_buffer(offsets: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """A scale-factor buffer of `size` bytes holding byte values[r, b] at offsets[r, b]."""
    buffer = np.zeros(size, np.uint8)
    buffer[offsets] = values
    assert len(np.unique(offsets)) == offsets.size
    return buffer


def scaled(values: np.ndarray, scales: np.ndarray, vector: int) -> np.ndarray:
    """values (rows x K, float64) times each K block's scale (rows x K / vector)."""
    return values * np.repeat(scales, vector, axis=1)


def test_block_scaled_mxfp8_gemm() -> None:
    """E4M3 elements, one UE8M0 scale (2^(e - 127)) per 32 elements along K."""
    fixture = Fixture.load("mxfp8_1sm")
    launch = fixture.launch
    m, n, k = launch["problem"]
    vector = launch["scale_vector"]
    assert vector == 32
    rng = np.random.default_rng(17)
    a = rng.standard_normal((m, k)).astype(ml_dtypes.float8_e4m3fn)
    bt = rng.standard_normal((n, k)).astype(ml_dtypes.float8_e4m3fn)
    sa = rng.integers(124, 131, (m, k // vector)).astype(np.uint8)  # 2^-3 .. 2^3
    sb = rng.integers(124, 131, (n, k // vector)).astype(np.uint8)
    sfa = scale_buffer(scale_layout(fixture, "a", m, k), sa, launch["sfa_size"])
    sfb = scale_buffer(scale_layout(fixture, "b", n, k), sb, launch["sfb_size"])
    c, d = c_and_d(fixture, rng)
    fixture.run({0xA: a, 0xB: bt, 0xC: c, 0xD: d, 0xE: sfa, 0xF: sfb})
    ue8m0 = lambda e: np.exp2(e.astype(np.float64) - 127)  # noqa: E731
    check(fixture, d, scaled(a.astype(np.float64), ue8m0(sa), vector),
          scaled(bt.astype(np.float64), ue8m0(sb), vector), c, k_mma=32)


def test_block_scaled_nvfp4_gemm() -> None:
    """E2M1 elements packed two to a byte (the first in the low nibble), one UE4M3 scale per
    16 elements along K."""
    fixture = Fixture.load("nvfp4_1sm")
    launch = fixture.launch
    m, n, k = launch["problem"]
    vector = launch["scale_vector"]
    assert vector == 16
    rng = np.random.default_rng(18)
    fp4 = ml_dtypes.float4_e2m1fn
    a = rng.standard_normal((m, k)).astype(fp4)
    bt = rng.standard_normal((n, k)).astype(fp4)
    ue4m3 = np.array([0.25, 0.5, 0.75, 1, 1.5, 2, 3], ml_dtypes.float8_e4m3fn)
    sa = ue4m3[rng.integers(0, ue4m3.size, (m, k // vector))]
    sb = ue4m3[rng.integers(0, ue4m3.size, (n, k // vector))]
    sfa = scale_buffer(scale_layout(fixture, "a", m, k), sa.view(np.uint8), launch["sfa_size"])
    sfb = scale_buffer(scale_layout(fixture, "b", n, k), sb.view(np.uint8), launch["sfb_size"])
    c, d = c_and_d(fixture, rng)
    fixture.run({0xA: pack_fp4(a), 0xB: pack_fp4(bt), 0xC: c, 0xD: d, 0xE: sfa, 0xF: sfb})
    check(fixture, d, scaled(a.astype(np.float64), sa.astype(np.float64), vector),
          scaled(bt.astype(np.float64), sb.astype(np.float64), vector), c, k_mma=64)


def pack_fp4(values: np.ndarray) -> np.ndarray:
    """E2M1 values (rows x K) packed two to a byte along K, the even element in the low
    nibble (rows x K / 2 bytes)."""
    nibbles = values.view(np.uint8) & 0xF
    return (nibbles[:, 0::2] | (nibbles[:, 1::2] << 4)).astype(np.uint8)


def test_fixtures_record_their_toolchain() -> None:
    """Every fixture names nvcc and CUTLASS, and its PTX targets sm_100a."""
    for path in sorted(FIXTURES.glob("*.json")):
        launch = json.loads(path.read_text())
        assert launch["cutlass"] == "4.2.0" and "13.0" in launch["nvcc"], path.name
        ptx = (FIXTURES / f"{path.stem}.ptx").read_text()
        assert re.search(r"^\.target sm_100a", ptx, re.M), path.name
