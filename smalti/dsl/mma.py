"""`wgmma(acc, a, b)`: acc + a @ b on the tensor cores, A and B in shared memory (or A in
registers), the f32 accumulator in registers.

Inputs: bf16 or f16 (A and B alike), f32 (multiplied as tf32: 10 mantissa bits kept), or
f8 (float8_e4m3fn, float8_e5m2, mixed freely). wgmma transposes only 16-bit operands, so
f32 and f8 ones are read K-major: A as the (M, K) ref it is, B as the transposed view of an
(N, K) ref, `b_smem.T`:

    acc = sd.wgmma(acc, a_smem, bt_smem.T)   # a_smem (M, K), bt_smem (N, K): acc + A @ B
"""

from __future__ import annotations

import numpy as np

from smalti.dialect.ops_mma import (
    INPUT_TYPES,
    MAX_N,
    TRANSPOSABLE_TYPES,
    WGMMA_K_BYTES,
    WGMMA_M,
    WgmmaOp,
)
from smalti.dsl.array import Array
from smalti.dsl.dtypes import mlir_name
from smalti.dsl.locations import user_error
from smalti.dsl.refs import Ref
from smalti.dsl.smem_refs import SharedRef, StagedRef
from smalti.dsl.trace import create, dsl_entry

DTYPE_NAMES = {"bf16": "bfloat16", "f16": "float16", "f32": "float32 (as tf32)",
               "f8E4M3FN": "float8_e4m3fn", "f8E5M2": "float8_e5m2"}


def _operand(x: object, what: str, registers_ok: bool) -> Ref | Array:
    if isinstance(x, StagedRef):
        raise user_error(TypeError, f"wgmma's {what} {x.name} has {len(x)} stages; pass one "
                                    f"of them, like {x.name}[stage]")
    if isinstance(x, Ref) and x.is_smem:
        pass
    elif not (registers_ok and isinstance(x, Array)):
        where = "a shared-memory ref" + (" or an Array" if registers_ok else "")
        raise user_error(TypeError, f"wgmma's {what} must be {where}, got {x!r}")
    if len(x.shape) != 2:
        raise user_error(ValueError, f"wgmma's {what} must be 2-D, got shape {x.shape}")
    if mlir_name(x.dtype) not in INPUT_TYPES:
        raise user_error(TypeError, f"wgmma's {what} must be one of "
                                    f"{', '.join(DTYPE_NAMES.values())}; got {x.dtype.name}")
    return x


def _family(dtype: np.dtype) -> str:
    """Which inputs pair: f8 formats mix freely, any other dtype pairs only with itself."""
    name = mlir_name(dtype) or ""
    return "f8" if name.startswith("f8") else name


def _check_k_major(a: Ref | Array, b: Ref) -> None:
    """f32 and f8 operands are read K-major: A not transposed, B the `.T` of an (N, K) ref.
    (Refs the DSL did not declare, e.g. views with transforms of their own, are left to the
    dialect's verifier.)"""
    if mlir_name(b.dtype) in TRANSPOSABLE_TYPES:
        return
    kind = DTYPE_NAMES[mlir_name(b.dtype)]
    if isinstance(a, SharedRef) and a.transposed_of is not None:
        raise user_error(ValueError, f"wgmma reads {kind} A only K-major (it transposes only "
                                     f"bfloat16/float16): pass the (M, K) ref "
                                     f"{a.transposed_of.name}, not the transposed view {a.name}")
    if isinstance(b, SharedRef) and b.transposed_of is None:
        k, n = b.shape
        raise user_error(ValueError, f"wgmma reads {kind} B only K-major (it transposes only "
                                     f"bfloat16/float16): declare B as ({n}, {k}) in smem, K "
                                     f"contiguous, and pass its transposed view, like "
                                     f"bt_smem.T, instead of {b.name}")


@dsl_entry(WgmmaOp)
def wgmma(acc: Array, a: Ref | Array, b: Ref) -> Array:
    """acc + a @ b (wgmma.mma_async): acc (M, N) f32, a (M, K), b (K, N) of bf16, f16, f32
    (as tf32) or f8; f32 and f8 B is the transposed view of an (N, K) ref (`bt_smem.T`)."""
    if not isinstance(acc, Array) or acc.ndim != 2 or acc.dtype != np.float32:
        raise user_error(TypeError, "wgmma's accumulator must be a 2-D float32 Array, got "
                                    f"{acc!r}")
    a = _operand(a, "A", registers_ok=True)
    b = _operand(b, "B", registers_ok=False)
    if _family(a.dtype) != _family(b.dtype):
        raise user_error(TypeError, f"wgmma's A ({a.dtype.name}) and B ({b.dtype.name}) do not "
                                    "pair: A and B must have the same dtype, or both be float8 "
                                    "(e4m3fn and e5m2 mix)")
    (m, n), (a_m, k), (b_k, b_n) = acc.shape, a.shape, b.shape
    if (a_m, b_n) != (m, n) or k != b_k:
        raise user_error(ValueError, f"wgmma: A {a.shape} @ B {b.shape} does not fit the "
                                     f"accumulator {acc.shape}")
    k_step = WGMMA_K_BYTES // b.dtype.itemsize
    if m % WGMMA_M or n % 8 or not 8 <= n <= MAX_N or k % k_step:
        raise user_error(ValueError, f"wgmma needs M a multiple of {WGMMA_M}, N a multiple of "
                                     f"8 in [8, {MAX_N}] and K a multiple of {k_step} for "
                                     f"{b.dtype.name}; got M={m}, N={n}, K={k}")
    _check_k_major(a, b)
    return Array(create(WgmmaOp, accumulator=acc.value, a=a.value, b=b.value).result)
