"""wgmma instructions are `.sync.aligned` over a warpgroup: lanes that reach one while members
of their warpgroup are elsewhere (here thread 0 still polling a flag, asleep in the
simulator's spin detection) wait for them and execute it together; a warpgroup whose
members exited before it is an error naming the instruction."""

from __future__ import annotations

import numpy as np
import pytest

from smalti.ptx.toolchain import compile_ptx
from smalti.sim import SimError, run_ptx

KERNEL = """
.version 8.0
.target sm_90a
.address_size 64

.visible .entry rendezvous(.param .u64 out, .param .u64 flag)
{
  .reg .pred %p<4>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd0, [out];
  ld.param.u64 %rd1, [flag];
  cvta.to.global.u64 %rd2, %rd0;
  cvta.to.global.u64 %rd3, %rd1;
  mov.u32 %r0, %tid.x;
  setp.ne.u32 %p0, %r0, 0;
  @%p0 bra READY;
SPIN:
  ld.volatile.global.u32 %r1, [%rd3];
  setp.eq.u32 %p1, %r1, 0;
  @%p1 bra SPIN;
READY:
  setp.eq.u32 %p2, %r0, 32;
  @%p2 st.volatile.global.u32 [%rd3], 1;
  EXIT_EARLY
  wgmma.fence.sync.aligned;
  wgmma.commit_group.sync.aligned;
  wgmma.wait_group.sync.aligned 0;
  mul.wide.u32 %rd4, %r0, 4;
  add.s64 %rd5, %rd2, %rd4;
  st.global.u32 [%rd5], %r0;
  ret;
}
"""


def _kernel(exit_early: bool) -> str:
    early = "setp.eq.u32 %p3, %r0, 5;\n  @%p3 ret;" if exit_early else ""
    return KERNEL.replace("EXIT_EARLY", early)


def test_the_kernel_assembles():
    compile_ptx(_kernel(False))
    compile_ptx(_kernel(True))


def test_lanes_wait_at_wgmma_for_a_member_still_polling():
    out, flag = np.zeros(128, np.uint32), np.zeros(1, np.uint32)
    run_ptx(_kernel(False), "rendezvous", (1, 1, 1), (128, 1, 1), [out, flag])
    np.testing.assert_array_equal(out, np.arange(128))


def test_a_warpgroup_with_an_exited_member_cannot_run_wgmma():
    out, flag = np.zeros(128, np.uint32), np.zeros(1, np.uint32)
    with pytest.raises(SimError, match="wgmma needs all 128 threads of a warpgroup; 127"):
        run_ptx(_kernel(True), "rendezvous", (1, 1, 1), (128, 1, 1), [out, flag])
