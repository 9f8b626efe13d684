"""Cluster launch control (sm_100a): persistent loops over the grid's tiles, for the whole
block (`smalti.persistent_tiles`, below) or per warp-specialised role (`smalti.role_tiles`,
whose class says how its roles share a ring of responses).

    "smalti.persistent_tiles"() ({
    ^bb0(%x: index, %y: index, %z: index):
      ...  // the work of block (%x, %y, %z)
    }) : () -> ()

The body runs first for the block's own ids (%ctaid), then for the ids of each cluster the
block's cluster cancels before it launched: after each pass, the cluster asks for one with
`clusterlaunchcontrol.try_cancel` (PTX ISA 8.6, "clusterlaunchcontrol"; a multicast request
in clusters of several CTAs), waits for the response on an mbarrier of its own, and goes on
with the canceled cluster's block of its own rank, until a request fails (no cluster is left
to launch). So every block of the grid has its body run exactly once, by itself or by a
block that took its work, and a GPU keeps its running CTAs busy instead of launching more.
The body's block arguments are those ids; `gpu.block_id` inside it still reads the running
block's own. The op stands at the top level of a kernel, once: every thread of the block
(and, in a cluster, of its cluster) runs the loop together, and after a failed request the
PTX ISA leaves any further one undefined.
"""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func

from smalti.dialect.bindings import type_name
from smalti.dialect.checks import check_smem_ref
from smalti.dialect.definition import BOOL, Attr, Operand, Result, SmaltiOp, Trait
from smalti.dialect.diagnostics import error_at
from smalti.dialect.launch import enclosing_kernel, kernel_cluster, kernel_warpgroups
from smalti.dialect.ops_sync import check_barriers
from smalti.dialect.ops_warpgroup import WarpgroupRegionOp

# clusterlaunchcontrol exists from sm_100 (PTX ISA 8.6); smalti's Blackwell target is sm_100a.
LAUNCH_CONTROL_ARCHES = ("sm_100a",)
LAUNCH_CONTROL_FEATURE = "cluster launch control (clusterlaunchcontrol.try_cancel)"
TILE_ID_DIMS = 3


def _check_body(op: ir.Operation, count: int, expected: str) -> None:
    """The op's region is one block with `count` index arguments (`expected` says which)."""
    blocks = op.regions[0].blocks
    if len(blocks) != 1:
        raise error_at(op, f"expects a body of one block, got {len(blocks)}")
    arguments = list(blocks[0].arguments)
    if len(arguments) != count or not all(isinstance(a.type, ir.IndexType)
                                          for a in arguments):
        types = ", ".join(str(a.type) for a in arguments) or "none"
        raise error_at(op, f"expects a body with {expected}, got {types}")


class PersistentTilesOp(SmaltiOp):
    """Runs its body for the block's own ids, then for each cluster its cluster cancels
    (try_cancel) until none is left; the body's arguments are the block ids (x, y, z)."""

    OPERATION_NAME = "smalti.persistent_tiles"
    ARCHES = LAUNCH_CONTROL_ARCHES
    ARCH_FEATURE = LAUNCH_CONTROL_FEATURE
    TRAITS = Trait.BLOCK_COLLECTIVE
    REGIONS = 1

    @property
    def body(self) -> ir.Block:
        """The region's one block (its arguments: the block ids x, y, z)."""
        return self.operation.regions[0].blocks[0]

    def verify_op(self) -> None:
        op = self.operation
        _check_body(op, TILE_ID_DIMS, "three index arguments (the block ids x, y, z)")
        parent = op.parent
        if parent is None or not isinstance(parent.opview, func.FuncOp):
            raise error_at(op, "must stand at the top level of the kernel body (every thread "
                               "of the block runs its loop), not inside another op")
        for other in op.block.operations:
            if other.operation == op:
                break
            if isinstance(other.opview, PersistentTilesOp):
                raise error_at(op, "is the kernel's second persistent_tiles: after the "
                                   "first one's failed request, the PTX ISA leaves another "
                                   "undefined")


class RoleTilesOp(SmaltiOp):
    """One warp-specialised role's walk over the tile sequence cluster launch control hands
    its block: the block's own ids, then the ids each successful try_cancel response names,
    read from a ring of response slots that one role requests into.

        %passes = "smalti.role_tiles"(%responses, %full, %empty) {request = true} ({
        ^bb0(%x: index, %y: index, %z: index, %pass: index):
          ...  // this role's share of the work of block (%x, %y, %z), pass %pass
        }) : (memref<2x16xi8, #smem>, memref<2xi64, #smem>, memref<2xi64, #smem>) -> index

    The response of pass p + 1 lands in slot p % D of `responses` (D slots of 16 bytes) and
    completes barrier `full[p % D]`; every role's warpgroups release the slot on
    `empty[p % D]` of the cluster's rank-0 CTA (one arrival per warpgroup per CTA, so its
    arrival count is the warpgroups of all role_tiles ops times the cluster's CTAs; `full`
    has arrival count 1). The role with `request` asks for pass p + 1's cluster as pass p
    starts, after slot p % D was released for pass p + 1 - D: so the request overlaps the
    pass, and each role walks the sequence at its own pace, with no block-wide meeting.
    Each op stands directly in a warpgroup_region; exactly one op of the ring requests. The
    result is the number of passes the role ran (so it can drain what its last pass left in
    flight). In a cluster of several CTAs the walks of one ring cover every warpgroup of
    the kernel once, and each ends with the cluster's meeting (barrier.cluster): no CTA
    exits while a peer may still arrive on its barriers or write its shared memory."""

    OPERATION_NAME = "smalti.role_tiles"
    ARCHES = LAUNCH_CONTROL_ARCHES
    ARCH_FEATURE = LAUNCH_CONTROL_FEATURE
    TRAITS = Trait.WARPGROUP_COLLECTIVE
    REGIONS = 1

    responses = Operand("the response ring: memref<Dx16xi8> in shared memory")
    full = Operand("D mbarriers a response completes (16 bytes of tx)")
    empty = Operand("D mbarriers the roles release a slot on (in the cluster's rank-0 CTA)")
    request = Attr(BOOL, "whether this role issues the try_cancel requests", optional=True,
                   default=False)
    result = Result("the number of passes the role ran (index)")

    @property
    def body(self) -> ir.Block:
        """The region's one block (its arguments: the block ids x, y, z and the pass)."""
        return self.operation.regions[0].blocks[0]

    def depth(self) -> int:
        """D: the ring's slots."""
        return ir.MemRefType(self.responses.type).shape[0]

    def verify_op(self) -> None:
        op = self.operation
        _check_body(op, ROLE_TILE_ARGS,
                    "four index arguments (the block ids x, y, z and the pass)")
        ring = check_smem_ref(op, self.responses, "the responses")
        if (ring.rank != 2 or ring.shape[1] != RESPONSE_BYTES
                or type_name(ring.element_type) != "i8"):
            raise error_at(op, f"expects the responses as memref<Dx{RESPONSE_BYTES}xi8> (one "
                               f"{RESPONSE_BYTES}-byte try_cancel response per slot), got "
                               f"{ring}")
        for name in ("full", "empty"):
            count = check_barriers(op, getattr(self, name))
            if count != ring.shape[0]:
                raise error_at(op, f"expects one '{name}' barrier per response slot "
                                   f"({ring.shape[0]}), got {count}")
        parent = op.parent
        if parent is None or not isinstance(parent.opview, WarpgroupRegionOp):
            raise error_at(op, "must stand directly in a warpgroup_region (the role that "
                               "walks the tiles), not inside another op")
        if not isinstance(self.result.type, ir.IndexType):
            raise error_at(op, f"expects an index result (the passes run), got "
                               f"{self.result.type}")
        walks = _ring_users(op, self.responses)
        requesters = [other for other in walks if other.request]
        if len(requesters) != 1:
            raise error_at(op, f"its response ring has {len(requesters)} requesting "
                               "role_tiles ops; exactly one role requests (request = true)")
        _check_walkers(op, walks)


def _check_walkers(op: ir.Operation, walks: list[RoleTilesOp]) -> None:
    """A warpgroup walks a ring at most once (after its failed response, another request
    is undefined); in a cluster the walks end at the cluster's meeting, so every warpgroup
    of the kernel walks it exactly once."""
    func = enclosing_kernel(op)
    if func is None:
        return
    regions = [walk.operation.parent.opview for walk in walks]
    running = sorted(w for region in regions if isinstance(region, WarpgroupRegionOp)
                     for w in region.warpgroups)
    twice = sorted({w for w in running if running.count(w) > 1})
    if twice:
        raise error_at(op, f"warpgroup {twice[0]} walks its response ring twice; after a "
                           "failed response another request is undefined (PTX ISA)")
    cluster = kernel_cluster(func)
    if cluster is None or cluster == (1, 1, 1):
        return
    expected = list(range(kernel_warpgroups(func)))
    if running != expected:
        raise error_at(op, f"in a cluster the walks of one ring end at the cluster's meeting, "
                           f"so every warpgroup of the kernel ({expected}) runs exactly one; "
                           f"its walks run warpgroups {running}")


ROLE_TILE_ARGS = 4
RESPONSE_BYTES = 16  # one clusterlaunchcontrol.try_cancel response (PTX ISA)


def _ring_users(op: ir.Operation, responses: ir.Value) -> list[RoleTilesOp]:
    """The role_tiles ops of `op`'s kernel that walk the ring `responses` starts."""
    func = enclosing_kernel(op)
    found: list[RoleTilesOp] = []

    def visit(inner: ir.Operation) -> ir.WalkResult:
        view = inner.operation.opview
        if isinstance(view, RoleTilesOp) and view.responses == responses:
            found.append(view)
        return ir.WalkResult.ADVANCE

    if func is not None:
        func.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found
