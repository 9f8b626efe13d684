"""Persistent kernels on Blackwell (sm_100a): `@persistent_tiles` traces a function of the
block ids into a `smalti.persistent_tiles` loop, which runs it for the block's own ids and
then for each block whose cluster it cancels before launch (cluster launch control).

    @sd.kernel(grid=(tiles,), out_shape=..., arch="sm_100a")
    def body(x_ref, out_ref):
        @sd.persistent_tiles
        def tile(ids):
            col = ids[0] * 128
            out_ref[:, col:col + 128] = x_ref[:, col:col + 128] * 2.0

Every block id of the grid gets the function run exactly once, by its own block or by one
that took its work; on a GPU the running CTAs keep going instead of new ones launching.

`@role_tiles(responses, full, empty, request=...)` is the same walk for one role of a
warp-specialised kernel, inside its warpgroup_region: each role reads the tile sequence from
a small ring of try_cancel responses in shared memory (one role requests into it), so a TMA
producer, an MMA issuer and an epilogue each go on to their next tile at their own pace,
with no meeting of the block between tiles:

    smem=[sd.Barriers(2), sd.Barriers(2, arrival_count=ROLES * CTAS), sd.SMEM((2, 16), jnp.int8)]
    ...
    @sd.warpgroup_region(warpgroups=0)
    def producer():
        @sd.role_tiles(responses, clc_full, clc_empty, request=True)
        def tile(ids, n):   # n: this role's pass, 0, 1, ...
            ...
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func as func_ops

from smalti.dialect.ops_launch_control import (
    RESPONSE_BYTES,
    ROLE_TILE_ARGS,
    TILE_ID_DIMS,
    PersistentTilesOp,
    RoleTilesOp,
)
from smalti.dialect.ops_warpgroup import WarpgroupRegionOp
from smalti.dsl.index import Index
from smalti.dsl.locations import user_error
from smalti.dsl.smem_refs import BarrierArray, SharedRef
from smalti.dsl.trace import active, create, dsl_entry

TileIds = tuple[Index, Index, Index]


@dsl_entry(PersistentTilesOp)
def persistent_tiles(body: Callable[[TileIds], None]) -> None:
    """Decorator: trace `body(ids)` (no result) into a loop over block ids, at the top level
    of the kernel body, once per kernel; `ids[axis]` is the id along grid `axis` of the
    block whose work this pass does (`program_id` still gives the running block's own).
    Needs `arch="sm_100a"`."""
    info = active()
    if not callable(body):
        raise user_error(TypeError, f"persistent_tiles decorates a function, got "
                                    f"{type(body).__name__}")
    if not isinstance(ir.InsertionPoint.current.block.owner.operation.opview, func_ops.FuncOp):
        raise user_error(ValueError, "persistent_tiles must stand at the top level of the "
                                     "kernel body, not inside fori, when or a "
                                     "warpgroup_region: every thread of the block runs its loop")
    op = create(PersistentTilesOp).operation
    block = op.regions[0].blocks.append(*[ir.IndexType.get()] * TILE_ID_DIMS)
    ids = tuple(Index.of(argument, 0, info.grid[axis] - 1, f"persistent_tiles' id {axis}")
                for axis, argument in enumerate(block.arguments))
    with ir.InsertionPoint(block):
        if body(ids) is not None:
            raise user_error(TypeError, "a function decorated with persistent_tiles must "
                                        "return None (each pass writes its results)")


@dsl_entry(RoleTilesOp)
def role_tiles(responses: SharedRef, full: BarrierArray, empty: BarrierArray, *,
               request: bool = False) -> Callable[[Callable[[TileIds, Index], None]], Index]:
    """Decorator: trace `body(ids, n)` (no result) into this role's walk over its block's
    tiles, directly in a warpgroup_region: `ids` as for persistent_tiles, `n` the pass
    (0 for the block's own tile). `responses` is a (D, 16) int8 shared array of try_cancel
    responses, `full` D barriers of arrival count 1, `empty` D barriers of arrival count
    (warpgroups running role_tiles) x (CTAs per cluster); exactly one role of the ring has
    `request=True`. The decorated name is bound to the number of passes the role ran (to
    drain what its last pass left in flight). In a cluster of several CTAs every warpgroup
    of the kernel walks the ring once, and the walks end at the cluster's meeting. Needs
    `arch="sm_100a"`."""
    info = active()
    if not isinstance(responses, SharedRef) or responses.ndim != 2 or responses.shape[1] != \
            RESPONSE_BYTES or responses.dtype != np.int8:
        raise user_error(TypeError, f"role_tiles' responses must be a (D, {RESPONSE_BYTES}) "
                                    f"int8 shared-memory array, got {responses!r}")
    for name, bars in (("full", full), ("empty", empty)):
        if not isinstance(bars, BarrierArray) or bars.count != responses.shape[0]:
            raise user_error(TypeError, f"role_tiles' {name} must be sd.Barriers("
                                        f"{responses.shape[0]}) (one per response slot), got "
                                        f"{bars!r}")
    if not isinstance(request, bool):
        raise user_error(TypeError, f"role_tiles' request must be a bool, got {request!r}")
    owner = ir.InsertionPoint.current.block.owner.operation.opview
    if not isinstance(owner, WarpgroupRegionOp):
        raise user_error(ValueError, "role_tiles must stand directly in a warpgroup_region "
                                     "(the role that walks the tiles), not inside fori or when; "
                                     "for every thread of the block use persistent_tiles")

    def decorate(body: Callable[[TileIds, Index], None]) -> Index:
        if not callable(body):
            raise user_error(TypeError, f"role_tiles decorates a function, got "
                                        f"{type(body).__name__}")
        op = create(RoleTilesOp, responses=responses.value, full=full.value, empty=empty.value,
                    request=request or None, result_types=[ir.IndexType.get()]).operation
        block = op.regions[0].blocks.append(*[ir.IndexType.get()] * ROLE_TILE_ARGS)
        arguments = list(block.arguments)
        ids = tuple(Index.of(argument, 0, info.grid[axis] - 1, f"role_tiles' id {axis}")
                    for axis, argument in enumerate(arguments[:TILE_ID_DIMS]))
        with ir.InsertionPoint(block):
            if body(ids, Index.of(arguments[TILE_ID_DIMS], 0, None, "role_tiles' pass")) \
                    is not None:
                raise user_error(TypeError, "a function decorated with role_tiles must return "
                                            "None (each pass writes its results)")
        return Index.of(op.result)

    return decorate
