"""Kernels ptxas says will not run as written: register spills, `setmaxnreg` ignored,
wgmma serialised. A Python warning names the kernel and points at its source line, so a
kernel that spills does not run silently slower."""

from __future__ import annotations

import warnings

from smalti.ptx.ptxas_log import PtxasReport


class KernelQualityWarning(UserWarning):
    """ptxas reports register spills or a performance failure (C7508, C7510-C7515)."""


# What one thread of a warpgroup may hold in registers before ptxas spills (README).
REGISTERS_PER_THREAD = 255


def quality_problems(report: PtxasReport) -> list[str]:
    """What is wrong with the kernel's machine code, each said once; empty if nothing."""
    problems = []
    if report.spill_stores or report.spill_loads:
        problems.append(f"spills registers to local memory ({report.spill_stores} bytes "
                        f"stored, {report.spill_loads} loaded back; ptxas used "
                        f"{report.registers} registers per thread): it holds more values at "
                        f"once than the {REGISTERS_PER_THREAD} registers one thread has "
                        "(a 128x128 f32 array is 128 per thread); work on smaller tiles, or "
                        "keep fewer arrays live at once")
    problems.extend(f"ptxas: {warning}" for warning in report.performance_failures)
    return problems


def warn_about_quality(report: PtxasReport | None, kernel: str,
                       where: tuple[str, int, int] | None) -> None:
    """A KernelQualityWarning per problem of `report`, at the kernel's line `where`."""
    if report is None:
        return
    for problem in quality_problems(report):
        message = f"kernel {kernel} {problem}"
        if where is None:
            warnings.warn(message, KernelQualityWarning, stacklevel=3)
        else:
            file, line, _ = where
            warnings.warn_explicit(message, KernelQualityWarning, file, line)
