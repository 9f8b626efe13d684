"""f32 computations of the math ops that PTX has no single instruction for (16-bit floats
are widened to f32, computed, and rounded once: smalti.lowering.elementwise).

Exact: floor, ceil, trunc, roundeven (`cvt.rmi/rpi/rzi/rni.f32.f32`), round (half away from
zero, from trunc), copysign, and remf (C's fmod, computed on the integer significands, so
any exponent difference is exact). Through the .approx units, with the error bounds the PTX
ISA gives them (the simulator computes the units exactly, so its results show only the
error of the surrounding arithmetic):
- sin, cos: the argument is first reduced modulo 2π in f32 (k = rni(x / 2π), then
  x - k*C1 - k*C2 by fma, exact in the first step; x itself when k is 0, so -0 stays -0
  and [-π, π] is untouched), so `sin.approx.f32` sees [-π, π] where
  its absolute error is at most 2^-20.9; the reduction adds at most 2^-23, so the absolute
  error against numpy is below 2^-20.5 for |x| < 2^20 (beyond, 2^-20.5 + 7e-15 |x|).
  ±inf and NaN give NaN.
- powf: C's pow (numpy's `power`): exp2(y * log2|x|) with `lg2.approx` and `ex2.approx`
  (each about 2^-22 relative), the sign of x for odd integer y, NaN for a finite negative x
  and a non-integer y, and the exact special cases (x^0 = 1, 1^y = 1, (-1)^±inf = 1, zeros
  and infinities by the sign rules of C). The relative error is below
  2^-21 * (1 + |y log2|x||): a result near the f32 range (|y log2 x| ~ 128) keeps about 14
  bits.
"""

from __future__ import annotations

from smalti.ptx import Immediate, KernelBuilder, Register

INV_TWO_PI = 0.15915493667125702  # f32(1 / 2π)
TWO_PI_HIGH = 6.2831854820251465  # f32(2π), 0x40C90FDB
TWO_PI_LOW = -1.7484555314695172e-07  # f32(2π - TWO_PI_HIGH), 0xB43BBD2E
FLOAT_BITS = 23  # f32 significand bits (without the implicit one)
CHUNK = 40  # bits a remainder below 2^24 may be shifted by within 64 bits
CHUNKS = 7  # 7 * 40 >= 253, the largest exponent difference of two f32 values
INFINITY = float("inf")
NAN = float("nan")


def f32(value: float) -> Immediate:
    return Immediate(value, "f32")


def rounded(mode: str):
    """floor (rmi), ceil (rpi), trunc (rzi), roundeven (rni): one cvt, exact."""
    return lambda b, xs: b.compute(f"cvt.{mode}.f32.f32", "f32", xs[0])


def round_half_away(b: KernelBuilder, xs: list[Register]) -> Register:
    """math.round: trunc(x), moved one away from zero when the dropped fraction is >= 1/2
    (x - trunc(x) is exact)."""
    (x,) = xs
    whole = b.compute("cvt.rzi.f32.f32", "f32", x)
    fraction = b.compute("abs.f32", "f32", b.compute("sub.rn.f32", "f32", x, whole))
    up = b.compute("setp.ge.f32", "pred", fraction, f32(0.5))
    step = b.compute("copysign.f32", "f32", x, f32(1.0))
    return b.compute("selp.f32", "f32", b.compute("add.rn.f32", "f32", whole, step), whole, up)


def copysign(b: KernelBuilder, xs: list[Register]) -> Register:
    """math.copysign(x, y): |x| with y's sign (PTX's copysign takes the sign first)."""
    x, y = xs
    return b.compute("copysign.f32", "f32", y, x)


def trigonometric(opcode: str):
    """sin / cos of x reduced to [-π, π] (module docstring)."""

    def compute(b: KernelBuilder, xs: list[Register]) -> Register:
        (x,) = xs
        turns = b.compute("mul.rn.f32", "f32", x, f32(INV_TWO_PI))
        k = b.compute("cvt.rni.f32.f32", "f32", turns)
        high = b.compute("fma.rn.f32", "f32", k, f32(-TWO_PI_HIGH), x)
        reduced = b.compute("fma.rn.f32", "f32", k, f32(-TWO_PI_LOW), high)
        within = b.compute("setp.eq.f32", "pred", k, f32(0.0))  # |x| <= π: x itself (-0 too)
        reduced = b.compute("selp.f32", "f32", x, reduced, within)
        return b.compute(f"{opcode}.approx.f32", "f32", reduced)

    return compute


def powf(b: KernelBuilder, xs: list[Register]) -> Register:
    """x^y as C's powf (module docstring)."""
    x, y = xs
    magnitude = b.compute("ex2.approx.f32", "f32", b.compute(
        "mul.rn.f32", "f32", y, b.compute("lg2.approx.f32", "f32",
                                          b.compute("abs.f32", "f32", x))))
    # y an odd integer: integral, below 2^24 (all larger floats are even), lowest bit set
    integral = b.compute("setp.eq.f32", "pred", b.compute("cvt.rzi.f32.f32", "f32", y), y)
    small = b.compute("setp.lt.f32", "pred", b.compute("abs.f32", "f32", y),
                      f32(float(1 << 24)))
    low_bit = b.compute("and.b32", "b32", b.compute("cvt.rzi.s32.f32", "b32", y), 1)
    odd = b.compute("and.pred", "pred", b.compute("setp.ne.b32", "pred", low_bit, 0),
                    b.compute("and.pred", "pred", integral, small))
    negative_sign = b.compute("setp.lt.s32", "pred", b.compute("mov.b32", "b32", x), 0)
    negate = b.compute("and.pred", "pred", negative_sign, odd)
    result = b.compute("selp.f32", "f32", b.compute("neg.f32", "f32", magnitude), magnitude,
                       negate)
    # a finite negative x and a non-integer y: NaN
    negative = b.compute("setp.lt.f32", "pred", x, f32(0.0))
    finite = b.compute("setp.gt.f32", "pred", x, f32(-INFINITY))
    invalid = b.compute("and.pred", "pred", b.compute("and.pred", "pred", negative, finite),
                        b.compute("not.pred", "pred", integral))
    result = b.compute("selp.f32", "f32", f32(NAN), result, invalid)
    # x^0 = 1, 1^y = 1 (NaN included), (-1)^±inf = 1
    zero_power = b.compute("setp.eq.f32", "pred", y, f32(0.0))
    base_one = b.compute("setp.eq.f32", "pred", x, f32(1.0))
    minus_one = b.compute("setp.eq.f32", "pred", x, f32(-1.0))
    infinite_power = b.compute("setp.eq.f32", "pred", b.compute("abs.f32", "f32", y),
                               f32(INFINITY))
    one = b.compute("or.pred", "pred", b.compute("or.pred", "pred", zero_power, base_one),
                    b.compute("and.pred", "pred", minus_one, infinite_power))
    return b.compute("selp.f32", "f32", f32(1.0), result, one)


def _fields(b: KernelBuilder, magnitude: Register) -> tuple[Register, Register]:
    """(significand with its implicit one, exponent field with subnormals as 1) of a finite
    non-negative f32: the value is significand * 2^(exponent - 150)."""
    bits = b.compute("mov.b32", "b32", magnitude)
    exponent = b.compute("shr.u32", "b32", bits, FLOAT_BITS)
    fraction = b.compute("and.b32", "b32", bits, (1 << FLOAT_BITS) - 1)
    normal = b.compute("setp.ne.u32", "pred", exponent, 0)
    significand = b.compute("selp.b32", "b32",
                            b.compute("or.b32", "b32", fraction, 1 << FLOAT_BITS), fraction,
                            normal)
    return significand, b.compute("max.u32", "b32", exponent, 1)


def remf(b: KernelBuilder, xs: list[Register]) -> Register:
    """fmod(x, y) exactly: with x = mx 2^ex and y = my 2^ey (integer significands), the
    result is ((mx 2^(ex - ey)) mod my) 2^ey with x's sign, the power of two taken in 40-bit
    steps of a 64-bit remainder. NaN when y is 0 or x infinite (or either NaN); x when
    |x| < |y|."""
    x, y = xs
    ax, ay = b.compute("abs.f32", "f32", x), b.compute("abs.f32", "f32", y)
    mx, ex = _fields(b, ax)
    my, ey = _fields(b, ay)
    divisor = b.compute("cvt.u64.u32", "b64", my)
    remainder = b.compute("rem.u64", "b64", b.compute("cvt.u64.u32", "b64", mx), divisor)
    left = b.compute("sub.s32", "b32", ex, ey)
    for _ in range(CHUNKS):
        step = b.compute("max.s32", "b32", b.compute("min.s32", "b32", left, CHUNK), 0)
        shifted = b.compute("shl.b64", "b64", remainder, step)
        remainder = b.compute("rem.u64", "b64", shifted, divisor)
        left = b.compute("sub.s32", "b32", left, step)
    value = b.compute("cvt.rn.f32.u64", "f32", remainder)  # below 2^24: exact
    # 2^(ey - 150): a normal power (biased exponent ey - 23) or a subnormal one (1 << ey - 1)
    biased = b.compute("sub.s32", "b32", ey, FLOAT_BITS)
    normal = b.compute("setp.ge.s32", "pred", biased, 1)
    scale_bits = b.compute("selp.b32", "b32", b.compute("shl.b32", "b32", biased, FLOAT_BITS),
                           b.compute("shl.b32", "b32", 1,
                                     b.compute("sub.s32", "b32", ey, 1)), normal)
    scaled = b.compute("mul.rn.f32", "f32", value, b.compute("mov.b32", "f32", scale_bits))
    result = b.compute("copysign.f32", "f32", x, scaled)
    smaller = b.compute("setp.lt.f32", "pred", ax, ay)
    result = b.compute("selp.f32", "f32", x, result, smaller)
    invalid = b.compute("or.pred", "pred", b.compute("setp.equ.f32", "pred", ay, f32(0.0)),
                        b.compute("setp.equ.f32", "pred", ax, f32(INFINITY)))
    return b.compute("selp.f32", "f32", f32(NAN), result, invalid)


__all__ = ["copysign", "powf", "remf", "round_half_away", "rounded", "trigonometric"]
