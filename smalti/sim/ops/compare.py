"""Comparisons and selection: setp (incl. the .and/.or/.xor combining forms) and selp."""

from __future__ import annotations

import numpy as np

from smalti.ptx.module import Instruction, PredicatePair
from smalti.sim.dtypes import BIT, FLOAT, HALF_ELEMENT, SIGNED, TYPES
from smalti.sim.errors import Unsupported
from smalti.sim.lanes import Lanes, thread_ids
from smalti.sim.machine import Machine
from smalti.sim.operands import DecodeEnv, Modifiers, expect, reader, writer
from smalti.sim.registry import Compute, Step, semantics

ORDERED = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal,
}
UNORDERED = {"equ": "eq", "neu": "ne", "ltu": "lt", "leu": "le", "gtu": "gt", "geu": "ge"}
UNSIGNED_NAMES = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}
COMBINE = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}
COMPARISONS = frozenset([*ORDERED, *UNORDERED, *UNSIGNED_NAMES, "num", "nan"])


def comparison(op: str, ptx_type: str):
    """The elementwise predicate `a op b` for values of `ptx_type`.

    PTX ISA, "Comparison and Selection Instructions: setp": for floats the plain comparisons are
    false when either operand is NaN (`ne` included), the `u` forms are true then; `num` and
    `nan` test for NaN operands.
    """
    floating = ptx_type in FLOAT or ptx_type in HALF_ELEMENT
    if ptx_type in BIT and op not in ("eq", "ne"):
        raise Unsupported(f"setp.{op} on .{ptx_type}")
    if not floating and op in (*UNORDERED, "num", "nan"):
        raise Unsupported(f"setp.{op} needs a floating-point type")
    if op in UNSIGNED_NAMES:
        if ptx_type in SIGNED:
            raise Unsupported(f"setp.{op} needs an unsigned type")
        op = UNSIGNED_NAMES[op]
    if not floating:
        return ORDERED[op]

    def nan_of(a, b):
        return np.isnan(a) | np.isnan(b)

    match op:
        case "num":
            return lambda a, b: ~nan_of(a, b)
        case "nan":
            return nan_of
        case _ if op in UNORDERED:
            base = ORDERED[UNORDERED[op]]
            return lambda a, b: base(a, b) | nan_of(a, b)
    base = ORDERED[op]
    return lambda a, b: base(a, b) & ~nan_of(a, b)


def _destinations(dest) -> tuple:
    """`p` or the pair `p|q` (either may be the sink `_`)."""
    match dest:
        case PredicatePair(first=p, second=q):
            return p, q
    return (dest,)


@semantics("setp")
def decode_setp(inst: Instruction, env: DecodeEnv) -> Step:
    """setp.cmp{.bool}.T p[|q], a, b{, c}: p = cmp(a,b) BOOL c; q = !cmp(a,b) BOOL c."""
    mods = Modifiers(inst)
    mods.flag("ftz")  # flushing subnormal inputs does not change any comparison's outcome
    op = mods.one_of(COMPARISONS)
    combine = mods.one_of(tuple(COMBINE))
    [ptx_type] = mods.types()
    mods.done()
    if op is None or ptx_type not in TYPES or ptx_type in ("pred", "f16x2", "bf16x2"):
        raise Unsupported("setp needs a comparison and a scalar type")
    compare = comparison(op, ptx_type)
    dests = _destinations(inst.operands[0])
    sources = inst.operands[1:]
    if len(sources) != (3 if combine else 2):
        raise Unsupported("wrong number of operands")
    writes = [writer(d, "pred", env) for d in dests]
    value_type = ptx_type
    reads = [reader(s, value_type, env) for s in sources[:2]]
    read_c = reader(sources[2], "pred", env) if combine else None

    def run(m: Machine, lanes: Lanes) -> None:
        a, b = (read(m, lanes) for read in reads)
        result = compare(a, b)
        results = [result, np.logical_not(result)]
        if read_c is not None:
            c = read_c(m, lanes)
            results = [COMBINE[combine](r, c) for r in results]
        for write, value in zip(writes, results, strict=False):
            write(m, lanes, value)

    return Compute(run)


@semantics("selp")
def decode_selp(inst: Instruction, env: DecodeEnv) -> Step:
    """selp.T d, a, b, c: d = c ? a : b."""
    mods = Modifiers(inst)
    [ptx_type] = mods.types()
    mods.done()
    if ptx_type == "pred":
        raise Unsupported("selp.pred")
    dest, first, second, condition = expect(inst.operands, 4)
    write = writer(dest, ptx_type, env)
    read_a, read_b = reader(first, ptx_type, env), reader(second, ptx_type, env)
    read_c = reader(condition, "pred", env)

    def run(m: Machine, lanes: Lanes) -> None:
        registers = m.registers
        c, a, b = read_c(m, lanes), read_a(m, lanes), read_b(m, lanes)
        if registers.taint is not None:  # an undefined operand: only the chosen one counts
            registers.taint = _selected_taint(m, lanes, c, (read_c, read_a, read_b))
        write(m, lanes, np.where(c, a, b))

    return Compute(run)


def _selected_taint(m: Machine, lanes: Lanes, c: np.ndarray, reads) -> np.ndarray | None:
    """The threads whose selp result is undefined (sim/poison.py): an undefined condition,
    or an undefined operand it selects."""
    registers = m.registers
    registers.taint = None
    taints = []
    for read in reads:
        read(m, lanes)
        taints.append(registers.take_taint())
    condition, first, second = taints
    chosen = np.zeros(lanes.mask.size, np.bool_)
    chosen[thread_ids(lanes)] = np.broadcast_to(c, (lanes.count,))
    taint = np.zeros_like(chosen) if condition is None else condition
    if first is not None:
        taint |= first & chosen
    if second is not None:
        taint |= second & ~chosen
    return taint if taint.any() else None


