"""Reading nvdisasm's SASS: a kernel's main loop (the innermost loop holding its first MMA:
HGMMA on sm_90a, UTC*MMA (tcgen05.mma) on sm_100a) and the tensor-core work that loop does,
for benchmarks and the autotuner's static model."""

from __future__ import annotations

import re
from dataclasses import dataclass

_INSTRUCTION = re.compile(r"/\*[0-9a-f]{4}\*/")
_LABEL = re.compile(r"\s*(\.L_x_\d+):")
_ELECT_RETRY = "BRA.U.ANY"  # the branch of ptxas's loop electing threads one by one
_BRANCH = re.compile(r"BRA[^`]*`\((\.L_x_\d+)\)")
_HGMMA_SHAPE = re.compile(r"HGMMA\.(\d+)x(\d+)x(\d+)")
_MMA = re.compile(r"\b(?:HGMMA|UTC\w*MMA)\b")


@dataclass(frozen=True)
class SassLoop:
    """A loop of SASS: its instructions (one per line, as nvdisasm prints them), and the
    multiply-accumulates its HGMMAs do per iteration (m x n x k of each, summed)."""

    instructions: tuple[str, ...]

    @property
    def length(self) -> int:
        return len(self.instructions)

    @property
    def hgmma(self) -> int:
        return sum("HGMMA" in line for line in self.instructions)

    @property
    def mma(self) -> int:
        """The loop's MMA instructions: HGMMA, or UTC*MMA on sm_100a."""
        return sum(bool(_MMA.search(line)) for line in self.instructions)

    @property
    def macs(self) -> int:
        """Multiply-accumulates per iteration, over the loop's HGMMAs (one warpgroup's; 0
        for UTC*MMA, whose shape lives in its instruction descriptor, not its name)."""
        total = 0
        for line in self.instructions:
            if (match := _HGMMA_SHAPE.search(line)) is not None:
                m, n, k = (int(g) for g in match.groups())
                total += m * n * k
        return total

    def count(self, opcode: str) -> int:
        """Instructions of the loop whose mnemonic starts with `opcode` (e.g. 'LDL')."""
        pattern = re.compile(rf"\*/\s+(?:@!?U?P\w+\s+)?{re.escape(opcode)}\b")
        return sum(bool(pattern.search(line)) for line in self.instructions)


def sass_lines(sass: str) -> list[str]:
    """The instruction and label lines of nvdisasm's output, in order."""
    return [line for line in sass.splitlines()
            if _INSTRUCTION.search(line) or _LABEL.match(line)]


def main_loop(sass: str) -> SassLoop | None:
    """The innermost loop holding the first MMA that is in a loop: from a label to the last
    backward branch to it after that MMA; None when no MMA is in a loop. (Loops may be
    unrolled: the loop may hold several K tiles' MMAs. An MMA peeled into a prologue is
    passed over, and so are the `BRA.U.ANY` loops ptxas wraps around a UTC*MMA issued
    under a per-thread predicate, which retry until each thread has been elected.)"""
    lines = sass_lines(sass)
    labels = {m.group(1): i for i, line in enumerate(lines) if (m := _LABEL.match(line))}
    loops = [(labels[m.group(1)], i) for i, line in enumerate(lines)
             if (m := _BRANCH.search(line)) and m.group(1) in labels
             and labels[m.group(1)] < i and _ELECT_RETRY not in line]
    for mma in (i for i, line in enumerate(lines) if _MMA.search(line)):
        around = [(start, end) for start, end in loops if start <= mma <= end]
        if around:
            start, end = min(around, key=lambda span: span[1] - span[0])
            return SassLoop(tuple(line for line in lines[start:end + 1]
                                  if _INSTRUCTION.search(line)))
    return None
