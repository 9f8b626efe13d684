"""ldmatrix, stmatrix and mma.sync fragments against the PTX ISA's per-thread definitions."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from smalti.sim import SimError
from tests.sim_body import run_body

LANE = np.arange(32)
G, T = LANE // 4, LANE % 4
# Shared memory holds b16 value 1000 + i at element i (row r of matrix q: 64 q + 8 r + col).
FILL = """  shl.b32 %r5, %r0, 1;
  mov.u32 %r6, smem;
  add.u32 %r6, %r6, %r5;
  add.u32 %r7, %r0, 1000;
  st.shared.u16 [%r6], %r7;
  add.u32 %r7, %r0, 1032;
  st.shared.u16 [%r6+64], %r7;
  add.u32 %r7, %r0, 1064;
  st.shared.u16 [%r6+128], %r7;
  add.u32 %r7, %r0, 1096;
  st.shared.u16 [%r6+192], %r7;
  add.u32 %r7, %r0, 1128;
  st.shared.u16 [%r6+256], %r7;
  add.u32 %r7, %r0, 1160;
  st.shared.u16 [%r6+320], %r7;
  add.u32 %r7, %r0, 1192;
  st.shared.u16 [%r6+384], %r7;
  add.u32 %r7, %r0, 1224;
  st.shared.u16 [%r6+448], %r7;
  bar.sync 0;
"""


@pytest.mark.parametrize("count", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_fragments(count, trans):
    # Lane l supplies the address of row l % 8 of matrix l // 8 (rows are 16 bytes apart).
    regs = ", ".join(f"%r{20 + i}" for i in range(count))
    body = FILL + f"""  mov.u32 %r8, smem;
  shl.b32 %r9, %r0, 4;
  add.u32 %r8, %r8, %r9;
  ldmatrix.sync.aligned.m8n8.x{count}{".trans" if trans else ""}.shared.b16 {{{regs}}}, [%r8];
"""
    out = run_body(body, np.zeros((32, 1)), count)
    for q in range(count):
        for h in range(2):
            # ISA: without .trans thread l holds row l/4, columns 2(l%4)+h of matrix q;
            # with .trans it holds row 2(l%4)+h, column l/4.
            row, col = (G, 2 * T + h) if not trans else (2 * T + h, G)
            expected = 1000 + 64 * q + 8 * row + col
            np.testing.assert_array_equal((out[:, q] >> (16 * h)) & 0xFFFF, expected)


@pytest.mark.parametrize("trans", [False, True])
def test_stmatrix_is_the_inverse_of_ldmatrix(trans):
    suffix = ".trans" if trans else ""
    body = FILL + f"""  mov.u32 %r8, smem;
  shl.b32 %r9, %r0, 4;
  add.u32 %r8, %r8, %r9;
  ldmatrix.sync.aligned.m8n8.x4{suffix}.shared.b16 {{%r30, %r31, %r32, %r33}}, [%r8];
  add.u32 %r11, %r8, 1024;
  stmatrix.sync.aligned.m8n8.x4{suffix}.shared.b16 [%r11], {{%r30, %r31, %r32, %r33}};
  bar.sync 0;
  ld.shared.u32 %r20, [%r8+1024];
  ld.shared.u32 %r21, [%r8+1028];
  ld.shared.u32 %r22, [%r8+1032];
  ld.shared.u32 %r23, [%r8+1036];
"""
    out = run_body(body, np.zeros((32, 1)), 4)
    stored = out.view(np.uint16).reshape(-1)
    np.testing.assert_array_equal(stored, 1000 + np.arange(256))


def test_ldmatrix_needs_the_whole_warp():
    body = FILL + """  setp.lt.u32 %p1, %r0, 16;
  @!%p1 bra SKIP;
  mov.u32 %r8, smem;
  ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r20}, [%r8];
SKIP:
"""
    with pytest.raises(SimError, match="all 32 lanes"):
        run_body(body, np.zeros((32, 1)), 1)


def pack(values: np.ndarray) -> np.ndarray:
    """(32, elements) narrow values -> (32, registers) b32 words, low element first."""
    raw = np.ascontiguousarray(values).view(np.uint8 if values.itemsize == 1 else np.uint16)
    return raw.view(np.uint32)


def fragments_16bit(a: np.ndarray, b: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """A (16 x k, row) and B (k x 8, col) fragments, per NOTES.md / the ISA figures."""
    a_elems = []
    for i in range(k // 2):  # k16: a0..a7, k8: a0..a3
        row = G + 8 * ((i >> 1) & 1)
        col = 2 * T + (i & 1) + 8 * (i >> 2)
        a_elems.append(a[row, col])
    b_elems = [b[2 * T + (i & 1) + 8 * (i >> 1), G] for i in range(k // 4)]
    return pack(np.stack(a_elems, axis=1)), pack(np.stack(b_elems, axis=1))


def fragments_8bit(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """m16n8k32 A (a0..a15) and B (b0..b7) fragments of 8-bit elements (ISA figures)."""
    a_elems = [a[G + 8 * (1 if 4 <= i < 8 or i >= 12 else 0), 4 * T + (i & 3) + 16 * (i >= 8)]
               for i in range(16)]
    b_elems = [b[4 * T + (i & 3) + 16 * (i >= 4), G] for i in range(8)]
    return pack(np.stack(a_elems, axis=1)), pack(np.stack(b_elems, axis=1))


def run_mma(opcode: str, a_regs: np.ndarray, b_regs: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Run one mma.sync with per-thread fragments; return D as a 16 x 8 matrix."""
    c_regs = np.stack([c[G + 8 * (i >> 1), 2 * T + (i & 1)] for i in range(4)], axis=1)
    inputs = np.concatenate([a_regs, b_regs, c_regs.astype(np.float32).view(np.uint32)], axis=1)
    na, nb = a_regs.shape[1], b_regs.shape[1]
    a_ops = ", ".join(f"%r{10 + i}" for i in range(na))
    b_ops = ", ".join(f"%r{10 + na + i}" for i in range(nb))
    c_movs = "\n".join(f"  mov.b32 %f{i}, %r{10 + na + nb + i};" for i in range(4))
    body = f"""{c_movs}
  {opcode} {{%f4, %f5, %f6, %f7}}, {{{a_ops}}}, {{{b_ops}}}, {{%f0, %f1, %f2, %f3}};
  mov.b32 %r20, %f4;
  mov.b32 %r21, %f5;
  mov.b32 %r22, %f6;
  mov.b32 %r23, %f7;"""
    out = run_body(body, inputs, 4).view(np.float32)
    d = np.zeros((16, 8), np.float32)
    for i in range(4):
        d[G + 8 * (i >> 1), 2 * T + (i & 1)] = out[:, i]
    return d


@pytest.mark.parametrize(("kind", "dtype", "k"), [("bf16", ml_dtypes.bfloat16, 16),
                                                  ("f16", np.float16, 16),
                                                  ("bf16", ml_dtypes.bfloat16, 8),
                                                  ("f16", np.float16, 8)])
def test_mma_sync_16bit(kind, dtype, k):
    rng = np.random.default_rng(k)
    a = rng.standard_normal((16, k)).astype(dtype)
    b = rng.standard_normal((k, 8)).astype(dtype)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    a_regs, b_regs = fragments_16bit(a, b, k)
    d = run_mma(f"mma.sync.aligned.m16n8k{k}.row.col.f32.{kind}.{kind}.f32", a_regs, b_regs, c)
    expected = a.astype(np.float64) @ b.astype(np.float64) + c
    np.testing.assert_array_equal(d, expected.astype(np.float32))


@pytest.mark.parametrize(("kind", "dtype"), [("e4m3", ml_dtypes.float8_e4m3fn),
                                             ("e5m2", ml_dtypes.float8_e5m2)])
def test_mma_sync_fp8(kind, dtype):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((16, 32)).astype(dtype)
    b = rng.standard_normal((32, 8)).astype(dtype)
    c = np.zeros((16, 8), np.float32)
    a_regs, b_regs = fragments_8bit(a, b)
    d = run_mma(f"mma.sync.aligned.m16n8k32.row.col.f32.{kind}.{kind}.f32", a_regs, b_regs, c)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_array_equal(d, expected.astype(np.float32))
