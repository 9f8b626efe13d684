"""Block-scaled tcgen05.mma in the simulator: the block-scaled instruction descriptor against
its bit table, the scale factor layout in tensor memory and the scale types as tables,
hand-written sm_100a kernels (.kind::mxf8f6f4 over every element type, .kind::mxf4,
.kind::mxf4nvf4 with 2X and 4X scale vectors; scale factors brought to tensor memory by
tcgen05.cp .32x128b.warpx4) against numpy, and Triton 3.9's `tl.dot_scaled` (mxfp8, mxfp4)
compiled for sm_100 against numpy.

PTX ISA, "tcgen05.mma" (block scaling): D = (A * scale_A) @ (B * scale_B) + D, one scale
factor per block of K/N consecutive K elements (N = .scale_vec::NX). The scale factors of
row m of A lie in lane m, column col(scale_A) + m // 32; those of column n of B in lane n % 32
of each 32-lane quarter, column col(scale_B) + n // 32; the descriptor's data ID picks the
first byte of each 32-bit column.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from smalti.sim import SimError, run_ptx
from smalti.sim.ops import tcgen05_scales as scales
from smalti.sim.ops.tcgen05_descriptors import BlockScaledDescriptor
from tests.tcgen05_ptx import assembles
from tests.test_sim_tcgen05_copy import smem_descriptor, tmem_kernel

SMEM = 40960
A_BASE, B_BASE, SFA_BASE, SFB_BASE = 0, 16384, 32768, 36864
TYPE_CODE = {"e4m3": 0, "e5m2": 1, "e2m3": 3, "e3m2": 4, "e2m1": 5}
GRIDS = {  # exactly representable values of each element type
    "e4m3": [-3, -1.5, -0.25, 0, 0.5, 1, 2, 6],
    "e5m2": [-4, -1, -0.5, 0, 0.25, 1, 3, 8],
    "e2m3": [-3.5, -1.25, -0.5, 0, 0.125, 1, 2.5, 7],
    "e3m2": [-12, -1.5, -0.25, 0, 0.0625, 1, 3, 28],
    "e2m1": [-6, -1.5, -0.5, 0, 0.5, 1, 3, 4],
}
DTYPES = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2,
          "e2m3": ml_dtypes.float6_e2m3fn, "e3m2": ml_dtypes.float6_e3m2fn,
          "e2m1": ml_dtypes.float4_e2m1fn}


def block_idesc(atype: str, btype: str, n: int, *, kind: str = "mxf8f6f4", ue8m0: bool = True,
                a_id: int = 0, b_id: int = 0, m: int = 128) -> int:
    """Bits 4-5 B scale data ID, 7-9 A type, 10-12 B type, 17-22 N >> 3, 23 scale type
    (1: UE8M0), 24-28 M >> 4, 29-30 A scale data ID (.kind::mxf4*: E2M1 is type 1)."""
    code = (lambda t: 1) if kind != "mxf8f6f4" else TYPE_CODE.get
    return (b_id << 4) | (code(atype) << 7) | (code(btype) << 10) | ((n >> 3) << 17) | (
        int(ue8m0) << 23) | ((m >> 4) << 24) | (a_id << 29)


# -- tables --------------------------------------------------------------------------------

def test_block_scaled_descriptor_fields() -> None:
    # Triton 3.9's descriptors for mxfp8 128x128 tiles (K steps 0..3) and mxfp4 (steps 0, 1)
    for step, value in enumerate((0x08A00000, 0x28A00010, 0x48A00020, 0x68A00030)):
        d = BlockScaledDescriptor.decode(value, "mxf8f6f4")
        assert (d.atype, d.btype, d.m, d.n, d.scale_type) == ("e4m3", "e4m3", 128, 128, "ue8m0")
        assert (d.a_scale_id, d.b_scale_id, d.transpose_a, d.transpose_b) == (
            step, step, False, False)
    d = BlockScaledDescriptor.decode(0x48A004A0, "mxf4")
    assert (d.atype, d.btype, d.a_scale_id, d.b_scale_id) == ("e2m1", "e2m1", 2, 2)
    d = BlockScaledDescriptor.decode(block_idesc("e2m3", "e3m2", 64, ue8m0=False, a_id=3,
                                                 b_id=1), "mxf8f6f4")
    assert (d.atype, d.btype, d.n, d.scale_type, d.a_scale_id, d.b_scale_id) == (
        "e2m3", "e3m2", 64, "ue4m3", 3, 1)


def test_scale_factor_layout_table() -> None:
    """Row m of A: lane m, column m // 32; column n of B: lane 32 q + n % 32 (every quarter q),
    column n // 32 (the ISA's 4x1 data-path figures, written out row by row)."""
    lanes, columns = scales.a_cells(100, 128)
    for m in (0, 31, 32, 63, 64, 127):
        assert (lanes[m, 0], columns[m, 0]) == (m, 100 + m // 32)
    lanes, columns = scales.b_cells(8, 256)
    for q in range(4):
        for n, (lane, column) in {0: (0, 8), 31: (31, 8), 32: (0, 9), 100: (4, 11),
                                  255: (31, 15)}.items():
            assert (lanes[q, n], columns[q, n]) == (32 * q + lane, column)
    words = np.array([0x44332211], np.uint32)
    assert scales.scale_bytes(words, 0, 4).tolist() == [[0x11, 0x22, 0x33, 0x44]]
    assert scales.scale_bytes(words, 2, 2).tolist() == [[0x33, 0x44]]
    assert scales.scale_bytes(words, 3, 1).tolist() == [[0x44]]


def test_scale_types_and_vector_sizes() -> None:
    e8 = scales.scale_values(np.array([127, 128, 0, 254, 255], np.uint8), "ue8m0")
    assert e8[:4].tolist() == [1.0, 2.0, 2.0 ** -127, 2.0 ** 127] and np.isnan(e8[4])
    e4 = scales.scale_values(np.array([0x38, 0x40, 0x01, 0x7E], np.uint8), "ue4m3")
    assert e4.tolist() == [1.0, 2.0, 2.0 ** -9, 448.0]
    assert scales.vectors("mxf8f6f4", None) == 1 and scales.vectors("mxf8f6f4", "block32") == 1
    assert scales.vectors("mxf4", None) == 2 and scales.vectors("mxf4", "block32") == 2
    assert scales.vectors("mxf4nvf4", "block16") == 4
    assert scales.vectors("mxf4nvf4", "scale_vec::2X") == 2
    for kind, modifier in (("mxf8f6f4", "scale_vec::2X"), ("mxf4", "block16"),
                           ("mxf4nvf4", "scale_vec::1X")):
        with pytest.raises(ValueError):
            scales.vectors(kind, modifier)
    # .b4x16_p64: 16 E2M1 in 8 bytes (element j at bits 4j), 8 bytes of padding
    group = np.zeros((1, 32), np.uint8)
    group[0, 0], group[0, 7], group[0, 8:16] = 0x2F, 0x70, 0xFF  # padding is ignored
    values = scales.element_values(group, "e2m1", "mxf8f6f4")
    assert values[0, :2].tolist() == [-6.0, 1.0] and values[0, 15] == 6.0
    assert not values[0, 2:15].any() and not values[0, 16:].any()
    # .b6x16_p32: 16 E2M3 in 12 bytes (element j at bits 6j), 4 bytes of padding
    group = np.zeros((1, 32), np.uint8)
    group[0, 0], group[0, 1], group[0, 12:16] = 0xFF, 0x07, 0xFF  # 0x3F (-7.5), 0x1F (7.5)
    values = scales.element_values(group, "e2m3", "mxf8f6f4")
    assert values[0, :3].tolist() == [-7.5, 7.5, 0.0] and not values[0, 3:].any()
    # .kind::mxf4 packs two E2M1 to a byte, the first in the low nibble
    assert scales.element_values(np.array([[0x2F]], np.uint8), "e2m1", "mxf4").tolist() == [
        [-6.0, 1.0]]


# -- hand-written kernels ------------------------------------------------------------------

def k_major(image: np.ndarray, base: int, raw: np.ndarray) -> list[int]:
    """Rows of bytes (rows x 32 * steps) K-major without swizzle: 8-row core matrices of 16
    bytes, K chunks LBO = 128 apart, 8-row groups SBO apart; one descriptor per 32 bytes."""
    rows, width = raw.shape
    r, c = np.arange(rows)[:, None], np.arange(width)[None, :]
    sbo = 128 * (width // 16)
    image[base + (r % 8) * 16 + (r // 8) * sbo + (c // 16) * 128 + c % 16] = raw
    return [smem_descriptor(base + 256 * s, 128, sbo) for s in range(width // 32)]


def encode(values: np.ndarray, itype: str, kind: str) -> np.ndarray:
    """Bytes (rows x 32 * steps) of element values as shared memory holds them."""
    bits = values.astype(DTYPES[itype]).view(np.uint8)
    if kind != "mxf8f6f4":
        return (bits[:, 0::2] & 0x0F) | ((bits[:, 1::2] & 0x0F) << 4)
    if itype in ("e2m1", "e2m3", "e3m2"):  # 16 per 16 bytes: packed from bit 0, padded
        width = 4 if itype == "e2m1" else 6
        rows, k = bits.shape
        fields = (bits.reshape(rows, k // 16, 16, 1) >> np.arange(width, dtype=np.uint8)) & 1
        packed = np.packbits(fields.reshape(rows, k // 16, 16 * width), axis=-1,
                             bitorder="little")
        out = np.zeros((rows, k // 16, 16), np.uint8)
        out[..., :2 * width] = packed
        return out.reshape(rows, k)
    return bits


def scale_block(rows: int, factors: np.ndarray) -> np.ndarray:
    """The 512-byte blocks tcgen05.cp .32x128b.warpx4 copies (one per 4 scale factors of each
    row): byte 16 j + 4 c + s of block g holds factor 4 g + s of row 32 c + j."""
    groups = factors.shape[1] // 4
    out = np.zeros((groups, 32, 16), np.uint8)
    for g in range(groups):
        for row in range(rows):
            out[g, row % 32, 4 * (row // 32):4 * (row // 32) + 4] = factors[row, 4 * g:4 * g + 4]
    return out.reshape(groups, 512)


def scaled_kernel(kind: str, modifier: str, steps: int, count: int) -> str:
    """Thread 0: tcgen05.cp the scale factor blocks (A to columns 256 + 4 g, B to 320 + 4 g),
    then `steps` block-scaled MMAs (A, B descriptors from descs after the blocks' ones)."""
    groups = steps * count // 4 or 1
    body = []
    for g in range(groups):
        body.append(f"""  ld.global.u64 %rd20, [%rd11+{16 * g}];
  add.u32 %r20, %r9, {256 + 4 * g};
  tcgen05.cp.cta_group::1.32x128b.warpx4 [%r20], %rd20;
  ld.global.u64 %rd20, [%rd11+{16 * g + 8}];
  add.u32 %r20, %r9, {320 + 4 * g};
  tcgen05.cp.cta_group::1.32x128b.warpx4 [%r20], %rd20;""")
    for s in range(steps):
        g = s * count // 4
        first = 16 * groups + 16 * s
        body.append(f"""  ld.global.u64 %rd21, [%rd11+{first}];
  ld.global.u64 %rd22, [%rd11+{first + 8}];
  ld.global.u32 %r22, [%rd13+{4 * s}];
  add.u32 %r23, %r9, {256 + 4 * g};
  add.u32 %r24, %r9, {320 + 4 * g};
  setp.ne.u32 %p3, {s}, 0;
  tcgen05.mma.cta_group::1.kind::{kind}.block_scale{modifier} [%r9], %rd21, %rd22, %r22, [%r23], [%r24], %p3;""")
    body.insert(0, "  ld.param.u64 %rd13, [idescs];")
    return "\n".join(body)


CASES = [  # kind, modifier, A type, B type, scale type, N
    ("mxf8f6f4", ".scale_vec::1X", "e4m3", "e4m3", "ue8m0", 128),
    ("mxf8f6f4", ".block32", "e5m2", "e4m3", "ue8m0", 64),
    ("mxf8f6f4", "", "e2m3", "e3m2", "ue8m0", 64),
    ("mxf8f6f4", ".scale_vec::1X", "e2m1", "e4m3", "ue8m0", 128),
    ("mxf8f6f4", ".scale_vec::1X", "e3m2", "e2m1", "ue8m0", 64),
    ("mxf4", ".scale_vec::2X", "e2m1", "e2m1", "ue8m0", 128),
    ("mxf4", "", "e2m1", "e2m1", "ue8m0", 64),
    ("mxf4nvf4", ".scale_vec::2X", "e2m1", "e2m1", "ue8m0", 64),
    ("mxf4nvf4", ".scale_vec::4X", "e2m1", "e2m1", "ue4m3", 128),
    ("mxf4nvf4", ".block16", "e2m1", "e2m1", "ue8m0", 64),
]


def scaled_case(kind: str, modifier: str, atype: str, btype: str, scale_type: str, n: int,
                seed: int = 0):
    count = scales.vectors(kind, modifier.lstrip(".") or None)
    k_step = scales.k_of(kind)
    steps = max(1, 4 // count) * (2 if count == 4 else 1)  # two groups of four for 4X
    k = k_step * steps
    rng = np.random.default_rng(seed)
    a = rng.choice(GRIDS[atype], (128, k))
    b = rng.choice(GRIDS[btype], (n, k))
    factors = steps * count
    if scale_type == "ue8m0":
        sa = rng.integers(124, 131, (128, factors)).astype(np.uint8)
        sb = rng.integers(124, 131, (n, factors)).astype(np.uint8)
    else:
        sa = np.array([0x30, 0x38, 0x3C, 0x40, 0x44], np.uint8)[rng.integers(0, 5, (128, factors))]
        sb = np.array([0x30, 0x38, 0x3C, 0x40, 0x44], np.uint8)[rng.integers(0, 5, (n, factors))]
    image = np.zeros(SMEM, np.uint8)
    a_descs = k_major(image, A_BASE, encode(a, atype, kind))
    b_descs = k_major(image, B_BASE, encode(b, btype, kind))
    sfa, sfb = scale_block(128, sa), scale_block(n, sb)
    descs = []
    for g in range(sfa.shape[0]):
        image[SFA_BASE + 512 * g:SFA_BASE + 512 * (g + 1)] = sfa[g]
        image[SFB_BASE + 512 * g:SFB_BASE + 512 * (g + 1)] = sfb[g]
        descs += [smem_descriptor(SFA_BASE + 512 * g, 0, 128),
                  smem_descriptor(SFB_BASE + 512 * g, 0, 128)]
    descs += [v for pair in zip(a_descs, b_descs, strict=True) for v in pair]
    idescs = [block_idesc(atype, btype, n, kind=kind, ue8m0=scale_type == "ue8m0",
                          a_id=(s * count) % 4, b_id=(s * count) % 4) for s in range(steps)]
    block = k // factors
    scale_a = np.repeat(scales.scale_values(sa, scale_type), block, axis=1)
    scale_b = np.repeat(scales.scale_values(sb, scale_type), block, axis=1)
    expected = np.zeros((128, n), np.float32)  # each MMA: exact, then rounded to f32 once
    for s in range(steps):
        part = slice(s * k_step, (s + 1) * k_step)
        expected = (expected + (a[:, part] * scale_a[:, part]) @ (b[:, part] * scale_b[:, part]).T
                    ).astype(np.float32)
    ptx = tmem_kernel(scaled_kernel(kind, modifier, steps, count), ncols=n,
                      smem_bytes=SMEM, params=", .param .u64 idescs")
    return ptx, image, descs, idescs, expected


@pytest.mark.parametrize(("kind", "modifier", "atype", "btype", "scale_type", "n"), CASES)
@pytest.mark.parametrize("policy", ["eager", "latest"])
def test_block_scaled_mma_matches_numpy(kind: str, modifier: str, atype: str, btype: str,
                                        scale_type: str, n: int, policy: str) -> None:
    ptx, image, descs, idescs, expected = scaled_case(kind, modifier, atype, btype,
                                                      scale_type, n)
    assembles(ptx)
    out = np.zeros((128, n), np.float32)
    run_ptx(ptx, "tmem", 1, 128, [image, np.array(descs, np.uint64), out,
                                  np.array(idescs, np.uint32)], async_completion=policy)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize(("change", "match"), [
    (lambda d: d & ~(1 << 23), "takes UE8M0 scale factors"),
    (lambda d: d | (1 << 29), "A's scale factor data ID 1"),
    (lambda d: d | (1 << 15), "K-major"),
])
def test_block_scaled_faults(change, match: str) -> None:
    ptx, image, descs, idescs, _ = scaled_case("mxf4", ".scale_vec::2X", "e2m1", "e2m1",
                                               "ue8m0", 64)
    with pytest.raises(SimError, match=match):
        run_ptx(ptx, "tmem", 1, 128, [image, np.array(descs, np.uint64),
                                      np.zeros((128, 64), np.float32),
                                      np.array([change(d) for d in idescs], np.uint32)])


# -- Triton 3.9's tl.dot_scaled for sm_100 -------------------------------------------------

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "tcgen05"


def triton_kernel(name: str) -> tuple[str, dict]:
    """Triton's PTX for `name`: compiled now when Triton is importable, else the fixture."""
    if importlib.util.find_spec("triton") is not None:
        sys.path.insert(0, str(FIXTURES))
        try:
            import generate_triton
        finally:
            sys.path.remove(str(FIXTURES))
        return generate_triton.compile_one(name.removeprefix("triton_"))
    facts = json.loads((FIXTURES / f"{name}.json").read_text())
    return (FIXTURES / f"{name}.ptx").read_text(), facts


@pytest.mark.parametrize("name", ["triton_scaled_mxfp8", "triton_scaled_mxfp4",
                                  "triton_scaled_mxfp8_mxfp4"])
@pytest.mark.parametrize("policy", ["eager", "latest", "random"])
def test_triton_dot_scaled_matches_numpy(name: str, policy: str) -> None:
    ptx, facts = triton_kernel(name)
    assert ".block_scale" in ptx
    assembles(ptx)
    m, n, k = 256, 128, 2 * facts["BK"]
    rng = np.random.default_rng(11)
    values, stored = [], []
    for fmt, rows in ((facts["a_format"], m), (facts["b_format"], n)):
        vals = rng.choice(GRIDS[fmt], (rows, k)).astype(DTYPES[fmt])
        values.append(vals)  # e2m1: two to a byte along K, the first in the low nibble
        stored.append(encode(vals, fmt, "mxf4") if fmt == "e2m1" else vals)
    sa = rng.integers(122, 133, (m, k // 32)).astype(np.uint8)
    sb = rng.integers(122, 133, (n, k // 32)).astype(np.uint8)
    c = np.zeros((m, n), np.float32)
    scratch = [np.zeros(16, np.uint8), np.zeros(16, np.uint8)]
    run_ptx(ptx, "scaled_matmul", (m // facts["BM"], n // facts["BN"], 1), facts["threads"],
            [*stored, sa, sb, c, np.int32(m), np.int32(n), np.int32(k), *scratch],
            shared_bytes=facts["shared"], async_completion=policy, seed=5)
    scale_a = np.repeat(scales.scale_values(sa, "ue8m0"), 32, axis=1)
    scale_b = np.repeat(scales.scale_values(sb, "ue8m0"), 32, axis=1)
    expected = (values[0].astype(np.float64) * scale_a) @ (
        values[1].astype(np.float64) * scale_b).T
    # D is rounded to f32 after every MMA (4 or 2 per K block of 128): f32 rounding only
    np.testing.assert_allclose(c, expected, rtol=0, atol=1e-6 * np.abs(expected).max())


@pytest.mark.parametrize(("atype", "btype"), [("e2m1", "e3m2"), ("e2m3", "e4m3"),
                                              ("e5m2", "e2m1")])
def test_f8f6f4_sub_byte_types_without_scales(atype: str, btype: str) -> None:
    """.kind::f8f6f4 reads 6- and 4-bit operands in the same padded groups (no scales)."""
    n, steps = 64, 2
    rng = np.random.default_rng(5)
    a = rng.choice(GRIDS[atype], (128, 32 * steps))
    b = rng.choice(GRIDS[btype], (n, 32 * steps))
    image = np.zeros(SMEM, np.uint8)
    a_descs = k_major(image, A_BASE, encode(a, atype, "mxf8f6f4"))
    b_descs = k_major(image, B_BASE, encode(b, btype, "mxf8f6f4"))
    descs = [v for pair in zip(a_descs, b_descs, strict=True) for v in pair]
    idesc = (1 << 4) | (TYPE_CODE[atype] << 7) | (TYPE_CODE[btype] << 10) | (
        (n >> 3) << 17) | ((128 >> 4) << 24)
    body = "\n".join(f"""  ld.global.u64 %rd21, [%rd11+{16 * s}];
  ld.global.u64 %rd22, [%rd11+{16 * s + 8}];
  mov.u32 %r22, {idesc};
  setp.ne.u32 %p3, {s}, 0;
  tcgen05.mma.cta_group::1.kind::f8f6f4 [%r9], %rd21, %rd22, %r22, %p3;""" for s in range(steps))
    ptx = tmem_kernel(body, ncols=n, smem_bytes=SMEM)
    assembles(ptx)
    out = np.zeros((128, n), np.float32)
    run_ptx(ptx, "tmem", 1, 128, [image, np.array(descs, np.uint64), out])
    expected = np.zeros((128, n), np.float32)
    for s in range(steps):
        part = slice(32 * s, 32 * (s + 1))
        expected = (expected + a[:, part] @ b[:, part].T).astype(np.float32)
    np.testing.assert_array_equal(out, expected)


def with_scale_bytes(ptx: str, ids: list[int]) -> str:
    """Step s's scale-factor TMEM addresses with ids[s] in bits 31-30 (CUTLASS's addressing)."""
    for s, ident in enumerate(ids):
        step = f"  setp.ne.u32 %p3, {s}, 0;"
        assert ptx.count(step) == 1
        ptx = ptx.replace(step, f"  or.b32 %r23, %r23, {ident << 30};\n"
                                f"  or.b32 %r24, %r24, {ident << 30};\n{step}")
    return ptx


def test_scale_addresses_may_carry_their_byte_in_bits_31_30() -> None:
    """CUTLASS puts the byte of the 32-bit column its scales start at in bits 31-30 of the
    scale-factor TMEM addresses as well as in the instruction descriptor's data IDs; the
    lane is bits 29-16. An address whose byte disagrees with the data ID is reported."""
    ptx, image, descs, idescs, expected = scaled_case("mxf8f6f4", ".scale_vec::1X", "e4m3",
                                                      "e4m3", "ue8m0", 128)
    args = [image, np.array(descs, np.uint64), None, np.array(idescs, np.uint32)]
    marked = with_scale_bytes(ptx, [0, 1, 2, 3])
    assembles(marked)
    out = args[2] = np.zeros((128, 128), np.float32)
    run_ptx(marked, "tmem", 1, 128, args)
    np.testing.assert_array_equal(out, expected)
    args[2] = np.zeros((128, 128), np.float32)
    with pytest.raises(SimError, match="scale factors of A are addressed at byte 2 of their "
                                       "column, but the instruction descriptor's data ID is 1"):
        run_ptx(with_scale_bytes(ptx, [0, 2, 2, 3]), "tmem", 1, 128, args)
