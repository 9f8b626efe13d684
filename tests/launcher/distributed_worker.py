"""One process of a multi-process JAX job on CPU, started by tests/test_launcher_nvshmem.py:

    python -m tests.launcher.distributed_worker PORT PROCESSES PROCESS [kernels | real]

It joins jax.distributed on localhost:PORT, bootstraps NVSHMEM (the library named by
$SMALTI_LIBNVSHMEM, the stand-in) through jax.distributed's key-value store, and with
`kernels` also runs examples/pointwise.py's kernel on its shards of a global mesh (under
jax.jit with shard_map, and with plain jax.jit sharding) and tries a collective kernel across
the processes. It prints one JSON object: what each step gave. With `real` (NVSHMEM's own
library) it stops after the bootstrap without finalising: on a machine without a GPU,
NVSHMEM's finalisation aborts the process.
"""

from __future__ import annotations

import json
import sys
import traceback


def shards_match(out, x, scale, shift) -> list[bool]:
    """Whether each of this process's shards of `out` holds pointwise's reference numbers."""
    import numpy as np

    return [bool(np.array_equal(np.asarray(s.data),
                                x[s.index] * scale + shift[s.index[0]][:, None]))
            for s in out.addressable_shards]


def run_kernels(report: dict) -> None:
    import jax
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from tests.dsl_helpers import load_example

    processes = jax.process_count()
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("x",))
    rows, cols = 128 * processes, 128
    x = (np.arange(rows * cols, dtype=np.float32).reshape(rows, cols) / 64).astype(np.float32)
    scale = np.linspace(-1, 1, cols, dtype=np.float32)
    shift = np.linspace(1, 2, rows, dtype=np.float32)

    def global_array(value, spec):
        return jax.make_array_from_callback(value.shape, NamedSharding(mesh, spec),
                                            lambda index: value[index])

    xs, ss, hs = global_array(x, P("x")), global_array(scale, P()), global_array(shift, P("x"))
    pointwise = load_example("pointwise")
    per_shard = jax.jit(jax.shard_map(pointwise.scale_shift, mesh=mesh,
                                      in_specs=(P("x"), P(), P("x")), out_specs=P("x")))
    out = per_shard(xs, ss, hs)
    report["shard_map"] = {"shape": list(out.shape), "matches": shards_match(out, x, scale, shift)}
    whole = jax.jit(pointwise.scale_shift, out_shardings=NamedSharding(mesh, P("x")))
    out = whole(xs, ss, hs)
    report["jit"] = {"shape": list(out.shape), "matches": shards_match(out, x, scale, shift)}

    collectives = load_example("collectives")
    gather = jax.jit(jax.shard_map(collectives.all_gather, mesh=mesh, in_specs=P("x"),
                                   out_specs=P("x")))
    try:
        gather(global_array(np.zeros((16 * processes, 128), np.float32), P("x")))
        report["collective"] = "ran"
    except Exception as error:  # the test reads the message
        report["collective"] = f"{type(error).__name__}: {error}"


def main(port: str, processes: int, process: int, mode: str) -> None:
    import os

    import jax

    jax.distributed.initialize(coordinator_address=f"localhost:{port}",
                               num_processes=processes, process_id=process,
                               initialization_timeout=60)
    from smalti.runtime import distributed, launcher
    from smalti.runtime.cache import cache_directory

    report: dict = {"process": jax.process_index(), "processes": jax.process_count()}
    try:
        client = distributed.key_value_client()
        if process == 1:  # a key nobody publishes: the timeout's message
            try:
                distributed.exchange_unique_id(client, 1, bytes, "smalti/test/never", 0.5)
            except distributed.DistributedError as error:
                report["timeout"] = str(error)
        distributed.bootstrap_nvshmem()
        distributed.bootstrap_nvshmem()  # once only
        library = launcher.load(cache_directory())
        report["active"] = launcher.nvshmem_active(library)
        if mode == "real":
            print(json.dumps(report), flush=True)
            os._exit(0)
        if mode == "kernels":
            run_kernels(report)
        launcher.nvshmem_finalize(library)
    except Exception:
        report["error"] = traceback.format_exc()
    print(json.dumps(report), flush=True)
    jax.distributed.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] if sys.argv[4:] else "")
