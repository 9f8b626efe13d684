"""The Python kernel DSL: trace functions over refs into smalti kernels and call them from JAX.

    @smalti.dsl.kernel(grid=(2,), out_shape=jax.ShapeDtypeStruct((128, 256), jnp.float32))
    def add(a_ref, b_ref, out_ref):
        col = smalti.dsl.program_id(0) * 128
        out_ref[:, col:col + 128] = a_ref[:, col:col + 128] + b_ref[:, col:col + 128]
"""

from smalti.dsl.array import Array
from smalti.dsl.cluster import (
    block_id_in_cluster,
    cluster_barrier,
    cluster_id,
    cluster_rank,
    cluster_shape,
    num_clusters,
)
from smalti.dsl.collective import (
    Semaphore,
    SemaphoreArray,
    Semaphores,
    Symmetric,
    SymmetricRef,
    device_count,
    device_index,
    multimem_load_reduce,
    multimem_red,
    multimem_store,
    remote_ref,
)
from smalti.dsl.control import fori, when
from smalti.dsl.index import Index, Predicate
from smalti.dsl.kernel import Kernel, Traced, kernel
from smalti.dsl.mma import wgmma
from smalti.dsl.ops import (
    abs,
    astype,
    broadcast_to,
    debug_print,
    exp,
    exp2,
    full,
    iota,
    layout_cast,
    log,
    maximum,
    minimum,
    num_programs,
    program_id,
    rsqrt,
    sqrt,
    tanh,
    where,
    zeros,
)
from smalti.dsl.refs import Ref, RefView
from smalti.dsl.regions import warpgroup_region
from smalti.dsl.schedule import record_schedule
from smalti.dsl.smem import SMEM, Barriers, Union
from smalti.dsl.smem_refs import Barrier, BarrierArray, SharedRef, StagedRef, warpgroup_barrier
from smalti.dsl.specs import ArraySpec
from smalti.dsl.tma import async_copy, async_store, async_store_wait
from smalti.runtime.exports import deserialize, export

__all__ = [
    "SMEM",
    "Array",
    "ArraySpec",
    "Barrier",
    "BarrierArray",
    "Barriers",
    "Index",
    "Kernel",
    "Predicate",
    "Ref",
    "RefView",
    "Semaphore",
    "SemaphoreArray",
    "Semaphores",
    "SharedRef",
    "StagedRef",
    "Symmetric",
    "SymmetricRef",
    "Traced",
    "Union",
    "abs",
    "astype",
    "async_copy",
    "async_store",
    "async_store_wait",
    "block_id_in_cluster",
    "broadcast_to",
    "cluster_barrier",
    "cluster_id",
    "cluster_rank",
    "cluster_shape",
    "debug_print",
    "deserialize",
    "device_count",
    "device_index",
    "exp",
    "exp2",
    "export",
    "fori",
    "full",
    "iota",
    "kernel",
    "layout_cast",
    "log",
    "maximum",
    "minimum",
    "multimem_load_reduce",
    "multimem_red",
    "multimem_store",
    "num_clusters",
    "num_programs",
    "program_id",
    "record_schedule",
    "remote_ref",
    "rsqrt",
    "sqrt",
    "tanh",
    "warpgroup_barrier",
    "warpgroup_region",
    "wgmma",
    "when",
    "where",
    "zeros",
]
