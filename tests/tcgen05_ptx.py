"""PTX text the tcgen05 simulator tests share."""

from __future__ import annotations

from smalti.ptx.toolchain import ToolchainError, compile_ptx, find_tool


def assembles(ptx: str) -> None:
    """ptxas assembles `ptx` for sm_100a (when ptxas is installed)."""
    try:
        find_tool("ptxas")
    except ToolchainError:
        return
    compile_ptx(ptx, arch="sm_100a")


def copy_image(smem_bytes: int) -> str:
    """PTX: the 128 threads (%r1 the thread) copy `smem_bytes` from global %rd1 into shared
    `smem`, 16 bytes each at a time, then fence them for the async proxy."""
    return f"""  mov.u32 %r3, smem;
  mov.u32 %r4, %r1;
COPY:
  mul.wide.u32 %rd2, %r4, 16;
  add.u64 %rd3, %rd1, %rd2;
  ld.global.v4.b32 {{%r5, %r6, %r7, %r8}}, [%rd3];
  shl.b32 %r14, %r4, 4;
  add.u32 %r15, %r3, %r14;
  st.shared.v4.b32 [%r15], {{%r5, %r6, %r7, %r8}};
  add.u32 %r4, %r4, 128;
  setp.lt.u32 %p1, %r4, {smem_bytes // 16};
  @%p1 bra COPY;
  fence.proxy.async.shared::cta;
"""


def staged_prologue(smem_bytes: int) -> str:
    """The start of a 128-thread kernel body with an `image` (.u64) parameter: the threads
    copy `smem_bytes` of `image` into shared `smem` (fenced for the async proxy), warp 0
    allocates all 512 TMEM columns (address in shared `slot`) and gives up the permit,
    thread 0 initialises the mbarrier `bar`, and everyone meets. Then %r1 is the thread,
    %r2 its warp, %p5 thread 0, %r9 the TMEM address and %r11 the warp's lane quarter."""
    return f"""  .shared .align 1024 .b8 smem[{smem_bytes}];
  .shared .align 8 .b64 bar;
  .shared .align 4 .b32 slot;
  mov.u32 %r1, %tid.x;
  shr.u32 %r2, %r1, 5;
  ld.param.u64 %rd1, [image];
{copy_image(smem_bytes)}  setp.eq.u32 %p2, %r2, 0;
  @!%p2 bra ALLOCATED;
  tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 512;
  tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
ALLOCATED:
  setp.eq.u32 %p5, %r1, 0;
  @%p5 mbarrier.init.shared::cta.b64 [bar], 1;
  tcgen05.fence::before_thread_sync;
  bar.sync 0;
  tcgen05.fence::after_thread_sync;
  ld.shared.b32 %r9, [slot];
  shl.b32 %r16, %r2, 21;
  add.u32 %r11, %r9, %r16;
"""
