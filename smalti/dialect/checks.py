"""Checks and readers that several ops share: types of memory refs, constant indices, the
`collective` attribute, and located errors for malformed operands. It imports no op module."""

from __future__ import annotations

import math
from collections.abc import Callable

from jaxlib.mlir import ir

from smalti.dialect.bindings import is_workgroup_address_space
from smalti.dialect.diagnostics import error_at
from smalti.dialect.launch import CLUSTER_ATTR, enclosing_kernel, kernel_cluster
from smalti.tiling.smem import ElementSize, element_size
from smalti.tiling.tmem import TMEM_COLUMNS, TMEM_LANES


def is_smem_type(t: ir.Type) -> bool:
    """A memref in `#gpu.address_space<workgroup>` (shared memory)."""
    return isinstance(t, ir.MemRefType) and is_workgroup_address_space(
        ir.MemRefType(t).memory_space)


def is_gmem_type(t: ir.Type) -> bool:
    """A memref in global memory (no memory space)."""
    return isinstance(t, ir.MemRefType) and ir.MemRefType(t).memory_space is None


SYMMETRIC_SPACE = "symmetric"  # memref<...xT, "symmetric">: a collective kernel's scratch


def named_memory_space(t: ir.Type) -> str | None:
    """The name of a memref's string memory space (`memref<..., "symmetric">`: "symmetric");
    None for other types and spaces."""
    if not isinstance(t, ir.MemRefType):
        return None
    space = ir.MemRefType(t).memory_space
    return ir.StringAttr(space).value if isinstance(space, ir.StringAttr) else None


def is_symmetric_type(t: ir.Type) -> bool:
    """A memref in the symmetric heap: global memory at the same offset on every device
    (`memref<..., "symmetric">`)."""
    return named_memory_space(t) == SYMMETRIC_SPACE


def symmetric_memory_space() -> ir.Attribute:
    """The memory space of symmetric memrefs (in the current context)."""
    return ir.StringAttr.get(SYMMETRIC_SPACE)


def check_symmetric_ref(op: ir.Operation, value: ir.Value, what: str) -> ir.MemRefType:
    """A symmetric memref of static shape; else a located error naming `what`."""
    if not is_symmetric_type(value.type):
        raise error_at(op, f"expects {what} to be a symmetric memref (memref<..., "
                           f'"{SYMMETRIC_SPACE}">, from smalti.slice_symmetric), got '
                           f"{value.type}")
    ref = ir.MemRefType(value.type)
    if not ref.has_static_shape:
        raise error_at(op, f"expects {what} of static shape, got {ref}")
    return ref


TMEM_SPACE = "tmem"  # memref<LANESxCOLUMNSxT, "tmem">: a region of the CTA's tensor memory


def is_tmem_type(t: ir.Type) -> bool:
    """A memref in tensor memory (`memref<..., "tmem">`, sm_100a): rows are TMEM lanes,
    columns the elements of each lane, packed `32 // bitwidth` to a 32-bit column."""
    return named_memory_space(t) == TMEM_SPACE


def tmem_memory_space() -> ir.Attribute:
    """The memory space of TMEM memrefs (in the current context)."""
    return ir.StringAttr.get(TMEM_SPACE)


TMEM_UNPACKED_STRIDE = 2  # strided<[2C, 2]>: 16-bit elements one per 32-bit column


def tmem_unpacked(t: ir.Type) -> bool:
    """Whether a TMEM memref holds 16-bit elements unpacked, one in the low half of each
    32-bit column (as tcgen05.mma writes a 16-bit D): the layout `strided<[2C, 2]>` (a
    column stride of two 16-bit halves); the identity layout packs them two per column."""
    layout = ir.MemRefType(t).layout
    return isinstance(layout, ir.StridedLayoutAttr) and \
        list(layout.strides)[-1:] == [TMEM_UNPACKED_STRIDE]


def tmem_unpacked_layout(columns: int, context: ir.Context) -> ir.StridedLayoutAttr:
    """strided<[2C, 2]>: the layout of an unpacked TMEM memref of C columns."""
    return ir.StridedLayoutAttr.get(0, [TMEM_UNPACKED_STRIDE * columns, TMEM_UNPACKED_STRIDE],
                                    context=context)


def tmem_unpacked_type(shape: list[int], element: ir.Type) -> ir.MemRefType:
    """memref<SHAPE x ELEMENT, strided<[2C, 2]>, "tmem">: 16-bit elements one per column."""
    return ir.MemRefType.get(shape, element,
                             layout=tmem_unpacked_layout(shape[-1], element.context),
                             memory_space=tmem_memory_space())


def tmem_elements_per_column(t: ir.Type) -> int:
    """Elements of a TMEM memref in one 32-bit column: `32 // bits` packed, 1 unpacked."""
    ref = ir.MemRefType(t)
    return 1 if tmem_unpacked(ref) else max(32 // bitwidth(ref.element_type), 1)


def tmem_columns(t: ir.Type) -> int:
    """32-bit TMEM columns a TMEM memref spans (its columns, packed unless unpacked)."""
    ref = ir.MemRefType(t)
    if tmem_unpacked(ref):
        return ref.shape[-1]
    return -(-ref.shape[-1] * bitwidth(ref.element_type) // 32)


def check_tmem_ref(op: ir.Operation, value: ir.Value, what: str) -> ir.MemRefType:
    """A TMEM memref that fits the CTA's tensor memory: 2-D of static shape, 128 or 64 rows
    (lanes; 64: the M = 64 data path), elements of 32 bits or fewer packed into at most
    512 32-bit columns (PTX ISA 9.7.16.2, "Tensor Memory"); else a located error naming `what`."""
    if not is_tmem_type(value.type):
        raise error_at(op, f"expects {what} to be a TMEM memref (memref<LANESxCOLUMNSxT, "
                           f'"{TMEM_SPACE}">), got {value.type}')
    ref = ir.MemRefType(value.type)
    if not ref.has_static_shape or ref.rank != 2:
        raise error_at(op, f"expects {what} to be 2-D of static shape (lanes x columns), "
                           f"got {ref}")
    if ref.shape[0] not in (TMEM_LANES, TMEM_LANES // 2):
        raise error_at(op, f"expects {what} to span 128 or 64 TMEM lanes, got {ref.shape[0]}")
    try:
        bits = bitwidth(ref.element_type)
    except TypeError:
        bits = 0
    if bits == 0 or 32 % bits:
        raise error_at(op, f"expects {what} to hold elements of 32, 16, 8, 4, 2 or 1 bits "
                           f"(TMEM cells are 32 bits), got {ref.element_type}")
    unpacked = tmem_unpacked_layout(ref.shape[-1], ref.context)
    identity = isinstance(ref.layout, ir.AffineMapAttr) and \
        ir.AffineMapAttr(ref.layout).value == ir.AffineMap.get_identity(ref.rank, ref.context)
    if not identity and not (bits == 16 and ref.layout == unpacked):
        raise error_at(op, f"expects {what} to have the identity layout (packed) or, for "
                           f"16-bit elements, {unpacked} (one per 32-bit column), got {ref}")
    if tmem_columns(ref) > TMEM_COLUMNS:
        raise error_at(op, f"{what} spans {tmem_columns(ref)} TMEM columns; a CTA has "
                           f"{TMEM_COLUMNS}")
    return ref


def bitwidth(element_type: ir.Type) -> int:
    """Bits of one element of an integer, float or index type."""
    if isinstance(element_type, ir.IntegerType):
        return ir.IntegerType(element_type).width
    if isinstance(element_type, ir.FloatType):
        return ir.FloatType(element_type).width
    if isinstance(element_type, ir.IndexType):
        return 64
    raise TypeError(f"no bit width for element type {element_type}")


def element_bytes(t: ir.Type) -> ElementSize:
    """Bytes of one element of a memref or vector type in memory: 4-bit types pack two per
    byte (Fraction(1, 2)); an i1 takes a whole byte."""
    return element_size(bitwidth(ir.ShapedType(t).element_type))


def smem_size_bytes(t: ir.Type) -> int:
    """Bytes a memref's elements take (4-bit ones two per byte, rounded up)."""
    return math.ceil(math.prod(ir.MemRefType(t).shape) * element_bytes(t))


def row_major_strides(shape: list[int] | tuple[int, ...]) -> list[int]:
    """Element strides of a contiguous row-major array of `shape`."""
    return [math.prod(shape[i + 1:]) for i in range(len(shape))]


def constant_index(value: ir.Value) -> int | None:
    """The value of an `arith.constant` of type index, or None."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    owner = owner.operation
    if owner.name == "arith.constant" and isinstance(value.type, ir.IndexType):
        return ir.IntegerAttr(owner.attributes["value"]).value
    return None


def check_gmem_ref(op: ir.Operation, value: ir.Value, what: str) -> ir.MemRefType:
    """A global memref (a kernel argument) of static shape; else a located error naming
    `what`."""
    if not is_gmem_type(value.type):
        raise error_at(op, f"expects {what} to be a global memref (a kernel argument), got "
                           f"{value.type}")
    return _static_ref(op, value, what)


def check_smem_ref(op: ir.Operation, value: ir.Value, what: str) -> ir.MemRefType:
    """A shared-memory memref of static shape; else a located error naming `what`."""
    if not is_smem_type(value.type):
        raise error_at(op, f"expects {what} to be a memref in #gpu.address_space<workgroup>, "
                           f"got {value.type}")
    return _static_ref(op, value, what)


def _static_ref(op: ir.Operation, value: ir.Value, what: str) -> ir.MemRefType:
    """`value`'s memref type, which must have a static shape (a located error otherwise)."""
    ref = ir.MemRefType(value.type)
    if not ref.has_static_shape:
        raise error_at(op, f"expects {what} of static shape, got {ref}")
    return ref


def check_index(op: ir.Operation, value: ir.Value, what: str) -> None:
    if not isinstance(value.type, ir.IndexType):
        raise error_at(op, f"{what} must have type index, got {value.type}")


def check_vector(op: ir.Operation, value: ir.Value, what: str) -> ir.VectorType:
    if not isinstance(value.type, ir.VectorType):
        raise error_at(op, f"expects {what} to be a vector, got {value.type}")
    return ir.VectorType(value.type)


def collective_dims(op: ir.Operation) -> tuple[int, ...]:
    """An op's `collective` attribute (default none): distinct cluster dims (0 = x, 1 = y,
    2 = z), each of size > 1 in the `smalti.cluster` of the kernel enclosing the op; else a
    located error."""
    if "collective" not in op.attributes:
        return ()
    attr = op.attributes["collective"]
    if not isinstance(attr, ir.DenseI64ArrayAttr):
        raise error_at(op, f"'collective' must be array<i64: ...> of cluster dims, got {attr}")
    dims = tuple(attr)
    if len(set(dims)) != len(dims):
        raise error_at(op, f"'collective' {list(dims)} repeats a cluster dim")
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


def check_constant_slice(op: ir.Operation, offset: ir.Value, result: ir.Value,
                         check_ref: Callable[[], ir.MemRefType], alignment: int
                         ) -> tuple[int, ir.MemRefType]:
    """(offset, result type) of an op that carves a typed view out of a buffer at a constant
    byte offset (slice_smem, slice_symmetric): `offset` an arith.constant index, the result
    of the kind `check_ref` checks, contiguous and row-major, the offset a non-negative
    multiple of `alignment`; else a located error."""
    check_index(op, offset, "the offset")
    value = constant_index(offset)
    if value is None:
        raise error_at(op, "expects a constant offset (an arith.constant of type index)")
    ref = check_ref()
    if ref.get_strides_and_offset() != (row_major_strides(list(ref.shape)), 0):
        raise error_at(op, f"expects a contiguous row-major result, got {ref}")
    if value < 0 or value % alignment:
        raise error_at(op, f"offset {value} must be a non-negative multiple of {alignment} "
                           "bytes")
    return value, ref


def slice_end_bytes(offset: ir.Value, result: ir.Value) -> int | None:
    """The byte after a constant-offset slice, when its offset and type are well formed."""
    value = constant_index(offset)
    if value is None or not isinstance(result.type, ir.MemRefType):
        return None
    return value + smem_size_bytes(result.type)
