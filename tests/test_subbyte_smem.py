"""4-bit shared memory (i4, f4E2M1FN packed two per byte): sizes, transforms measured in
bytes (a 128-byte swizzled row holds 256 elements), TMA loads and stores of 4-bit tiles
(maps over bytes: the innermost coordinate halves), expect_tx byte counts, and tcgen05_mma
.kind::mxf4 / .kind::mxf4nvf4 reading packed K-major operands through sm_100 descriptors,
run in the simulator against numpy and assembled by ptxas for sm_100a."""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from smalti.dialect import DiagnosticError
from smalti.runtime import compile_mlir
from smalti.runtime.simulate import run_simulated
from smalti.tiling import SwizzleTransform, TileTransform, physical_address
from smalti.tiling.smem import element_size, tma_incompatibility
from tests.test_lowering_tcgen05 import SCALE_BYTES, SCALE_ROWS, _scale_blocks

SMEM = "#gpu.address_space<workgroup>"
BARS = f"memref<1xi64, {SMEM}>"
FOUR_BIT = {"f4E2M1FN": ml_dtypes.float4_e2m1fn, "i4": ml_dtypes.int4}
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


def _smem(shape: tuple[int, ...], element: str) -> str:
    return f"memref<{'x'.join(map(str, shape))}x{element}, {SMEM}>"


def _gmem(shape: tuple[int, ...], element: str) -> str:
    return f"memref<{'x'.join(map(str, shape))}x{element}>"


def _codes(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(0, 16, shape).astype(np.uint8)


# -- transforms in bytes ---------------------------------------------------------------------

def test_swizzled_row_of_four_bit_elements_spans_256():
    half = element_size(4)
    assert half == Fraction(1, 2) and element_size(1) == 1 and element_size(8) == 1
    transforms = (TileTransform((8, 256)), SwizzleTransform(128))
    address = physical_address(transforms, (16, 512), half)
    # element (r, c) of tile (r // 8, c // 256) lies in byte c % 256 // 2 of its 128-byte
    # row, 16-byte chunk XOR r % 8; tiles are 1024 bytes, row-major
    r, c = np.indices((16, 512))
    chunk = ((c % 256) // 32) ^ (r % 8)
    expected = ((r // 8) * 2 + c // 256) * 1024 + (r % 8) * 128 + chunk * 16 + (c % 32) // 2
    np.testing.assert_array_equal(address, expected)
    assert tma_incompatibility(transforms, half, (16, 512)) is None
    assert "128-byte swizzle" in tma_incompatibility(
        (TileTransform((8, 128)), SwizzleTransform(128)), half, (16, 512))


# -- TMA round trip ---------------------------------------------------------------------------

def roundtrip_kernel(element: str, rows: int, cols: int, swizzle: int) -> str:
    """Each of 2 blocks TMA-loads its `rows` x `cols` half (columns from a run-time block
    offset) into swizzled tiles and stores it back out."""
    tile = swizzle * 2
    g, s = _gmem((rows, 2 * cols), element), _smem((rows, cols), element)
    return f"""func.func @roundtrip(%x: {g}, %out: {g})
    attributes {{smalti.kernel, smalti.grid = array<i64: 2>}} {{
  %c0 = arith.constant 0 : index
  %ccols = arith.constant {cols} : index
  %o_t = arith.constant 1024 : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> {BARS}
  %raw = "smalti.slice_smem"(%o_t) : (index) -> {s}
  %t = "smalti.with_transforms"(%raw) {{transforms = [#smalti.tile<[8, {tile}]>, #smalti.swizzle<{swizzle}>]}} : ({s}) -> {s}
  "smalti.initialize_barrier"(%bars) {{arrival_count = 1 : i64}} : ({BARS}) -> ()
  %bx = gpu.block_id x
  %col = arith.muli %bx, %ccols : index
  "smalti.arrive_expect_tx"(%bars, %c0) {{bytes = {rows * cols // 2} : i64}} : ({BARS}, index) -> ()
  "smalti.async_load"(%x, %t, %bars, %c0, %c0, %col) : ({g}, {s}, {BARS}, index, index, index) -> ()
  %p = arith.constant 0 : i32
  "smalti.wait"(%bars, %c0, %p) : ({BARS}, index, i32) -> ()
  "smalti.async_store"(%t, %out, %c0, %col) : ({s}, {g}, index, index) -> ()
  "smalti.async_store_wait"() {{pending = 0 : i64}} : () -> ()
  return
}}
"""


@pytest.mark.parametrize("element", list(FOUR_BIT))
@pytest.mark.parametrize(("rows", "cols", "swizzle"), [(16, 512, 128), (8, 256, 64),
                                                        (24, 64, 32)])
def test_tma_round_trip(element, rows, cols, swizzle):
    compiled = compile_mlir(roundtrip_kernel(element, rows, cols, swizzle), "roundtrip.mlir")
    compiled.assemble()
    x = _codes(np.random.default_rng(rows), (rows, 2 * cols)).view(FOUR_BIT[element])
    out = run_simulated(compiled, x, np.zeros_like(x))[-1]
    np.testing.assert_array_equal(out.view(np.uint8), x.view(np.uint8))
    signature = compiled.signature()
    assert signature.smem_bytes == 1024 + rows * cols // 2  # two elements per byte
    record = signature.tensor_maps[0]
    assert record.box == (8, 2 * swizzle) and record.dtype == element


def test_tma_of_an_odd_innermost_index_is_a_located_error():
    text = roundtrip_kernel("f4E2M1FN", 16, 512, 128).replace(
        '%col = arith.muli %bx, %ccols : index', '%col = arith.constant 3 : index')
    with pytest.raises(DiagnosticError, match=r"roundtrip.mlir:\d+:\d+: .*innermost index must "
                                              "be even, got 3"):
        compile_mlir(text, "roundtrip.mlir")


def test_thread_access_to_four_bit_smem_is_a_located_error():
    s = _smem((128, 64), "f4E2M1FN")
    text = f"""func.func @k(%out: memref<128x64xf4E2M1FN>)
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %t = "smalti.slice_smem"(%c0) : (index) -> {s}
  %v = "smalti.vector_load"(%t, %c0, %c0) : ({s}, index, index) -> vector<128x64xf4E2M1FN>
  "smalti.vector_store"(%v, %out, %c0, %c0) : (vector<128x64xf4E2M1FN>, memref<128x64xf4E2M1FN>, index, index) -> ()
  return
}}
"""
    with pytest.raises(DiagnosticError, match=r"k.mlir:5:\d+: .*do not access shared memory of "
                                              "f4E2M1FN"):
        compile_mlir(text, "k.mlir")


# -- block-scaled MMA on packed operands ------------------------------------------------------

def mma_kernel(n: int, k: int, scale: str, steps_per_mma: int = 1) -> str:
    """A (128 x K) and B (N x K, viewed K x N), e2m1 K-major in 128-byte swizzled tiles of 8
    rows x 256 elements, TMA-loaded; their scale factors (one per `block` of K) TMA-loaded
    and copied to TMEM (.32x128b.warpx4); one tcgen05_mma; D stored."""
    t = "f4E2M1FN"
    groups = -(-k // (16 if scale == "f8E4M3FN" else 32) // 4)
    copies_b = groups * -(-n // 128)
    a_g, b_g = _gmem((128, k), t), _gmem((n, k), t)
    a_s, b_load, b_s = _smem((128, k), t), _smem((n, k), t), _smem((k, n), t)
    sfa_g, sfb_g = (_gmem((c, SCALE_ROWS, SCALE_BYTES), scale) for c in (groups, copies_b))
    sfa_s, sfb_s = (_smem((c, SCALE_ROWS, SCALE_BYTES), scale) for c in (groups, copies_b))
    scale_columns = max(32, 4 * copies_b)  # 32-bit TMEM columns: 4 per copy
    scale_t = f'memref<128x{4 * scale_columns}x{scale}, "tmem">'
    columns = max(32, 1 << (n - 1).bit_length())
    d = f'memref<128x{columns}xf32, "tmem">'
    o_a = 1024
    o_b = o_a + 128 * k // 2
    o_sfa = o_b + n * k // 2
    o_sfb = o_sfa + groups * 512
    tx = (128 + n) * k // 2 + (groups + copies_b) * 512
    tiles = "[#smalti.tile<[8, 256]>, #smalti.swizzle<128>]"
    b_view = "[#smalti.transpose<[1, 0]>, #smalti.tile<[8, 256]>, #smalti.swizzle<128>]"
    half = min(n, 128)
    stores = "\n".join(
        f'''  %v{c} = "smalti.tmem_load"(%t) {{column = {c} : i64}} : ({d}) -> vector<128x{half}xf32>
  %col{c} = arith.constant {c} : index
  "smalti.vector_store"(%v{c}, %out, %c0, %col{c}) : (vector<128x{half}xf32>, memref<128x{n}xf32>, index, index) -> ()'''
        for c in range(0, n, half))
    return f"""func.func @nvfp4(%a: {a_g}, %b: {b_g}, %sfa: {sfa_g}, %sfb: {sfb_g}, %out: memref<128x{n}xf32>)
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %false = arith.constant false
  %o_a = arith.constant {o_a} : index
  %o_b = arith.constant {o_b} : index
  %o_sfa = arith.constant {o_sfa} : index
  %o_sfb = arith.constant {o_sfb} : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<2xi64, {SMEM}>
  %sa_raw = "smalti.slice_smem"(%o_a) : (index) -> {a_s}
  %sa = "smalti.with_transforms"(%sa_raw) {{transforms = {tiles}}} : ({a_s}) -> {a_s}
  %sb_raw = "smalti.slice_smem"(%o_b) : (index) -> {b_load}
  %sb_load = "smalti.with_transforms"(%sb_raw) {{transforms = {tiles}}} : ({b_load}) -> {b_load}
  %sb_view = "smalti.slice_smem"(%o_b) : (index) -> {b_s}
  %sb = "smalti.with_transforms"(%sb_view) {{transforms = {b_view}}} : ({b_s}) -> {b_s}
  %ssfa = "smalti.slice_smem"(%o_sfa) : (index) -> {sfa_s}
  %ssfb = "smalti.slice_smem"(%o_sfb) : (index) -> {sfb_s}
  %t = "smalti.tmem_alloc"() {{columns = {columns} : i64}} : () -> {d}
  %tsfa = "smalti.tmem_alloc"() {{columns = {scale_columns} : i64}} : () -> {scale_t}
  %tsfb = "smalti.tmem_alloc"() {{columns = {scale_columns} : i64}} : () -> {scale_t}
  "smalti.initialize_barrier"(%bars) {{arrival_count = 1 : i64}} : (memref<2xi64, {SMEM}>) -> ()
  "smalti.arrive_expect_tx"(%bars, %c0) {{bytes = {tx} : i64}} : (memref<2xi64, {SMEM}>, index) -> ()
  "smalti.async_load"(%a, %sa, %bars, %c0, %c0, %c0) : ({a_g}, {a_s}, memref<2xi64, {SMEM}>, index, index, index) -> ()
  "smalti.async_load"(%b, %sb_load, %bars, %c0, %c0, %c0) : ({b_g}, {b_load}, memref<2xi64, {SMEM}>, index, index, index) -> ()
  "smalti.async_load"(%sfa, %ssfa, %bars, %c0, %c0, %c0, %c0) : ({sfa_g}, {sfa_s}, memref<2xi64, {SMEM}>, index, index, index, index) -> ()
  "smalti.async_load"(%sfb, %ssfb, %bars, %c0, %c0, %c0, %c0) : ({sfb_g}, {sfb_s}, memref<2xi64, {SMEM}>, index, index, index, index) -> ()
  "smalti.wait"(%bars, %c0, %c0) : (memref<2xi64, {SMEM}>, index, index) -> ()
  "smalti.tcgen05_cp"(%ssfa, %tsfa) {{shape = "32x128b.warpx4"}} : ({sfa_s}, {scale_t}) -> ()
  "smalti.tcgen05_cp"(%ssfb, %tsfb) {{shape = "32x128b.warpx4"}} : ({sfb_s}, {scale_t}) -> ()
  "smalti.tcgen05_mma"(%sa, %sb, %t, %false, %tsfa, %tsfb) : ({a_s}, {b_s}, {d}, i1, {scale_t}, {scale_t}) -> ()
  "smalti.tcgen05_commit"(%bars, %c1) : (memref<2xi64, {SMEM}>, index) -> ()
  "smalti.wait"(%bars, %c1, %c0) : (memref<2xi64, {SMEM}>, index, index) -> ()
{stores}
  "smalti.tmem_dealloc"(%t) : ({d}) -> ()
  "smalti.tmem_dealloc"(%tsfa) : ({scale_t}) -> ()
  "smalti.tmem_dealloc"(%tsfb) : ({scale_t}) -> ()
  return
}}
"""


def _scale_values(rng: np.random.Generator, shape: tuple[int, ...], scale: str
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(scale-factor bytes, their values): E8M0 2^-3..2^3, or UE4M3 from a small grid."""
    if scale == "f8E8M0FNU":
        codes = rng.integers(124, 131, shape).astype(np.uint8)
        return codes, np.ldexp(1.0, codes.astype(int) - 127)
    values = rng.choice(np.array([0.25, 0.5, 0.75, 1, 1.5, 2, 3]), shape)
    codes = values.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    return codes, values


@pytest.mark.parametrize(("scale", "n", "k"), [("f8E4M3FN", 128, 256), ("f8E4M3FN", 256, 512),
                                               ("f8E8M0FNU", 128, 256)])
def test_block_scaled_mma_on_packed_operands(scale, n, k):
    """.kind::mxf4nvf4 (UE4M3 per 16, scale_vec::4X) and .kind::mxf4 (E8M0 per 32, 2X)."""
    rng = np.random.default_rng(n + k)
    block = 16 if scale == "f8E4M3FN" else 32
    a_codes, b_codes = _codes(rng, (128, k)), _codes(rng, (n, k))
    sfa, sfa_values = _scale_values(rng, (128, k // block), scale)
    sfb, sfb_values = _scale_values(rng, (n, k // block), scale)
    copies_b = -(-n // 128)
    scale_dtype = ml_dtypes.float8_e4m3fn if scale == "f8E4M3FN" else ml_dtypes.float8_e8m0fnu
    compiled = compile_mlir(mma_kernel(n, k, scale), "nvfp4.mlir", arch="sm_100a")
    ptx = compiled.ptx
    kind = "mxf4nvf4.block_scale.scale_vec::4X" if block == 16 else \
        "mxf4.block_scale.scale_vec::2X"
    assert ptx.count(f"tcgen05.mma.cta_group::1.kind::{kind}") == k // 64
    compiled.assemble()
    args = [a_codes.view(ml_dtypes.float4_e2m1fn), b_codes.view(ml_dtypes.float4_e2m1fn),
            _scale_blocks(sfa, 1).view(scale_dtype),
            _scale_blocks(sfb, copies_b).view(scale_dtype), np.zeros((128, n), np.float32)]
    result = run_simulated(compiled, *args)[-1]
    a = E2M1[a_codes] * np.repeat(sfa_values, block, axis=1)
    b = E2M1[b_codes] * np.repeat(sfb_values, block, axis=1)
    np.testing.assert_allclose(result, a @ b.T, rtol=1e-6, atol=1e-6)


def test_unscaled_four_bit_mma_is_a_located_error():
    scale_t = 'memref<128x128xf8E8M0FNU, "tmem">'
    text = mma_kernel(128, 256, "f8E8M0FNU").replace("%false, %tsfa, %tsfb) :", "%false) :")
    text = text.replace(f", i1, {scale_t}, {scale_t}) -> ()", ", i1) -> ()")
    with pytest.raises(DiagnosticError, match=r"nvfp4.mlir:\d+:\d+: .*4-bit inputs are block "
                                              "scaled"):
        compile_mlir(text, "nvfp4.mlir", arch="sm_100a")
