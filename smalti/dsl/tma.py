"""TMA copies between a window of global memory and a shared-memory ref:
`async_copy(gmem.at[rows, cols], smem, barrier)`, `async_store(smem, gmem.at[...])`,
`async_store_wait()`."""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dsl.locations import user_error
from smalti.dsl.refs import Ref, RefView
from smalti.dsl.smem_refs import Barrier, StagedRef
from smalti.dsl.trace import emit


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
    return ref


def _transfer_operands(view: RefView, smem: Ref, verb: str) -> tuple[list[ir.Value],
                                                                      dict[str, ir.Attribute]]:
    """The window's start indices, and slice_lengths when it drops dims; checks dtypes and
    shapes against the shared-memory ref."""
    gmem = view.ref
    if gmem.dtype != smem.dtype:
        raise user_error(TypeError, f"{verb} between {gmem.name} ({gmem.dtype.name}) and "
                                    f"{smem.name} ({smem.dtype.name}): dtypes differ")
    if view.window.shape != smem.shape:
        raise user_error(ValueError, f"{verb}: the window of {gmem.name} has shape "
                                     f"{view.window.shape} but {smem.name} has shape "
                                     f"{smem.shape}")
    attributes = {}
    if not all(view.window.kept):
        lengths = [n if keep else -1 for n, keep in zip(view.window.sizes, view.window.kept,
                                                        strict=True)]
        attributes["slice_lengths"] = ir.DenseI64ArrayAttr.get(lengths)
    return [s.materialize() for s in view.window.starts], attributes


def async_copy(source: RefView | Ref, destination: Ref, barrier: Barrier) -> None:
    """TMA load of a global window into a shared-memory ref; its bytes complete `barrier`
    (announce them first with barrier.arrive_expect_tx)."""
    view = _gmem_view(source, "async_copy's source")
    smem = _smem_ref(destination, "async_copy's destination")
    if not isinstance(barrier, Barrier):
        raise user_error(TypeError, "async_copy's barrier must be one barrier, like bars[i]; "
                                    f"got {barrier!r}")
    indices, attributes = _transfer_operands(view, smem, "async_copy")
    emit("smalti.async_load", [view.ref.value, smem.value, barrier.array.value,
                               barrier.index.materialize(), *indices], attributes=attributes)


def async_store(source: Ref, destination: RefView | Ref) -> None:
    """TMA store of a shared-memory ref into a global window (wait with async_store_wait)."""
    smem = _smem_ref(source, "async_store's source")
    view = _gmem_view(destination, "async_store's destination")
    indices, attributes = _transfer_operands(view, smem, "async_store")
    emit("smalti.async_store", [smem.value, view.ref.value, *indices], attributes=attributes)


def async_store_wait(pending: int = 0) -> None:
    """Wait until at most `pending` async_store groups still read shared memory."""
    if isinstance(pending, bool) or not isinstance(pending, int) or pending < 0:
        raise user_error(ValueError, "async_store_wait's pending must be a non-negative int, "
                                     f"got {pending!r}")
    i64 = ir.IntegerType.get_signless(64)
    emit("smalti.async_store_wait", attributes={"pending": ir.IntegerAttr.get(i64, pending)})
