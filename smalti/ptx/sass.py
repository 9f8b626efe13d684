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
_EXIT = re.compile(r"\*/\s+EXIT\b")  # unpredicated
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


def loop_spans(sass: str) -> tuple[list[str], list[tuple[int, int]]]:
    """nvdisasm's instruction and label lines, and the (first, last) line of each loop of the
    program: from a label to the last backward branch to it. Not loops of the program:
    ptxas's `BRA.U.ANY` loops around a UTC*/UTMA* instruction issued under a per-thread
    predicate (they retry until each thread has been elected); loops of one or two
    instructions (spin waits, the `BRA` to itself after EXIT); and a span holding an
    unpredicated EXIT, which is out-of-line code (a wait's slow path) branching back into
    the straight line."""
    lines = sass_lines(sass)
    labels = {m.group(1): i for i, line in enumerate(lines) if (m := _LABEL.match(line))}
    ends: dict[int, int] = {}
    for i, line in enumerate(lines):
        if ((m := _BRANCH.search(line)) and m.group(1) in labels
                and labels[m.group(1)] < i and _ELECT_RETRY not in line):
            ends[labels[m.group(1)]] = i
    spans = [(start, end) for start, end in sorted(ends.items()) if end - start > 2
             and not any(_EXIT.search(line) for line in lines[start:end])]
    return lines, spans


def _loop(lines: list[str], span: tuple[int, int]) -> SassLoop:
    start, end = span
    return SassLoop(tuple(line for line in lines[start:end + 1] if _INSTRUCTION.search(line)))


def innermost_loops(sass: str) -> list[SassLoop]:
    """The loops (`loop_spans`) that hold no other loop, in program order."""
    lines, spans = loop_spans(sass)
    return [_loop(lines, (s, e)) for s, e in spans
            if not any(s <= s2 and e2 <= e and (s2, e2) != (s, e) for s2, e2 in spans)]


def main_loop(sass: str) -> SassLoop | None:
    """The innermost loop (`loop_spans`) holding the first MMA that is in a loop: the one that
    closes first after the MMA (ptxas may lay a later loop, such as an epilogue's, out
    overlapping it: shortest is not innermost then); None when no MMA is in a loop. Loops
    may be unrolled (several K tiles' MMAs in one); an MMA peeled into a prologue is passed
    over."""
    lines, spans = loop_spans(sass)
    for mma in (i for i, line in enumerate(lines) if _MMA.search(line)):
        around = [(start, end) for start, end in spans if start <= mma <= end]
        if around:
            return _loop(lines, min(around, key=lambda span: (span[1], span[1] - span[0])))
    return None
