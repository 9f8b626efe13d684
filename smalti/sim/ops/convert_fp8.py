"""cvt to and from packed fp8 pairs (.e4m3x2, .e5m2x2); the formats are in sim/fp8.py.

PTX ISA, "cvt": `cvt.rn.satfinite{.relu}.f8x2.f32 d, a, b` puts cvt(a) in d[15:8] and cvt(b)
in d[7:0]; `cvt.rn.satfinite{.relu}.f8x2.f16x2 d, a` converts a's upper half into d's upper
byte; `cvt.rn{.relu}.f16x2.f8x2 d, a` widens each byte exactly, the upper into d[31:16].
"""

from __future__ import annotations

import numpy as np

from smalti.ptx.module import Instruction
from smalti.sim.errors import Unsupported
from smalti.sim.fp8 import FORMATS, decode, encode
from smalti.sim.operands import DecodeEnv
from smalti.sim.ops.common import elementwise
from smalti.sim.registry import Step

F16_NAN = np.uint16(0x7FFF)  # the canonical f16 NaN


def decode_fp8_cvt(inst: Instruction, env: DecodeEnv, dst: str, src: str, frnd: str | None,
                   relu: bool, finite: bool) -> Step:
    """The three fp8 pair conversions of PTX ISA 8.x (no .bf16x2 forms exist for e4m3/e5m2)."""
    if frnd != "rn":
        raise Unsupported("fp8 conversions round with .rn")
    if dst in FORMATS:
        fmt = FORMATS[dst]
        if not finite:
            raise Unsupported(f"cvt to .{dst} needs .satfinite")
        if src == "f32":
            def pack(a: np.ndarray, b: np.ndarray) -> np.ndarray:
                hi = encode(np.asarray(a).astype(np.float64), fmt, relu).astype(np.uint16)
                lo = encode(np.asarray(b).astype(np.float64), fmt, relu).astype(np.uint16)
                return (hi << np.uint16(8)) | lo
            return elementwise(inst, env, ["f32", "f32"], dst, pack)
        if src == "f16x2":
            def narrow(a: np.ndarray) -> np.ndarray:
                halves = np.asarray(a).astype(np.uint32)
                hi = (halves >> np.uint32(16)).astype(np.uint16).view(np.float16)
                lo = (halves & np.uint32(0xFFFF)).astype(np.uint16).view(np.float16)
                codes = [encode(h.astype(np.float64), fmt, relu).astype(np.uint16)
                         for h in (hi, lo)]
                return (codes[0] << np.uint16(8)) | codes[1]
            return elementwise(inst, env, ["b32"], dst, narrow)
        raise Unsupported(f"cvt to .{dst} takes .f32 or .f16x2 sources")
    if dst != "f16x2" or finite:
        raise Unsupported(f"cvt from .{src} gives .f16x2 (without .satfinite)")
    fmt = FORMATS[src]

    def widen(a: np.ndarray) -> np.ndarray:
        codes = np.asarray(a).astype(np.uint16)
        halves = []
        for byte in (codes >> np.uint16(8), codes & np.uint16(0xFF)):
            value = decode(byte, fmt)
            if relu:  # negative values and -0 become +0, NaN stays NaN
                value = np.where(np.signbit(value) & ~np.isnan(value), 0.0, value)
            bits = value.astype(np.float16).view(np.uint16)  # exact: fp8 values fit f16
            halves.append(np.where(np.isnan(value), F16_NAN, bits).astype(np.uint32))
        return (halves[0] << np.uint32(16)) | halves[1]

    return elementwise(inst, env, ["b16"], "f16x2", widen)
