"""Instruction semantics, registered per opcode base (and type family) by the `ops` modules."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from smalti.ptx.module import Instruction
from smalti.sim.dtypes import FLOAT, HALF, INTEGER
from smalti.sim.errors import Unsupported
from smalti.sim.lanes import Lanes
from smalti.sim.machine import Machine
from smalti.sim.operands import DecodeEnv


@dataclass(frozen=True)
class Compute:
    """A straight-line instruction: run it for the active lanes, then fall through."""

    run: Callable[[Machine, Lanes], None]


@dataclass(frozen=True)
class Branch:
    """Jump to instruction index `target` (for the lanes whose guard holds)."""

    target: int


@dataclass(frozen=True)
class Exit:
    """Retire the active lanes (`ret` from a kernel, `exit`)."""


@dataclass(frozen=True)
class Barrier:
    """`bar.sync`/`bar.arrive`: arrive at CTA barrier `ident` (0-15) and, if `wait`, wait.

    `count` is the number of threads the barrier expects (None: every live thread of the
    block). `ident` and `count` are ints or readers of per-lane values (register operands).
    """

    ident: int | Callable[[Machine, Lanes], object] = 0
    count: int | Callable[[Machine, Lanes], object] | None = None
    wait: bool = True


@dataclass(frozen=True)
class Wait:
    """A potentially blocking wait (mbarrier.try_wait/test_wait): `poll` returns, for the
    active lanes, which may go on; the others sleep at the wait until the async state changes.
    """

    poll: Callable[[Machine, Lanes], np.ndarray]


Step = Compute | Branch | Exit | Barrier | Wait
Decoder = Callable[[Instruction, DecodeEnv], Step]

_DECODERS: dict[tuple[str, str], Decoder] = {}


def semantics(base: str, *families: str) -> Callable[[Decoder], Decoder]:
    """Register a decoder for opcode `base` and type families (int, float, half, pred, any)."""

    def register(decoder: Decoder) -> Decoder:
        for family in families or ("any",):
            key = (base, family)
            if key in _DECODERS:
                raise ValueError(f"two decoders for {base} ({family})")
            _DECODERS[key] = decoder
        return decoder

    return register


def family(inst: Instruction) -> str:
    """The type family of an instruction, from its last type modifier."""
    for modifier in reversed(inst.modifiers):
        if modifier in INTEGER:
            return "int"
        if modifier in FLOAT:
            return "float"
        if modifier in HALF:
            return "half"
        if modifier == "pred":
            return "pred"
    return "any"


def decode(inst: Instruction, env: DecodeEnv) -> Step:
    """Decode one instruction into its step; `Unsupported` when nothing implements it."""
    base = inst.opcode if inst.opcode.startswith(".") else inst.base  # a directive: .pragma
    decoder = _DECODERS.get((base, family(inst))) or _DECODERS.get((base, "any"))
    if decoder is None:
        raise Unsupported()
    return decoder(inst, env)
