"""The warpgroup matrix multiply-accumulate op.

    %d = "smalti.wgmma"(%acc, %a, %b) : (vector<128x128xf32>,
          memref<128x64xbf16, #gpu.address_space<workgroup>>,
          memref<64x128xbf16, #gpu.address_space<workgroup>>) -> vector<128x128xf32>

d = acc + a @ b, with acc (M x N, f32) in registers (WGMMA layout), a (M x K) in shared
memory or in registers, b (K x N) in shared memory; a and b bf16 or f16. Which operand is
stored transposed (MN-major) follows from the SMEM refs' transforms.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect.diagnostics import error_at
from smalti.dialect.ops import SmaltiOp, _register, operand
from smalti.dialect.ops_memory import check_smem_ref

WGMMA_M = 64
WGMMA_K_BYTES = 32  # one wgmma instruction consumes 32 bytes of K (k16 for 16-bit types)
MAX_N = 256
INPUT_TYPES = ("bf16", "f16")


def _shape_of(op: ir.Operation, value: ir.Value, what: str, registers_ok: bool
              ) -> tuple[int, ...]:
    if registers_ok and isinstance(value.type, ir.VectorType):
        shape = tuple(ir.VectorType(value.type).shape)
    else:
        shape = tuple(check_smem_ref(op, value, what).shape)
    if len(shape) != 2:
        raise error_at(op, f"expects {what} to be 2-D, got {value.type}")
    return shape


@_register
class WgmmaOp(SmaltiOp):
    """acc + a @ b through wgmma.mma_async (one warpgroup)."""

    OPERATION_NAME = "smalti.wgmma"

    accumulator = operand(0)
    a = operand(1)
    b = operand(2)

    def verify_op(self) -> None:
        op = self.operation
        self._expect_counts(3, 1)
        acc = self.accumulator
        if not isinstance(acc.type, ir.VectorType):
            raise error_at(op, f"expects the accumulator to be a vector, got {acc.type}")
        acc_type = ir.VectorType(acc.type)
        if str(acc_type.element_type) != "f32" or acc_type.rank != 2:
            raise error_at(op, f"expects a 2-D f32 accumulator, got {acc.type}")
        if op.results[0].type != acc.type:
            raise error_at(op, f"result type {op.results[0].type} differs from accumulator type "
                               f"{acc.type}")
        m, n = acc_type.shape
        a_m, a_k = _shape_of(op, self.a, "A", registers_ok=True)
        b_k, b_n = _shape_of(op, self.b, "B", registers_ok=False)
        elements = {str(ir.ShapedType(v.type).element_type) for v in (self.a, self.b)}
        if len(elements) != 1:
            raise error_at(op, f"A and B element types differ: {sorted(elements)}")
        element = elements.pop()
        if element not in INPUT_TYPES:
            raise error_at(op, f"supports A and B of {' or '.join(INPUT_TYPES)}, got {element}")
        if (a_m, b_n) != (m, n):
            raise error_at(op, f"A is {a_m}x{a_k} and B {b_k}x{b_n}, but the accumulator is "
                               f"{m}x{n}")
        if a_k != b_k:
            raise error_at(op, f"the K dims of A ({a_k}) and B ({b_k}) differ")
        if m % WGMMA_M:
            raise error_at(op, f"M ({m}) must be a multiple of {WGMMA_M}")
        if n % 8 or not 8 <= n <= MAX_N:
            raise error_at(op, f"N ({n}) must be a multiple of 8 in [8, {MAX_N}]")
        if a_k % (WGMMA_K_BYTES // 2):
            raise error_at(op, f"K ({a_k}) must be a multiple of {WGMMA_K_BYTES // 2}")
