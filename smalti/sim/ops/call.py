"""`call` to the CUDA runtime's device functions: `__assertfail` and `vprintf`.

PTX ISA, "call": `call{.uni} (ret), func, (a, b, ...);` after the arguments were stored to
`.param` variables of a call sequence (`{ .param .b64 param0; st.param.b64 [param0], %rd; ...
call.uni __assertfail, (param0, ...); }`); `func` is declared in the module, typically
`.extern .func`. Those parameters are the calling thread's own (the simulator keeps them with
its .local memory). The two functions nvcc's device code calls are built in:

- `__assertfail(message, file, line, function, charSize)` (a failed `assert`): the run stops
  with a SimError quoting the assertion, file and line, as the CUDA runtime prints it.
- `vprintf(format, args)` (`printf`): the format string with the arguments packed at `args`
  (each aligned to its size; floats promoted to double, integers narrower than int to int)
  is printed to stdout, thread by thread in launch order; it returns the number of
  arguments, as CUDA's printf does.

Calls to other functions, including `.func`s defined in the module, are not simulated.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable

import numpy as np

from smalti.ptx.module import Instruction, ParamList, Symbol
from smalti.sim.errors import Fault, Unsupported
from smalti.sim.lanes import Lanes, thread_ids
from smalti.sim.machine import Machine
from smalti.sim.operands import DecodeEnv, Modifiers
from smalti.sim.ops.memory import _load
from smalti.sim.registry import Compute, Step, semantics

MAX_STRING = 1 << 16
Builtin = Callable[[Machine, Lanes, list[np.ndarray]], np.ndarray | None]


@semantics("call")
def decode_call(inst: Instruction, env: DecodeEnv) -> Step:
    mods = Modifiers(inst)
    mods.flag("uni")
    mods.done()
    operands = list(inst.operands)
    returns: tuple = ()
    if operands and isinstance(operands[0], ParamList):
        returns = operands.pop(0).elements
    if not operands or not isinstance(operands[0], Symbol):
        raise Unsupported("call needs a function name (indirect calls are not simulated)")
    name = operands.pop(0).name
    arguments = operands.pop(0).elements if operands and isinstance(operands[0], ParamList) else ()
    if operands:
        raise Unsupported("call with a prototype (an indirect call) is not simulated")
    builtin = BUILTINS.get(name)
    if builtin is None:
        raise Unsupported(f"call to '{name}': only __assertfail and vprintf are simulated "
                          "(inline other functions)")
    declared = env.functions.get(name)
    types = ([p.type for p in declared.params] if declared is not None
             else list(DEFAULT_TYPES[name]))
    if len(types) != len(arguments):
        raise Unsupported(f"{name} takes {len(types)} arguments, the call passes "
                          f"{len(arguments)}")
    reads = [_param_reader(a, t, env) for a, t in zip(arguments, types, strict=True)]
    write = _param_writer(returns[0], env) if returns else None

    def run(m: Machine, lanes: Lanes) -> None:
        values = [read(m, lanes) for read in reads]
        result = builtin(m, lanes, values)
        if write is not None and result is not None:
            write(m, lanes, result)

    return Compute(run)


def _local_offset(op, env: DecodeEnv) -> int:
    if not isinstance(op, Symbol) or op.name not in env.call_params:
        raise Unsupported(f"call arguments are .param variables of the call sequence, not {op}")
    return env.local[op.name]


def _param_reader(op, ptx_type: str, env: DecodeEnv):
    offset = np.uint64(_local_offset(op, env))
    nbytes = max(1, int("".join(c for c in ptx_type if c.isdigit()) or 64) // 8)

    def read(m: Machine, lanes: Lanes) -> np.ndarray:
        addresses = np.full(lanes.count, offset, np.uint64)
        raw = m.local.load(addresses, nbytes, 1, lanes)[:, 0]
        return raw.astype(np.uint64)

    return read


def _param_writer(op, env: DecodeEnv):
    offset = np.uint64(_local_offset(op, env))

    def write(m: Machine, lanes: Lanes, values: np.ndarray) -> None:
        addresses = np.full(lanes.count, offset, np.uint64)
        column = np.broadcast_to(np.asarray(values, np.uint32), (lanes.count,))
        m.local.store(addresses, column[:, None], 4, lanes)

    return write


def _one_lane(lanes: Lanes, thread: int) -> Lanes:
    mask = np.zeros_like(lanes.mask)
    mask[thread] = True
    return Lanes(mask, everyone=False)


def read_bytes(m: Machine, address: int, count: int, thread: int, lanes: Lanes) -> bytes:
    """`count` bytes at a generic address, as thread `thread` reads them."""
    one = _one_lane(lanes, thread)
    addresses = np.uint64(address) + np.arange(count, dtype=np.uint64)
    return bytes(_load(m, "generic", addresses, 1, 1, one)[:, 0].astype(np.uint8))


def c_string(m: Machine, address: int, thread: int, lanes: Lanes) -> str:
    """The NUL-terminated string at a generic address (read a byte at a time, so a string
    ending at the end of its buffer is not read past)."""
    if address == 0:
        return "(null)"
    out = bytearray()
    while len(out) < MAX_STRING:
        byte = read_bytes(m, address + len(out), 1, thread, lanes)
        if byte == b"\0":
            return out.decode("utf-8", "replace")
        out += byte
    raise Fault(f"string at {address:#x} has no terminating NUL within {MAX_STRING} bytes",
                thread)


def _assertfail(m: Machine, lanes: Lanes, args: list[np.ndarray]) -> None:
    thread = int(thread_ids(lanes)[0])
    message = c_string(m, int(args[0][0]), thread, lanes)
    file = c_string(m, int(args[1][0]), thread, lanes)
    line = int(args[2][0])
    function = c_string(m, int(args[3][0]), thread, lanes)
    raise Fault(f"device assertion failed: {file}:{line}: {function}: Assertion `{message}` "
                "failed.", thread)


_CONVERSION = re.compile(
    r"%([-+ #0]*)(\*|\d+)?(?:\.(\*|\d+))?(hh|h|ll|l|z|j|t|L)?([diouxXcsfFeEgGaAp%])")


def format_printf(m: Machine, thread: int, lanes: Lanes, fmt: str, args: int) -> tuple[str, int]:
    """The text `printf(fmt, ...)` prints with its arguments packed at generic address `args`,
    and how many arguments it took."""
    out, cursor, count, position = [], 0, 0, 0

    def take(size: int) -> int:
        nonlocal cursor
        cursor = -(-cursor // size) * size
        raw = read_bytes(m, args + cursor, size, thread, lanes)
        cursor += size
        return int.from_bytes(raw, "little")

    for match in _CONVERSION.finditer(fmt):
        out.append(fmt[position:match.start()])
        position = match.end()
        flags, width, precision, length, conversion = match.groups()
        if conversion == "%":
            out.append("%")
            continue
        if width == "*":
            width = str(np.int32(np.uint32(take(4))))
            count += 1
        if precision == "*":
            precision = str(np.int32(np.uint32(take(4))))
            count += 1
        spec = "%" + flags + (width or "") + (f".{precision}" if precision is not None else "")
        wide = length in ("l", "ll", "z", "j", "t")
        count += 1
        if conversion in "fFeEgGaA":
            value = np.uint64(take(8)).view(np.float64)
            out.append((spec + ("e" if conversion in "aA" else conversion)) % float(value))
        elif conversion == "s":
            out.append((spec + "s") % c_string(m, take(8), thread, lanes))
        elif conversion == "p":
            out.append((spec + "s") % hex(take(8)))
        elif conversion == "c":
            out.append((spec + "c") % chr(take(4) & 0xFF))
        else:
            size = 8 if wide else 4
            raw = take(size)
            value = raw - (1 << (8 * size)) if conversion in "di" and raw >> (
                8 * size - 1) else raw
            out.append((spec + conversion.replace("i", "d").replace("u", "d")) % value)
    out.append(fmt[position:])
    return "".join(out), count


def _vprintf(m: Machine, lanes: Lanes, args: list[np.ndarray]) -> np.ndarray:
    counts = np.zeros(lanes.count, np.uint32)
    for i, thread in enumerate(thread_ids(lanes)):
        thread = int(thread)
        fmt = c_string(m, int(args[0][i]), thread, lanes)
        text, counts[i] = format_printf(m, thread, lanes, fmt, int(args[1][i]))
        sys.stdout.write(text)
    sys.stdout.flush()
    return counts


BUILTINS: dict[str, Builtin] = {"__assertfail": _assertfail, "vprintf": _vprintf}
DEFAULT_TYPES = {"__assertfail": ("b64", "b64", "b32", "b64", "b64"), "vprintf": ("b64", "b64")}
