"""Reads the `ptxas -v --warn-on-spills` log into one resource report per function."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Warnings that mean the kernel will not run as designed: setmaxnreg ignored, wgmma serialised.
PERFORMANCE_FAILURE_CODES = frozenset({"C7508", "C7510", "C7511", "C7512", "C7513", "C7514",
                                       "C7515"})

_FUNCTION = re.compile(r"ptxas info\s*: (?:Compiling entry function|Function properties for)"
                       r" '?([^'\s]+)'?")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"ptxas info\s*: Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[\d+\]")
_WARNING = re.compile(r"ptxas (?:warning\s*: (.*)|info\s*: (\(C\d{4}\).*))")
_CODE = re.compile(r"\((C\d{4})\)")
_NAMED = re.compile(r"'([^']+)'|\bentry (\S+)")


@dataclass(frozen=True)
class PtxasReport:
    """What ptxas says one function uses: registers, spills (bytes), memory, warnings."""

    kernel: str
    registers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    shared_bytes: int = 0
    stack_frame: int = 0
    constant_bytes: int = 0
    barriers: int = 0
    warnings: tuple[str, ...] = field(default=())

    @property
    def performance_failures(self) -> tuple[str, ...]:
        """Warnings with a code that means lost performance (C7508, C7510-C7515)."""
        return tuple(w for w in self.warnings if warning_code(w) in PERFORMANCE_FAILURE_CODES)


def warning_code(warning: str) -> str | None:
    """The `Cnnnn` code in a ptxas message, if it has one."""
    match = _CODE.search(warning)
    return match.group(1) if match else None


def parse_ptxas_log(log: str, kernel_hint: str | None = None) -> dict[str, PtxasReport]:
    """One report per function named in `log`.

    A warning naming a function goes to it; one naming none (C7508 does not) goes to
    `kernel_hint` when given, else to every function, so that no failure is lost.
    """
    fields: dict[str, dict[str, int]] = {}
    warnings: list[str] = []
    current: str | None = None
    for line in log.splitlines():
        if (match := _FUNCTION.match(line)) is not None:
            current = match.group(1)
            fields.setdefault(current, {})
        elif (match := _FRAME.search(line)) is not None and current is not None:
            stack, stores, loads = (int(g) for g in match.groups())
            fields[current].update(stack_frame=stack, spill_stores=stores, spill_loads=loads)
        elif (match := _USED.match(line)) is not None and current is not None:
            found = fields[current]
            found["registers"] = int(match.group(1))
            if (barriers := _BARRIERS.search(line)) is not None:
                found["barriers"] = int(barriers.group(1))
            if (smem := _SMEM.search(line)) is not None:
                found["shared_bytes"] = int(smem.group(1))
            found["constant_bytes"] = sum(int(c) for c in _CMEM.findall(line))
        elif (match := _WARNING.match(line)) is not None:
            warnings.append((match.group(1) or match.group(2)).strip())
    per_function: dict[str, list[str]] = {name: [] for name in fields}
    for warning in warnings:
        for name in _targets(warning, per_function, kernel_hint):
            per_function.setdefault(name, []).append(warning)
            fields.setdefault(name, {})
    return {
        name: PtxasReport(name, warnings=tuple(per_function.get(name, ())), **values)
        for name, values in fields.items()
    }


def _targets(warning: str, known: dict[str, list[str]], hint: str | None) -> list[str]:
    named = [a or b for a, b in _NAMED.findall(warning)]
    matches = [name for name in named if name in known]
    if matches:
        return matches[:1]
    if hint is not None:
        return [hint]
    return list(known)
