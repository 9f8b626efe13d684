"""Collective kernels: all-gather, reduce-scatter and all-reduce written in the DSL, called
inside `jax.shard_map` over a mesh axis, and checked against jax.numpy.

Each kernel runs on every device of the axis at once and moves data between devices from
inside: stores into a peer's copy of a symmetric buffer (`sd.remote_ref`), semaphores that
say the data has arrived (`signal` releases, `wait` acquires, at system scope), and for the
all-reduce NVLink multicast (`sd.multimem_load_reduce` sums one slice over every device,
`sd.multimem_store` writes the sum back to all of them). On a CPU, the devices are XLA's host
devices and every kernel runs in smalti's simulator, all devices in one launch:

    python examples/collectives.py 4      # 4 simulated devices (2, 4 or 8)
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and "jax" not in sys.modules:  # host devices for the demo
    os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

import smalti.dsl as sd

AXIS = "x"


def barrier(semaphore: sd.Semaphore, devices: int) -> None:
    """Every device signals every device, then waits for all of them: what each wrote
    before is visible to every device after."""
    for peer in range(devices):
        semaphore.signal(peer)
    semaphore.wait(devices)


@sd.kernel(out_shape=lambda x, devices: jax.ShapeDtypeStruct(
               (devices * x.shape[0], *x.shape[1:]), x.dtype),
           mesh_axis=AXIS,
           symmetric=lambda x, devices: [sd.Symmetric((devices * x.shape[0], *x.shape[1:]),
                                                      x.dtype), sd.Semaphores(1)])
def all_gather(x_ref, out_ref, gathered, sems):
    """out = the shards of every device, in device order: each device stores its shard into
    its slot of every device's `gathered`, then signals that device."""
    rows, devices, me = x_ref.shape[0], sd.device_count(), sd.device_index()
    shard = x_ref[...]
    for peer in range(devices):
        sd.remote_ref(gathered, peer)[me * rows:me * rows + rows, :] = shard
        sems[0].signal(peer)
    sems[0].wait(devices)
    for slot in range(devices):
        out_ref[slot * rows:slot * rows + rows, :] = gathered[slot * rows:slot * rows + rows, :]


@sd.kernel(out_shape=lambda x, devices: jax.ShapeDtypeStruct(
               (x.shape[0] // devices, *x.shape[1:]), x.dtype),
           mesh_axis=AXIS,
           symmetric=lambda x, devices: [sd.Symmetric(x.shape, x.dtype), sd.Semaphores(1)])
def reduce_scatter(x_ref, out_ref, staged, sems):
    """out = the sum over devices of their row block `me`: each device sends block p of its
    input to device p (into slot `me` there), and each sums the slots it received."""
    rows, devices, me = out_ref.shape[0], sd.device_count(), sd.device_index()
    for peer in range(devices):
        sd.remote_ref(staged, peer)[me * rows:me * rows + rows, :] = \
            x_ref[peer * rows:peer * rows + rows, :]
        sems[0].signal(peer)
    sems[0].wait(devices)
    total = staged[0:rows, :].astype(jnp.float32)
    for slot in range(1, devices):
        total = total + staged[slot * rows:slot * rows + rows, :].astype(jnp.float32)
    out_ref[...] = total.astype(out_ref.dtype)


@sd.kernel(out_shape=lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), mesh_axis=AXIS,
           symmetric=lambda x: [sd.Symmetric(x.shape, x.dtype), sd.Semaphores(2)])
def all_reduce(x_ref, out_ref, buffer, sems):
    """out = the sum over devices of x, through multicast: each device puts x in its
    `buffer`, reduces its own slice of rows over every device's buffer and stores the sum
    into every device's buffer at once; after a second barrier each holds the whole sum."""
    devices, me = sd.device_count(), sd.device_index()
    rows = x_ref.shape[0] // devices
    buffer[...] = x_ref[...]
    barrier(sems[0], devices)
    mine = buffer.at[me * rows:me * rows + rows, :]
    sd.multimem_store(mine, sd.multimem_load_reduce(mine))
    barrier(sems[1], devices)
    out_ref[...] = buffer[...]


def sharded(kernel: sd.Kernel, mesh: jax.sharding.Mesh, out_spec: P) -> object:
    """`kernel` on every device of `mesh`, each on its shard (split along axis 0)."""
    return jax.jit(jax.shard_map(kernel, mesh=mesh, in_specs=P(AXIS), out_specs=out_spec))


def main(devices: int = 4) -> None:
    if len(jax.devices()) < devices:
        raise SystemExit(f"{devices} devices needed, JAX has {len(jax.devices())}; run with "
                         f"XLA_FLAGS=--xla_force_host_platform_device_count={devices}")
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:devices]), (AXIS,))
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((devices * 16, 128), np.float32))
    gathered = sharded(all_gather, mesh, P(AXIS))(x)
    np.testing.assert_array_equal(gathered, jnp.tile(x, (devices, 1)))
    y = jnp.asarray(rng.standard_normal((devices * devices * 8, 128), np.float32))
    scattered = sharded(reduce_scatter, mesh, P(AXIS))(y)
    expected = y.reshape(devices, devices * 8, 128).sum(0)
    np.testing.assert_allclose(scattered, expected, rtol=1e-5, atol=1e-5)
    z = jnp.asarray(rng.standard_normal((devices * 64, 128), np.float32))
    reduced = sharded(all_reduce, mesh, P(AXIS))(z)
    total = z.reshape(devices, 64, 128).sum(0)
    np.testing.assert_allclose(reduced, jnp.tile(total, (devices, 1)), rtol=1e-5, atol=1e-5)
    print(f"all-gather, reduce-scatter and all-reduce match jax.numpy on {devices} devices")


if __name__ == "__main__":
    main(*map(int, sys.argv[1:2]))
