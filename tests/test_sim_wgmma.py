"""wgmma in the simulator against numpy: descriptors, swizzles, transposes, types, fragments.

Shared-memory operands are laid out here from the ISA's description of the canonical
layouts (core matrices of 8 rows x 16 bytes without swizzle; rows of one swizzle span,
8-row groups, the swizzle XOR on byte addresses with swizzle) and described by descriptors
encoded here from the "Matrix Descriptor Format" bit fields.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from smalti.sim import run_ptx
from tests.async_kernels import wgmma_kernel

DTYPES = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "tf32": np.float32,
          "e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}
MODE = {None: 0, 128: 1, 64: 2, 32: 3}
POLICIES = [("eager", 0), ("latest", 0), ("random", 3)]


def descriptor(start: int, lbo: int, sbo: int, span: int | None) -> int:
    """Bits 13-0 start>>4, 29-16 LBO>>4, 45-32 SBO>>4, 63-62 swizzle mode."""
    return ((start >> 4) & 0x3FFF) | (((lbo >> 4) & 0x3FFF) << 16) | (
        ((sbo >> 4) & 0x3FFF) << 32) | (MODE[span] << 62)


def swz(a: np.ndarray, span: int | None) -> np.ndarray:
    bits = {None: 0, 32: 1, 64: 3, 128: 7}[span]
    return a ^ (((a >> 7) & bits) << 4)


def place(smem: np.ndarray, offsets: np.ndarray, values: np.ndarray) -> None:
    """Write each element's bytes at its byte offset."""
    raw = np.ascontiguousarray(values).view(np.uint8).reshape(values.size, -1)
    idx = offsets.reshape(-1, 1) + np.arange(raw.shape[1])
    smem[idx] = raw


def k_major(smem, base, mat, span):
    """mat (rows x K): per 32-byte K step a descriptor; returns the descriptors."""
    rows, k_total = mat.shape
    e = mat.itemsize
    r = np.arange(rows)[:, None]
    kb = np.arange(k_total)[None, :] * e
    if span is None:  # core matrices 8 x 16 B; along K 128 B apart, 8-row groups after all K
        lbo, sbo = 128, 128 * (k_total * e // 16)
        off = (r // 8) * sbo + (kb // 16) * lbo + (r % 8) * 16 + kb % 16
        steps = [base + s * 2 * lbo for s in range(k_total * e // 32)]
    else:  # dense rows of one span (K_total * e == span), swizzled; 8-row groups 8 spans apart
        assert k_total * e == span
        lbo, sbo = 16, 8 * span
        off = r * span + kb
        steps = [base + 32 * s for s in range(span // 32)]
    place(smem, swz(base + off, span), mat)
    return [descriptor(s, lbo, sbo, span) for s in steps]


def mn_major(smem, base, mat, span):
    """mat (rows x K) stored MN-contiguous; one descriptor per 32-byte K step."""
    rows, k_total = mat.shape
    e = mat.itemsize
    mn = np.arange(rows)[:, None]
    k = np.arange(k_total)[None, :]
    k_step = 32 // e
    if span is None:  # core matrices: 8 K-rows x 16 bytes of MN; K groups LBO, MN groups SBO
        lbo, sbo = 128, 128 * (k_total // 8)
        off = (mn * e // 16) * sbo + (k // 8) * lbo + (k % 8) * 16 + (mn * e) % 16
        steps = [base + s * (k_step // 8) * lbo for s in range(k_total // k_step)]
    else:  # tiles of K rows x one span of MN, dense and swizzled; tiles LBO apart
        per = span // e
        lbo, sbo = k_total * span, 8 * span
        off = (mn // per) * lbo + k * span + (mn % per) * e
        steps = [base + s * k_step * span for s in range(k_total // k_step)]
    place(smem, swz(base + off, span), mat)
    return [descriptor(s, lbo, sbo, span) for s in steps]


def accumulator(out: np.ndarray, n: int) -> np.ndarray:
    """NOTES.md: thread t, register i -> row 16*(t//32) + (t%32)//4 + 8*((i>>1)&1),
    col 2*(t%4) + (i&1) + 8*(i>>2)."""
    frag = out.reshape(128, n // 2)
    d = np.zeros((64, n), np.float32)
    for t in range(128):
        for i in range(n // 2):
            d[16 * (t // 32) + (t % 32) // 4 + 8 * ((i >> 1) & 1),
              2 * (t % 4) + (i & 1) + 8 * (i >> 2)] = frag[t, i]
    return d


def a_fragment(a: np.ndarray) -> np.ndarray:
    """A (64 x 16 bf16) in registers: same row/col pattern as the accumulator, over k."""
    regs = np.zeros((128, 8), np.uint16)
    bits = a.view(np.uint16)
    for t in range(128):
        for i in range(8):
            regs[t, i] = bits[16 * (t // 32) + (t % 32) // 4 + 8 * ((i >> 1) & 1),
                              2 * (t % 4) + (i & 1) + 8 * (i >> 2)]
    return regs.view(np.uint32).reshape(-1)


def random_matrix(rng, shape, dtype) -> np.ndarray:
    values = rng.integers(-8, 9, size=shape) / 4.0
    if dtype == "tf32":  # exercise the ignored low mantissa bits too
        return (values + rng.random(shape) * 1e-5).astype(np.float32)
    return values.astype(DTYPES[dtype])


def run(n, types, steps, smem, **kw):
    policy = kw.pop("policy", ("eager", 0))
    a_regs = kw.pop("a_regs", np.zeros(128 * 4, np.uint32))
    d_in = kw.pop("d_in", np.zeros(128 * n // 2, np.float32))
    out = np.zeros(128 * n // 2, np.float32)
    if types.startswith(("bf16", "f16")):
        kw.setdefault("trans", (0, 0))
    ptx = wgmma_kernel(n, types, steps, smem.size, **kw)
    run_ptx(ptx, "wgmma_test", 1, 128, [smem, a_regs, d_in, out],
            async_completion=policy[0], seed=policy[1])
    return accumulator(out, n)


def expected(a, b, d0=None, sign=1.0):
    tf = lambda x: x.astype(np.float64) if x.dtype != np.float32 else (  # noqa: E731
        (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64))
    d = sign * (tf(a) @ tf(b).T)
    if d0 is not None:
        d = d + d0
    return d.astype(np.float32)


@pytest.mark.parametrize("span", [None, 32, 64, 128])
@pytest.mark.parametrize("n", [8, 64, 256])
def test_bf16_k_major(span, n):
    rng = np.random.default_rng(n + (span or 0))
    k_total = (span or 64) // 2
    a = random_matrix(rng, (64, k_total), "bf16")
    b = random_matrix(rng, (n, k_total), "bf16")
    smem = np.zeros(65536, np.uint8)
    da = k_major(smem, 0, a, span)
    db = k_major(smem, 16384, b, span)
    d = run(n, "bf16.bf16", list(zip(da, db, strict=True)), smem)
    np.testing.assert_array_equal(d, expected(a, b))


@pytest.mark.parametrize("span", [None, 128, 64])
@pytest.mark.parametrize(("trans_a", "trans_b", "n"), [(1, 0, 64), (0, 1, 128), (1, 1, 64)])
@pytest.mark.parametrize("policy", POLICIES)
def test_bf16_transposes(span, trans_a, trans_b, n, policy):
    rng = np.random.default_rng(trans_a * 2 + trans_b)
    a = random_matrix(rng, (64, 32), "bf16")
    b = random_matrix(rng, (n, 32), "bf16")
    smem = np.zeros(65536, np.uint8)
    lay_a = mn_major if trans_a else (lambda s, o, m, _: k_major(s, o, m, None))
    lay_b = mn_major if trans_b else (lambda s, o, m, _: k_major(s, o, m, None))
    da = lay_a(smem, 0, a, span)
    db = lay_b(smem, 16384, b, span)
    d = run(n, "bf16.bf16", list(zip(da, db, strict=True)), smem, trans=(trans_a, trans_b),
            policy=policy)
    np.testing.assert_array_equal(d, expected(a, b))


@pytest.mark.parametrize("trans_b", [0, 1])
def test_a_from_registers(trans_b):
    rng = np.random.default_rng(5)
    a = random_matrix(rng, (64, 16), "bf16")
    b = random_matrix(rng, (32, 16), "bf16")
    smem = np.zeros(4096, np.uint8)
    [db] = (mn_major if trans_b else k_major)(smem, 0, b, None)
    d = run(32, "bf16.bf16", [(None, db)], smem, trans=(0, trans_b), a_regs=a_fragment(a))
    np.testing.assert_array_equal(d, expected(a, b))


@pytest.mark.parametrize("types", ["f16", "tf32", "e4m3", "e5m2"])
def test_input_types(types):
    rng = np.random.default_rng(11)
    e = np.dtype(DTYPES[types]).itemsize
    k_total = 128 // e
    a = random_matrix(rng, (64, k_total), types)
    b = random_matrix(rng, (24, k_total), types)
    smem = np.zeros(32768, np.uint8)
    da = k_major(smem, 0, a, 128)
    db = k_major(smem, 16384, b, 128)
    d = run(24, f"{types}.{types}", list(zip(da, db, strict=True)), smem)
    k = 32 // e  # each instruction rounds its sum to f32 once
    want = np.zeros((64, 24), np.float32)
    for s in range(0, k_total, k):
        want = expected(a[:, s:s + k], b[:, s:s + k], want.astype(np.float64))
    np.testing.assert_array_equal(d, want)


def test_scale_d_accumulates_and_scale_a_negates():
    rng = np.random.default_rng(2)
    a = random_matrix(rng, (64, 16), "bf16")
    b = random_matrix(rng, (16, 16), "bf16")
    smem = np.zeros(8192, np.uint8)
    [da] = k_major(smem, 0, a, None)
    [db] = k_major(smem, 4096, b, None)
    d_in = rng.integers(-4, 5, 128 * 8).astype(np.float32)
    d = run(16, "bf16.bf16", [(da, db)], smem, accumulate_first=True, d_in=d_in.copy(),
            scale_ab=(-1, 1), trans=(0, 0))
    np.testing.assert_array_equal(d, expected(a, b, accumulator(d_in, 16), sign=-1.0))
