"""Blackwell tensor-core ops, sm_100a only: the asynchronous MMA into tensor memory, the commit
that makes an mbarrier track it, and the shared-to-tensor-memory copy that brings block
scale factors in.

    "smalti.tcgen05_mma"(%a, %b, %d, %accumulate) {collective = false}
        : (memref<128x64xbf16, #smem>, memref<64x256xbf16, #smem>,
           memref<128x256xf32, "tmem">, i1) -> ()
    "smalti.tcgen05_mma"(%a, %b, %d, %accumulate, %a_scale, %b_scale) {column = 0 : i64}
        : (memref<128x128xf8E4M3FN, #smem>, memref<128x128xf8E4M3FN, #smem>,
           memref<128x128xf32, "tmem">, i1, memref<128x16xf8E8M0FNU, "tmem">,
           memref<128x16xf8E8M0FNU, "tmem">) -> ()
    "smalti.tcgen05_commit"(%barriers, %i) {collective = false}
        : (memref<2xi64, #smem>, index) -> ()
    "smalti.tcgen05_cp"(%scales_smem, %a_scale) {shape = "32x128b.warpx4", column = 0 : i64}
        : (memref<1x32x16xf8E8M0FNU, #smem>, memref<128x16xf8E8M0FNU, "tmem">) -> ()

(#smem stands for #gpu.address_space<workgroup>.) Semantics (PTX ISA 9.7.16, "TensorCore
5th Generation Family Instructions"):

* `tcgen05_mma` computes D[:, column:column+N] = A @ B (`accumulate` false) or D[:,
  column:column+N] += A @ B (true), D a TMEM ref (f32, or f16 for f16 and 8-bit inputs: an
  unpacked ref, one element in the low half of each 32-bit column, smalti/dialect/ops_tmem.py), A
  (M x K) in shared memory or (M = 128) the first K columns of a TMEM ref whose row i is
  lane i (K packed into 32-bit columns), B (K x N) in shared memory. Shared operands are
  stored as wgmma's are (tiles of 8k rows one swizzle span wide, then the swizzle; B N x K
  viewed through a leading `#smalti.transpose<[1, 0]>` when K-major), and, as for wgmma,
  only 16-bit operands may be MN-major. The instruction kind follows from the element types:
  f16 x f16 and bf16 x bf16 are `.kind::f16` (K step 16), f32 x f32 `.kind::tf32` (each
  input rounded to tf32; K step 8), f8E4M3FN / f8E5M2 in any mix `.kind::f8f6f4` (K step
  32). With `a_scale` and `b_scale` (TMEM refs of scale factors) the MMA is block scaled: f8
  inputs with f8E8M0FNU scales are `.kind::mxf8f6f4` (one scale per 32 elements of K),
  f4E2M1FN inputs with f8E8M0FNU scales `.kind::mxf4` (per 32), with f8E4M3FN (UE4M3) scales
  `.kind::mxf4nvf4` (per 16); D is f32. Rows of D: with M = 128 row i is lane i; with M = 64
  rows 16q .. 16q + 15 are lanes 32q .. 32q + 15 (the ISA's M = 64 data path). M is 64 or
  128 per CTA (128 when block scaled or A is in TMEM); N a multiple of 8 (M = 64) or 16 in
  [8 or 16, 256]; K a multiple of the kind's step, one instruction per step. `collective =
  true` is `.cta_group::2`: the two CTAs of a pair (cluster ranks 2i, 2i + 1) compute a 256
  x N tile, each holding its 128 rows of A and D and N / 2 columns of B (so B's N is half of
  D's); the even CTA issues it.
* The MMA is issued by thread 0 of the warpgroup the op runs in (the thread that issues
  async_load's TMA copies) after the warpgroup meets (tcgen05 fences around the barrier:
  the threads' earlier tcgen05.ld/st of these columns and generic shared-memory writes,
  published to the async proxy, come first). It is asynchronous: it completes (D written,
  A and B read) only for a wait on the mbarrier a later `tcgen05_commit` of the same
  warpgroup arrives on; MMAs into one accumulator need nothing between them.
* `tcgen05_commit`: thread 0 of the warpgroup makes barrier `barrier_index` (the barrier
  operand convention of async_load) track all its prior tcgen05 MMAs and copies: one
  arrive (`.mbarrier::arrive::one`) when they are done, so the barrier's arrival count is
  1 per commit. `collective = true` commits `.cta_group::2` MMAs and multicasts the arrive
  to the barrier at the same offset in both CTAs of the pair (ctaMask 0b11 << pair's even
  rank).
* `tcgen05_cp`: thread 0 of the warpgroup copies a shared-memory ref of G copies of R rows
  of 128 bits (memref<[G x ]R x E x T>, row-major, E elements of T making 16 bytes) into
  the TMEM ref from `column` (elements; a 32-bit column start), copy g at 4g 32-bit
  columns further: `.128x128b` (R = 128: row r to lane r), `.32x128b.warpx4` (R = 32: row
  r to lanes r, r + 32, r + 64, r + 96), `.64x128b.warpx2::02_13` / `::01_23` (R = 64:
  rows 0-31 to warps 0 and 2 / 0 and 1, rows 32-63 to warps 1 and 3 / 2 and 3). It is
  asynchronous, ordered before the same thread's later MMAs (which may read its output at
  once) and tracked by `tcgen05_commit` for anything else. In a kernel whose MMAs are
  collective it is `.cta_group::2`: the even CTA's thread 0 copies in both CTAs of the pair,
  each from its own shared memory.
* Scale factors in TMEM (block-scaled MMA): with S scale factors per row (K / 32, or K / 16
  for mxf4nvf4) in G = ceil(S / 4) groups of 4, A's scale ref spans at least 4G 32-bit
  columns (the factors 4g .. 4g + 3 of row m in column 4g + m // 32, bytes 0-3) and B's at
  least 4GR, R = ceil(N / 128) (4R columns per group: those of column n in column
  4Rg + n // 32 of lane n % 32 of every 32-lane quarter), which is what tcgen05_cp
  `.32x128b.warpx4` writes from 512-byte blocks (copy i to columns 4i) whose byte
  16j + 4c + s is factor 4g + s of row (column) 128r + 32c + j, copy i = Rg + r.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from jaxlib.mlir import ir

from smalti.dialect.bindings import type_name
from smalti.dialect.checks import (
    bitwidth,
    check_index,
    check_smem_ref,
    check_tmem_ref,
    constant_index,
    element_bytes,
    is_tmem_type,
    tmem_columns,
    tmem_unpacked,
)
from smalti.dialect.definition import (
    BOOL,
    INTEGER,
    STRING,
    Attr,
    Effect,
    Operand,
    Proxy,
    SmaltiOp,
    Trait,
)
from smalti.dialect.diagnostics import error_at
from smalti.dialect.launch import enclosing_kernel, unpaired_cluster
from smalti.dialect.ops_mma import is_transposed, known_transforms, mn_major_problem
from smalti.dialect.ops_sync import check_barriers
from smalti.dialect.ops_tmem import TMEM_ARCHES
from smalti.tiling.smem import descriptor_layout_problem
from smalti.tiling.tmem import TMEM_CELL_BITS, TMEM_LANES

TCGEN05_FEATURE = "tcgen05 tensor-core MMA"
MAX_N = 256
K_BYTES = 32  # bytes of K per row one tcgen05.mma reads (PTX ISA, "tcgen05.mma" K sizes)
SCALE_GROUP = 4  # scale factors per 32-bit TMEM column (one byte each)
SCALE_GROUP_COLUMNS = 4  # 32-bit columns per group of A's scale factors (one per quarter)
SCALE_COLUMNS_N = 128  # columns of B whose scale factors one 4-column group holds

# PTX's name of each input type, per kind (the instruction descriptor's type codes are in
# smalti.lowering.tcgen05).
_F8 = ("f8E4M3FN", "f8E5M2")
_F6F4 = ("f6E2M3FN", "f6E3M2FN", "f4E2M1FN")
SCALE_TYPES = {"f8E8M0FNU": "ue8m0", "f8E4M3FN": "ue4m3"}


@dataclass(frozen=True)
class MmaKind:
    """A tcgen05.mma kind: its name, the K elements of one instruction, and for the
    block-scaled kinds the K elements each scale factor covers (0: not block scaled)."""

    name: str
    k: int
    scale_block: int = 0

    @property
    def block_scaled(self) -> bool:
        return self.scale_block > 0

    @property
    def scale_vectors(self) -> int:
        """Scale factors per row per instruction (`.scale_vec::NX`)."""
        return self.k // self.scale_block if self.block_scaled else 0

    def accumulator_types(self, a: str) -> tuple[str, ...]:
        """The D element types the kind writes (PTX ISA, "tcgen05.mma" kinds table)."""
        if self.name == "f8f6f4" or (self.name == "f16" and a == "f16"):
            return ("f32", "f16")
        return ("f32",)


def mma_kind(a: str, b: str, scale: str | None) -> MmaKind | str:
    """The kind that multiplies A of `a` by B of `b` (MLIR type names) with scale factors of
    `scale` (None: not block scaled), or why none does."""
    pairing = ("tcgen05_mma pairs f16 with f16, bf16 with bf16, f32 (as tf32) with f32, "
               "f8 (f8E4M3FN, f8E5M2) with f8; block scaled, f8 with f8E8M0FNU scales and "
               "f4E2M1FN with f4E2M1FN and f8E8M0FNU or f8E4M3FN (UE4M3) scales")
    if scale is None:
        if a == b and a in ("f16", "bf16"):
            return MmaKind("f16", 16)
        if a == b == "f32":
            return MmaKind("tf32", 8)
        if a in _F8 and b in _F8:
            return MmaKind("f8f6f4", 32)
        if a in _F6F4 or b in _F6F4:
            return (f"cannot multiply {a} A by {b} B: 6- and 4-bit inputs are block scaled "
                    "here (give a_scale and b_scale)")
        return f"cannot multiply {a} A by {b} B: {pairing}"
    if scale not in SCALE_TYPES:
        return (f"scale factors are f8E8M0FNU (UE8M0) or f8E4M3FN (UE4M3), got {scale}")
    if a in _F8 and b in _F8:
        if scale != "f8E8M0FNU":
            return f"f8 inputs take f8E8M0FNU scale factors (.kind::mxf8f6f4), got {scale}"
        return MmaKind("mxf8f6f4", 32, 32)
    if a == b == "f4E2M1FN":
        return MmaKind("mxf4", 64, 32) if scale == "f8E8M0FNU" else MmaKind("mxf4nvf4", 64, 16)
    if a in _F8 + _F6F4 and b in _F8 + _F6F4:
        return (f"cannot multiply {a} A by {b} B: 6- and 4-bit inputs of .kind::mxf8f6f4 need "
                "the padded shared-memory formats, which smalti does not lay out yet")
    return f"cannot multiply {a} A by {b} B: {pairing}"


def scale_groups(kind: MmaKind, k: int) -> int:
    """Groups of 4 scale factors per row for K elements of K."""
    return math.ceil(k // kind.scale_block / SCALE_GROUP)


def scale_columns(kind: MmaKind, k: int, n: int | None) -> int:
    """32-bit TMEM columns of A's scale factors (n None) or of B's for N = n."""
    repeats = 1 if n is None else math.ceil(n / SCALE_COLUMNS_N)
    return scale_groups(kind, k) * SCALE_GROUP_COLUMNS * repeats


def _element(value: ir.Value) -> str:
    return type_name(ir.ShapedType(value.type).element_type)


def _two_d(op: ir.Operation, value: ir.Value, what: str) -> tuple[int, int]:
    shape = tuple(ir.ShapedType(value.type).shape)
    if len(shape) != 2:
        raise error_at(op, f"expects {what} to be 2-D, got {value.type}")
    return shape[0], shape[1]


def check_pair_cluster(op: ir.Operation) -> None:
    """`.cta_group::2` needs CTA pairs: a cluster of an even number of CTAs."""
    cluster = unpaired_cluster(op)
    if cluster is not None:
        raise error_at(op, "'collective' (.cta_group::2) needs a cluster of an even number "
                           f"of CTAs (smalti.cluster), got {cluster}")


def check_cta_group(op: ir.Operation, collective: bool) -> None:
    """A kernel's tcgen05 MMAs and commits are all collective or none is (ptxas refuses a
    kernel mixing `.cta_group::1` and `::2`)."""
    if not collective and enclosing_kernel(op) is not None and kernel_cta_group(op) == 2:
        raise error_at(op, "is not 'collective', but other tcgen05 MMAs or commits of the "
                           "kernel are (.cta_group::2): ptxas takes one CTA granularity per "
                           "kernel")


class Tcgen05MmaOp(SmaltiOp):
    """D (+)= A @ B on the tensor cores (tcgen05.mma, one per K step), issued by thread 0
    of the warpgroup; asynchronous until a tcgen05_commit's barrier is waited on."""

    OPERATION_NAME = "smalti.tcgen05_mma"
    ARCHES = TMEM_ARCHES
    ARCH_FEATURE = TCGEN05_FEATURE
    TRAITS = Trait.WARPGROUP_COLLECTIVE  # the warpgroup meets before thread 0 issues it
    EFFECTS = (Effect.read("a", Proxy.ASYNC), Effect.read("b", Proxy.ASYNC),
               Effect.write("accumulator", Proxy.ASYNC))
    # smalti/dsl/tcgen05.py has the builders (tcgen05_mma, tcgen05_commit, tcgen05_copy)

    a = Operand("A (M x K): a shared-memory ref, or a TMEM ref (M = 128)")
    b = Operand("B (K x N): a shared-memory ref")
    accumulator = Operand("D: the TMEM ref accumulated into (columns [column, column + N))")
    accumulate = Operand("an i1: false overwrites D (D = A @ B), true adds to it")
    scales = Operand("none, or a_scale and b_scale: TMEM refs of block scale factors",
                     variadic=True)
    column = Attr(INTEGER, "the first column of D in the accumulator ref, in elements",
                  optional=True, default=0, minimum=0)
    collective = Attr(BOOL, ".cta_group::2: a 256-row MMA over the CTA pair",
                      optional=True, default=False)

    @property
    def a_scale(self) -> ir.Value | None:
        return self.scales[0] if self.scales else None

    @property
    def b_scale(self) -> ir.Value | None:
        return self.scales[1] if self.scales else None

    @property
    def a_in_tmem(self) -> bool:
        return is_tmem_type(self.a.type)

    def memory_effects(self) -> list[tuple[Effect, ir.Value]]:
        """A in tensor memory is read by the tensor cores, not through shared memory."""
        return [(e, v) for e, v in super().memory_effects()
                if not (e.operand == "a" and self.a_in_tmem)]

    def kind(self) -> MmaKind:
        """The instruction kind (the verifier has checked it exists)."""
        scale = _element(self.a_scale) if self.scales else None
        kind = mma_kind(_element(self.a), _element(self.b), scale)
        if isinstance(kind, str):
            raise error_at(self.operation, kind)
        return kind

    def verify_op(self) -> None:
        op = self.operation
        d_type = check_tmem_ref(op, self.accumulator, "the accumulator")
        if d_type.shape[0] != TMEM_LANES:
            raise error_at(op, f"expects the accumulator to span all {TMEM_LANES} TMEM lanes, "
                               f"got {d_type}")
        accumulate = self.accumulate.type
        if not (isinstance(accumulate, ir.IntegerType) and ir.IntegerType(accumulate).width == 1):
            raise error_at(op, f"expects 'accumulate' to be an i1, got {accumulate}")
        if self.a_in_tmem:
            a_ref = check_tmem_ref(op, self.a, "A")
            if a_ref.shape[0] != TMEM_LANES:
                raise error_at(op, f"A in tensor memory spans all {TMEM_LANES} lanes (M = 128), "
                                   f"got {a_ref}")
        else:
            check_smem_ref(op, self.a, "A")
        check_smem_ref(op, self.b, "B")
        if len(self.scales) not in (0, 2):
            raise error_at(op, "takes no scale factor refs or two (a_scale, b_scale), got "
                               f"{len(self.scales)}")
        for what, ref in (("a_scale", self.a_scale), ("b_scale", self.b_scale)):
            if ref is not None:
                check_tmem_ref(op, ref, what)
        scale = None
        if self.scales:
            scale = _element(self.a_scale)
            if _element(self.b_scale) != scale:
                raise error_at(op, f"a_scale holds {scale} but b_scale "
                                   f"{_element(self.b_scale)}: both take one scale type")
        a_element, b_element = _element(self.a), _element(self.b)
        kind = mma_kind(a_element, b_element, scale)
        if isinstance(kind, str):
            raise error_at(op, kind)
        d_element = type_name(d_type.element_type)
        if d_element not in kind.accumulator_types(a_element):
            raise error_at(op, f".kind::{kind.name} accumulates {a_element} products in "
                               f"{' or '.join(kind.accumulator_types(a_element))}, not "
                               f"{d_element}")
        if bitwidth(d_type.element_type) < TMEM_CELL_BITS and not tmem_unpacked(d_type):
            raise error_at(op, f"writes a {d_element} D one element per 32-bit TMEM column: "
                               "the accumulator must be an unpacked ref, "
                               f"memref<128xCx{d_element}, strided<[2C, 2]>, \"tmem\">, "
                               f"got {d_type}")
        for what, ref in (("A", self.a if self.a_in_tmem else None),
                          ("a_scale", self.a_scale), ("b_scale", self.b_scale)):
            if ref is not None and tmem_unpacked(ref.type):
                raise error_at(op, f"reads {what} packed: it cannot be an unpacked TMEM ref, "
                                   f"got {ref.type}")
        self._verify_shapes(kind, d_type)
        self._verify_layouts(a_element, b_element)

    def _verify_shapes(self, kind: MmaKind, d_type: ir.MemRefType) -> None:
        op = self.operation
        m, a_k = _two_d(op, self.a, "A")
        b_k, b_n = _two_d(op, self.b, "B")
        n = 2 * b_n if self.collective else b_n
        if self.a_in_tmem and a_k >= b_k:
            a_k = b_k  # A's K is its first K columns
        if a_k != b_k:
            raise error_at(op, f"the K dims of A ({a_k}) and B ({b_k}) differ")
        check_cta_group(op, self.collective)
        if self.collective:
            check_pair_cluster(op)
            if m != 128 or self.a_in_tmem or kind.block_scaled:
                raise error_at(op, "'collective' (.cta_group::2) takes 128 rows of A in each "
                                   "CTA's shared memory (M = 256), not block scaled")
        elif self.a_in_tmem and m != TMEM_LANES:
            raise error_at(op, f"A in tensor memory has M = 128 rows, got {m}")
        elif m not in (64, 128) or (kind.block_scaled and m != 128):
            raise error_at(op, f"M ({m}) must be 64 or 128" + (" (128 when block scaled)"
                                                               if kind.block_scaled else ""))
        step = 8 if m == 64 else 16
        low = 32 if self.collective else step
        if n % step or not low <= n <= MAX_N:
            raise error_at(op, f"N ({n}) must be a multiple of {step} in [{low}, {MAX_N}] for "
                               f"M = {2 * m if self.collective else m}"
                               + (" (B holds N / 2 columns in each CTA)"
                                  if self.collective else ""))
        if a_k % kind.k:
            raise error_at(op, f"K ({a_k}) must be a multiple of {kind.k} for .kind::"
                               f"{kind.name} ({kind.k} elements per instruction)")
        if self.column + n > d_type.shape[1]:
            raise error_at(op, f"D's columns [{self.column}, {self.column + n}) are out of "
                               f"bounds for {d_type}")
        if kind.block_scaled:
            for what, ref, extent in (("a_scale", self.a_scale, None),
                                      ("b_scale", self.b_scale, n)):
                ref_type = ir.MemRefType(ref.type)
                columns = scale_columns(kind, a_k, extent)
                if ref_type.shape[0] != TMEM_LANES or tmem_columns(ref_type) < columns:
                    groups = scale_groups(kind, a_k)
                    raise error_at(op, f"expects {what} to span {TMEM_LANES} lanes and at "
                                       f"least {columns} 32-bit columns ({groups} group(s) of "
                                       f"{SCALE_GROUP} scale factors per row"
                                       + ("" if extent is None else f", N = {n}")
                                       + f"), got {ref_type}")

    def _verify_layouts(self, a_element: str, b_element: str) -> None:
        """Operands the MMA cannot transpose are K-major; known SMEM transforms are ones
        the shared memory descriptor expresses."""
        op = self.operation
        m = _two_d(op, self.a, "A")[0]
        refs = [] if self.a_in_tmem else [("A", self.a, a_element)]
        refs.append(("B", self.b, b_element))
        for position, (what, value, element) in enumerate(refs):
            transforms = known_transforms(op, value, position)
            if transforms is None:
                continue
            problem = mn_major_problem(what, element, is_transposed(transforms) != (what == "B"))
            if problem is None:
                shape = tuple(ir.MemRefType(value.type).shape)
                problem = descriptor_layout_problem(
                    transforms, shape, element_bytes(value.type), what, a_rows=m)
            if problem is not None:
                raise error_at(op, problem.replace("wgmma", "tcgen05_mma"))


class Tcgen05CommitOp(SmaltiOp):
    """Thread 0 of the warpgroup makes barrier `barrier_index` track its prior tcgen05 MMAs
    and copies (tcgen05.commit ... mbarrier::arrive::one: one arrive when they are done)."""

    OPERATION_NAME = "smalti.tcgen05_commit"
    ARCHES = TMEM_ARCHES
    ARCH_FEATURE = TCGEN05_FEATURE

    barriers = Operand("the mbarrier array")
    barrier_index = Operand("the barrier that tracks the MMAs")
    collective = Attr(BOOL, ".cta_group::2, the arrive multicast to both CTAs of the pair",
                      optional=True, default=False)

    def verify_op(self) -> None:
        op = self.operation
        count = check_barriers(op, self.barriers)
        check_index(op, self.barrier_index, "the barrier index")
        index = constant_index(self.barrier_index)
        if index is not None and not 0 <= index < count:
            raise error_at(op, f"barrier index {index} is out of bounds for {count} barriers")
        check_cta_group(op, self.collective)
        if self.collective:
            check_pair_cluster(op)


@dataclass(frozen=True)
class CopyShape:
    """A tcgen05.cp shape smalti emits: its PTX name and the source rows of one copy."""

    name: str
    rows: int


COPY_SHAPES = {s.name: s for s in (CopyShape("128x128b", 128), CopyShape("32x128b.warpx4", 32),
                                   CopyShape("64x128b.warpx2::02_13", 64),
                                   CopyShape("64x128b.warpx2::01_23", 64))}
COPY_ROW_BYTES = 16  # every shape above moves rows of 128 bits
COPY_COLUMNS = COPY_ROW_BYTES * 8 // TMEM_CELL_BITS  # 32-bit columns one copy writes


class Tcgen05CpOp(SmaltiOp):
    """Thread 0 of the warpgroup copies 128-bit rows of a shared-memory ref into tensor
    memory (tcgen05.cp, one per copy); asynchronous, ordered before its later MMAs."""

    OPERATION_NAME = "smalti.tcgen05_cp"
    ARCHES = TMEM_ARCHES
    ARCH_FEATURE = TCGEN05_FEATURE
    TRAITS = Trait.WARPGROUP_COLLECTIVE  # generic writes of the source are published first
    EFFECTS = (Effect.read("source", Proxy.ASYNC), Effect.write("destination", Proxy.ASYNC))

    source = Operand("the shared-memory ref: memref<[G x ]R x E x T>, rows of 16 bytes")
    destination = Operand("the TMEM ref")
    shape = Attr(STRING, "the tcgen05.cp shape: " + ", ".join(COPY_SHAPES))
    column = Attr(INTEGER, "the first column written, in elements", optional=True, default=0,
                  minimum=0)

    def copies(self) -> int:
        shape = ir.MemRefType(self.source.type).shape
        return shape[0] if len(shape) == 3 else 1

    def verify_op(self) -> None:
        op = self.operation
        source = check_smem_ref(op, self.source, "the source")
        destination = check_tmem_ref(op, self.destination, "the destination")
        if self.shape not in COPY_SHAPES:
            raise error_at(op, f"'shape' must be one of {', '.join(COPY_SHAPES)}, got "
                               f"'{self.shape}'")
        rows = COPY_SHAPES[self.shape].rows
        if source.element_type != destination.element_type:
            raise error_at(op, f"copies {source.element_type} into a TMEM ref of "
                               f"{destination.element_type}: the element types must match")
        bits = bitwidth(source.element_type)
        shape = tuple(source.shape)
        if len(shape) not in (2, 3) or shape[-2:] != (rows, COPY_ROW_BYTES * 8 // bits):
            raise error_at(op, f"expects the source as memref<[G x ]{rows}x"
                               f"{COPY_ROW_BYTES * 8 // bits}x{source.element_type}> (rows of "
                               f"128 bits for .{self.shape}), got {source}")
        if destination.shape[0] != TMEM_LANES:
            raise error_at(op, f"expects a TMEM ref of {TMEM_LANES} lanes, got {destination}")
        if tmem_unpacked(destination):
            raise error_at(op, f"writes packed 16-byte rows: the destination cannot be an "
                               f"unpacked TMEM ref, got {destination}")
        if self.column * bits % TMEM_CELL_BITS:
            raise error_at(op, f"'column' {self.column} does not start a 32-bit TMEM column")
        first = self.column * bits // TMEM_CELL_BITS
        end = first + COPY_COLUMNS * self.copies()
        if end > tmem_columns(destination):
            raise error_at(op, f"the copies write 32-bit columns [{first}, {end}), out of "
                               f"bounds for {destination}")


def kernel_cta_group(op: ir.Operation) -> int:
    """2 when the kernel around `op` issues `.cta_group::2` tcgen05 ops (collective MMAs or
    commits), else 1: ptxas refuses a kernel that mixes the two granularities, so its TMEM
    allocations take the kernel's."""
    func = enclosing_kernel(op)
    if func is None:
        return 1
    found = []

    def visit(inner: ir.Operation) -> ir.WalkResult:
        view = inner.operation.opview
        if isinstance(view, (Tcgen05MmaOp, Tcgen05CommitOp)) and view.collective:
            found.append(view)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    func.walk(visit, ir.WalkOrder.PRE_ORDER)
    return 2 if found else 1
