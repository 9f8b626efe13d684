"""The warpgroup matrix multiply-accumulate op.

    %d = "smalti.wgmma"(%acc, %a, %b) : (vector<128x128xf32>,
          memref<128x64xbf16, #gpu.address_space<workgroup>>,
          memref<64x128xbf16, #gpu.address_space<workgroup>>) -> vector<128x128xf32>

d = acc + a @ b, with acc (M x N, f32) in registers (WGMMA layout), a (M x K) in shared
memory or in registers (in the A layout of its bit width, WGMMA_A_LAYOUTS), b (K x N) in
shared memory. Input types, as wgmma multiplies them: bf16 x bf16, f16 x f16, f32 x f32
computed as tf32 (the tensor cores' only f32 path: each input keeps 10 mantissa bits, like
`jax.lax.Precision.DEFAULT` on GPUs), and f8E4M3FN / f8E5M2 in any mix. Which operand is
stored transposed (MN-major) follows from the SMEM refs' transforms; wgmma transposes only
16-bit operands, so f32 and f8 ones must be K-major: A as M x K, B as N x K in memory, i.e.
B's ref viewed through transforms that start with `#smalti.transpose<[1, 0]>`.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect.attributes import LayoutAttrError, attr_to_transforms
from smalti.dialect.bindings import type_name
from smalti.dialect.checks import check_smem_ref, element_bytes
from smalti.dialect.definition import Effect, Operand, Proxy, Result, SmaltiOp, Trait
from smalti.dialect.diagnostics import error_at
from smalti.dialect.ops_memory import SelectStageOp, WithTransformsOp
from smalti.tiling import TransposeTransform

WGMMA_M = 64
WGMMA_K_BYTES = 32  # one wgmma instruction consumes 32 bytes of K (k16 for 16-bit types)
MAX_N = 256
PTX_INPUT_TYPES = {"bf16": "bf16", "f16": "f16", "f32": "tf32", "f8E4M3FN": "e4m3",
                   "f8E5M2": "e5m2"}
"""wgmma's name (PTX) of each MLIR input element type."""
INPUT_TYPES = tuple(PTX_INPUT_TYPES)
TRANSPOSABLE_TYPES = ("bf16", "f16")  # imm-trans-a/b exist only for these (PTX ISA)


def _family(element: str) -> str:
    """Which inputs may pair: fp8 formats mix freely, any other type pairs only with itself."""
    return "f8" if element.startswith("f8") else element


def _shape_of(op: ir.Operation, value: ir.Value, what: str, registers_ok: bool
              ) -> tuple[int, ...]:
    if registers_ok and isinstance(value.type, ir.VectorType):
        shape = tuple(ir.VectorType(value.type).shape)
    else:
        shape = tuple(check_smem_ref(op, value, what).shape)
    if len(shape) != 2:
        raise error_at(op, f"expects {what} to be 2-D, got {value.type}")
    return shape


def known_transforms(op: ir.Operation, value: ir.Value, position: int) -> tuple | None:
    """The transforms of SMEM operand `value` (the `position`-th SMEM ref of `op`), when
    known before lowering: the op's `in_transforms`, else a defining with_transforms."""
    if "in_transforms" in op.attributes:
        try:
            return tuple(attr_to_transforms(op.attributes["in_transforms"][position]))
        except (LayoutAttrError, IndexError) as error:
            raise error_at(op, f"'in_transforms' has no valid entry #{position}: {error}"
                           ) from None
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    owner = owner.operation.opview
    if isinstance(owner, SelectStageOp):  # the stages share their transforms
        return known_transforms(op, owner.stages[0], position)
    if not isinstance(owner, WithTransformsOp) or "transforms" not in owner.attributes:
        return None
    try:
        return owner.transforms
    except LayoutAttrError:
        return None  # with_transforms' own verifier reports it


def is_transposed(transforms: tuple) -> bool:
    """Whether memory holds the transpose of the logical 2-D operand."""
    return bool(transforms) and transforms[0] == TransposeTransform((1, 0))


def mn_major_problem(what: str, element: str, mn_major: bool) -> str | None:
    """Why wgmma cannot read operand `what` ("A" or "B") of `element` stored MN-major (only
    16-bit operands can be transposed), naming the fix; None if it can."""
    if not mn_major or element in TRANSPOSABLE_TYPES:
        return None
    fix = ("store B as N x K (K contiguous) and view it as K x N through "
           "smalti.with_transforms whose transforms start with #smalti.transpose<[1, 0]>"
           if what == "B" else
           "store A as M x K (K contiguous): drop the leading #smalti.transpose")
    return (f"reads {what} ({element}) MN-major, but wgmma transposes only bf16/f16 operands; "
            f"{fix}")


class WgmmaOp(SmaltiOp):
    """acc + a @ b through wgmma.mma_async (one warpgroup)."""

    OPERATION_NAME = "smalti.wgmma"
    TRAITS = Trait.WARPGROUP_COLLECTIVE
    EFFECTS = (Effect.read("a", Proxy.ASYNC), Effect.read("b", Proxy.ASYNC))
    # wgmma.mma_async (its fence, commit and wait too) "requires sm_90a" (PTX ISA, Target ISA
    # notes); ptxas 13 rejects it for sm_100a ("not supported on .target 'sm_100a'").
    ARCHES = ("sm_90a",)
    ARCH_FEATURE = "wgmma (Blackwell's tensor cores take tcgen05.mma)"

    accumulator = Operand("the f32 accumulator (M x N) in registers")
    a = Operand("A (M x K): in shared memory, or a vector in registers")
    b = Operand("B (K x N) in shared memory")
    result = Result("acc + a @ b", same_type_as="accumulator")

    def memory_effects(self) -> list[tuple[Effect, ir.Value]]:
        """A is read from shared memory only when it is not a register vector."""
        return [(e, v) for e, v in super().memory_effects()
                if not isinstance(v.type, ir.VectorType)]

    def verify_op(self) -> None:
        op = self.operation
        acc = self.accumulator
        if not isinstance(acc.type, ir.VectorType):
            raise error_at(op, f"expects the accumulator to be a vector, got {acc.type}")
        acc_type = ir.VectorType(acc.type)
        if type_name(acc_type.element_type) != "f32" or acc_type.rank != 2:
            raise error_at(op, f"expects a 2-D f32 accumulator, got {acc.type}")
        if self.result.type != acc.type:
            raise error_at(op, f"result type {self.result.type} differs from accumulator type "
                               f"{acc.type}")
        m, n = acc_type.shape
        a_m, a_k = _shape_of(op, self.a, "A", registers_ok=True)
        b_k, b_n = _shape_of(op, self.b, "B", registers_ok=False)
        a_type, b_type = (type_name(ir.ShapedType(v.type).element_type) for v in (self.a, self.b))
        for what, element in (("A", a_type), ("B", b_type)):
            if element not in INPUT_TYPES:
                raise error_at(op, f"supports {what} of {', '.join(INPUT_TYPES)}, got {element}")
        if _family(a_type) != _family(b_type):
            raise error_at(op, f"cannot multiply {a_type} A by {b_type} B: wgmma pairs bf16 "
                               "with bf16, f16 with f16, f32 (as tf32) with f32, and f8 "
                               "(f8E4M3FN or f8E5M2) with f8")
        if (a_m, b_n) != (m, n):
            raise error_at(op, f"A is {a_m}x{a_k} and B {b_k}x{b_n}, but the accumulator is "
                               f"{m}x{n}")
        if a_k != b_k:
            raise error_at(op, f"the K dims of A ({a_k}) and B ({b_k}) differ")
        if m % WGMMA_M:
            raise error_at(op, f"M ({m}) must be a multiple of {WGMMA_M}")
        if n % 8 or not 8 <= n <= MAX_N:
            raise error_at(op, f"N ({n}) must be a multiple of 8 in [8, {MAX_N}]")
        k_step = WGMMA_K_BYTES // element_bytes(self.b.type)
        if a_k % k_step:
            raise error_at(op, f"K ({a_k}) must be a multiple of {k_step} for {b_type} "
                               f"({WGMMA_K_BYTES} bytes per wgmma instruction)")
        a_in_registers = isinstance(self.a.type, ir.VectorType)
        if b_type not in TRANSPOSABLE_TYPES:
            self._verify_k_major(a_type, b_type, a_in_registers)

    def _verify_k_major(self, a_type: str, b_type: str, a_in_registers: bool) -> None:
        """f32 and f8 operands cannot be transposed by wgmma: both must be K-major."""
        op = self.operation
        refs = ([] if a_in_registers else [("A", self.a, a_type, False)]) + [
            ("B", self.b, b_type, True)]
        for position, (what, value, element, is_b) in enumerate(refs):
            transforms = known_transforms(op, value, position)
            if transforms is None:
                continue
            problem = mn_major_problem(what, element, is_transposed(transforms) != is_b)
            if problem is not None:
                raise error_at(op, problem)
