"""TMA copies between a window of global memory and a shared-memory ref:
`async_copy(gmem.at[rows, cols], smem, barrier)`, `async_store(smem, gmem.at[...])`,
`async_store_wait()`. In a kernel with a cluster, `async_copy(..., collective=0)` is shared
by the blocks of a cluster along axis 0: each loads a part of the window and multicasts it
to all of them, so every one receives the whole window (and its barrier all the bytes);
`async_copy(..., leader_barrier=True)` completes on the pair leader's barrier (sm_100a)."""

from __future__ import annotations

import math

from jaxlib.mlir import ir

from smalti.dialect.ops_memory import AsyncLoadOp, AsyncStoreOp, AsyncStoreWaitOp
from smalti.dsl.locations import user_error, user_position
from smalti.dsl.ops import check_axis
from smalti.dsl.refs import Ref, RefView
from smalti.dsl.smem_refs import Barrier, SharedRef, StagedRef
from smalti.dsl.trace import active, create, dsl_entry


def _gmem_view(view: object, what: str) -> RefView:
    """A RefView of a global ref (a whole global Ref is its full window)."""
    if isinstance(view, Ref) and not view.is_smem:
        view = view.at[...]
    if not isinstance(view, RefView) or view.ref.is_smem:
        raise user_error(TypeError, f"{what} must be a window of a global ref, like "
                                    f"a_ref.at[row:row + 128, k:k + 64]; got {view!r}")
    return view


def _smem_ref(ref: object, what: str) -> Ref:
    if isinstance(ref, StagedRef):
        raise user_error(TypeError, f"{what} {ref.name} has {len(ref)} stages; pass one of "
                                    f"them, like {ref.name}[stage]")
    if not isinstance(ref, Ref) or not ref.is_smem:
        raise user_error(TypeError, f"{what} must be a shared-memory ref (declared in the "
                                    f"kernel's smem=[...]), got {ref!r}")
    if isinstance(ref, SharedRef) and ref.transposed_of is not None:
        raise user_error(TypeError, f"{what} cannot be the transposed view {ref.name}: TMA "
                                    f"moves {ref.transposed_of.name} itself")
    return ref


def _transfer_operands(view: RefView, smem: Ref, verb: str
                       ) -> tuple[list[ir.Value], tuple[int, ...] | None]:
    """The window's start indices, and its slice_lengths when it drops dims; checks dtypes
    and shapes against the shared-memory ref."""
    gmem = view.ref
    if gmem.dtype != smem.dtype:
        raise user_error(TypeError, f"{verb} between {gmem.name} ({gmem.dtype.name}) and "
                                    f"{smem.name} ({smem.dtype.name}): dtypes differ")
    if view.window.shape != smem.shape:
        shorter = len(gmem.shape) == len(smem.shape) and any(
            g < s for g, s in zip(gmem.shape, smem.shape, strict=True))
        hint = (f" (a window may hang over {gmem.name}'s end, which TMA fills with zeros on "
                f"loads and clips on stores: give it {smem.name}'s shape, like "
                f"{gmem.name}.at[{', '.join(f'0:{n}' for n in smem.shape)}])" if shorter else "")
        raise user_error(ValueError, f"{verb}: the window of {gmem.name} has shape "
                                     f"{view.window.shape} but {smem.name} has shape "
                                     f"{smem.shape}{hint}")
    lengths = None
    if not all(view.window.kept):
        lengths = tuple(n if keep else -1 for n, keep in zip(view.window.sizes,
                                                             view.window.kept, strict=True))
    return [s.materialize() for s in view.window.starts], lengths


@dsl_entry(AsyncLoadOp)
def async_copy(source: RefView | Ref, destination: Ref, barrier: Barrier, *,
               collective: int | tuple[int, ...] = (), leader_barrier: bool = False) -> None:
    """TMA load of a global window into a shared-memory ref; its bytes complete `barrier`
    (announce them first with barrier.arrive_expect_tx). `collective` (a cluster axis or a
    tuple of them) shares the load among the blocks of the cluster along those axes, which
    must all copy the same window: each copies 1/n of `destination`'s leading dim and
    multicasts it, and each block's barrier still receives all of destination's bytes.
    `leader_barrier=True` (sm_100a, a cluster of block pairs) completes the bytes on
    `barrier` of the pair's leader (the even block of cluster ranks 2i, 2i + 1) instead of
    this block's: the leader expects both blocks' bytes, as a collective tcgen05_mma reads
    both (`.cta_group::2`)."""
    view = _gmem_view(source, "async_copy's source")
    smem = _smem_ref(destination, "async_copy's destination")
    if not isinstance(barrier, Barrier):
        raise user_error(TypeError, "async_copy's barrier must be one barrier, like bars[i]; "
                                    f"got {barrier!r}")
    indices, lengths = _transfer_operands(view, smem, "async_copy")
    axes = _collective_axes(collective, smem)
    if leader_barrier:
        _check_pairs(axes)
    create(AsyncLoadOp, source=view.ref.value, destination=smem.value,
           barriers=barrier.array.value, barrier_index=barrier.index.materialize(),
           indices=indices, slice_lengths=lengths, collective=axes or None,
           cta_group=2 if leader_barrier else None)


def _check_pairs(axes: tuple[int, ...]) -> None:
    """leader_barrier=True needs a cluster of block pairs and no multicast."""
    info = active()
    if math.prod(info.cluster) % 2:
        raise user_error(ValueError, "async_copy(..., leader_barrier=True) completes on the "
                                     "barrier of the block pair's leader, but kernel "
                                     f"{info.name} has a cluster of {math.prod(info.cluster)} "
                                     f"block(s) (cluster={info.cluster}); declare pairs in "
                                     "@sd.kernel(..., cluster=(2, 1, 1))")
    if axes:
        raise user_error(ValueError, "async_copy cannot both multicast (collective) and "
                                     "complete on the pair leader's barrier (leader_barrier)")


def _collective_axes(collective: object, smem: Ref) -> tuple[int, ...]:
    """The cluster axes a copy is shared along, checked against the kernel's cluster and the
    destination's leading dim (which they split); the copy is noted for the kernel."""
    axes = (collective,) if not isinstance(collective, tuple | list) else tuple(collective)
    axes = tuple(check_axis(a, "async_copy's collective") for a in axes)
    if not axes:
        return ()
    if len(set(axes)) != len(axes):
        raise user_error(ValueError, f"async_copy's collective {collective!r} repeats an axis")
    info = active()
    for axis in axes:
        if info.cluster[axis] == 1:
            raise user_error(ValueError, f"async_copy is collective along axis {axis}, but "
                                         f"kernel {info.name} has one block per cluster along "
                                         f"it (cluster={info.cluster}); declare a cluster in "
                                         "@sd.kernel(..., cluster=...)")
    parts = math.prod(info.cluster[axis] for axis in axes)
    if smem.shape[0] % parts:
        raise user_error(ValueError, f"async_copy collective along {list(axes)} splits "
                                     f"{smem.name}'s leading dim ({smem.shape[0]}) into {parts} "
                                     "parts, one per block sharing it; it does not divide")
    if isinstance(smem, SharedRef):
        smem.note_collective(parts)
    info.collective_copies.append(user_position())
    return axes


@dsl_entry(AsyncStoreOp)
def async_store(source: Ref, destination: RefView | Ref) -> None:
    """TMA store of a shared-memory ref into a global window (wait with async_store_wait)."""
    smem = _smem_ref(source, "async_store's source")
    view = _gmem_view(destination, "async_store's destination")
    indices, lengths = _transfer_operands(view, smem, "async_store")
    create(AsyncStoreOp, source=smem.value, destination=view.ref.value, indices=indices,
           slice_lengths=lengths)


@dsl_entry(AsyncStoreWaitOp)
def async_store_wait(pending: int = 0) -> None:
    """Wait until at most `pending` async_store groups still read shared memory."""
    if isinstance(pending, bool) or not isinstance(pending, int) or pending < 0:
        raise user_error(ValueError, "async_store_wait's pending must be a non-negative int, "
                                     f"got {pending!r}")
    create(AsyncStoreWaitOp, pending=pending)
