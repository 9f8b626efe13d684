"""Runs a PTX snippet per thread: inputs %r10.. loaded from a (threads, k) u32 array, outputs
%r20.. stored to another; shared by the table-driven simulator tests."""

from __future__ import annotations

import numpy as np

from smalti.sim import run_ptx

HEADER = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry body(.param .u64 inp, .param .u64 outp)
{
  .reg .pred %p<8>;
  .reg .b32 %r<64>;
  .reg .b64 %rd<16>;
  .reg .f32 %f<16>;
  .shared .align 16 .b8 smem[4096];
  ld.param.u64 %rd1, [inp];
  ld.param.u64 %rd2, [outp];
  mov.u32 %r0, %tid.x;
  mov.u32 %r1, %ntid.x;
  mov.u32 %r2, %ctaid.x;
  mad.lo.s32 %r3, %r2, %r1, %r0;
"""


def run_body(body: str, inputs: np.ndarray, outputs: int, block: int = 32,
             grid: int = 1) -> np.ndarray:
    """Run `body` with inputs (threads, k) as %r10.. and return %r20.. as (threads, outputs)."""
    inputs = np.ascontiguousarray(inputs, dtype=np.uint32).reshape(block * grid, -1)
    k = inputs.shape[1]
    lines = [HEADER, f"  mul.wide.u32 %rd3, %r3, {4 * k};", "  add.s64 %rd4, %rd1, %rd3;",
             f"  mul.wide.u32 %rd5, %r3, {4 * outputs};", "  add.s64 %rd6, %rd2, %rd5;"]
    lines += [f"  ld.global.u32 %r{10 + i}, [%rd4+{4 * i}];" for i in range(k)]
    lines += [f"  mov.u32 %r{20 + i}, 0;" for i in range(outputs)]
    lines.append(body)
    lines += [f"  st.global.u32 [%rd6+{4 * i}], %r{20 + i};" for i in range(outputs)]
    lines.append("  ret;\n}\n")
    out = np.zeros((block * grid, outputs), np.uint32)
    run_ptx("\n".join(lines), "body", grid, block, [inputs, out])
    return out
