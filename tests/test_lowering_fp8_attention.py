"""FlashAttention-3's fp8 step end to end: S = Q K^T (bf16 or e4m3 wgmma into f32),
P = exp((S - rowmax S) / sqrt(d)) rounded to e4m3, relayouted from the accumulator layout to
wgmma's 8-bit A layout (`smalti.layout_cast`, shuffles in registers), O = P V with P from
registers and V e4m3 in shared memory, normalised by the row sums of the unrounded P.

f8 B operands are read K-major only, so V arrives transposed (head_dim x seq, seq
contiguous) and wgmma reads the transposed view of that tile, like K for S. Written as MLIR
and in the DSL (under jax.jit); checked against numpy with f8 rounding applied to P and V
(the kernel also writes the P it multiplied), and by ptxas: QGMMA with A in registers, no
C75xx warning, no spills.
"""

from __future__ import annotations

import re
from functools import cache

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import smalti.dsl as sd
from smalti.dialect.attributes import layout_to_text
from smalti.ptx.toolchain import compile_ptx, disassemble
from smalti.runtime import compile_mlir, run_simulated
from smalti.tiling import WGMMA_LAYOUT_8BIT

SMEM = "#gpu.address_space<workgroup>"
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
DTYPES = {"bf16": np.dtype(ml_dtypes.bfloat16), "f8E4M3FN": E4M3}
# (Q and K type, seq, head_dim)
CASES = [("bf16", 128, 64), ("f8E4M3FN", 64, 64), ("f8E4M3FN", 128, 128)]
IDS = [f"{t}-seq{s}-d{d}" for t, s, d in CASES]


def _tiles(element: str, rows: int, k: int) -> str:
    """Tile and swizzle of a (rows, k) tile: the widest swizzle span k fills."""
    size = DTYPES[element].itemsize
    span = next(s for s in (128, 64, 32) if k * size % s == 0)
    return f"#smalti.tile<[{rows}, {span // size}]>, #smalti.swizzle<{span}>"


def attention_kernel(qk: str, seq: int, d: int) -> str:
    """One 64-row block of Q against `seq` keys; writes P (as multiplied) and O."""
    f8 = "f8E4M3FN"
    size = DTYPES[qk].itemsize
    q, k, vt = f"memref<64x{d}x{qk}>", f"memref<{seq}x{d}x{qk}>", f"memref<{d}x{seq}x{f8}>"
    sq, sk = f"memref<64x{d}x{qk}, {SMEM}>", f"memref<{seq}x{d}x{qk}, {SMEM}>"
    skt, svt = f"memref<{d}x{seq}x{qk}, {SMEM}>", f"memref<{d}x{seq}x{f8}, {SMEM}>"
    sv, bars = f"memref<{seq}x{d}x{f8}, {SMEM}>", f"memref<1xi64, {SMEM}>"
    s_t, o_t, row, p_t = (f"vector<64x{seq}xf32>", f"vector<64x{d}xf32>", "vector<64xf32>",
                          f"vector<64x{seq}x{f8}>")
    a8 = f"#smalti.{layout_to_text(WGMMA_LAYOUT_8BIT)}"
    at_q, at_k = 1024, 1024 + 64 * d * size
    at_v = at_k + -(-seq * d * size // 1024) * 1024
    loaded = 64 * d * size + seq * d * size + d * seq
    return f"""
func.func @attention(%q: {q}, %k: {k}, %vt: {vt}, %p_out: memref<64x{seq}x{f8}>,
                     %out: memref<64x{d}xf32>) attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %c_q = arith.constant {at_q} : index
  %c_k = arith.constant {at_k} : index
  %c_v = arith.constant {at_v} : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> {bars}
  %sq0 = "smalti.slice_smem"(%c_q) : (index) -> {sq}
  %sq = "smalti.with_transforms"(%sq0) {{transforms = [{_tiles(qk, 64, d)}]}} : ({sq}) -> {sq}
  %sk0 = "smalti.slice_smem"(%c_k) : (index) -> {sk}
  %sk = "smalti.with_transforms"(%sk0) {{transforms = [{_tiles(qk, seq, d)}]}} : ({sk}) -> {sk}
  %skt0 = "smalti.slice_smem"(%c_k) : (index) -> {skt}
  %skt = "smalti.with_transforms"(%skt0) {{transforms = [#smalti.transpose<[1, 0]>, {_tiles(qk, seq, d)}]}} : ({skt}) -> {skt}
  %svt0 = "smalti.slice_smem"(%c_v) : (index) -> {svt}
  %svt = "smalti.with_transforms"(%svt0) {{transforms = [{_tiles(f8, d, seq)}]}} : ({svt}) -> {svt}
  %sv0 = "smalti.slice_smem"(%c_v) : (index) -> {sv}
  %sv = "smalti.with_transforms"(%sv0) {{transforms = [#smalti.transpose<[1, 0]>, {_tiles(f8, d, seq)}]}} : ({sv}) -> {sv}
  "smalti.initialize_barrier"(%bars) {{arrival_count = 1 : i64}} : ({bars}) -> ()
  "smalti.arrive_expect_tx"(%bars, %c0) {{bytes = {loaded} : i64}} : ({bars}, index) -> ()
  "smalti.async_load"(%q, %sq, %bars, %c0, %c0, %c0) : ({q}, {sq}, {bars}, index, index, index) -> ()
  "smalti.async_load"(%k, %sk, %bars, %c0, %c0, %c0) : ({k}, {sk}, {bars}, index, index, index) -> ()
  "smalti.async_load"(%vt, %svt, %bars, %c0, %c0, %c0) : ({vt}, {svt}, {bars}, index, index, index) -> ()
  "smalti.wait"(%bars, %c0, %c0) : ({bars}, index, index) -> ()
  %zs = arith.constant dense<0.0> : {s_t}
  %s = "smalti.wgmma"(%zs, %sq, %skt) : ({s_t}, {sq}, {skt}) -> {s_t}
  %ninf = arith.constant dense<0xFF800000> : {row}
  %zr = arith.constant dense<0.0> : {row}
  %m = vector.multi_reduction <maximumf>, %s, %ninf [1] : {s_t} to {row}
  %mb = "smalti.broadcast_in_dim"(%m) {{broadcast_dimensions = array<i64: 0>}} : ({row}) -> {s_t}
  %scale = arith.constant {1 / np.sqrt(d)} : f32
  %sc = vector.broadcast %scale : f32 to {s_t}
  %d0 = arith.subf %s, %mb : {s_t}
  %d1 = arith.mulf %d0, %sc : {s_t}
  %e = math.exp %d1 : {s_t}
  %l = vector.multi_reduction <add>, %e, %zr [1] : {s_t} to {row}
  %p = arith.truncf %e : {s_t} to {p_t}
  %pa = "smalti.layout_cast"(%p) {{new_layout = {a8}}} : ({p_t}) -> {p_t}
  "smalti.vector_store"(%pa, %p_out, %c0, %c0) : ({p_t}, memref<64x{seq}x{f8}>, index, index) -> ()
  %zo = arith.constant dense<0.0> : {o_t}
  %o = "smalti.wgmma"(%zo, %pa, %sv) : ({o_t}, {p_t}, {sv}) -> {o_t}
  %lb = "smalti.broadcast_in_dim"(%l) {{broadcast_dimensions = array<i64: 0>}} : ({row}) -> {o_t}
  %on = arith.divf %o, %lb : {o_t}
  "smalti.vector_store"(%on, %out, %c0, %c0) : ({o_t}, memref<64x{d}xf32>, index, index) -> ()
  return
}}
"""


@cache
def compiled(case: tuple):
    return compile_mlir(attention_kernel(*case), "attention.mlir")


def inputs(qk: str, seq: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q (64, d) and K (seq, d) of `qk`, V (seq, d) e4m3: standard normal, rounded."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((64, d)).astype(DTYPES[qk]),
            rng.standard_normal((seq, d)).astype(DTYPES[qk]),
            rng.standard_normal((seq, d)).astype(E4M3))


def exact_p(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """exp((S - rowmax S) / sqrt(d)) in float64."""
    s = q.astype(np.float64) @ k.astype(np.float64).T
    return np.exp((s - s.max(axis=1, keepdims=True)) / np.sqrt(q.shape[1]))


def near_a_tie(p: np.ndarray) -> np.ndarray:
    """Where p is so close to halfway between two e4m3 values that the kernel's f32 S and
    exp (relative error far below 2^-14) may round it either way."""
    low = p.astype(E4M3).astype(np.float64)
    step = np.where(low <= p, 1, -1)
    other = (low.astype(E4M3).view(np.uint8) + step).astype(np.uint8).view(E4M3)
    middle = (low + other.astype(np.float64)) / 2
    return np.abs(p - middle) <= 2.0**-14 * p


def check(q: np.ndarray, k: np.ndarray, v: np.ndarray, p8: np.ndarray, o: np.ndarray) -> None:
    """P as e4m3 rounds it (ties excepted), and O = P V / rowsum against that P."""
    p = exact_p(q, k)
    ties = near_a_tie(p)
    assert ties.mean() < 0.01
    expected = p.astype(E4M3)
    assert (p8.view(np.uint8) == expected.view(np.uint8))[~ties].all()
    assert (np.abs(p8.astype(np.float64) - p) <= np.abs(p) * 2.0**-4 + 2.0**-10).all()
    wide_p, wide_v = p8.astype(np.float64), v.astype(np.float64)
    rows = p.sum(axis=1, keepdims=True)
    reference = wide_p @ wide_v / rows
    bound = 2.0**-20 * (np.abs(wide_p) @ np.abs(wide_v)) / rows + 2.0**-16 * np.abs(reference)
    error = np.abs(o - reference)
    assert (error <= bound).all(), f"{int((error > bound).sum())} of {error.size} elements off"
    # tight enough to tell a permuted P (a wrong relayout) or a V read MN-major
    assert (np.abs(o - np.roll(wide_p, 1, axis=1) @ wide_v / rows) > bound).mean() > 0.9
    assert (np.abs(o - wide_p @ np.roll(wide_v, 1, axis=1) / rows) > bound).mean() > 0.9


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_mlir_attention_matches_numpy_with_f8_rounding(case):
    q, k, v = inputs(*case, seed=4)
    _, seq, d = case
    p8, o = run_simulated(compiled(case), q, k, np.ascontiguousarray(v.T),
                          np.zeros((64, seq), E4M3), np.zeros((64, d), np.float32),
                          async_completion="random", seed=1)[-2:]
    check(q, k, v, p8, o)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_ptxas_takes_p_from_registers_as_qgmma_a(case):
    qk, seq, _ = case
    ptx = compiled(case).ptx
    result = compile_ptx(ptx, arch="sm_90a")
    assert not re.search(r"C75\d\d", result.log), result.log
    assert re.search(r"\b0 bytes spill stores, 0 bytes spill loads", result.log), result.log
    sass = disassemble(result.cubin)
    register_a = re.findall(r"\bQGMMA\.\S+ R\d+, R\d+, gdesc\[", sass)
    assert len(register_a) == seq // 32, sass  # K = seq bytes of P, 32 per instruction
    s_opcode = "HGMMA" if qk == "bf16" else "QGMMA"
    assert re.search(rf"\b{s_opcode}\.\S+ R\d+, gdesc\[", sass)
    # the relayout: one shuffle per A register of a thread (seq / 8 of them), besides the
    # two butterfly steps of each of the 4 row reductions (max and sum of 2 rows)
    assert ptx.count("shfl.sync.bfly.b32") == seq // 8 + 8


def dsl_attention(qk, seq: int, d: int) -> sd.Kernel:
    """The same step in the DSL: P is cast to the 8-bit A layout with sd.layout_cast."""

    @sd.kernel(out_shape=(jax.ShapeDtypeStruct((64, seq), E4M3),
                          jax.ShapeDtypeStruct((64, d), jnp.float32)),
               smem=[sd.Barriers(1), sd.SMEM((64, d), qk), sd.SMEM((seq, d), qk),
                     sd.SMEM((d, seq), E4M3)])
    def attention(q_ref, k_ref, vt_ref, p_ref, o_ref, bars, q_smem, k_smem, vt_smem):
        bars[0].arrive_expect_tx(q_smem.nbytes + k_smem.nbytes + vt_smem.nbytes)
        sd.async_copy(q_ref, q_smem, bars[0])
        sd.async_copy(k_ref, k_smem, bars[0])
        sd.async_copy(vt_ref, vt_smem, bars[0])
        bars[0].wait(0)
        s = sd.wgmma(sd.zeros((64, seq)), q_smem, k_smem.T)
        p = sd.exp((s - s.max(axis=1)[:, None]) * float(1 / np.sqrt(d)))
        p8 = sd.layout_cast(p.astype(E4M3), WGMMA_LAYOUT_8BIT)
        p_ref[...] = p8
        o_ref[...] = sd.wgmma(sd.zeros((64, d)), p8, vt_smem.T) / p.sum(axis=1)[:, None]

    return attention


@pytest.mark.parametrize("case", [CASES[0], CASES[2]], ids=[IDS[0], IDS[2]])
def test_dsl_attention_under_jit_matches_numpy_with_f8_rounding(case):
    qk, seq, d = case
    q, k, v = inputs(*case, seed=7)
    run = jax.jit(dsl_attention(DTYPES[qk], seq, d))
    p8, o = run(q, k, np.ascontiguousarray(v.T))
    check(q, k, v, np.asarray(p8), np.asarray(o))
