"""Tensor memory in the simulator: tcgen05.alloc/dealloc/relinquish_alloc_permit and the
data-path layouts of tcgen05.ld/st, checked against tables written from the PTX ISA's
figures ("Matrix fragments for tcgen05.ld/st": .32x32b, .16x64b, .16x128b, .16x256b,
.16x32bx2), and the faults the ISA's rules imply. Every kernel here assembles with ptxas for
sm_100a.

The tables are built the way the figures are drawn, lane row by lane row and column by
column, naming the thread and register each cell comes from; the simulator maps the other way
(thread, register) -> (lane, column).
"""

from __future__ import annotations

import numpy as np
import pytest

from smalti.sim import SimError, run_ptx
from tests.tcgen05_ptx import assembles

HEADER = """.version 8.7
.target sm_100a
.address_size 64
"""
REGS = {"32x32b": 1, "16x64b": 1, "16x128b": 2, "16x256b": 4, "16x32bx2": 1}
COLUMNS = {"32x32b": 1, "16x64b": 2, "16x128b": 4, "16x256b": 8, "16x32bx2": 1}




def figure(shape: str, num: int, split: int = 0) -> dict[tuple[int, int], tuple[int, int]]:
    """(lane, column) -> (thread, register) of one warp's access, as the ISA's figures draw it
    (lanes relative to the address's lane, 32-bit columns relative to its column)."""
    cells = {}
    for rep in range(num):
        if shape == "32x32b":  # lane i holds thread i's registers, one column per register
            for lane in range(32):
                cells[lane, rep] = (lane, rep)
        elif shape == "16x64b":  # row i: T4i, T4i+2 (lanes 0-7); T4i+1, T4i+3 (lanes 8-15)
            for row in range(8):
                for half in range(2):
                    for col in range(2):
                        cells[row + 8 * half, 2 * rep + col] = (4 * row + 2 * col + half, rep)
        elif shape == "16x128b":  # row i: T4i..T4i+3, r0 in lanes 0-7 and r1 in lanes 8-15
            for row in range(8):
                for half in range(2):
                    for col in range(4):
                        cells[row + 8 * half, 4 * rep + col] = (4 * row + col, 2 * rep + half)
        elif shape == "16x256b":  # row i: T4i r0 r1, T4i+1 r0 r1, ...; r2 r3 in lanes 8-15
            for row in range(8):
                for half in range(2):
                    for col in range(8):
                        cells[row + 8 * half, 8 * rep + col] = (
                            4 * row + col // 2, 4 * rep + 2 * half + col % 2)
        elif shape == "16x32bx2":  # T0-15 at the address, T16-31 immHalfSplitoff columns on
            for lane in range(16):
                cells[lane, rep] = (lane, rep)
                cells[lane, split + rep] = (16 + lane, rep)
    return cells


def regs(prefix: str, count: int) -> str:
    return "{" + ", ".join(f"%{prefix}{i}" for i in range(count)) + "}"


def kernel(shape: str, num: int, *, upper: bool = False, split: int = 0, unpack: bool = False,
           load: str | None = None, ncols: int = 128, wait_st: bool = True,
           wait_ld: bool = True, warp_offset: bool = True, read_early: bool = False,
           load_regs: int | None = None, load_extra: str = "") -> str:
    """128 threads: warp 0 allocates `ncols` columns; every thread stores tid*256 + i in its
    register i with `tcgen05.st.<shape>.x<num>` at its warp's lanes (16 lanes further with
    `upper`), then each warp reads back `ncols` columns with `load` (default .32x32b) and
    writes them to out[lane][column]."""
    count = REGS[shape] * num
    width = load_regs or ncols
    load = load or f"32x32b.x{width}"
    unpack_mod = ".unpack::16b" if unpack else ""
    extra = f", {split}" if shape == "16x32bx2" else ""
    lanes = "shl.b32 %r4, %r3, 21;" if warp_offset else "mov.b32 %r4, 0;"
    stores = "\n".join(f"  mad.lo.u32 %v{i}, %r1, 256, {i};" for i in range(count))
    early = "  add.u32 %r9, %q0, 1;\n" if read_early else ""
    return HEADER + f"""
.visible .entry tmem_map(.param .u64 out)
{{
  .reg .b32 %r<16>;
  .reg .b32 %v<{max(count, 1)}>;
  .reg .b32 %q<{width}>;
  .reg .b64 %rd<8>;
  .reg .pred %p<4>;
  .shared .align 16 .b32 slot;
  mov.u32 %r1, %tid.x;
  shr.u32 %r2, %r1, 5;
  and.b32 %r3, %r2, 3;
  setp.eq.u32 %p1, %r2, 0;
  @!%p1 bra ALLOCATED;
  tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], {ncols};
  tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
ALLOCATED:
  tcgen05.fence::before_thread_sync;
  bar.sync 0;
  tcgen05.fence::after_thread_sync;
  ld.shared.b32 %r5, [slot];
  {lanes}
  add.u32 %r6, %r5, %r4;
  add.u32 %r7, %r6, {(16 << 16) if upper else 0};
{stores}
  tcgen05.st.sync.aligned.{shape}.x{num}{unpack_mod}.b32 [%r7]{extra}, {regs("v", count)};
  {"tcgen05.wait::st.sync.aligned;" if wait_st else ""}
  tcgen05.ld.sync.aligned.{load}.b32 {regs("q", width)}, [%r6]{load_extra};
{early}  {"tcgen05.wait::ld.sync.aligned;" if wait_ld else ""}
  ld.param.u64 %rd1, [out];
  mul.wide.u32 %rd2, %r1, {4 * width};
  add.u64 %rd3, %rd1, %rd2;
""" + "\n".join(f"  st.global.b32 [%rd3+{4 * j}], %q{j};" for j in range(width)) + f"""
  tcgen05.fence::before_thread_sync;
  bar.sync 0;
  @!%p1 bra DONE;
  tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r5, {ncols};
DONE:
  ret;
}}
"""


def run(ptx: str, ncols: int = 128) -> np.ndarray:
    out = np.zeros((128, ncols), np.uint32)
    run_ptx(ptx, "tmem_map", 1, 128, [out])
    return out


CASES = [("32x32b", 1), ("32x32b", 4), ("16x64b", 1), ("16x64b", 4), ("16x128b", 1),
         ("16x128b", 2), ("16x256b", 1), ("16x256b", 2), ("16x32bx2", 2)]


@pytest.mark.parametrize(("shape", "num", "upper"), [
    (shape, num, upper) for shape, num in CASES for upper in (False, True)
    if not (upper and shape == "32x32b")])  # .32x32b spans the warp's 32 lanes
def test_store_layout_matches_the_isa_figure(shape: str, num: int, upper: bool) -> None:
    """Each cell a .<shape> store writes holds the value of the thread and register the
    figure names (`upper`: from the address's lane + 16); cells it does not reach stay zero
    (tensor memory starts zeroed here)."""
    split = 8 if shape == "16x32bx2" else 0
    ptx = kernel(shape, num, upper=upper, split=split)
    assembles(ptx)
    out = run(ptx)
    expected = np.zeros_like(out)
    shift = 16 if upper else 0
    for warp in range(4):
        for (lane, column), (thread, register) in figure(shape, num, split).items():
            expected[32 * warp + shift + lane, column] = (32 * warp + thread) * 256 + register
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize(("shape", "num"), CASES)
def test_round_trip_through_the_same_shape(shape: str, num: int) -> None:
    """tcgen05.st then tcgen05.ld of one shape give every thread its own registers back."""
    count = REGS[shape] * num
    split = 8 if shape == "16x32bx2" else 0
    extra = f", {split}" if split else ""
    ptx = kernel(shape, num, split=split, load=f"{shape}.x{num}", ncols=32, load_regs=count,
                 load_extra=extra)
    assembles(ptx)
    out = np.zeros((128, count), np.uint32)
    run_ptx(ptx, "tmem_map", 1, 128, [out])
    threads = np.arange(128)[:, None]
    np.testing.assert_array_equal(out[:, :count], threads * 256 + np.arange(count))


def test_unpack_puts_halves_in_adjacent_columns_and_pack_joins_them() -> None:
    """.unpack::16b: a register's low half goes to column 2c, its high half to 2c+1;
    .pack::16b reads them back as one register."""
    ptx = kernel("32x32b", 2, unpack=True, ncols=32)
    assembles(ptx)
    out = run(ptx, 32)
    values = np.arange(128)[:, None] * 256 + np.arange(2)
    np.testing.assert_array_equal(out[:, 0:4:2], values & 0xFFFF)
    np.testing.assert_array_equal(out[:, 1:4:2], values >> 16)
    packed = kernel("32x32b", 2, unpack=True, ncols=32, load="32x32b.x2.pack::16b",
                    load_regs=2)
    assembles(packed)
    out = np.zeros((128, 2), np.uint32)
    run_ptx(packed, "tmem_map", 1, 128, [out])
    np.testing.assert_array_equal(out[:, :2], values)


def fails(ptx: str, match: str) -> None:
    assembles(ptx)
    with pytest.raises(SimError, match=match):
        run(ptx, 32 if "x32.b32" in ptx else 128)


def test_a_warp_reaches_only_its_quarter_of_the_lanes() -> None:
    fails(kernel("32x32b", 1, ncols=32, warp_offset=False), r"warp 1 of its warpgroup reaches "
          r"only tensor memory lanes 32\.\.63")


def test_columns_past_the_allocation_fault() -> None:
    ptx = kernel("32x32b", 1, ncols=32).replace("[%r7], {%v0}", "[%r7+32], {%v0}")
    fails(ptx, "column 32 of tensor memory is not allocated")


def test_loaded_registers_are_readable_before_wait_ld() -> None:
    """A tcgen05.ld's destination registers are data dependencies, as NVVM's intrinsic (it
    returns them; tcgen05.wait::ld is separate) and CUTLASS 4.2's sm100 epilogue (it reads
    each subtile's before the one wait) use them: read at once, they hold the cells."""
    ptx = kernel("32x32b", 1, ncols=32, wait_ld=False, read_early=True)
    assembles(ptx)
    out = run(ptx, 32)
    np.testing.assert_array_equal(out[:, 0], np.arange(128) * 256)


def test_loading_stored_cells_before_wait_st_is_a_hazard() -> None:
    fails(kernel("32x32b", 1, ncols=32, wait_st=False),
          "tensor memory that the tcgen05.st at line .* still writes: tcgen05.wait::st first")


ALLOC = HEADER + """
.visible .entry tmem_map(.param .u64 out)
{
  .reg .b32 %r<8>;
  .reg .pred %p<2>;
  .shared .align 16 .b32 slot[2];
  mov.u32 %r1, %tid.x;
  setp.lt.u32 %p1, %r1, 32;
  @!%p1 bra DONE;
  BODY
DONE:
  ret;
}
"""


def alloc_kernel(body: str) -> str:
    return ALLOC.replace("BODY", body)


def test_allocations_are_powers_of_two_and_the_address_goes_to_shared_memory() -> None:
    ptx = alloc_kernel("""
  tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 64;
  tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot+4], 128;
  tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
  ld.shared.b32 %r2, [slot];
  ld.shared.b32 %r3, [slot+4];
  tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r3, 128;
  tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r2, 64;
  ld.param.u64 %rd1, [out];
  st.global.v2.b32 [%rd1], {%r2, %r3};""").replace(".reg .b32 %r<8>;",
                                                    ".reg .b32 %r<8>;\n  .reg .b64 %rd<2>;")
    assembles(ptx)
    out = np.zeros((128, 128), np.uint32)
    run_ptx(ptx, "tmem_map", 1, 128, [out])
    # lane 0 in bits 31-16, the column in bits 15-0: 64 columns at 0, 128 at 128
    assert out[0, :2].tolist() == [0, 128]


@pytest.mark.parametrize(("body", "match"), [
    ("mov.b32 %r2, 96;\n  tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], %r2;",
     "must be a power of two in"),
    ("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;\n"
     "  tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 32;",
     "after tcgen05.relinquish_alloc_permit"),
    ("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 512;\n"
     "  tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 32;",
     "would block forever"),
    ("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 64;\n"
     "  ld.shared.b32 %r2, [slot];\n"
     "  tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r2, 32;",
     "allocated with 64"),
    ("mov.b32 %r2, 0;\n  tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r2, 32;",
     "which no tcgen05.alloc returned"),
])
def test_allocation_rules(body: str, match: str) -> None:
    ptx = alloc_kernel(body)
    assembles(ptx)
    with pytest.raises(SimError, match=match):
        run_ptx(ptx, "tmem_map", 1, 128, [np.zeros(4, np.uint32)])


def test_exiting_with_tensor_memory_allocated_is_reported() -> None:
    """PTX ISA, "Tensor Memory Allocation": every allocation is freed before the kernel
    exits; the launch reports the columns a CTA left allocated."""
    body = HEADER + """
.visible .entry leak(.param .u64 out)
{
  .reg .b32 %r<4>;
  .reg .pred %p<2>;
  .shared .align 16 .b32 slot;
  mov.u32 %r1, %tid.x;
  setp.lt.u32 %p1, %r1, 32;
  @!%p1 bra DONE;
  tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 64;
DONE:
  ret;
}
"""
    assembles(body)
    with pytest.raises(SimError, match=r"exited with 64 columns of tensor memory still "
                                       r"allocated \(columns 0\.\.63\).*block \(0, 0, 0\)"):
        run_ptx(body, "leak", 2, 64, [np.zeros(1, np.uint32)])
