"""Tensor memory (TMEM) ops, sm_100a only: allocate a region of the CTA's tensor memory,
move warpgroup-owned vectors to and from it, and free it.

    %t = "smalti.tmem_alloc"() {columns = 128 : i64} : () -> memref<128x128xf32, "tmem">
    "smalti.tmem_store"(%v, %t) {column = 64 : i64}
        : (vector<128x64xf32>, memref<128x128xf32, "tmem">) -> ()
    %w = "smalti.tmem_load"(%t) {column = 64 : i64}
        : (memref<128x128xf32, "tmem">) -> vector<128x64xf32>
    "smalti.tmem_dealloc"(%t) : (memref<128x128xf32, "tmem">) -> ()
    "smalti.tmem_relinquish_alloc_permit"() : () -> ()
    %s = "smalti.tmem_stage"(%t, %k) {stages = 2 : i64}
        : (memref<128x512xf32, "tmem">, index) -> memref<128x256xf32, "tmem">

Semantics (PTX ISA 9.7.16, "TensorCore 5th Generation Family Instructions"):

* `tmem_alloc` is run by a whole warpgroup; warp 0 of the warpgroup allocates `columns`
  32-bit columns (a power of two, 32 to 512: PTX ISA `tcgen05.alloc`) of all 128 lanes with
  `cta_group::1`, and every thread of the warpgroup gets the region's address. The result
  is a `memref<128xCxT, "tmem">` whose C elements of T fill exactly `columns` 32-bit
  columns (elements narrower than 32 bits pack `32 // bits` to a column).
* `tmem_dealloc` frees a region `tmem_alloc` made (its operand is that op's result); the
  warpgroup meets first, so no thread still reads or writes it, and warp 0 frees it.
* `tmem_relinquish_alloc_permit`: warp 0 of the warpgroup gives up the CTA's right to
  allocate more (PTX ISA `tcgen05.relinquish_alloc_permit`); allocating afterwards is an
  error.
* `tmem_load` / `tmem_store` move a `vector<128xCxT>` from / to the columns `[column,
  column + C)` of a TMEM ref (all 128 lanes: row r is lane r). Warp w of the warpgroup
  reaches lanes 32w to 32w + 31 (PTX ISA 9.7.16.8.1). The vector's layout is one a
  tcgen05.ld / tcgen05.st data movement shape realises (smalti.tiling.tmem); both ops wait
  for their accesses (`tcgen05.wait::ld` / `::st`) before the values are used or the cells
  are read again. Element types: 32-bit (f32, i32) and 16-bit (f16, bf16, i16), the latter
  packed two to a 32-bit column as in registers (no `.pack::16b`), or, in an unpacked ref,
  one to a column (see below). `column` (in elements) must start a 32-bit column.

* `tmem_stage` views stage %k (an index, chosen at run time) of a TMEM ref whose columns
  are `stages` equal stages: columns [k C / stages, (k + 1) C / stages), as a TMEM ref of
  C / stages columns that tcgen05_mma, tmem_load and tmem_store take like any other (a
  double-buffered accumulator, buffer n % 2). A TMEM address is a register with the column
  in its low 16 bits, so the stage costs one multiply-add; each stage starts a 32-bit column
  (checked). %k must lie in [0, stages) (checked when constant; the DSL proves it).

Unpacked 16-bit refs: `memref<128xCxf16, strided<[2C, 2]>, "tmem">` (a column stride of two
16-bit halves) holds one element in the low half of each of C 32-bit columns, as tcgen05.mma
writes a 16-bit accumulator (PTX ISA "Matrix fragments"; CUTLASS's 16-bit accumulators in
32-bit storage). tmem_alloc of `columns` columns may return one of C = columns elements;
tmem_load / tmem_store move its values with `tcgen05.ld ... .pack::16b` / `tcgen05.st ...
.unpack::16b` (two columns' low halves to a register, as in the packed form), from any
column.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect.checks import (
    bitwidth,
    check_index,
    check_tmem_ref,
    check_vector,
    constant_index,
    tmem_columns,
    tmem_elements_per_column,
    tmem_unpacked,
    tmem_unpacked_layout,
)
from smalti.dialect.definition import INTEGER, Attr, Effect, Operand, Result, SmaltiOp, Trait
from smalti.dialect.diagnostics import error_at
from smalti.tiling.tmem import TMEM_ALLOCATION_COLUMNS, TMEM_LANES

TMEM_ACCESS_BITS = (32, 16)
"""Element widths tmem_load / tmem_store move (tcgen05.ld/st .b32 registers)."""


# The tcgen05 instructions "require sm_100a" (PTX ISA, tcgen05.alloc, Target ISA notes).
TMEM_ARCHES = ("sm_100a",)
TMEM_FEATURE = "tensor memory (tcgen05)"


class TmemAllocOp(SmaltiOp):
    """Allocates `columns` columns of tensor memory (warp 0 of the warpgroup runs
    `tcgen05.alloc.cta_group::1`); the result addresses them."""

    OPERATION_NAME = "smalti.tmem_alloc"
    ARCHES = TMEM_ARCHES
    ARCH_FEATURE = TMEM_FEATURE
    TRAITS = Trait.WARPGROUP_COLLECTIVE

    columns = Attr(INTEGER, "32-bit TMEM columns allocated: 32, 64, 128, 256 or 512")
    result = Result("the TMEM ref, memref<128xCxT, \"tmem\"> spanning `columns` columns")

    def verify_op(self) -> None:
        op = self.operation
        if self.columns not in TMEM_ALLOCATION_COLUMNS:
            raise error_at(op, f"'columns' must be a power of two from 32 to 512, got "
                               f"{self.columns}")
        ref = check_tmem_ref(op, self.result, "the result")
        if ref.shape[0] != TMEM_LANES:
            raise error_at(op, f"expects the result to span all {TMEM_LANES} lanes, got "
                               f"{ref.shape[0]}")
        if tmem_columns(ref) != self.columns:
            raise error_at(op, f"the result {ref} spans {tmem_columns(ref)} TMEM columns, "
                               f"not the {self.columns} allocated")


class TmemDeallocOp(SmaltiOp):
    """Frees the columns a `tmem_alloc` allocated (warp 0 of the warpgroup runs
    `tcgen05.dealloc.cta_group::1`, after the warpgroup meets)."""

    OPERATION_NAME = "smalti.tmem_dealloc"
    ARCHES = TMEM_ARCHES
    ARCH_FEATURE = TMEM_FEATURE
    TRAITS = Trait.WARPGROUP_COLLECTIVE

    ref = Operand("the result of a smalti.tmem_alloc")

    def verify_op(self) -> None:
        op = self.operation
        check_tmem_ref(op, self.ref, "the ref")
        owner = self.ref.owner
        if isinstance(owner, ir.Block) or not isinstance(owner.operation.opview, TmemAllocOp):
            raise error_at(op, "expects the result of a smalti.tmem_alloc (the region "
                               "to free)")


class TmemRelinquishAllocPermitOp(SmaltiOp):
    """The CTA gives up its right to allocate tensor memory (warp 0 of the warpgroup runs
    `tcgen05.relinquish_alloc_permit.cta_group::1`)."""

    OPERATION_NAME = "smalti.tmem_relinquish_alloc_permit"
    ARCHES = TMEM_ARCHES
    ARCH_FEATURE = TMEM_FEATURE
    TRAITS = Trait.WARPGROUP_COLLECTIVE

    def verify_op(self) -> None:
        if self.operation.operands or self.operation.results:
            raise error_at(self.operation, "takes no operands and has no results")


def check_tmem_access(op: ir.Operation, vector: ir.Value, ref: ir.Value, column: int,
                      what: str) -> None:
    """The checks of tmem_load / tmem_store: a 2-D vector of all 128 lanes, of the ref's
    element type (32 or 16 bits), inside the ref from `column`, which starts a 32-bit
    column (any column of an unpacked ref)."""
    ref_type = check_tmem_ref(op, ref, f"the ref to {what}")
    vector_type = check_vector(op, vector, "the value")
    if vector_type.element_type != ref_type.element_type:
        raise error_at(op, f"element type {vector_type.element_type} of the vector does not "
                           f"match element type {ref_type.element_type} of the TMEM ref")
    bits = bitwidth(vector_type.element_type)
    if bits not in TMEM_ACCESS_BITS:
        raise error_at(op, f"moves 32- or 16-bit elements, got {vector_type.element_type}")
    if vector_type.rank != 2 or vector_type.shape[0] != TMEM_LANES:
        raise error_at(op, f"expects a vector<{TMEM_LANES}xCx{vector_type.element_type}> "
                           f"(one row per TMEM lane), got {vector_type}")
    if ref_type.shape[0] != TMEM_LANES:
        raise error_at(op, f"expects a TMEM ref of {TMEM_LANES} lanes, got {ref_type}")
    per_column = tmem_elements_per_column(ref_type)
    if column % per_column:
        raise error_at(op, f"'column' {column} does not start a 32-bit TMEM column "
                           f"({per_column} elements of {vector_type.element_type} each)")
    end = column + vector_type.shape[1]
    if end > ref_type.shape[1]:
        raise error_at(op, f"columns [{column}, {end}) are out of bounds for {ref_type}")


class TmemLoadOp(SmaltiOp):
    """The columns [column, column + C) of every lane of `source`, as a vector in a
    tcgen05.ld layout (`tcgen05.ld` then `tcgen05.wait::ld`)."""

    OPERATION_NAME = "smalti.tmem_load"
    ARCHES = TMEM_ARCHES
    ARCH_FEATURE = TMEM_FEATURE
    EFFECTS = (Effect.read("source"),)

    source = Operand("the TMEM ref")
    column = Attr(INTEGER, "the first column read, in elements", optional=True, default=0,
                  minimum=0)
    result = Result("the vector<128xCxT>")

    def verify_op(self) -> None:
        check_tmem_access(self.operation, self.result, self.source, self.column, "load from")


class TmemStoreOp(SmaltiOp):
    """Writes `value` into the columns [column, column + C) of every lane of `destination`
    (`tcgen05.st` then `tcgen05.wait::st`)."""

    OPERATION_NAME = "smalti.tmem_store"
    ARCHES = TMEM_ARCHES
    ARCH_FEATURE = TMEM_FEATURE
    EFFECTS = (Effect.write("destination"),)

    value = Operand("the vector<128xCxT> stored")
    destination = Operand("the TMEM ref")
    column = Attr(INTEGER, "the first column written, in elements", optional=True,
                  default=0, minimum=0)

    def verify_op(self) -> None:
        check_tmem_access(self.operation, self.value, self.destination, self.column,
                          "store to")


class TmemStageOp(SmaltiOp):
    """Stage `index` of the `stages` equal column stages of a TMEM ref, chosen at run time:
    a TMEM ref of its columns (the address plus index times the stage's 32-bit columns)."""

    OPERATION_NAME = "smalti.tmem_stage"
    ARCHES = TMEM_ARCHES
    ARCH_FEATURE = TMEM_FEATURE

    source = Operand("the TMEM ref whose columns are the stages")
    index = Operand("the stage, an index in [0, stages)")
    stages = Attr(INTEGER, "how many equal stages the source's columns make", minimum=1)
    result = Result("the chosen stage: a TMEM ref of C / stages columns")

    def verify_op(self) -> None:
        op = self.operation
        source = check_tmem_ref(op, self.source, "the source")
        check_index(op, self.index, "the stage index")
        result = check_tmem_ref(op, self.result, "the result")
        columns = source.shape[1]
        if columns % self.stages:
            raise error_at(op, f"the source's {columns} columns do not split into "
                               f"{self.stages} equal stages")
        width = columns // self.stages
        layout = (tmem_unpacked_layout(width, op.context) if tmem_unpacked(source)
                  else None)
        if (list(result.shape) != [source.shape[0], width]
                or result.element_type != source.element_type
                or result.memory_space != source.memory_space
                or (layout is not None and result.layout != layout)
                or tmem_unpacked(result) != tmem_unpacked(source)):
            expected = f"{source.shape[0]}x{width}x{source.element_type}" + (
                f", {layout}" if layout is not None else "")
            raise error_at(op, f"expects the result memref<{expected}, \"tmem\"> (a stage of "
                               f"{source}), got {result}")
        per_column = tmem_elements_per_column(source)
        if width % per_column:
            raise error_at(op, f"a stage of {width} columns of {source.element_type} does not "
                               f"start a 32-bit TMEM column ({per_column} elements each)")
        index = constant_index(self.index)
        if index is not None and not 0 <= index < self.stages:
            raise error_at(op, f"stage {index} is out of range for {self.stages} stages")
