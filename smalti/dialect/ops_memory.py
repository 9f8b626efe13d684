"""Shared-memory and TMA ops: slice_smem, with_transforms, async_load, async_store(_wait).

    %r = "smalti.slice_smem"(%offset) : (index) -> memref<128x64xbf16, #smem>
    %t = "smalti.with_transforms"(%r) {transforms = [#smalti.tile<[8, 64]>,
                                                     #smalti.swizzle<128>]}
    "smalti.async_load"(%gmem, %smem, %barriers, %i, %x, %y) {slice_lengths = array<i64: ...>}
    "smalti.async_load"(...) {collective = array<i64: 0>}  // shared along cluster dim x
    "smalti.async_store"(%smem, %gmem, %x, %y)
    "smalti.async_store_wait"() {pending = 0 : i64}

(#smem stands for #gpu.address_space<workgroup>.)

Every slice carves the kernel's one dynamic shared-memory buffer at a constant byte offset;
slices may overlap (aliasing is the author's business, as in CUDA).
"""

from __future__ import annotations

import math

from jaxlib.mlir import ir

from smalti.dialect.attributes import LayoutAttrError, attr_to_transforms
from smalti.dialect.bindings import is_workgroup_address_space
from smalti.dialect.diagnostics import error_at
from smalti.dialect.ops import SmaltiOp, _register, constant_index, operand, operands_from
from smalti.tiling import LayoutError, physical_shape

SMEM_ALIGNMENT = 16  # bytes every slice starts on (16-byte vector accesses, TMA, wgmma)
MAX_SMEM_BYTES = 227 * 1024  # dynamic shared memory one sm_90 block may use


def is_smem_type(t: ir.Type) -> bool:
    """A memref in `#gpu.address_space<workgroup>`."""
    if not isinstance(t, ir.MemRefType):
        return False
    return is_workgroup_address_space(ir.MemRefType(t).memory_space)


def is_gmem_type(t: ir.Type) -> bool:
    return isinstance(t, ir.MemRefType) and ir.MemRefType(t).memory_space is None


def element_bytes(t: ir.Type) -> int:
    """Bytes of one element of a memref or vector type."""
    element = ir.ShapedType(t).element_type
    width = (ir.IntegerType(element).width if isinstance(element, ir.IntegerType)
             else ir.FloatType(element).width)
    return max(width // 8, 1)


def smem_size_bytes(t: ir.Type) -> int:
    return math.prod(ir.MemRefType(t).shape) * element_bytes(t)


def check_smem_ref(op: ir.Operation, value: ir.Value, what: str) -> ir.MemRefType:
    """A shared-memory memref of static, contiguous row-major shape; else a located error."""
    if not is_smem_type(value.type):
        raise error_at(op, f"expects {what} to be a memref in #gpu.address_space<workgroup>, "
                           f"got {value.type}")
    ref = ir.MemRefType(value.type)
    if not ref.has_static_shape:
        raise error_at(op, f"expects {what} of static shape, got {ref}")
    return ref


def check_index(op: ir.Operation, value: ir.Value, what: str) -> None:
    if not isinstance(value.type, ir.IndexType):
        raise error_at(op, f"{what} must have type index, got {value.type}")


def int_attr(op: ir.Operation, name: str, minimum: int) -> int:
    """A required integer attribute of at least `minimum`."""
    if name not in op.attributes or not isinstance(op.attributes[name], ir.IntegerAttr):
        raise error_at(op, f"requires an integer '{name}' attribute")
    value = ir.IntegerAttr(op.attributes[name]).value
    if value < minimum:
        raise error_at(op, f"'{name}' must be at least {minimum}, got {value}")
    return value


def _row_major(shape: list[int]) -> list[int]:
    return [math.prod(shape[i + 1:]) for i in range(len(shape))]


def slice_end(op: ir.Operation) -> int | None:
    """The byte after a slice_smem's slice, when its offset and type are well formed."""
    offset = constant_index(op.operands[0]) if len(op.operands) == 1 else None
    if offset is None or len(op.results) != 1 or not is_smem_type(op.results[0].type):
        return None
    return offset + smem_size_bytes(op.results[0].type)


@_register
class SliceSmemOp(SmaltiOp):
    """A typed view of the dynamic shared-memory buffer at a constant byte offset."""

    OPERATION_NAME = "smalti.slice_smem"

    @property
    def offset(self) -> int:
        value = constant_index(self.operation.operands[0])
        assert value is not None
        return value

    def verify_op(self) -> None:
        op = self.operation
        self._expect_counts(1, 1)
        check_index(op, op.operands[0], "the offset")
        offset = constant_index(op.operands[0])
        if offset is None:
            raise error_at(op, "expects a constant offset (an arith.constant of type index)")
        ref = check_smem_ref(op, op.results[0], "the result")
        if ref.get_strides_and_offset() != (_row_major(list(ref.shape)), 0):
            raise error_at(op, f"expects a contiguous row-major result, got {ref}")
        if offset < 0 or offset % SMEM_ALIGNMENT:
            raise error_at(op, f"offset {offset} must be a non-negative multiple of "
                               f"{SMEM_ALIGNMENT} bytes")
        end = offset + smem_size_bytes(ref)
        if end > MAX_SMEM_BYTES:
            raise error_at(op, f"slice ends at byte {end}, beyond the {MAX_SMEM_BYTES} bytes of "
                               "shared memory a block may use")

    @staticmethod
    def build(offset: ir.Value, result_type: ir.Type) -> SliceSmemOp:
        return ir.Operation.create(SliceSmemOp.OPERATION_NAME, results=[result_type],
                                   operands=[offset]).opview


@_register
class WithTransformsOp(SmaltiOp):
    """The same SMEM ref, with its tile/swizzle/transpose transforms fixed."""

    OPERATION_NAME = "smalti.with_transforms"

    @property
    def transforms(self) -> tuple:
        return tuple(attr_to_transforms(self.operation.attributes["transforms"]))

    def verify_op(self) -> None:
        op = self.operation
        self._expect_counts(1, 1)
        ref = check_smem_ref(op, op.operands[0], "the operand")
        if op.results[0].type != op.operands[0].type:
            raise error_at(op, f"result type {op.results[0].type} differs from operand type "
                               f"{op.operands[0].type}")
        if "transforms" not in op.attributes:
            raise error_at(op, "requires a 'transforms' attribute")
        try:
            physical_shape(self.transforms, tuple(ref.shape), element_bytes(ref))
        except (LayoutAttrError, LayoutError) as error:
            raise error_at(op, f"'transforms' {error}") from None


def slice_lengths(op: ir.Operation, gmem: ir.MemRefType, smem: ir.MemRefType
                  ) -> tuple[int, ...]:
    """The box read from GMEM per dim (-1: a squeezed dim of length 1); checked against
    both refs. Without the attribute, the SMEM shape (ranks must then agree)."""
    if "slice_lengths" not in op.attributes:
        lengths = tuple(smem.shape)
    else:
        attr = op.attributes["slice_lengths"]
        if not isinstance(attr, ir.DenseI64ArrayAttr):
            raise error_at(op, f"'slice_lengths' must be array<i64: ...>, got {attr}")
        lengths = tuple(attr)
    if len(lengths) != gmem.rank:
        raise error_at(op, f"'slice_lengths' has {len(lengths)} entries for a rank-"
                           f"{gmem.rank} global ref")
    kept = tuple(n for n in lengths if n != -1)
    if any(n < 1 for n in kept):
        raise error_at(op, f"'slice_lengths' {list(lengths)} must be positive or -1 (squeezed)")
    if kept != tuple(smem.shape):
        raise error_at(op, f"'slice_lengths' {list(lengths)} do not match the shared-memory "
                           f"shape {list(smem.shape)}")
    for dim, (n, size) in enumerate(zip(lengths, gmem.shape, strict=True)):
        if n > size:
            raise error_at(op, f"slice length {n} of dim {dim} exceeds the global dim of size "
                               f"{size}")
    return lengths


def _check_transfer(op: ir.Operation, gmem_value: ir.Value, smem_value: ir.Value,
                    indices: list[ir.Value]) -> None:
    """Shared checks of async_load and async_store."""
    if not is_gmem_type(gmem_value.type):
        raise error_at(op, f"expects a global memref, got {gmem_value.type}")
    gmem = ir.MemRefType(gmem_value.type)
    smem = check_smem_ref(op, smem_value, "the shared-memory ref")
    if gmem.element_type != smem.element_type:
        raise error_at(op, f"element types differ: {gmem.element_type} in global memory, "
                           f"{smem.element_type} in shared memory")
    if len(indices) != gmem.rank:
        raise error_at(op, f"expects {gmem.rank} indices for {gmem}, got {len(indices)}")
    for i, index in enumerate(indices):
        check_index(op, index, f"index #{i}")
    slice_lengths(op, gmem, smem)


@_register
class AsyncLoadOp(SmaltiOp):
    """TMA: copy a box of a global ref into an SMEM ref; completes tx bytes on barrier i."""

    OPERATION_NAME = "smalti.async_load"

    source = operand(0)
    destination = operand(1)
    barriers = operand(2)
    barrier_index = operand(3)
    indices = operands_from(4)

    def verify_op(self) -> None:
        op = self.operation
        self._expect_counts(None, 0)
        if len(op.operands) < 4:
            raise error_at(op, "expects a global ref, a shared ref, barriers, a barrier index "
                               "and indices")
        from smalti.dialect.ops_sync import check_barriers

        check_barriers(op, self.barriers)
        check_index(op, self.barrier_index, "the barrier index")
        _check_transfer(op, self.source, self.destination, self.indices)
        collective_dims(op)


def collective_dims(op: ir.Operation) -> tuple[int, ...]:
    """The cluster dims (0 = x, 1 = y, 2 = z) along which the CTAs of an async_load share
    it (`collective`, default none): each of the n CTAs along them loads 1/n of the SMEM
    ref's leading dim and multicasts it to all n. Checked against the enclosing kernel's
    `smalti.cluster`."""
    dims = cluster_dims(op)
    if not dims:
        return ()
    from smalti.dialect.kernel import enclosing_kernel, kernel_cluster

    cluster = kernel_cluster(enclosing_kernel(op))
    if cluster is None:
        return dims
    parts = math.prod(cluster[d] for d in dims)
    smem = ir.MemRefType(op.operands[1].type)
    if smem.rank == 0 or smem.shape[0] % parts:
        raise error_at(op, f"the shared-memory ref {smem} cannot be split into {parts} "
                           "collective parts along its leading dim")
    return dims


def cluster_dims(op: ir.Operation) -> tuple[int, ...]:
    """An op's `collective` attribute (default none): distinct cluster dims (0 = x, 1 = y,
    2 = z), each of size > 1 in the `smalti.cluster` of the kernel enclosing the op."""
    if "collective" not in op.attributes:
        return ()
    attr = op.attributes["collective"]
    if not isinstance(attr, ir.DenseI64ArrayAttr):
        raise error_at(op, f"'collective' must be array<i64: ...> of cluster dims, got {attr}")
    dims = tuple(attr)
    if len(set(dims)) != len(dims):
        raise error_at(op, f"'collective' {list(dims)} repeats a cluster dim")
    from smalti.dialect.kernel import CLUSTER_ATTR, enclosing_kernel, kernel_cluster

    func = enclosing_kernel(op)
    if func is None:
        raise error_at(op, "'collective' needs an enclosing kernel (a func.func marked "
                           f"'smalti.kernel') with a '{CLUSTER_ATTR}'")
    cluster = kernel_cluster(func)
    if cluster is None:  # the kernel's own check reports its malformed grid or cluster
        return dims
    for d in dims:
        if not 0 <= d < 3:
            raise error_at(op, f"'collective' dim {d} is not a cluster dim (0 = x, 1 = y, "
                               "2 = z)")
        if cluster[d] == 1:
            raise error_at(op, f"'collective' dim {d} has size 1 in the kernel's "
                               f"'{CLUSTER_ATTR}' {list(cluster)}: nothing to share along it")
    return dims


@_register
class AsyncStoreOp(SmaltiOp):
    """TMA: copy an SMEM ref into a box of a global ref (a bulk async-group)."""

    OPERATION_NAME = "smalti.async_store"

    source = operand(0)
    destination = operand(1)
    indices = operands_from(2)

    def verify_op(self) -> None:
        op = self.operation
        self._expect_counts(None, 0)
        if len(op.operands) < 2:
            raise error_at(op, "expects a shared ref, a global ref and indices")
        _check_transfer(op, self.destination, self.source, self.indices)


@_register
class AsyncStoreWaitOp(SmaltiOp):
    """Wait until at most `pending` async_store groups still read shared memory."""

    OPERATION_NAME = "smalti.async_store_wait"

    def verify_op(self) -> None:
        op = self.operation
        self._expect_counts(0, 0)
        int_attr(op, "pending", 0)


def collective_parts(op: ir.Operation) -> int:
    """How many CTAs share an async_load (each copies that fraction of the SMEM ref's
    leading dim); 1 when it is not collective."""
    dims = collective_dims(op)
    if not dims:
        return 1
    from smalti.dialect.kernel import enclosing_kernel, kernel_cluster

    func = enclosing_kernel(op)
    cluster = kernel_cluster(func) if func is not None else None
    return 1 if cluster is None else math.prod(cluster[d] for d in dims)


def collective_part_shape(op: ir.Operation) -> tuple[int, ...]:
    """The shape of what one CTA copies of an async op's SMEM ref: all of it, or its part."""
    shape = tuple(ir.MemRefType(op.operands[1 if op.name == AsyncLoadOp.OPERATION_NAME else 0]
                                .type).shape)
    if op.name != AsyncLoadOp.OPERATION_NAME:
        return shape
    parts = collective_parts(op)
    return (shape[0] // parts, *shape[1:]) if parts > 1 else shape
