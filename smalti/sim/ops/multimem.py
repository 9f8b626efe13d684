"""Multimem: `multimem.ld_reduce`, `multimem.st` and `multimem.red` on multicast addresses.

PTX ISA, "Data Movement and Conversion Instructions: multimem.ld_reduce, multimem.st,
multimem.red" (PTX 8.1, sm_90): a multimem address names one location in each buffer of a
multicast group (here: every device's symmetric buffer, smalti.sim.multicast). `ld_reduce`
loads the value at every location and returns their reduction; `st` stores to every location;
`red` reduces its operand into every location, atomically at each.

What is modelled, and the choices the ISA leaves open:
- Forms: integer `.u32 .s32 .u64 .s64 .b32 .b64` (no vectors) with the ISA's table of
  operations (`.add` on u32/s32/u64, `.min`/`.max` on u32/s32/u64/s64, `.and`/`.or`/`.xor`
  on b32/b64); floating point `.f16 .f16x2 .bf16 .bf16x2 .f32 .f64` with `.add` (and, for
  `ld_reduce`, `.min`/`.max` on the half types), vectors `.v2/.v4/.v8` of 32, 64 or 128 bits
  as the ISA's table allows, `.acc::f32` on `ld_reduce.add` of half types. `multimem.red` on
  floating point types is `.add` only. The fp8 types (`.e4m3`, `.e5m2`, their pairs and
  quads, `.acc::f16`: sm_100a and later) are not supported.
- Rounding: `ld_reduce` accumulates the devices' values in device order (0, 1, ...), in the
  instruction type (each partial sum rounded to nearest even) or, with `.acc::f32`, in f32,
  and rounds to the type once at the end. `red.add` rounds each location's sum to nearest
  even; subnormals are kept (the multimem section, unlike `atom.add.f32`'s, says nothing of
  flushing). `.min`/`.max` of half types follow `min.f16`: a NaN operand yields the other.
- Memory model: `ld_reduce` and `st` are weak unless given `.relaxed`/`.acquire`/`.release`
  with a scope; `red` is `.relaxed.sys` unless told otherwise. With `.sys` they are strong
  system-scope accesses, and acquire/release, in the race check between devices
  (sim/peers.py), exactly as ld/st/red are; one instruction's accesses to every device's copy
  are one access there. Other threads of the issuing device see a multimem store at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from smalti.ptx.module import Instruction
from smalti.sim.dtypes import BITS, UINT_OF_BITS, VIEW, as_bits
from smalti.sim.errors import Fault, Unsupported
from smalti.sim.lanes import Lanes
from smalti.sim.lines import instruction_text
from smalti.sim.machine import Machine
from smalti.sim.multicast import MulticastGroup
from smalti.sim.operands import DecodeEnv, Modifiers, expect, reader, vector_elements, writer
from smalti.sim.ops.atomic import serial_rank
from smalti.sim.ops.floating import min_max
from smalti.sim.ops.memory import SCOPES, _address, _per_lane, _sub_lanes
from smalti.sim.peers import Site, Sync
from smalti.sim.registry import Compute, Step, semantics
from smalti.sim.rounding import round_pair, two_sum

KINDS = ("ld_reduce", "st", "red")
SEMANTICS = {"ld_reduce": ("weak", "relaxed", "acquire"), "st": ("weak", "relaxed", "release"),
             "red": ("relaxed", "release")}
HALF_TYPES = ("f16", "f16x2", "bf16", "bf16x2")
INTEGER_TYPES = ("b32", "b64", "u32", "u64", "s32", "s64")
FLOAT_TYPES = (*HALF_TYPES, "f32", "f64")
# Operation -> the types it takes (PTX ISA, multimem: "valid combinations of .op and base
# type"; multimem.red takes only .add on floating point types).
OPERATIONS = {
    "add": ("u32", "s32", "u64", *FLOAT_TYPES),
    "min": ("u32", "s32", "u64", "s64", *HALF_TYPES),
    "max": ("u32", "s32", "u64", "s64", *HALF_TYPES),
    "and": ("b32", "b64"), "or": ("b32", "b64"), "xor": ("b32", "b64"),
}
RED_FLOAT_OPERATIONS = ("add",)
# Vector length -> the floating point types it takes ("valid usage of .vec and base type").
VECTORS = {1: ("f16x2", "bf16x2", "f32", "f64"),
           2: ("f16", "f16x2", "bf16", "bf16x2", "f32"),
           4: ("f16", "f16x2", "bf16", "bf16x2", "f32"),
           8: ("f16", "bf16")}
FP8 = ("e4m3", "e5m2")
# The element dtype of each type (packed half pairs: two elements per container).
ELEMENT = {"f16": np.float16, "f16x2": np.float16, "bf16": ml_dtypes.bfloat16,
           "bf16x2": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
           **{t: VIEW[t] for t in INTEGER_TYPES}}


@dataclass(frozen=True)
class Form:
    """One multimem opcode: `kind` (ld_reduce, st, red), memory semantics and scope as written
    (None when absent), reduction `op` (None for st), whether it accumulates in f32
    (`.acc::f32`), vector length and type."""

    kind: str
    sem: str | None
    scope: str | None
    op: str | None
    acc_f32: bool
    count: int
    type: str

    @property
    def elem(self) -> int:
        """Bytes of one vector element (a container of two halves for .f16x2/.bf16x2)."""
        return BITS[self.type] // 8

    @property
    def nbytes(self) -> int:
        return self.elem * self.count

    @property
    def sync(self) -> Sync:
        """How the access orders against other devices (sim/peers.py): strong at system scope
        with `.relaxed`/`.acquire`/`.release` and `.sys`, which multimem.red has by default."""
        sem, scope = self.sem, self.scope
        if self.kind == "red" and sem is None:
            sem, scope = "relaxed", "sys"
        strong = sem in ("relaxed", "acquire", "release") and scope == "sys"
        return Sync(strong, strong and sem == "acquire", strong and sem == "release")


def parse(inst: Instruction) -> Form:
    """The Form of a multimem opcode, checked against the ISA's tables (Unsupported if not)."""
    if any(m.startswith(FP8) for m in inst.modifiers) or "acc::f16" in inst.modifiers:
        raise Unsupported("multimem on fp8 types (.e4m3/.e5m2, .acc::f16; sm_100a) is not "
                          "supported")
    mods = Modifiers(inst)
    kind = mods.one_of(KINDS)
    if kind is None:
        raise Unsupported("multimem needs .ld_reduce, .st or .red")
    sem = mods.one_of(("weak", "relaxed", "acquire", "release"))
    scope = mods.one_of(SCOPES)
    mods.flag("global")
    op = mods.one_of(tuple(OPERATIONS)) if kind != "st" else None
    acc_f32 = mods.flag("acc::f32")
    vec = mods.one_of(("v2", "v4", "v8"))
    [ptx_type] = mods.types()
    mods.done()
    form = Form(kind, sem, scope, op, acc_f32, int(vec[1:]) if vec else 1, ptx_type)
    _check(form)
    return form


def _check(form: Form) -> None:
    name = f"multimem.{form.kind}"
    if form.sem is not None and form.sem not in SEMANTICS[form.kind]:
        raise Unsupported(f"{name} does not take .{form.sem}")
    if (form.sem not in (None, "weak")) != (form.scope is not None):
        raise Unsupported(f"{name}: .relaxed/.acquire/.release need a scope, and a scope "
                          "needs one of them")
    if form.type not in INTEGER_TYPES + FLOAT_TYPES:
        raise Unsupported(f"{name} does not take .{form.type}")
    if form.kind != "st":
        if form.op is None:
            raise Unsupported(f"{name} needs a reduction operation")
        allowed = OPERATIONS[form.op]
        if form.kind == "red" and form.type in FLOAT_TYPES and form.op not in \
                RED_FLOAT_OPERATIONS:
            allowed = ()
        if form.type not in allowed:
            raise Unsupported(f"{name}.{form.op} does not take .{form.type}")
    if form.type in INTEGER_TYPES:
        if form.count != 1:
            raise Unsupported(f"{name} takes no vector of integers")
    elif form.type not in VECTORS[form.count]:
        raise Unsupported(f"{name}: .{form.type} does not come in "
                          + (f".v{form.count}" if form.count > 1 else "scalars"))
    if form.acc_f32 and not (form.kind == "ld_reduce" and form.op == "add"
                             and form.type in HALF_TYPES):
        raise Unsupported(".acc::f32 is for multimem.ld_reduce.add of f16/bf16 types")


def elements(raw: np.ndarray, ptx_type: str) -> np.ndarray:
    """The typed elements of raw containers (n, count): (n, count) or, for pairs, (n, 2 count),
    low half first."""
    return np.ascontiguousarray(raw).view(ELEMENT[ptx_type])


def containers(values: np.ndarray, ptx_type: str) -> np.ndarray:
    """Inverse of `elements`: raw (n, count) containers."""
    typed = np.ascontiguousarray(values.astype(ELEMENT[ptx_type], copy=False))
    return typed.view(UINT_OF_BITS[BITS[ptx_type]])


def _combine(op: str, dtype: type):
    """acc (op) x on element arrays of `dtype`, rounded to it (floating point: to nearest)."""
    if op == "add" and np.dtype(dtype).kind == "f":
        return lambda acc, x: round_pair(*two_sum(acc.astype(np.float64),
                                                  x.astype(np.float64)), dtype, "rn")
    if op in ("min", "max") and np.dtype(dtype).kind == "f":
        return min_max(op, False)
    return {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and,
            "or": np.bitwise_or, "xor": np.bitwise_xor}[op]


def _group(m: Machine) -> MulticastGroup:
    if m.multicast is None:
        raise Fault("multimem in a launch without symmetric buffers: there is no multicast "
                    "address (run_ptx_devices with symmetric=[...] and a Multicast() argument)")
    return m.multicast


@semantics("multimem")
def decode_multimem(inst: Instruction, env: DecodeEnv) -> Step:
    """multimem.ld_reduce d, [a] / multimem.st [a], b / multimem.red [a], b."""
    form = parse(inst)
    address_op, values_op = expect(inst.operands, 2)
    if form.kind == "ld_reduce":
        address_op, values_op = values_op, address_op
    registers = vector_elements(values_op)
    if len(registers) != form.count:
        raise Unsupported(f"{len(registers)} registers for a vector of {form.count}")
    address_of = _address(address_op, "global", env)
    site = Site(inst.line, instruction_text(inst))
    what = f"multimem.{form.kind}"

    def access(m: Machine, lanes: Lanes) -> np.ndarray:
        """(devices, n) addresses of every device's copy of the lanes' operands."""
        group = _group(m)
        addresses = _per_lane(address_of(m, lanes), lanes)
        return group.addresses(group.offsets(addresses, form.nbytes, lanes, what))

    def check(m: Machine, targets: np.ndarray, lanes: Lanes, read: bool, write: bool) -> None:
        if m.peers is not None:
            m.peers.access(targets, form.nbytes, lanes, read=read, write=write,
                           sync=form.sync, site=m.peers.site_id(site))

    if form.kind == "ld_reduce":
        writes = [writer(r, form.type, env) for r in registers]
        reduce = _reducer(form)

        def run_ld(m: Machine, lanes: Lanes) -> None:
            targets = access(m, lanes)
            loaded = [m.global_memory.load(t, form.elem, form.count, lanes) for t in targets]
            raw = reduce(loaded)
            check(m, targets, lanes, True, False)
            view = VIEW[form.type]
            for j, write in enumerate(writes):
                write(m, lanes, raw[:, j].view(view))

        return Compute(run_ld)
    reads = [reader(r, form.type, env) for r in registers]

    def operand(m: Machine, lanes: Lanes) -> np.ndarray:
        columns = [np.broadcast_to(as_bits(read(m, lanes), form.type, BITS[form.type]),
                                   (lanes.count,)) for read in reads]
        return np.stack(columns, axis=1)

    if form.kind == "st":
        def run_st(m: Machine, lanes: Lanes) -> None:
            targets = access(m, lanes)
            values = operand(m, lanes)
            for t in targets:
                m.global_memory.store(t, values, form.elem, lanes)
            check(m, targets, lanes, False, True)

        return Compute(run_st)
    update = _combine(form.op, ELEMENT[form.type])

    def run_red(m: Machine, lanes: Lanes) -> None:
        targets = access(m, lanes)
        values = operand(m, lanes)
        rank = serial_rank(targets[0])  # lanes of one address apply one after another
        for k in range(int(rank.max()) + 1 if lanes.count else 0):
            where = rank == k
            sub = lanes if where.all() else _sub_lanes(lanes, where)
            b = elements(values[where], form.type)
            for t in targets:
                old = elements(m.global_memory.load(t[where], form.elem, form.count, sub),
                               form.type)
                new = containers(np.asarray(update(old, b)), form.type)
                m.global_memory.store(t[where], new, form.elem, sub)
        check(m, targets, lanes, True, True)

    return Compute(run_red)


def _reducer(form: Form):
    """The reduction of ld_reduce: raw containers loaded from each device (in device order)
    to raw result containers, accumulated in the type or (.acc::f32) in f32, rounded once."""
    dtype = ELEMENT[form.type]
    acc_dtype = np.float32 if form.acc_f32 else dtype
    step = _combine(form.op, acc_dtype)

    def reduce(loaded: list[np.ndarray]) -> np.ndarray:
        acc = elements(loaded[0], form.type).astype(acc_dtype)
        for raw in loaded[1:]:
            acc = np.asarray(step(acc, elements(raw, form.type).astype(acc_dtype)))
        if form.acc_f32:
            acc = round_pair(acc.astype(np.float64), 0.0, dtype, "rn")
        return containers(acc, form.type)

    return reduce
