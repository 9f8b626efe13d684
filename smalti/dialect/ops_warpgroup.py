"""Warp-specialised regions: code that only some warpgroups of a kernel run.

    "smalti.warpgroup_region"() ({
      ...
    }) {warpgroup = 0 : i64, max_registers = 40 : i64} : () -> ()

`warpgroup` names the warpgroup (an i64) or warpgroups (`array<i64: 1, 2>`) that run the
region; the others skip it. `max_registers`, when given, is the per-thread register budget
of that role: the region starts with `setmaxnreg` to it.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect.definition import INTEGER, INTEGERS, Attr, SmaltiOp
from smalti.dialect.diagnostics import error_at
from smalti.tiling import WARPGROUP_SIZE

WARPGROUP_ATTR = "warpgroup"
MAX_REGISTERS_ATTR = "max_registers"
REGISTER_FILE = 64 * 1024  # 32-bit registers per SM (and per block at most)
REGISTER_STEP = 8  # setmaxnreg counts are multiples of 8 ...
MIN_REGISTERS, MAX_REGISTERS = 24, 256  # ... in [24, 256] (PTX ISA, setmaxnreg)
MAX_THREAD_REGISTERS = 255  # what ptxas gives one thread at most without setmaxnreg


def entry_register_budget(warpgroups: int) -> int:
    """Registers per thread a kernel of `warpgroups` warpgroups starts with when it declares
    `.maxntid` and `.minnctapersm 1`: the register file shared out in steps of 8."""
    share = REGISTER_FILE // (WARPGROUP_SIZE * warpgroups)
    return min(share - share % REGISTER_STEP, MAX_THREAD_REGISTERS - MAX_THREAD_REGISTERS
               % REGISTER_STEP)


def budget_problem(count: int) -> str | None:
    """Why `count` is not a setmaxnreg register count, or None."""
    if count % REGISTER_STEP or not MIN_REGISTERS <= count <= MAX_REGISTERS:
        return (f"register budget {count} must be a multiple of {REGISTER_STEP} in "
                f"[{MIN_REGISTERS}, {MAX_REGISTERS}]")
    return None


class WarpgroupRegionOp(SmaltiOp):
    """A region run only by the warpgroups its `warpgroup` attribute names."""

    OPERATION_NAME = "smalti.warpgroup_region"
    REGIONS = 1

    warpgroups = Attr(INTEGERS, "the warpgroups that run the region, in the order written",
                      attr_name=WARPGROUP_ATTR)
    max_registers = Attr(INTEGER, "the role's per-thread register budget (setmaxnreg)",
                         optional=True)

    @property
    def body(self) -> ir.Block | None:
        """The region's block (None when the region is empty)."""
        blocks = self.operation.regions[0].blocks
        return blocks[0] if len(blocks) else None

    def verify_op(self) -> None:
        op = self.operation
        if len(op.regions[0].blocks) > 1:
            raise error_at(op, "expects one region of at most one block")
        if self.body is not None and len(self.body.arguments):
            raise error_at(op, "expects a region without block arguments")
        warpgroups = self.warpgroups
        if not warpgroups or any(w < 0 for w in warpgroups):
            raise error_at(op, f"'{WARPGROUP_ATTR}' must name non-negative warpgroup indices, "
                               f"got {list(warpgroups)}")
        if len(set(warpgroups)) != len(warpgroups):
            raise error_at(op, f"'{WARPGROUP_ATTR}' names a warpgroup twice: {list(warpgroups)}")
        if self.max_registers is not None:
            problem = budget_problem(self.max_registers)
            if problem is not None:
                raise error_at(op, f"'{MAX_REGISTERS_ATTR}': {problem}")
