"""Where a block is within its cluster (kernels declared with `cluster=`), and the barrier
all blocks of a cluster meet at.

    @sd.kernel(grid=(4, 2), cluster=(2, 1, 1), ...)
    def body(...):
        sd.cluster_id(0)           # which cluster along x: 0 or 1
        sd.block_id_in_cluster(0)  # which block of it: 0 or 1
        sd.cluster_rank()          # the block's rank in its cluster, x fastest
"""

from __future__ import annotations

from jaxlib.mlir.dialects import gpu

from smalti.dialect.ops_sync import ClusterBarrierOp
from smalti.dsl.index import Index
from smalti.dsl.ops import check_axis, launch_id
from smalti.dsl.trace import active, create, dsl_entry


def cluster_id(axis: int) -> Index:
    """The index of the block's cluster among the grid's clusters along `axis`
    (gpu.cluster_id: %clusterid)."""
    axis = check_axis(axis, "cluster_id")
    info = active()
    return launch_id(gpu.ClusterIdOp, axis, info.grid[axis] // info.cluster[axis],
                     f"cluster_id({axis})")


def block_id_in_cluster(axis: int) -> Index:
    """The block's index within its cluster along `axis` (gpu.cluster_block_id:
    %cluster_ctaid); program_id(axis) = cluster_id(axis) * cluster_shape()[axis] + this."""
    axis = check_axis(axis, "block_id_in_cluster")
    return launch_id(gpu.ClusterBlockIdOp, axis, active().cluster[axis],
                     f"block_id_in_cluster({axis})")


def cluster_rank() -> Index:
    """The block's rank in its cluster, x fastest (as %cluster_ctarank, the order TMA
    multicast masks use): 0 to the number of blocks in a cluster minus 1."""
    shape = active().cluster
    rank, stride = Index(()), 1
    for axis, size in enumerate(shape):
        if size > 1:
            rank = rank + block_id_in_cluster(axis) * stride
        stride *= size
    return rank


def num_clusters(axis: int) -> int:
    """How many clusters the grid holds along `axis` (static: known while tracing)."""
    info = active()
    axis = check_axis(axis, "num_clusters")
    return info.grid[axis] // info.cluster[axis]


def cluster_shape() -> tuple[int, int, int]:
    """Blocks per cluster along x, y, z, as the kernel declares (static)."""
    return active().cluster


@dsl_entry(ClusterBarrierOp)
def cluster_barrier() -> None:
    """Every thread of every block of the cluster meets here (barrier.cluster): no block
    passes it before all have reached it, and their shared-memory accesses before it are
    ordered before those after it; e.g. before multicasting into a buffer again, so that
    every peer is done reading it. (The kernel publishes its barrier inits to the cluster
    by itself when it has collective copies.)"""
    create(ClusterBarrierOp)
