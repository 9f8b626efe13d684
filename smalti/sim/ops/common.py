"""Helpers shared by instruction decoders: elementwise steps over decoded operands."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from smalti.ptx.module import Instruction
from smalti.sim.lanes import Lanes
from smalti.sim.machine import Machine
from smalti.sim.operands import DecodeEnv, expect, reader, writer
from smalti.sim.registry import Compute


def elementwise(inst: Instruction, env: DecodeEnv, sources: Sequence[str], result: str,
                fn: Callable[..., np.ndarray]) -> Compute:
    """`op d, a, b, ...`: d (of type `result`) = fn(a, b, ...) with sources of types `sources`."""
    dest, *srcs = expect(inst.operands, len(sources) + 1)
    write = writer(dest, result, env)
    reads = [reader(op, t, env) for op, t in zip(srcs, sources, strict=True)]
    match reads:  # spelled out for the common arities: this runs for most instructions
        case [a]:
            return Compute(lambda m, lanes: write(m, lanes, fn(a(m, lanes))))
        case [a, b]:
            return Compute(lambda m, lanes: write(m, lanes, fn(a(m, lanes), b(m, lanes))))
        case [a, b, c]:
            return Compute(lambda m, lanes: write(m, lanes, fn(a(m, lanes), b(m, lanes),
                                                               c(m, lanes))))

    def run(m: Machine, lanes: Lanes) -> None:
        write(m, lanes, fn(*(read(m, lanes) for read in reads)))

    return Compute(run)
