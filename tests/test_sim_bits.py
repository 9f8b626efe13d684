"""Bit and integer ops against per-element reference formulas written from the PTX ISA."""

from __future__ import annotations

import numpy as np
import pytest

from tests.sim_body import run_body

RNG = np.random.default_rng(7)
MASK32 = 0xFFFFFFFF


def words(n: int, k: int) -> np.ndarray:
    """Random u32 words mixed with edge values."""
    x = RNG.integers(0, 1 << 32, (n, k), dtype=np.uint64).astype(np.uint32)
    x[:4] = [[0] * k, [MASK32] * k, [0x80000000] * k, [1] * k]
    return x


PRMT_TABLE = {  # result bytes d.b3 d.b2 d.b1 d.b0 for selector c[1:0] = 0..3 (ISA table)
    "f4e": ["3210", "4321", "5432", "6543"], "b4e": ["5670", "6701", "7012", "0123"],
    "rc8": ["0000", "1111", "2222", "3333"], "ecl": ["3210", "3211", "3222", "3333"],
    "ecr": ["0000", "1110", "2210", "3210"], "rc16": ["1010", "3232", "1010", "3232"],
}


def prmt_reference(a: int, b: int, c: int, mode: str | None) -> int:
    source = [(a >> 8 * i) & 0xFF for i in range(4)] + [(b >> 8 * i) & 0xFF for i in range(4)]
    out = 0
    for k in range(4):
        if mode is None:
            sel = (c >> 4 * k) & 0xF
            byte = source[sel & 7]
            if sel & 8:
                byte = 0xFF if byte & 0x80 else 0
        else:
            byte = source[int(PRMT_TABLE[mode][c & 3][3 - k])]
        out |= byte << 8 * k
    return out


@pytest.mark.parametrize("mode", [None, *PRMT_TABLE])
def test_prmt(mode):
    x = words(64, 3)
    op = "prmt.b32" + (f".{mode}" if mode else "")
    out = run_body(f"  {op} %r20, %r10, %r11, %r12;", x, 1, block=64)
    expected = [prmt_reference(int(a), int(b), int(c), mode) for a, b, c in x]
    np.testing.assert_array_equal(out[:, 0], expected)


@pytest.mark.parametrize("lut", [0x00, 0xFF, 0xF0, 0xCC, 0xAA, 0x96, 0xE8, 0x3C, 0x1B])
def test_lop3(lut):
    x = words(32, 3)
    out = run_body(f"  lop3.b32 %r20, %r10, %r11, %r12, {lut:#x};", x, 1)
    for (a, b, c), d in zip(x.astype(np.int64), out[:, 0], strict=True):
        expected = 0
        for bit in range(32):
            index = ((a >> bit) & 1) << 2 | ((b >> bit) & 1) << 1 | ((c >> bit) & 1)
            expected |= ((lut >> index) & 1) << bit
        assert int(d) == expected


@pytest.mark.parametrize(("direction", "mode"), [("l", "clamp"), ("l", "wrap"), ("r", "clamp"),
                                                 ("r", "wrap")])
def test_shf(direction, mode):
    x = words(64, 3)
    x[:, 2] = np.arange(64) % 40 + (np.arange(64) >= 60) * 1000
    out = run_body(f"  shf.{direction}.{mode}.b32 %r20, %r10, %r11, %r12;", x, 1, block=64)
    for (a, b, c), d in zip(x.astype(np.int64), out[:, 0], strict=True):
        n = min(int(c), 32) if mode == "clamp" else int(c) & 31
        both = (int(b) << 32) | int(a)
        expected = (both << n) >> 32 if direction == "l" else both >> n
        assert int(d) == expected & MASK32


def bfe_reference(a: int, pos: int, length: int, signed: bool) -> int:
    pos, length = pos & 0xFF, length & 0xFF
    sbit = (a >> min(pos + length - 1, 31)) & 1 if signed and length > 0 else 0
    return sum(((a >> (pos + i)) & 1 if i < length and pos + i <= 31 else sbit) << i
               for i in range(32))


@pytest.mark.parametrize("ptx_type", ["u32", "s32"])
def test_bfe(ptx_type):
    x = words(96, 3)
    x[:, 1] = RNG.integers(0, 40, 96)
    x[:, 2] = RNG.integers(0, 40, 96)
    x[-1, 1:] = [0x105, 0x203]  # only the low bytes of position and length count
    out = run_body(f"  bfe.{ptx_type} %r20, %r10, %r11, %r12;", x, 1, block=96)
    expected = [bfe_reference(int(a), int(p), int(n), ptx_type == "s32") for a, p, n in x]
    np.testing.assert_array_equal(out[:, 0], expected)


def test_bfi():
    x = words(96, 4)
    x[:, 2] = RNG.integers(0, 40, 96)
    x[:, 3] = RNG.integers(0, 40, 96)
    out = run_body("  bfi.b32 %r20, %r10, %r11, %r12, %r13;", x, 1, block=96)
    for (a, b, pos, length), f in zip(x.astype(np.int64), out[:, 0], strict=True):
        expected = int(b)
        for i in range(int(length) & 0xFF):
            if (int(pos) & 0xFF) + i <= 31:
                bit = (int(a) >> i) & 1
                at = (int(pos) & 0xFF) + i
                expected = (expected & ~(1 << at)) | (bit << at)
        assert int(f) == expected


def test_popc_clz_brev_bfind():
    x = words(64, 1)
    body = """  popc.b32 %r20, %r10;
  clz.b32 %r21, %r10;
  brev.b32 %r22, %r10;
  bfind.u32 %r23, %r10;
  bfind.s32 %r24, %r10;
  bfind.shiftamt.u32 %r25, %r10;"""
    out = run_body(body, x, 6, block=64)
    for (a,), row in zip(x.astype(np.int64), out.astype(np.int64), strict=True):
        a = int(a)
        signed = a - (1 << 32) if a >> 31 else a
        magnitude = ~signed if signed < 0 else signed
        top = a.bit_length() - 1
        assert list(row) == [
            bin(a).count("1"), 32 - a.bit_length(), int(f"{a:032b}"[::-1], 2),
            MASK32 if a == 0 else top, MASK32 if magnitude == 0 else magnitude.bit_length() - 1,
            MASK32 if a == 0 else 31 - top]


def test_carry_chain_adds_and_subtracts_96_bit_numbers():
    x = words(64, 6)
    body = """  add.cc.u32 %r20, %r10, %r13;
  addc.cc.u32 %r21, %r11, %r14;
  addc.u32 %r22, %r12, %r15;
  sub.cc.u32 %r23, %r10, %r13;
  subc.cc.u32 %r24, %r11, %r14;
  subc.u32 %r25, %r12, %r15;
  mad.lo.cc.u32 %r26, %r10, %r11, %r12;
  madc.hi.u32 %r27, %r10, %r11, 0;"""
    out = run_body(body, x, 8, block=64)
    for row, res in zip(x.astype(object), out.astype(object), strict=True):
        a = row[0] | row[1] << 32 | row[2] << 64
        b = row[3] | row[4] << 32 | row[5] << 64
        total, diff = (a + b) % (1 << 96), (a - b) % (1 << 96)
        assert res[0] | res[1] << 32 | res[2] << 64 == total
        assert res[3] | res[4] << 32 | res[5] << 64 == diff
        wide = row[0] * row[1] + row[2]  # the 64-bit product plus c, via lo.cc then hi+carry
        assert res[6] | res[7] << 32 == wide % (1 << 64)


def test_testp_copysign_and_relu():
    values = np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40,
                       1.17549435e-38, 3.0, -3.0], np.float32)
    signs = np.array([-1.0, 1.0] * 6, np.float32)
    x = np.stack([values.view(np.uint32), signs.view(np.uint32)], axis=1)
    x = np.concatenate([x, np.zeros((32 - len(values), 2), np.uint32)])
    body = """  mov.b32 %f1, %r10;
  mov.b32 %f2, %r11;
  testp.finite.f32 %p1, %f1;
  selp.u32 %r20, 1, 0, %p1;
  testp.infinite.f32 %p1, %f1;
  selp.u32 %r21, 1, 0, %p1;
  testp.notanumber.f32 %p1, %f1;
  selp.u32 %r22, 1, 0, %p1;
  testp.normal.f32 %p1, %f1;
  selp.u32 %r23, 1, 0, %p1;
  testp.subnormal.f32 %p1, %f1;
  selp.u32 %r24, 1, 0, %p1;
  copysign.f32 %f3, %f2, %f1;
  mov.b32 %r25, %f3;
  max.relu.s32 %r26, %r10, %r11;
  min.relu.s32 %r27, %r10, %r11;"""
    out = run_body(body, x, 8)[: len(values)]
    v = values.astype(np.float64)
    tiny = np.finfo(np.float32).tiny
    np.testing.assert_array_equal(out[:, 0], np.isfinite(v))
    np.testing.assert_array_equal(out[:, 1], np.isinf(v))
    np.testing.assert_array_equal(out[:, 2], np.isnan(v))
    np.testing.assert_array_equal(out[:, 3], np.isfinite(v) & (np.abs(v) >= tiny))
    np.testing.assert_array_equal(out[:, 4], (v != 0) & (np.abs(v) < tiny))
    np.testing.assert_array_equal(out[:, 5], np.copysign(values, signs).view(np.uint32))
    ints = x[: len(values)].view(np.int32)
    np.testing.assert_array_equal(out[:, 6].view(np.int32),
                                  np.maximum(ints.max(axis=1), 0))
    np.testing.assert_array_equal(out[:, 7].view(np.int32), np.maximum(ints.min(axis=1), 0))


def test_lanemask_specials():
    body = """  mov.u32 %r20, %lanemask_eq;
  mov.u32 %r21, %lanemask_lt;
  mov.u32 %r22, %lanemask_le;
  mov.u32 %r23, %lanemask_gt;
  mov.u32 %r24, %lanemask_ge;
  mov.u32 %r25, %laneid;"""
    out = run_body(body, np.zeros((64, 1)), 6, block=64).astype(np.int64)
    lane = np.arange(64) % 32
    np.testing.assert_array_equal(out[:, 5], lane)
    np.testing.assert_array_equal(out[:, 0], 1 << lane)
    np.testing.assert_array_equal(out[:, 1], (1 << lane) - 1)
    np.testing.assert_array_equal(out[:, 2], (2 << lane) - 1)
    np.testing.assert_array_equal(out[:, 3], MASK32 & ~((2 << lane) - 1))
    np.testing.assert_array_equal(out[:, 4], MASK32 & ~((1 << lane) - 1))
