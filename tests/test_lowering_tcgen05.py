"""tcgen05_mma, tcgen05_commit and tcgen05_cp (smalti/dialect/ops_tcgen05.py) compiled for
sm_100a and run in the simulator against numpy: kernels written in MLIR TMA-load A and B
into shared memory, run tcgen05_mma over several K steps into a TMEM accumulator (first
overwriting it, then adding to it), commit to an mbarrier, wait, tmem_load the result and
store it. Input types bf16, f16, tf32 (f32), e4m3/e5m2; N 8 to 256; M 64 and 128; 128-, 64-
and 32-byte swizzles; A and B MN- and K-major; A from TMEM; block-scaled mxf8f6f4 with E8M0
scale factors brought to TMEM by tcgen05_cp; a CTA pair (.cta_group::2, M = 256). Every
kernel assembles with ptxas for sm_100a, and wrong use gives located errors."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from smalti.dialect import DiagnosticError
from smalti.lowering.tcgen05 import InstructionDescriptor
from smalti.runtime import compile_mlir
from smalti.runtime.simulate import run_simulated
from smalti.sim.errors import SimError
from smalti.sim.ops.tcgen05_descriptors import BlockScaledDescriptor
from smalti.sim.ops.tcgen05_descriptors import InstructionDescriptor as SimInstructionDescriptor
from smalti.sim.ops.tcgen05_mma import row_lanes

ROOT = Path(__file__).resolve().parents[1]
LIT_FILE = ROOT / "lit_tests" / "lowering" / "tcgen05.mlir"
ARCH = "sm_100a"
SMEM = "#gpu.address_space<workgroup>"
DTYPES = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "f32": np.float32,
          "f8E4M3FN": ml_dtypes.float8_e4m3fn, "f8E5M2": ml_dtypes.float8_e5m2,
          "f8E8M0FNU": ml_dtypes.float8_e8m0fnu}
BYTES = {"bf16": 2, "f16": 2, "f32": 4, "f8E4M3FN": 1, "f8E5M2": 1, "f8E8M0FNU": 1}
SCALE_ROWS, SCALE_BYTES = 32, 16  # one .32x128b.warpx4 copy: 32 rows of 16 bytes


def _smem(shape: tuple[int, ...], element: str) -> str:
    return f"memref<{'x'.join(map(str, shape))}x{element}, {SMEM}>"


def _gmem(shape: tuple[int, ...], element: str) -> str:
    return f"memref<{'x'.join(map(str, shape))}x{element}>"


def _tmem(lanes: int, columns: int, element: str) -> str:
    return f'memref<{lanes}x{columns}x{element}, "tmem">'


def _transforms(swizzle: int, rows: int, element: str, transposed: bool) -> str:
    cols = swizzle // BYTES[element]
    head = "#smalti.transpose<[1, 0]>, " if transposed else ""
    return f"[{head}#smalti.tile<[{rows}, {cols}]>, #smalti.swizzle<{swizzle}>]"


@dataclass(frozen=True)
class Case:
    """One MMA kernel: A (M x K) @ B (K x N) of `element`, one tcgen05_mma per entry of
    `accumulate` (False: D = A @ B, True: D += A @ B)."""

    element: str
    m: int = 128
    n: int = 128
    k: int = 64
    swizzle: int | None = None  # None: inference chooses; else explicit with_transforms
    b_k_major: bool | None = None  # None: as the type needs (16-bit: MN-major)
    a_in_tmem: bool = False
    a_mn_major: bool = False  # A stored K x M (16-bit types), viewed M x K by a transpose
    scaled: bool = False
    # Per tcgen05_mma: whether it adds to D ("flag": read from an i32 argument at run time).
    accumulate: tuple[bool | str, ...] = (False, True)
    preload: bool = False  # D starts as the `c` argument (tmem_store) instead of garbage

    @property
    def k_major(self) -> bool:
        if self.b_k_major is not None:
            return self.b_k_major
        return BYTES[self.element] != 2

    @property
    def b_global(self) -> tuple[int, int]:
        return (self.n, self.k) if self.k_major else (self.k, self.n)

    @property
    def scale_copies(self) -> tuple[int, int]:
        groups = -(-self.k // 32 // 4)
        return groups, groups * -(-self.n // 128)


def kernel(case: Case) -> str:
    """The MLIR of `case` (see the module docstring)."""
    t, m, n, k = case.element, case.m, case.n, case.k
    size = BYTES[t]
    o_a, o_b = 1024, 1024 + m * k * size
    o_s = o_b + k * n * size
    o_s = -(-o_s // 1024) * 1024
    a_global = (k, m) if case.a_mn_major else (m, k)
    params = [f"%a: {_gmem(a_global, t)}", f"%b: {_gmem(case.b_global, t)}"]
    lines = []
    a_type, b_smem, b_type = _smem((m, k), t), _smem(case.b_global, t), _smem((k, n), t)
    a_load_type = _smem(a_global, t)
    lines.append(f'%sa_raw = "smalti.slice_smem"(%o_a) : (index) -> {a_type}')
    if case.a_mn_major:
        span = case.swizzle or next(s for s in (128, 64, 32) if m * size % s == 0)
        tf = _transforms(span, 8, t, True)
        lines.append(f'%sa = "smalti.with_transforms"(%sa_raw) {{transforms = {tf}}} : '
                     f"({a_type}) -> {a_type}")
        tf = _transforms(span, 8, t, False)  # the bytes TMA writes: the same tiles
        lines += [f'%sa_load = "smalti.slice_smem"(%o_a) : (index) -> {a_load_type}',
                  f'%sa_tiled = "smalti.with_transforms"(%sa_load) {{transforms = {tf}}} : '
                  f"({a_load_type}) -> {a_load_type}"]
    elif case.swizzle is not None:
        tf = _transforms(case.swizzle, 8, t, False)
        lines.append(f'%sa = "smalti.with_transforms"(%sa_raw) {{transforms = {tf}}} : '
                     f"({a_type}) -> {a_type}")
    lines.append(f'%sb_load = "smalti.slice_smem"(%o_b) : (index) -> {b_smem}')
    if case.k_major:
        lines.append(f'%sb_view = "smalti.slice_smem"(%o_b) : (index) -> {b_type}')
        span = case.swizzle or next(s for s in (128, 64, 32) if k * size % s == 0)
        tf = _transforms(span, 8, t, True)
        lines.append(f'%sb = "smalti.with_transforms"(%sb_view) {{transforms = {tf}}} : '
                     f"({b_type}) -> {b_type}")
        tf = _transforms(span, 8, t, False)  # the bytes TMA writes: the same tiles
        lines.append(f'%sb_tiled = "smalti.with_transforms"(%sb_load) {{transforms = {tf}}} : '
                     f"({b_smem}) -> {b_smem}")
    elif case.swizzle is not None:
        tf = _transforms(case.swizzle, 8, t, False)
        lines.append(f'%sb = "smalti.with_transforms"(%sb_load) {{transforms = {tf}}} : '
                     f"({b_type}) -> {b_type}")
    sa = "%sa" if case.swizzle is not None or case.a_mn_major else "%sa_raw"
    load_a = "%sa_tiled" if case.a_mn_major else sa
    sb = "%sb" if case.k_major or case.swizzle is not None else "%sb_load"
    load_b = "%sb_tiled" if case.k_major else "%sb" if case.swizzle is not None else "%sb_load"
    columns = max(32, 1 << (n - 1).bit_length())
    d_type = _tmem(128, columns, "f32")
    bars = _smem((2,), "i64")
    tx = m * k * size + k * n * size
    lines += [
        f'%bars = "smalti.slice_smem"(%c0) : (index) -> {bars}',
        f'%t = "smalti.tmem_alloc"() {{columns = {columns} : i64}} : () -> {d_type}',
        f'"smalti.initialize_barrier"(%bars) {{arrival_count = 1 : i64}} : ({bars}) -> ()',
    ]
    scales = ""
    scale_types = ""
    if case.scaled:
        ga, gb = case.scale_copies
        params += [f"%sfa: {_gmem((ga, SCALE_ROWS, SCALE_BYTES), 'f8E8M0FNU')}",
                   f"%sfb: {_gmem((gb, SCALE_ROWS, SCALE_BYTES), 'f8E8M0FNU')}"]
        sfa_s, sfb_s = (_smem((g, SCALE_ROWS, SCALE_BYTES), "f8E8M0FNU") for g in (ga, gb))
        sfa_t, sfb_t = (_tmem(128, 128, "f8E8M0FNU") for _ in range(2))
        o_sb = o_s + ga * 512
        tx += (ga + gb) * 512
        lines += [
            f"%o_sfa = arith.constant {o_s} : index",
            f"%o_sfb = arith.constant {o_sb} : index",
            f'%ssfa = "smalti.slice_smem"(%o_sfa) : (index) -> {sfa_s}',
            f'%ssfb = "smalti.slice_smem"(%o_sfb) : (index) -> {sfb_s}',
            f'%tsfa = "smalti.tmem_alloc"() {{columns = 32 : i64}} : () -> {sfa_t}',
            f'%tsfb = "smalti.tmem_alloc"() {{columns = 32 : i64}} : () -> {sfb_t}',
        ]
        scales = ", %tsfa, %tsfb"
        scale_types = f", {sfa_t}, {sfb_t}"
    lines += [
        f'"smalti.arrive_expect_tx"(%bars, %c0) {{bytes = {tx} : i64}} : ({bars}, index) -> ()',
        f'"smalti.async_load"(%a, {load_a}, %bars, %c0, %c0, %c0) : ({_gmem(a_global, t)}, '
        f"{a_load_type}, {bars}, index, index, index) -> ()",
        f'"smalti.async_load"(%b, {load_b}, %bars, %c0, %c0, %c0) : ({_gmem(case.b_global, t)}, '
        f"{b_smem}, {bars}, index, index, index) -> ()",
    ]
    if case.scaled:
        ga, gb = case.scale_copies
        for name, g in (("sfa", ga), ("sfb", gb)):
            lines.append(
                f'"smalti.async_load"(%{name}, %s{name}, %bars, %c0, %c0, %c0, %c0) : '
                f"({_gmem((g, SCALE_ROWS, SCALE_BYTES), 'f8E8M0FNU')}, "
                f"{_smem((g, SCALE_ROWS, SCALE_BYTES), 'f8E8M0FNU')}, {bars}, index, index, "
                "index, index) -> ()")
    lines.append(f'"smalti.wait"(%bars, %c0, %c0) : ({bars}, index, index) -> ()')
    if case.scaled:
        for name in ("sfa", "sfb"):
            g = case.scale_copies[name == "sfb"]
            lines.append(
                f'"smalti.tcgen05_cp"(%s{name}, %t{name}) {{shape = "32x128b.warpx4"}} : '
                f"({_smem((g, SCALE_ROWS, SCALE_BYTES), 'f8E8M0FNU')}, "
                f"{_tmem(128, 128, 'f8E8M0FNU')}) -> ()")
    a_operand, a_operand_type = sa, a_type
    if case.a_in_tmem:
        a_cols = k * size // 4
        a_alloc = max(32, 1 << (a_cols - 1).bit_length())
        a_tmem = _tmem(128, a_alloc * 4 // size, t)
        lines += [
            f'%ta = "smalti.tmem_alloc"() {{columns = {a_alloc} : i64}} : () -> {a_tmem}',
            f'%va = "smalti.vector_load"(%a, %c0, %c0) : ({_gmem((m, k), t)}, index, index) '
            f"-> vector<{m}x{k}x{t}>",
            f'"smalti.tmem_store"(%va, %ta) : (vector<{m}x{k}x{t}>, {a_tmem}) -> ()',
        ]
        a_operand, a_operand_type = "%ta", a_tmem
    if case.preload:
        params.append(f"%cin: {_gmem((128, n), 'f32')}")
        lines += [
            f'%vc = "smalti.vector_load"(%cin, %c0, %c0) : ({_gmem((128, n), "f32")}, index, '
            f"index) -> vector<128x{n}xf32>",
            f'"smalti.tmem_store"(%vc, %t) : (vector<128x{n}xf32>, {d_type}) -> ()',
        ]
    if "flag" in case.accumulate:
        params.append("%flag: i32")
        lines += ["%zero = arith.constant 0 : i32",
                  "%dynamic = arith.cmpi ne, %flag, %zero : i32"]
    for accumulate in case.accumulate:
        flag = {False: "%false", True: "%true", "flag": "%dynamic"}[accumulate]
        lines.append(
            f'"smalti.tcgen05_mma"({a_operand}, {sb}, %t, {flag}{scales}) : ({a_operand_type}, '
            f"{b_type}, {d_type}, i1{scale_types}) -> ()")
    lines += [
        f'"smalti.tcgen05_commit"(%bars, %c1) : ({bars}, index) -> ()',
        f'"smalti.wait"(%bars, %c1, %c0) : ({bars}, index, index) -> ()',
    ]
    half = min(n, 128)
    for start in range(0, n, half):
        lines += [
            f'%v{start} = "smalti.tmem_load"(%t) {{column = {start} : i64}} : ({d_type}) -> '
            f"vector<128x{half}xf32>",
            f"%col{start} = arith.constant {start} : index",
            f'"smalti.vector_store"(%v{start}, %out, %c0, %col{start}) : (vector<128x{half}xf32>, '
            f"{_gmem((128, n), 'f32')}, index, index) -> ()",
        ]
    lines.append(f'"smalti.tmem_dealloc"(%t) : ({d_type}) -> ()')
    if case.scaled:
        lines += [f'"smalti.tmem_dealloc"(%tsfa) : ({_tmem(128, 128, "f8E8M0FNU")}) -> ()',
                  f'"smalti.tmem_dealloc"(%tsfb) : ({_tmem(128, 128, "f8E8M0FNU")}) -> ()']
    if case.a_in_tmem:
        lines.append(f'"smalti.tmem_dealloc"(%ta) : ({a_tmem}) -> ()')
    params.append(f"%out: {_gmem((128, n), 'f32')}")
    body = "\n  ".join(line for line in lines if line)
    return f"""func.func @mma({', '.join(params)})
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %o_a = arith.constant {o_a} : index
  %o_b = arith.constant {o_b} : index
  %false = arith.constant false
  %true = arith.constant true
  {body}
  return
}}
"""


def _values(rng: np.random.Generator, shape: tuple[int, ...], element: str) -> np.ndarray:
    """Values every input type holds exactly (small multiples of 1/4)."""
    grid = np.array([-2, -1.5, -1, -0.5, -0.25, 0, 0.25, 0.5, 1, 1.5, 2])
    return rng.choice(grid, size=shape).astype(DTYPES[element])


def _scale_blocks(factors: np.ndarray, copies_per_group: int) -> np.ndarray:
    """The .32x128b.warpx4 source blocks (copies x 32 x 16 bytes) of `factors` (rows x S,
    E8M0 bytes): copy g * R + r, byte 16 j + 4 c + s holds factor 4 g + s of row
    128 r + 32 c + j (S padded to groups of 4)."""
    rows, count = factors.shape
    groups = -(-count // 4)
    out = np.full((groups * copies_per_group, SCALE_ROWS, SCALE_BYTES), 127, np.uint8)
    for g in range(groups):
        for row in range(rows):
            r, c, j = row // 128, (row % 128) // 32, row % 32
            chunk = factors[row, 4 * g:4 * g + 4]
            out[g * copies_per_group + r, j, 4 * c:4 * c + len(chunk)] = chunk
    return out


def pair_kernel(n: int, k: int, copy: bool = False) -> str:
    """A .cta_group::2 MMA (bf16, M = 256) over a cluster of 2 CTAs: CTA r loads rows
    128r .. 128r + 127 of A and columns r N/2 .. (r + 1) N/2 - 1 of B, the cluster meets,
    the even CTA's thread 0 issues the MMA and commits to both CTAs' barriers, and each CTA
    stores its 128 rows of D. With `copy`, each CTA also loads its 128 rows of 16 bytes of
    `c`, which one tcgen05_cp (.cta_group::2) copies into both CTAs' TMEM, and stores them
    back to `c_out`."""
    half = n // 2
    a_s, b_s = _smem((128, k), "bf16"), _smem((k, half), "bf16")
    bars = _smem((2,), "i64")
    columns = max(32, 1 << (n - 1).bit_length())
    d = _tmem(128, columns, "f32")
    a_g, b_g, out_g = _gmem((256, k), "bf16"), _gmem((k, n), "bf16"), _gmem((256, n), "f32")
    c_g, c_s, c_t = _gmem((256, 4), "i32"), _smem((128, 4), "i32"), _tmem(128, 32, "i32")
    tx = (128 * k + k * half) * 2 + (128 * 16 if copy else 0)
    width = min(n, 128)
    stores = "\n".join(
        f'''  %v{s} = "smalti.tmem_load"(%t) {{column = {s} : i64}} : ({d}) -> vector<128x{width}xf32>
  %col{s} = arith.constant {s} : index
  "smalti.vector_store"(%v{s}, %out, %row, %col{s}) : (vector<128x{width}xf32>, {out_g}, index, index) -> ()'''
        for s in range(0, n, width))
    params = f"%a: {a_g}, %b: {b_g}, %out: {out_g}"
    load_c = copy_c = store_c = ""
    if copy:
        params += f", %c: {c_g}, %c_out: {c_g}"
        load_c = f'''
  %o_c = arith.constant {1024 + (128 * k + k * half) * 2} : index
  %sc = "smalti.slice_smem"(%o_c) : (index) -> {c_s}
  %tc = "smalti.tmem_alloc"() {{columns = 32 : i64}} : () -> {c_t}
  "smalti.async_load"(%c, %sc, %bars, %c0, %row, %c0) : ({c_g}, {c_s}, {bars}, index, index, index) -> ()'''
        copy_c = f'''
  "smalti.tcgen05_cp"(%sc, %tc) {{shape = "128x128b"}} : ({c_s}, {c_t}) -> ()'''
        store_c = f'''
  %vc = "smalti.tmem_load"(%tc) : ({c_t}) -> vector<128x4xi32>
  "smalti.vector_store"(%vc, %c_out, %row, %c0) : (vector<128x4xi32>, {c_g}, index, index) -> ()
  "smalti.tmem_dealloc"(%tc) : ({c_t}) -> ()'''
    return f"""func.func @pair({params})
    attributes {{smalti.kernel, smalti.grid = array<i64: 2>, smalti.cluster = array<i64: 2, 1, 1>}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %chalf = arith.constant {half} : index
  %o_a = arith.constant 1024 : index
  %o_b = arith.constant {1024 + 128 * k * 2} : index
  %false = arith.constant false
  %bars = "smalti.slice_smem"(%c0) : (index) -> {bars}
  %sa = "smalti.slice_smem"(%o_a) : (index) -> {a_s}
  %sb = "smalti.slice_smem"(%o_b) : (index) -> {b_s}
  %t = "smalti.tmem_alloc"() {{columns = {columns} : i64}} : () -> {d}
  "smalti.initialize_barrier"(%bars) {{arrival_count = 1 : i64}} : ({bars}) -> ()
  %rank = gpu.block_id x
  %row = arith.muli %rank, %c128 : index
  %col = arith.muli %rank, %chalf : index
  "smalti.arrive_expect_tx"(%bars, %c0) {{bytes = {tx} : i64}} : ({bars}, index) -> ()
  "smalti.async_load"(%a, %sa, %bars, %c0, %row, %c0) : ({a_g}, {a_s}, {bars}, index, index, index) -> ()
  "smalti.async_load"(%b, %sb, %bars, %c0, %c0, %col) : ({b_g}, {b_s}, {bars}, index, index, index) -> (){load_c}
  "smalti.wait"(%bars, %c0, %c0) : ({bars}, index, index) -> ()
  "smalti.cluster_barrier"() : () -> (){copy_c}
  "smalti.tcgen05_mma"(%sa, %sb, %t, %false) {{collective = true}} : ({a_s}, {b_s}, {d}, i1) -> ()
  "smalti.tcgen05_commit"(%bars, %c1) {{collective = true}} : ({bars}, index) -> ()
  "smalti.wait"(%bars, %c1, %c0) : ({bars}, index, index) -> ()
{stores}{store_c}
  "smalti.tmem_dealloc"(%t) : ({d}) -> ()
  return
}}
"""


def run_case(case: Case, seed: int = 0, flag: int = 1, **options
             ) -> tuple[np.ndarray, np.ndarray]:
    """(the simulated D, numpy's) for `case`; the kernel also assembles with ptxas."""
    rng = np.random.default_rng(seed)
    a = _values(rng, (case.m, case.k), case.element)
    b = _values(rng, (case.k, case.n), case.element)
    args = [np.ascontiguousarray(a.T) if case.a_mn_major else a,
            np.ascontiguousarray(b.T) if case.k_major else b]
    af, bf = a.astype(np.float64), b.astype(np.float64)
    if case.scaled:
        sfa = rng.integers(124, 131, (case.m, case.k // 32)).astype(np.uint8)
        sfb = rng.integers(124, 131, (case.n, case.k // 32)).astype(np.uint8)
        repeats = case.scale_copies[1] // case.scale_copies[0]
        args += [_scale_blocks(sfa, 1).view(ml_dtypes.float8_e8m0fnu),
                 _scale_blocks(sfb, repeats).view(ml_dtypes.float8_e8m0fnu)]
        af = af * np.repeat(np.ldexp(1.0, sfa.astype(int) - 127), 32, axis=1)
        bf = bf * np.repeat(np.ldexp(1.0, sfb.astype(int) - 127), 32, axis=1).T
    product = af @ bf
    expected = np.full((case.m, case.n), np.nan)
    if case.preload:
        c = _values(rng, (128, case.n), "f32")
        args.append(c)
        expected = c[:case.m].astype(np.float64)
    if "flag" in case.accumulate:
        args.append(np.int32(flag))
    for accumulate in case.accumulate:
        adds = bool(flag) if accumulate == "flag" else accumulate
        expected = expected + product if adds else product
    compiled = compile_mlir(kernel(case), "tcgen05.mlir", arch=ARCH)
    compiled.assemble()  # ptxas (sm_100a) takes it
    result = run_simulated(compiled, *args, np.zeros((128, case.n), np.float32), **options)[-1]
    if case.m == 64:  # rows 16q .. 16q + 15 of D are lanes 32q .. 32q + 15
        result = result[row_lanes(64, 0)[:, 0]]
    return result, expected


def check(case: Case, **options) -> None:
    result, expected = run_case(case, **options)
    np.testing.assert_array_equal(result, expected.astype(np.float32))


@pytest.mark.parametrize("element", ["bf16", "f16", "f32", "f8E4M3FN", "f8E5M2"])
def test_input_types_over_several_k_steps(element):
    """K = 256 bytes: 8 instructions per tcgen05_mma (k16 bf16/f16, k8 tf32, k32 f8),
    crossing swizzle tiles along K; the second MMA adds to the first's D."""
    check(Case(element, k=256 // BYTES[element]))


@pytest.mark.parametrize(("element", "n"), [("bf16", 64), ("bf16", 256), ("f8E4M3FN", 64),
                                            ("f8E4M3FN", 256), ("f32", 16)])
def test_n(element, n):
    check(Case(element, n=n, k=128 // BYTES[element]))


@pytest.mark.parametrize(("element", "n"), [("bf16", 64), ("f16", 128), ("f8E5M2", 8)])
def test_m64(element, n):
    """M = 64: rows 16q .. 16q + 15 of D land in lanes 32q .. 32q + 15; N a multiple of 8."""
    check(Case(element, m=64, n=n, k=128 // BYTES[element]))


@pytest.mark.parametrize("swizzle", [128, 64, 32])
@pytest.mark.parametrize("element", ["bf16", "f8E4M3FN", "f32"])
def test_swizzles(element, swizzle):
    """Operands given 8-row tiles of one swizzle span by with_transforms."""
    check(Case(element, k=256 // BYTES[element], swizzle=swizzle))


@pytest.mark.parametrize("swizzle", [None, 64])
def test_b_k_major_16_bit(swizzle):
    """bf16 B stored N x K (K-major; the default for 16-bit B is K x N, MN-major)."""
    check(Case("bf16", b_k_major=True, swizzle=swizzle))


@pytest.mark.parametrize(("m", "swizzle", "b_k_major"), [(128, None, False), (64, None, False),
                                                        (128, 64, True), (128, 32, False)])
def test_a_mn_major_16_bit(m, swizzle, b_k_major):
    """A stored K x M (MN-major, bit 15 of the instruction descriptor), its descriptor's
    LBO stepping swizzle spans of M (all M rows one instruction reads)."""
    check(Case("f16", m=m, n=64, k=64, swizzle=swizzle, b_k_major=b_k_major, a_mn_major=True))


@pytest.mark.parametrize("element", ["bf16", "f16", "f32"])
def test_a_from_tmem(element):
    """A stored to TMEM by tmem_store (row i in lane i, K packed into 32-bit columns)."""
    check(Case(element, k=128 // BYTES[element], a_in_tmem=True))


@pytest.mark.parametrize("flag", [0, 1])
def test_accumulate_overwrites_or_adds(flag):
    """D starts as C (tmem_store); MMAs with accumulate true, then one whose flag is
    computed at run time: C + 2 A @ B (flag 1), or A @ B (flag 0) then + A @ B."""
    case = Case("bf16", preload=True, accumulate=(True, "flag", True))
    result, expected = run_case(case, flag=flag)
    np.testing.assert_array_equal(result, expected.astype(np.float32))


@pytest.mark.parametrize(("element", "n", "k"), [("f8E4M3FN", 128, 128), ("f8E5M2", 64, 64),
                                                 ("f8E4M3FN", 256, 256)])
def test_block_scaled_mxf8f6f4(element, n, k):
    """E8M0 scale factors (one per 32 K) copied to TMEM by tcgen05_cp .32x128b.warpx4; the
    MMA steps the scale data ID per K step and the 4-column group every 4 steps."""
    check(Case(element, n=n, k=k, scaled=True))


@pytest.mark.parametrize("policy", ["latest", "random"])
def test_asynchronous_completion(policy):
    """The MMAs and copies land as late (or as randomly) as the simulator may make them:
    the commit, the wait and the fences order them before the reads."""
    check(Case("f8E4M3FN", k=64, scaled=True), async_completion=policy, seed=3)
    check(Case("bf16", a_in_tmem=True, preload=False), async_completion=policy, seed=4)


def test_cta_pair_copy():
    """In a kernel of collective MMAs, tcgen05_cp is .cta_group::2: the even CTA's thread 0
    copies each CTA's shared rows into that CTA's TMEM (tracked by the collective commit)."""
    rng = np.random.default_rng(7)
    a, b = _values(rng, (256, 64), "bf16"), _values(rng, (64, 64), "bf16")
    c = rng.integers(-(2**31), 2**31 - 1, (256, 4), dtype=np.int32)
    compiled = compile_mlir(pair_kernel(64, 64, copy=True), "pair.mlir", arch=ARCH)
    compiled.assemble()
    assert "tcgen05.cp.cta_group::2.128x128b" in compiled.ptx
    result = run_simulated(compiled, a, b, np.zeros((256, 64), np.float32), c,
                           np.zeros_like(c), async_completion="latest")
    np.testing.assert_array_equal(result[2], a.astype(np.float32) @ b.astype(np.float32))
    np.testing.assert_array_equal(result[4], c)


@pytest.mark.parametrize("n", [128, 256])
def test_cta_pair(n):
    """collective (.cta_group::2): a 256 x N MMA over two CTAs, the odd CTA's A rows and
    B columns read from its own shared memory; the commit arrives in both CTAs."""
    rng = np.random.default_rng(n)
    a, b = _values(rng, (256, 64), "bf16"), _values(rng, (64, n), "bf16")
    compiled = compile_mlir(pair_kernel(n, 64), "pair.mlir", arch=ARCH)
    compiled.assemble()
    assert "tcgen05.alloc.cta_group::2" in compiled.ptx
    out = run_simulated(compiled, a, b, np.zeros((256, n), np.float32),
                        async_completion="latest")[-1]
    np.testing.assert_array_equal(out, a.astype(np.float32) @ b.astype(np.float32))


@pytest.mark.parametrize(("kind", "a", "b", "d", "m", "n", "mn_major"), [
    ("f16", "bf16", "bf16", "f32", 128, 256, (False, True)),
    ("f16", "f16", "f16", "f16", 64, 8, (True, False)),
    ("tf32", "f32", "f32", "f32", 128, 16, (False, False)),
    ("f8f6f4", "f8E4M3FN", "f8E5M2", "f32", 256, 32, (False, False)),
])
def test_instruction_descriptor_decodes_as_encoded(kind, a, b, d, m, n, mn_major):
    """The lowering's instruction descriptors read back field by field through the
    simulator's decoder (written from the ISA's bit table separately)."""
    value = InstructionDescriptor(kind, a, b, d, m, n, *mn_major).encode()
    decoded = SimInstructionDescriptor.decode(value, kind)
    names = {"bf16": "bf16", "f16": "f16", "f32": "tf32", "f8E4M3FN": "e4m3", "f8E5M2": "e5m2"}
    assert (decoded.atype, decoded.btype, decoded.dtype) == (names[a], names[b], d)
    assert (decoded.m, decoded.n, decoded.transpose_a, decoded.transpose_b) == (m, n, *mn_major)
    assert not (decoded.sparse or decoded.saturate or decoded.negate_a or decoded.negate_b)


def test_block_scaled_descriptor_decodes_as_encoded():
    value = InstructionDescriptor("mxf8f6f4", "f8E5M2", "f8E4M3FN", "f32", 128, 192,
                                  scale="f8E8M0FNU", a_scale_id=3, b_scale_id=2).encode()
    decoded = BlockScaledDescriptor.decode(value, "mxf8f6f4")
    assert (decoded.atype, decoded.btype, decoded.m, decoded.n, decoded.scale_type) == (
        "e5m2", "e4m3", 128, 192, "ue8m0")
    assert (decoded.a_scale_id, decoded.b_scale_id) == (3, 2)


def test_wrong_arch_is_a_located_error():
    with pytest.raises(DiagnosticError) as error:
        compile_mlir(kernel(Case("bf16")), "mma.mlir", arch="sm_90a")
    assert re.search(r"mma\.mlir:\d+:\d+: error: 'smalti\.tmem_alloc' op needs sm_100a",
                     str(error.value)), str(error.value)


def test_f8_b_stored_mn_major_is_a_located_error():
    """An f8 B ref viewed K x N without the transpose: the MMA reads f8 operands K-major
    only, and the error says how to store B."""
    text = kernel(Case("f8E4M3FN", k=64)).replace("#smalti.transpose<[1, 0]>, ", "")
    with pytest.raises(DiagnosticError, match=r"tcgen05\.mlir:\d+:\d+: error: "
                                              r"'smalti\.tcgen05_mma' op reads B \(f8E4M3FN\) "
                                              r"MN-major, but tcgen05_mma transposes only"):
        compile_mlir(text, "tcgen05.mlir", arch=ARCH)


def test_k_not_a_multiple_of_the_step_is_a_located_error():
    with pytest.raises(DiagnosticError, match=r"tcgen05\.mlir:\d+:\d+: error: "
                                              r"'smalti\.tcgen05_mma' op K \(24\) must be a "
                                              r"multiple of 16 for \.kind::f16"):
        compile_mlir(kernel(Case("bf16", k=24)), "tcgen05.mlir", arch=ARCH)


@pytest.mark.parametrize("index", range(len(LIT_FILE.read_text().split("// -----"))))
def test_lit_kernels_assemble(index):
    chunk = LIT_FILE.read_text().split("// -----")[index]
    name = re.search(r"func\.func @(\w+)", chunk).group(1)
    compiled = compile_mlir(chunk, f"{LIT_FILE}:{name}", arch=ARCH)
    result = compiled.assemble()
    for kernel_name in compiled.kernels:
        report = result.reports[kernel_name]
        assert (report.spill_stores, report.spill_loads, report.stack_frame) == (0, 0, 0)


COPY_LANES = {  # tcgen05.cp shape -> the lanes (source rows x copies) each source row lands in
    "128x128b": np.arange(128)[:, None],
    "32x128b.warpx4": np.arange(32)[:, None] + 32 * np.arange(4)[None, :],
    "64x128b.warpx2::02_13": np.arange(64)[:, None] + np.array([[0, 64]]),
    "64x128b.warpx2::01_23": (np.arange(64) % 32 + 64 * (np.arange(64) // 32))[:, None]
    + np.array([[0, 32]]),
}


def copy_kernel(shape: str, copies: int, column: int) -> str:
    """TMA-load `copies` blocks of R rows of 16 bytes (i32) into shared memory, tcgen05_cp
    them into TMEM from `column`, commit, wait, tmem_load all 128 lanes and store them."""
    rows = len(COPY_LANES[shape])
    src_g, src_s = _gmem((copies, rows, 4), "i32"), _smem((copies, rows, 4), "i32")
    t, bars, out = _tmem(128, 32, "i32"), _smem((2,), "i64"), _gmem((128, 32), "i32")
    return f"""func.func @copy(%src: {src_g}, %out: {out})
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %o = arith.constant 1024 : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> {bars}
  %s = "smalti.slice_smem"(%o) : (index) -> {src_s}
  %t = "smalti.tmem_alloc"() {{columns = 32 : i64}} : () -> {t}
  %zero = arith.constant dense<0> : vector<128x32xi32>
  "smalti.tmem_store"(%zero, %t) : (vector<128x32xi32>, {t}) -> ()
  "smalti.initialize_barrier"(%bars) {{arrival_count = 1 : i64}} : ({bars}) -> ()
  "smalti.arrive_expect_tx"(%bars, %c0) {{bytes = {copies * rows * 16} : i64}} : ({bars}, index) -> ()
  "smalti.async_load"(%src, %s, %bars, %c0, %c0, %c0, %c0) : ({src_g}, {src_s}, {bars}, index, index, index, index) -> ()
  "smalti.wait"(%bars, %c0, %c0) : ({bars}, index, index) -> ()
  "smalti.tcgen05_cp"(%s, %t) {{shape = "{shape}", column = {column} : i64}} : ({src_s}, {t}) -> ()
  "smalti.tcgen05_commit"(%bars, %c1) : ({bars}, index) -> ()
  "smalti.wait"(%bars, %c1, %c0) : ({bars}, index, index) -> ()
  %v = "smalti.tmem_load"(%t) : ({t}) -> vector<128x32xi32>
  "smalti.vector_store"(%v, %out, %c0, %c0) : (vector<128x32xi32>, {out}, index, index) -> ()
  "smalti.tmem_dealloc"(%t) : ({t}) -> ()
  return
}}
"""


@pytest.mark.parametrize(("shape", "copies", "column"), [
    ("128x128b", 2, 4), ("32x128b.warpx4", 3, 0), ("64x128b.warpx2::02_13", 1, 8),
    ("64x128b.warpx2::01_23", 2, 20)])
def test_copy_shapes(shape, copies, column):
    """Each tcgen05_cp shape puts source row r (16 bytes: 4 columns) of copy g in its lanes,
    at columns column + 4g .. column + 4g + 3 (the rest stays as tmem_store left it)."""
    lanes = COPY_LANES[shape]
    rng = np.random.default_rng(len(shape))
    src = rng.integers(1, 2**31 - 1, (copies, len(lanes), 4), dtype=np.int32)
    compiled = compile_mlir(copy_kernel(shape, copies, column), "copy.mlir", arch=ARCH)
    compiled.assemble()
    out = run_simulated(compiled, src, np.zeros((128, 32), np.int32),
                        async_completion="latest")[-1]
    expected = np.zeros((128, 32), np.int32)
    for g in range(copies):
        for row, targets in enumerate(lanes):
            for lane in targets:
                expected[lane, column + 4 * g:column + 4 * g + 4] = src[g, row]
    np.testing.assert_array_equal(out, expected)


def _lit_chunk(name: str) -> str:
    return next(chunk for chunk in LIT_FILE.read_text().split("// -----")
                if f"func.func @{name}(" in chunk)


def _mma_store_mma(compiled, seed: int = 0) -> None:
    """D = 2 A @ B + A2 @ B, A2 stored into shared memory by the warpgroup between the
    second and third MMA (lit kernel mma_store_mma)."""
    rng = np.random.default_rng(seed)
    a, a2 = (rng.standard_normal((128, 32)).astype(ml_dtypes.bfloat16) for _ in range(2))
    b = rng.standard_normal((32, 128)).astype(ml_dtypes.bfloat16)
    out = run_simulated(compiled, a, a2, b, np.zeros((128, 128), np.float32),
                        async_completion="latest")[-1]
    f32 = [np.asarray(x, np.float32) for x in (a, a2, b)]
    np.testing.assert_allclose(out, 2 * f32[0] @ f32[2] + f32[1] @ f32[2], rtol=1e-5, atol=1e-4)


def test_handoffs_elided_between_mmas_but_kept_after_generic_stores():
    """One hand-off (fences around bar.sync) before the back-to-back MMAs, one more after the generic
    stores of A2; the numbers are right when async work completes late."""
    compiled = compile_mlir(_lit_chunk("mma_store_mma"), "mma_store_mma", arch=ARCH)
    body = compiled.ptx[compiled.ptx.index("tcgen05.alloc"):compiled.ptx.index("tcgen05.commit")]
    fences = body.count("tcgen05.fence::before_thread_sync")
    assert fences == 3  # tmem_alloc's, the first MMA's, the third MMA's
    _mma_store_mma(compiled)


def test_a_missing_handoff_is_a_reported_hazard(monkeypatch):
    """The hand-off before the MMA that reads A2 is needed: lowered with every hand-off
    after the first dropped, the simulator reports the MMA reading shared memory that the
    other threads wrote without a fence and a barrier."""
    from smalti.lowering import tcgen05

    real, done = tcgen05._handoff, []

    def first_only(ctx) -> None:
        if not done:
            real(ctx)
            done.append(True)

    monkeypatch.setattr(tcgen05, "_handoff", first_only)
    compiled = compile_mlir(_lit_chunk("mma_store_mma"), "mma_store_mma", arch=ARCH)
    body = compiled.ptx[compiled.ptx.index("tcgen05.alloc"):compiled.ptx.index("tcgen05.commit")]
    assert body.count("tcgen05.fence::before_thread_sync") == 2
    with pytest.raises(SimError, match=r"generic proxy with no fence\.proxy\.async"):
        _mma_store_mma(compiled)


# -- f16 accumulators ----------------------------------------------------------------------
# The simulator runs tcgen05.mma with an f16 D (.kind::f16 with f16 inputs, .kind::f8f6f4):
# one f16 per 32-bit TMEM column, in its low 16 bits, rounded once per instruction. The
# kernels are the hand-written ones of tests/test_sim_tcgen05_mma.py (descriptors from the
# ISA's bit tables), reading D back as 32-bit words with tcgen05.ld.32x32b.

D_TYPE_BITS = 3 << 4  # instruction descriptor bits 4-5: D type (0 f16, 1 f32)


def _f16_accumulated(itype: str, values: str, seed: int) -> tuple[np.ndarray, list]:
    """Run 4 K steps (each a tcgen05.mma, the first overwriting D) of A (128 x K) @ B.T
    (64 x K) into an f16 D; D's 32-bit cells and the per-instruction products."""
    from tests.test_sim_tcgen05_mma import (
        A_BASE,
        B_BASE,
        KIND,
        instruction_descriptor,
        k_major,
        mma_kernel,
        run_mma,
    )
    from tests.test_sim_tcgen05_mma import DTYPES as SIM_DTYPES

    dtype = SIM_DTYPES[itype]
    e = np.dtype(dtype).itemsize
    k_total, n = 128 // e, 64
    rng = np.random.default_rng(seed)
    if values == "exact":  # quarters: every sum is exact in f16
        a, b = (rng.integers(-4, 5, shape) / 4 for shape in ((128, k_total), (n, k_total)))
    else:
        a, b = rng.standard_normal((128, k_total)), rng.standard_normal((n, k_total))
    a, b = a.astype(dtype), b.astype(dtype)
    image = np.zeros(131072, np.uint8)
    a_descs, b_descs = k_major(image, A_BASE, a, 128), k_major(image, B_BASE, b, 128)
    descs = [v for pair in zip(a_descs, b_descs, strict=True) for v in pair]
    steps = len(a_descs)
    idesc = instruction_descriptor(itype, itype, n) & ~D_TYPE_BITS
    out = run_mma(mma_kernel(n, steps, KIND[itype], smem_bytes=131072), image, descs, idesc, n,
                  policy="latest")
    per = k_total // steps
    products = [a[:, s * per:(s + 1) * per].astype(np.float64)
                @ b[:, s * per:(s + 1) * per].astype(np.float64).T for s in range(steps)]
    return out.view(np.uint32), products


@pytest.mark.parametrize("itype", ["f16", "e4m3"])
def test_f16_accumulator_matches_numpy(itype):
    """Sums that are exact in f16: D's low halves are A @ B, its high halves zero."""
    words, products = _f16_accumulated(itype, "exact", seed=3)
    np.testing.assert_array_equal(words >> 16, 0)
    d = (words & 0xFFFF).astype(np.uint16).view(np.float16)
    np.testing.assert_array_equal(d.astype(np.float64), sum(products))


@pytest.mark.parametrize("itype", ["f16", "e4m3"])
def test_f16_accumulator_rounds_once_per_instruction(itype):
    """Normal values: each instruction adds its exact product to the f16 D and rounds once
    to f16 (the first overwrites), which differs from rounding the f32 sum once."""
    words, products = _f16_accumulated(itype, "normal", seed=4)
    expected = np.zeros_like(products[0])
    for product in products:
        expected = (expected + product).astype(np.float16).astype(np.float64)
    got = (words & 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float64)
    np.testing.assert_array_equal(got, expected)
    assert not np.array_equal(got, sum(products).astype(np.float16).astype(np.float64))


def test_f16_accumulator_with_bf16_inputs_is_a_fault():
    """.kind::f16 accumulates bf16 x bf16 only in f32 (PTX ISA, tcgen05.mma types table)."""
    from tests.test_sim_tcgen05_mma import mma_kernel, run_mma, small_case

    image, descs, idesc, _ = small_case()  # bf16 x bf16
    with pytest.raises(SimError, match=r"D of type f16 does not go with \.kind::f16 with "
                                       r"bf16 x bf16"):
        run_mma(mma_kernel(64, 4, "f16"), image, descs, idesc & ~D_TYPE_BITS, 64)


def test_packed_f16_accumulator_is_a_located_error():
    """tcgen05.mma writes an f16 D one element per 32-bit column: a packed 16-bit TMEM ref
    (two elements per column) is refused by the verifier; the unpacked form is the one."""
    text = _lit_chunk("mma_a_in_tmem_f16").replace(
        'columns = 64 : i64} : () -> memref<128x64xf32, "tmem">',
        'columns = 32 : i64} : () -> memref<128x64xf16, "tmem">').replace(
        'memref<128x64xf32, "tmem">', 'memref<128x64xf16, "tmem">')
    text = re.sub(r"%v = .*\n.*vector_store.*\n", "", text)
    with pytest.raises(DiagnosticError, match=r"tcgen05\.mlir:\d+:\d+: error: "
                                              r"'smalti\.tcgen05_mma' op writes a f16 D one "
                                              r"element per 32-bit TMEM column: the "
                                              r"accumulator must be an unpacked ref"):
        compile_mlir(text, "tcgen05.mlir", arch=ARCH)


@pytest.mark.parametrize("policy", ["latest", "random"])
def test_f16_accumulator_in_unpacked_tensor_memory(policy):
    """The lit kernel mma_f16_accumulator: f16 A @ B into columns 32-159 of an unpacked f16
    accumulator, read back with .pack::16b: numpy's product, rounded to f16 (small integers:
    exact)."""
    rng = np.random.default_rng(9)
    a = rng.integers(-3, 4, (128, 32)).astype(np.float16)
    b = rng.integers(-3, 4, (32, 128)).astype(np.float16)
    compiled = compile_mlir(_lit_chunk("mma_f16_accumulator"), "tcgen05.mlir", arch=ARCH)
    out = run_simulated(compiled, a, b, np.zeros((128, 128), np.float16),
                        async_completion=policy, seed=2)[-1]
    np.testing.assert_array_equal(out, (a.astype(np.float32) @ b.astype(np.float32))
                                  .astype(np.float16))
