"""cvt: conversions between integer and floating-point types with PTX rounding and saturation."""

from __future__ import annotations

import numpy as np

from smalti.ptx.module import Instruction
from smalti.sim.dtypes import BITS, FLOAT, HALF_ELEMENT, INTEGER, SIGNED, VIEW
from smalti.sim.errors import Unsupported
from smalti.sim.fp8 import FORMATS
from smalti.sim.operands import DecodeEnv, Modifiers
from smalti.sim.ops.common import elementwise
from smalti.sim.ops.convert_fp8 import decode_fp8_cvt
from smalti.sim.registry import Step, semantics
from smalti.sim.rounding import (
    flush_subnormals,
    relu,
    round_integral,
    round_pair,
    satfinite,
    saturate,
    two_sum,
)

INT_ROUNDING = ("rni", "rzi", "rmi", "rpi")
FLOAT_ROUNDING = ("rn", "rz", "rm", "rp")
SCALAR_FLOATS = FLOAT | {"f16", "bf16"}


def _int_range(ptx_type: str) -> tuple[int, int]:
    bits = BITS[ptx_type]
    if ptx_type in SIGNED:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def int_to_int(a: np.ndarray, src: str, dst: str, sat: bool) -> np.ndarray:
    """Truncate / extend (sign-extending signed sources); .sat clamps to the destination range."""
    a = np.asarray(a)
    out = VIEW[dst]
    if not sat:
        return a.astype(out)
    lo, hi = _int_range(dst)
    if src == "u64":
        return np.where(a > np.uint64(min(hi, (1 << 64) - 1)), out(hi), a.astype(out)).astype(out)
    wide = a.astype(np.int64)
    clipped = np.clip(wide, max(lo, -(1 << 63)), min(hi, (1 << 63) - 1))
    return clipped.astype(out)


def float_to_int(a: np.ndarray, mode: str, dst: str) -> np.ndarray:
    """Round to an integer, then saturate to the destination range; NaN becomes 0.

    PTX ISA, "cvt": float-to-integer conversions saturate by default (.sat is implied).
    """
    x = round_integral(np.asarray(a).astype(np.float64), mode)
    x = np.where(np.isnan(x), 0.0, x)
    lo, hi = _int_range(dst)
    top = np.nextafter(float(hi) + 1.0, 0.0)  # the largest float64 that fits the range
    clipped = np.clip(x, float(lo), top)
    return clipped.astype(VIEW[dst])


def exact_of_int(a: np.ndarray, src: str) -> tuple[np.ndarray, np.ndarray | float]:
    """An integer as an exact float64 pair (64-bit values are split into 32-bit halves)."""
    a = np.asarray(a)
    if BITS[src] < 64:
        return a.astype(np.float64), 0.0
    hi = (a >> 32).astype(np.float64) * 4294967296.0
    lo = (a & VIEW[src](0xFFFFFFFF)).astype(np.float64)
    return two_sum(hi, lo)


def _finish(x: np.ndarray, dst: str, ftz: bool, sat: bool, use_relu: bool,
            finite: bool) -> np.ndarray:
    if ftz and dst == "f32":
        x = flush_subnormals(x)
    if sat:
        x = saturate(x)
    if use_relu:
        x = relu(x)
    return satfinite(x) if finite else x


def _float_dtype(ptx_type: str) -> type:
    return HALF_ELEMENT.get(ptx_type, VIEW[ptx_type])


@semantics("cvt")
def decode_cvt(inst: Instruction, env: DecodeEnv) -> Step:
    """cvt{.irnd|.frnd}{.ftz}{.sat}{.relu}{.satfinite}.dtype.atype d, a (b for x2 forms)."""
    mods = Modifiers(inst)
    irnd = mods.one_of(INT_ROUNDING)
    frnd = mods.one_of(FLOAT_ROUNDING)
    ftz = mods.flag("ftz")
    sat = mods.flag("sat")
    use_relu = mods.flag("relu")
    finite = mods.flag("satfinite")
    types = mods.types()
    mods.done()
    if len(types) != 2:
        raise Unsupported("cvt needs a destination and a source type")
    dst, src = types
    if dst in FORMATS or src in FORMATS:
        if irnd or ftz or sat:
            raise Unsupported("fp8 conversions take only .rn, .relu and .satfinite")
        return decode_fp8_cvt(inst, env, dst, src, frnd, use_relu, finite)
    if dst in ("f16x2", "bf16x2"):
        return _pack_pair(inst, env, dst, src, frnd, use_relu, finite)
    if src in INTEGER and dst in INTEGER:
        if irnd or frnd:
            raise Unsupported("rounding modifier on an integer conversion")
        return elementwise(inst, env, [src], dst, lambda a: int_to_int(a, src, dst, sat))
    if src in SCALAR_FLOATS and dst in INTEGER:
        if irnd is None:
            raise Unsupported("float-to-integer cvt needs .rni, .rzi, .rmi or .rpi")
        flush = ftz and src == "f32"
        return elementwise(inst, env, [src], dst, lambda a: float_to_int(
            flush_subnormals(np.asarray(a)) if flush else a, irnd, dst))
    if src in INTEGER and dst in SCALAR_FLOATS:
        if irnd:
            raise Unsupported("integer-to-float cvt takes .rn, .rz, .rm or .rp")
        mode = frnd or "rn"
        out = _float_dtype(dst)
        return elementwise(inst, env, [src], dst, lambda a: _finish(
            round_pair(*_as_arrays(exact_of_int(a, src)), out, mode), dst, ftz, sat,
            use_relu, finite))
    if src in SCALAR_FLOATS and dst in SCALAR_FLOATS:
        return _float_to_float(inst, env, src, dst, irnd, frnd, (ftz, sat, use_relu, finite))
    raise Unsupported(f"conversion from .{src} to .{dst}")


def _as_arrays(pair: tuple) -> tuple[np.ndarray, np.ndarray | float]:
    return np.asarray(pair[0]), pair[1]


def _float_to_float(inst: Instruction, env: DecodeEnv, src: str, dst: str, irnd: str | None,
                    frnd: str | None, flags: tuple[bool, bool, bool, bool]) -> Step:
    ftz, sat, use_relu, finite = flags
    out = _float_dtype(dst)
    narrowing = BITS[dst] < BITS[src] or (BITS[dst] == BITS[src] and dst != src)

    def prepare(a: np.ndarray) -> np.ndarray:
        a = np.asarray(a)
        return flush_subnormals(a) if ftz and src == "f32" else a

    if irnd is not None:
        if src != dst:
            raise Unsupported("integer rounding needs equal float types")
        return elementwise(inst, env, [src], dst, lambda a: _finish(
            round_integral(prepare(a).astype(np.float64), irnd).astype(out), dst, ftz, sat,
            use_relu, finite))
    if narrowing:
        if frnd is None:
            raise Unsupported("a narrowing float cvt needs .rn, .rz, .rm or .rp")
        return elementwise(inst, env, [src], dst, lambda a: _finish(
            round_pair(prepare(a).astype(np.float64), 0.0, out, frnd), dst, ftz, sat,
            use_relu, finite))
    return elementwise(inst, env, [src], dst, lambda a: _finish(
        prepare(a).astype(out), dst, ftz, sat, use_relu, finite))


def _pack_pair(inst: Instruction, env: DecodeEnv, dst: str, src: str, frnd: str | None,
               use_relu: bool, finite: bool) -> Step:
    """cvt.frnd.{f16x2,bf16x2}.f32 d, a, b: `a` lands in the upper half, `b` in the lower.

    PTX ISA, "cvt": for the x2 forms d = {cvt(a), cvt(b)} with a in d[31:16].
    """
    if src != "f32" or frnd is None:
        raise Unsupported(f"cvt to .{dst} needs an .f32 source and a rounding modifier")
    element = HALF_ELEMENT[dst]

    def convert(x: np.ndarray) -> np.ndarray:
        return np.asarray(_finish(round_pair(np.asarray(x).astype(np.float64), 0.0, element,
                                             frnd), dst, False, False, use_relu, finite))

    def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        hi = convert(a).view(np.uint16).astype(np.uint32)
        lo = convert(b).view(np.uint16).astype(np.uint32)
        return (hi << np.uint32(16)) | lo

    return elementwise(inst, env, ["f32", "f32"], dst, run)
