"""The Python kernel DSL: trace functions over refs into smalti kernels and call them from JAX.

    @smalti.dsl.kernel(grid=(2,), out_shape=jax.ShapeDtypeStruct((128, 256), jnp.float32))
    def add(a_ref, b_ref, out_ref):
        col = smalti.dsl.program_id(0) * 128
        out_ref[:, col:col + 128] = a_ref[:, col:col + 128] + b_ref[:, col:col + 128]
"""

from smalti.dsl.array import Array
from smalti.dsl.autotune import Autotuned, autotune
from smalti.dsl.autotune_report import AutotuneError, AutotuneReport, Config
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
from smalti.dsl.custom import Register, Thread, custom_primitive
from smalti.dsl.index import Index, Predicate
from smalti.dsl.inline import inline_ptx
from smalti.dsl.kernel import Kernel, Traced, kernel
from smalti.dsl.launch_control import persistent_tiles, role_tiles
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
from smalti.dsl.pipeline import Pipeline, emit_pipeline
from smalti.dsl.pipeline_ws import emit_pipeline_warp_specialized
from smalti.dsl.refs import Ref, RefView, load, store
from smalti.dsl.regions import warpgroup_region
from smalti.dsl.schedule import record_schedule
from smalti.dsl.smem import SMEM, Barriers, Union
from smalti.dsl.smem_refs import (
    Barrier,
    BarrierArray,
    SharedRef,
    StagedRef,
    scoped_smem,
    warpgroup_barrier,
)
from smalti.dsl.specs import ArraySpec, BlockSpec
from smalti.dsl.tcgen05 import tcgen05_commit, tcgen05_copy, tcgen05_mma
from smalti.dsl.tma import async_copy, async_store, async_store_wait
from smalti.dsl.tmem import TMEM, TmemRef, TmemWindow
from smalti.runtime.exports import deserialize, export

__all__ = [
    "SMEM",
    "TMEM",
    "Array",
    "ArraySpec",
    "AutotuneError",
    "AutotuneReport",
    "Autotuned",
    "Barrier",
    "BarrierArray",
    "Barriers",
    "BlockSpec",
    "Config",
    "Index",
    "Kernel",
    "Pipeline",
    "Predicate",
    "Ref",
    "RefView",
    "Register",
    "Semaphore",
    "SemaphoreArray",
    "Semaphores",
    "SharedRef",
    "StagedRef",
    "Symmetric",
    "SymmetricRef",
    "Thread",
    "TmemRef",
    "TmemWindow",
    "Traced",
    "Union",
    "abs",
    "astype",
    "async_copy",
    "async_store",
    "async_store_wait",
    "autotune",
    "block_id_in_cluster",
    "broadcast_to",
    "cluster_barrier",
    "cluster_id",
    "cluster_rank",
    "cluster_shape",
    "custom_primitive",
    "debug_print",
    "deserialize",
    "device_count",
    "device_index",
    "emit_pipeline",
    "emit_pipeline_warp_specialized",
    "exp",
    "exp2",
    "export",
    "fori",
    "full",
    "inline_ptx",
    "iota",
    "kernel",
    "layout_cast",
    "load",
    "log",
    "maximum",
    "minimum",
    "multimem_load_reduce",
    "multimem_red",
    "multimem_store",
    "num_clusters",
    "num_programs",
    "persistent_tiles",
    "program_id",
    "record_schedule",
    "remote_ref",
    "role_tiles",
    "rsqrt",
    "scoped_smem",
    "sqrt",
    "store",
    "tanh",
    "tcgen05_commit",
    "tcgen05_copy",
    "tcgen05_mma",
    "warpgroup_barrier",
    "warpgroup_region",
    "wgmma",
    "when",
    "where",
    "zeros",
]
