"""What the autotuner's static model (smalti.schedule.autotune_model) reads of a compiled
kernel: ptxas's registers and shared memory, and from nvdisasm's SASS the instruction count
and the main loop."""

from __future__ import annotations

from dataclasses import dataclass

from smalti.ptx.sass import SassLoop, main_loop
from smalti.ptx.toolchain import disassemble, sass_opcode_counts
from smalti.runtime.cache import CompiledKernel


@dataclass(frozen=True)
class MachineCode:
    """What the model reads of a compiled kernel: ptxas's registers and shared memory, its
    SASS instruction count and main loop."""

    registers: int
    shared_bytes: int
    sass_instructions: int
    loop: SassLoop | None


def machine_code(compiled: CompiledKernel) -> MachineCode | None:
    """The kernel's machine code as the model reads it; None without a cubin (no ptxas)."""
    if compiled.cubin is None or compiled.report is None:
        return None
    sass = disassemble(compiled.cubin)
    return MachineCode(compiled.report.registers, compiled.report.shared_bytes,
                       sum(sass_opcode_counts(sass).values()), main_loop(sass))
