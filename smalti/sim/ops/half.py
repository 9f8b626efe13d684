"""f16 / bf16 arithmetic, scalar and packed (x2): exact in float64, rounded once to 16 bits."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from smalti.ptx.module import Instruction
from smalti.sim.dtypes import HALF_ELEMENT
from smalti.sim.errors import Unsupported
from smalti.sim.operands import DecodeEnv, Modifiers
from smalti.sim.ops.common import elementwise
from smalti.sim.ops.floating import min_max
from smalti.sim.registry import Step, semantics
from smalti.sim.rounding import exact_fma, flush_subnormals, relu, round_pair, saturate, two_sum

PACKED = ("f16x2", "bf16x2")


def unpack(x: np.ndarray, ptx_type: str) -> np.ndarray:
    """Elements of a half-precision value; packed: shape (n, 2), low half first."""
    x = np.asarray(x)
    if ptx_type not in PACKED:
        return x
    flat = np.ascontiguousarray(x.reshape(-1), dtype=np.uint32)
    return flat.view(np.uint16).reshape(-1, 2).view(HALF_ELEMENT[ptx_type])


def pack(x: np.ndarray, ptx_type: str) -> np.ndarray:
    """Inverse of `unpack`: packed values back into their 32-bit containers."""
    if ptx_type not in PACKED:
        return x
    return np.ascontiguousarray(x).view(np.uint16).reshape(-1).view(np.uint32)


def _exact(base: str, x: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray | float]:
    match base:
        case "add":
            return two_sum(x[0], x[1])
        case "sub":
            return two_sum(x[0], -x[1])
        case "mul":
            return x[0] * x[1], 0.0
    return exact_fma(x[0], x[1], x[2])


def packed_op(ptx_type: str, fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """Lift `fn` on element arrays to the (possibly packed) register values of `ptx_type`."""
    return lambda *args: pack(fn(*(unpack(a, ptx_type) for a in args)), ptx_type)


@semantics("add", "half")
@semantics("sub", "half")
@semantics("mul", "half")
@semantics("fma", "half")
def decode_arith(inst: Instruction, env: DecodeEnv) -> Step:
    """add/sub/mul/fma{.rn}{.ftz}{.sat}{.relu}: exact result rounded once to nearest-even.

    PTX ISA, "Half Precision Floating-Point Instructions": .rn is the only (and default) mode;
    .ftz and .sat exist for f16 only, .relu for fma.
    """
    mods = Modifiers(inst)
    mode = mods.one_of(("rn", "rz", "rm", "rp"), default="rn")
    ftz = mods.flag("ftz")
    sat = mods.flag("sat")
    use_relu = mods.flag("relu")
    [ptx_type] = mods.types()
    mods.done()
    if mode != "rn":
        raise Unsupported(f"{inst.base}.{ptx_type} supports .rn only")
    element = HALF_ELEMENT[ptx_type]

    def compute(*args: np.ndarray) -> np.ndarray:
        if ftz:
            args = tuple(flush_subnormals(a) for a in args)
        s, err = _exact(inst.base, [a.astype(np.float64) for a in args])
        result = round_pair(np.asarray(s), err, element, "rn")
        if ftz:
            result = flush_subnormals(result)
        if sat:
            result = saturate(result)
        return relu(result) if use_relu else result

    arity = 3 if inst.base == "fma" else 2
    return elementwise(inst, env, [ptx_type] * arity, ptx_type, packed_op(ptx_type, compute))


@semantics("neg", "half")
@semantics("abs", "half")
def decode_neg_abs(inst: Instruction, env: DecodeEnv) -> Step:
    """neg / abs flip or clear each element's sign bit."""
    mods = Modifiers(inst)
    mods.flag("ftz")
    [ptx_type] = mods.types()
    mods.done()
    sign = np.uint16(0x8000)

    def compute(a: np.ndarray) -> np.ndarray:
        bits = np.ascontiguousarray(a).view(np.uint16)
        return (bits ^ sign if inst.base == "neg" else bits & ~sign).view(a.dtype)

    return elementwise(inst, env, [ptx_type], ptx_type, packed_op(ptx_type, compute))


@semantics("min", "half")
@semantics("max", "half")
def decode_min_max(inst: Instruction, env: DecodeEnv) -> Step:
    """min / max{.NaN} on f16, bf16 and their packed forms."""
    mods = Modifiers(inst)
    if mods.flag("ftz"):
        raise Unsupported(".ftz min/max on half types is not implemented")
    nan = mods.flag("NaN")
    [ptx_type] = mods.types()
    mods.done()
    return elementwise(inst, env, [ptx_type] * 2, ptx_type,
                       packed_op(ptx_type, min_max(inst.base, nan)))
