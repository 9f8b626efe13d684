"""Blackwell tensor-core MMA (sm_100a) in the DSL: `tcgen05_mma` into a TMEM accumulator,
`tcgen05_commit` to an mbarrier that completes when the MMAs issued so far are done, and
`tcgen05_copy` of shared memory (block scale factors) into tensor memory.

    sd.tcgen05_mma(acc_tmem, a_smem[s], b_smem[s], accumulate=k > 0)  # acc (+)= A @ B
    sd.tcgen05_commit(done[s])            # done[s] completes when those MMAs have finished
    done[s].wait(phase)                   # then A and B may be refilled, acc_tmem read

The MMA is asynchronous: thread 0 of the warpgroup issues it, and nothing it reads or
writes may be touched (A and B refilled, the accumulator loaded) before a barrier that a
later commit arrives on has been waited for."""

from __future__ import annotations

import math

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith

from smalti.dialect.ops_tcgen05 import (
    COPY_COLUMNS,
    COPY_ROW_BYTES,
    COPY_SHAPES,
    MAX_N,
    MmaKind,
    Tcgen05CommitOp,
    Tcgen05CpOp,
    Tcgen05MmaOp,
    mma_kind,
)
from smalti.dsl.dtypes import bit_width, mlir_name
from smalti.dsl.index import Predicate
from smalti.dsl.locations import user_error
from smalti.dsl.refs import Ref
from smalti.dsl.smem_refs import Barrier, SharedRef, StagedRef
from smalti.dsl.tmem import TmemRef, TmemWindow
from smalti.dsl.trace import active, create, dsl_entry, emit_value
from smalti.tiling.tmem import TMEM_CELL_BITS, TMEM_LANES

TRANSPOSABLE_BITS = 16  # only 16-bit operands may be MN-major (as for wgmma)


def _window(x: object, what: str) -> TmemWindow:
    """A TmemRef (all its columns) or a window of one; a located TypeError otherwise."""
    if isinstance(x, TmemRef):
        return x.window
    if isinstance(x, TmemWindow):
        return x
    raise user_error(TypeError, f"{what} must be a TMEM array declared in the kernel's "
                                f"smem=[...] (sd.TMEM) or a window of one, like "
                                f"acc.at[:, 0:128]; got {x!r}")


def _smem(x: object, what: str) -> SharedRef:
    if isinstance(x, StagedRef):
        raise user_error(TypeError, f"{what} {x.name} has {len(x)} stages; pass one of them, "
                                    f"like {x.name}[stage]")
    if not isinstance(x, SharedRef):
        raise user_error(TypeError, f"{what} must be a shared-memory ref declared in the "
                                    f"kernel's smem=[...], got {x!r}")
    if x.ndim != 2:
        raise user_error(ValueError, f"{what} must be 2-D, got shape {x.shape}")
    return x


def _predicate(accumulate: object) -> ir.Value:
    """`accumulate` (a Python bool or a comparison of traced indices) as an i1."""
    if isinstance(accumulate, Predicate):
        return accumulate.value
    if isinstance(accumulate, bool | np.bool_):
        i1 = ir.IntegerType.get_signless(1)
        return emit_value(arith.ConstantOp, [], i1,
                          {"value": ir.IntegerAttr.get(i1, int(bool(accumulate)))})
    raise user_error(TypeError, "tcgen05_mma's accumulate must be a Python bool or a "
                                "comparison of traced indices (like k > 0), got "
                                f"{type(accumulate).__name__}")


def _kind(a: Ref | TmemRef, b: SharedRef, scales: tuple[TmemRef, TmemRef] | None) -> MmaKind:
    """The instruction kind of the operands' dtypes; a located TypeError if none."""
    scale = None if scales is None else mlir_name(scales[0].dtype)
    if scales is not None and scales[0].dtype != scales[1].dtype:
        raise user_error(TypeError, f"tcgen05_mma's a_scale ({scales[0].dtype.name}) and "
                                    f"b_scale ({scales[1].dtype.name}) take one scale dtype")
    kind = mma_kind(mlir_name(a.dtype) or a.dtype.name, mlir_name(b.dtype) or b.dtype.name,
                    scale)
    if isinstance(kind, str):
        raise user_error(TypeError, f"tcgen05_mma {kind}")
    return kind


def _scales(a_scale: object, b_scale: object) -> tuple[TmemRef, TmemRef] | None:
    if a_scale is None and b_scale is None:
        return None
    if not (isinstance(a_scale, TmemRef) and isinstance(b_scale, TmemRef)):
        raise user_error(TypeError, "tcgen05_mma takes a_scale and b_scale together, each a "
                                    f"TMEM array of scale factors (sd.TMEM); got {a_scale!r} "
                                    f"and {b_scale!r}")
    return a_scale, b_scale


def _check_k_major(a: Ref | TmemRef, b: SharedRef) -> None:
    """Operands of more or fewer than 16 bits are read K-major: A as the (M, K) ref, B as
    the transposed view of an (N, K) ref (`bt_smem.T`)."""
    if bit_width(b.dtype) == TRANSPOSABLE_BITS:
        return
    if isinstance(a, SharedRef) and a.transposed_of is not None:
        raise user_error(ValueError, f"tcgen05_mma reads {a.dtype.name} A only K-major: pass "
                                     f"the (M, K) ref {a.transposed_of.name}, not the "
                                     f"transposed view {a.name}")
    if b.transposed_of is None:
        k, n = b.shape
        raise user_error(ValueError, f"tcgen05_mma reads {b.dtype.name} B only K-major: "
                                     f"declare B as ({n}, {k}) in smem, K contiguous, and "
                                     f"pass its transposed view, like bt_smem.T, instead of "
                                     f"{b.name}")


def _check_whole(a: TmemRef) -> None:
    """A in tensor memory is read from every column of its allocation (the MMA takes K
    from the TMEM ref's type)."""
    allocated = ir.MemRefType(a.value.type).shape[1]
    if a.shape[1] != allocated:
        raise user_error(ValueError, f"tcgen05_mma reads A {a.name} from all the {allocated} "
                                     f"columns of its TMEM allocation (a power of two of "
                                     f"32-bit columns, at least 32): declare it "
                                     f"({TMEM_LANES}, {allocated}), not {a.shape}")


def _check_shapes(acc: TmemWindow, a: Ref | TmemRef, b: SharedRef, kind: MmaKind,
                  collective: bool) -> None:
    (m, k), (b_k, b_n) = a.shape, b.shape
    n = 2 * b_n if collective else b_n
    if k != b_k or acc.width != n:
        half = " (B holds N / 2 columns in each CTA of the pair)" if collective else ""
        raise user_error(ValueError, f"tcgen05_mma: A {a.shape} @ B {b.shape} does not fit "
                                     f"the accumulator {acc} of {acc.width} columns{half}")
    rows = (TMEM_LANES,) if collective or isinstance(a, TmemRef) or kind.block_scaled \
        else (64, TMEM_LANES)
    step = 8 if m == 64 else 16
    if m not in rows or n % step or not step <= n <= MAX_N or k % kind.k:
        raise user_error(ValueError, f"tcgen05_mma needs M in {list(rows)}, N a multiple of "
                                     f"{step} in [{step}, {MAX_N}] and K a multiple of "
                                     f"{kind.k} for .kind::{kind.name}; got M={m}, N={n}, "
                                     f"K={k}")


def _check_packing(acc: TmemRef, a: Ref | TmemRef) -> None:
    """A 16-bit accumulator is unpacked (tcgen05.mma writes one element per 32-bit
    column); A in tensor memory is packed."""
    if bit_width(acc.dtype) < TMEM_CELL_BITS and not acc.unpacked:
        raise user_error(TypeError, f"tcgen05_mma writes a {acc.dtype.name} accumulator one "
                                    f"element per 32-bit TMEM column: declare {acc.name} "
                                    f"sd.TMEM((128, N), jnp.{acc.dtype.name}, unpacked=True)")
    if isinstance(a, TmemRef) and a.unpacked:
        raise user_error(TypeError, f"tcgen05_mma reads A {a.name} packed, two 16-bit "
                                    "elements per TMEM column: declare it without unpacked")


@dsl_entry(Tcgen05MmaOp)
def tcgen05_mma(acc: TmemRef | TmemWindow, a: SharedRef | TmemRef, b: SharedRef, *,
                accumulate: bool | Predicate, a_scale: TmemRef | None = None,
                b_scale: TmemRef | None = None, collective: bool = False) -> None:
    """acc = a @ b (`accumulate` false) or acc += a @ b (true) on the tensor cores
    (tcgen05.mma, asynchronous: wait on a tcgen05_commit's barrier before touching its
    operands). acc: (128, N) columns of a TMEM array (f32; f16 for f16 and f8 inputs,
    declared sd.TMEM(..., jnp.float16, unpacked=True));
    a (M, K) in shared memory or a (128, K) TMEM array; b (K, N) in shared memory (f32 and
    f8 B is the transposed view of an (N, K) ref); a_scale and b_scale make it block
    scaled; `collective` is the 2-CTA MMA (.cta_group::2) over a cluster's CTA pair."""
    window = _window(acc, "tcgen05_mma's accumulator")
    if isinstance(a, TmemRef):
        _check_whole(a)
    else:
        a = _smem(a, "tcgen05_mma's A")
    b = _smem(b, "tcgen05_mma's B")
    scales = _scales(a_scale, b_scale)
    kind = _kind(a, b, scales)
    accumulators = kind.accumulator_types(mlir_name(a.dtype) or "")
    if mlir_name(window.ref.dtype) not in accumulators:
        names = " or ".join("float32" if t == "f32" else "float16" for t in accumulators)
        raise user_error(TypeError, f"tcgen05_mma .kind::{kind.name} accumulates in {names}, "
                                    f"not {window.ref.dtype.name} ({window.ref.name})")
    _check_packing(window.ref, a)
    if not isinstance(collective, bool):
        raise user_error(TypeError, "tcgen05_mma's collective must be a Python bool, got "
                                    f"{collective!r}")
    if collective and math.prod(active().cluster) % 2:
        raise user_error(ValueError, "a collective tcgen05_mma (.cta_group::2) runs over CTA "
                                     "pairs: declare a cluster of an even number of blocks, "
                                     "@sd.kernel(..., cluster=(2,))")
    _check_shapes(window, a, b, kind, collective)
    if not isinstance(a, TmemRef):
        _check_k_major(a, b)
    create(Tcgen05MmaOp, a=a.value, b=b.value, accumulator=window.ref.value,
           accumulate=_predicate(accumulate),
           scales=[] if scales is None else [scales[0].value, scales[1].value],
           column=window.start or None, collective=collective or None)


@dsl_entry(Tcgen05CommitOp)
def tcgen05_commit(barrier: Barrier, *, collective: bool = False) -> None:
    """`barrier` receives one arrival once every tcgen05_mma and tcgen05_copy this
    warpgroup issued before has completed (so its arrival count is 1 per commit);
    `collective` commits 2-CTA MMAs and arrives on the barrier in both CTAs of the pair."""
    if not isinstance(barrier, Barrier):
        raise user_error(TypeError, "tcgen05_commit's barrier must be one barrier, like "
                                    f"bars[i]; got {barrier!r}")
    if collective and math.prod(active().cluster) % 2:
        raise user_error(ValueError, "a collective tcgen05_commit arrives in both CTAs of a "
                                     "pair: declare a cluster of an even number of blocks")
    create(Tcgen05CommitOp, barriers=barrier.array.value,
           barrier_index=barrier.index.materialize(), collective=collective or None)


@dsl_entry(Tcgen05CpOp)
def tcgen05_copy(source: SharedRef | StagedRef, destination: TmemRef | TmemWindow, *,
                 shape: str | None = None) -> None:
    """Copy rows of 16 bytes from shared memory into tensor memory (tcgen05.cp,
    asynchronous; the MMAs issued after it may read what it writes): `source` is (R, E)
    with E elements making 16 bytes, or a StagedRef of such stages (one copy each, 4
    32-bit columns apart). `shape` says which lanes get which rows: "128x128b" (R = 128,
    the default), "32x128b.warpx4" (R = 32, the default: each row to the four warps'
    lanes, the layout of block scale factors), or for R = 64 "64x128b.warpx2::02_13" or
    "64x128b.warpx2::01_23"."""
    stages = source.stages if isinstance(source, StagedRef) else (source,)
    stages = tuple(_smem(s, "tcgen05_copy's source") for s in stages)
    window = _window(destination, "tcgen05_copy's destination")
    rows, elements = stages[0].shape
    dtype = stages[0].dtype
    if dtype != window.ref.dtype:
        raise user_error(TypeError, f"tcgen05_copy between {stages[0].name} ({dtype.name}) "
                                    f"and {window.ref.name} ({window.ref.dtype.name}): "
                                    "dtypes differ")
    if window.ref.unpacked:
        raise user_error(TypeError, f"tcgen05_copy writes packed rows: {window.ref.name} "
                                    "cannot be unpacked")
    bits = bit_width(dtype)
    if elements * bits != COPY_ROW_BYTES * 8:
        raise user_error(ValueError, f"tcgen05_copy moves rows of 16 bytes: {stages[0].name} "
                                     f"has rows of {elements} {dtype.name} "
                                     f"({elements * bits // 8} bytes)")
    shapes = [name for name, copy in COPY_SHAPES.items() if copy.rows == rows]
    if not shapes:
        raise user_error(ValueError, f"tcgen05_copy copies 128, 64 or 32 rows; "
                                     f"{stages[0].name} has {rows}")
    if shape is None and len(shapes) > 1:
        raise user_error(ValueError, f"tcgen05_copy of {rows} rows: say which lanes get them, "
                                     f"shape= one of {', '.join(shapes)}")
    shape = shapes[0] if shape is None else shape
    if shape not in shapes:
        raise user_error(ValueError, f"tcgen05_copy's shape {shape!r} does not copy {rows} "
                                     f"rows; for {rows}: {', '.join(shapes)}")
    per_copy = COPY_COLUMNS * TMEM_CELL_BITS // bits  # elements of a lane one copy writes
    if len(stages) * per_copy > window.width:
        raise user_error(ValueError, f"tcgen05_copy writes {len(stages) * per_copy} columns "
                                     f"of {window.ref.name}, more than the {window.width} of "
                                     f"{window}")
    for g, stage in enumerate(stages):
        create(Tcgen05CpOp, source=stage.value, destination=window.ref.value, shape=shape,
               column=window.start + g * per_copy or None)
