"""Collective kernels: the examples under jax.shard_map on 2, 4 and 8 simulated devices
(XLA's host devices, each kernel one simulated launch over all of them), the ops' numbers
through `run_simulated_devices`, and what goes wrong reported as it should: a missing
semaphore wait is a race, a wait nobody satisfies a deadlock, a call outside shard_map an
error naming the kernel."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import smalti.dsl as sd
from smalti.runtime.compiler import CompiledModule, compile_mlir
from smalti.runtime.simulate import run_simulated_devices
from smalti.sim import SimError

ROOT = Path(__file__).resolve().parents[1]
S = jax.ShapeDtypeStruct


def _run_with_devices(code: str, devices: int = 8, timeout: float = 900) -> str:
    """Run `code` in a fresh Python with `devices` XLA host devices; its stdout."""
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_examples_match_jax_numpy_on_2_4_and_8_devices():
    out = _run_with_devices("""
        import examples.collectives as c
        for n in (2, 4, 8):
            c.main(n)
    """)
    for n in (2, 4, 8):
        assert f"match jax.numpy on {n} devices" in out


def test_collective_matmuls_match_jax_numpy_on_2_4_and_8_devices():
    """The overlapped all-gather + matmul, matmul + reduce-scatter and FP8 all-gather +
    matmul (examples/collective_matmul.py) under shard_map."""
    out = _run_with_devices("""
        import examples.collective_matmul as c
        for n in (2, 4, 8):
            c.main(n)
    """)
    for n in (2, 4, 8):
        assert f"fp8_all_gather_matmul match jax.numpy on {n} devices" in out


def test_groups_of_a_two_axis_mesh_meet_apart_and_errors_name_the_kernel():
    """On a (y=2, x=4) mesh, the kernel over "x" runs as two launches of 4 devices, each
    gathering its own row of shards; outside shard_map the call is refused."""
    _run_with_devices("""
        import jax, jax.numpy as jnp, numpy as np
        from jax.sharding import PartitionSpec as P
        import examples.collectives as c
        mesh = jax.sharding.Mesh(np.array(jax.devices()).reshape(2, 4), ("y", "x"))
        f = jax.jit(jax.shard_map(c.all_gather, mesh=mesh, in_specs=P(("y", "x")),
                                  out_specs=P(("y", "x"))))
        x = jnp.arange(8 * 16 * 128, dtype=jnp.float32).reshape(8 * 16, 128)
        out = np.asarray(f(x)).reshape(2, 4, 4 * 16, 128)
        for y in range(2):
            group = np.asarray(x).reshape(2, 4 * 16, 128)[y]
            for d in range(4):
                np.testing.assert_array_equal(out[y, d], group)
        try:
            c.all_gather(x[:16])
        except ValueError as error:
            assert "kernel all_gather is collective over mesh axis 'x'" in str(error), error
        else:
            raise AssertionError("a collective kernel ran outside shard_map")
    """)


def test_a_process_exits_while_its_kernels_still_run():
    """Results nobody awaited: XLA's threads still run the kernels (one collective, one not,
    and a collective whose simulation fails) when the interpreter exits; the process ends
    instead of hanging in XLA's shutdown."""
    _run_with_devices("""
        import jax, jax.numpy as jnp, numpy as np
        from jax.sharding import PartitionSpec as P
        import examples.collectives as c
        import smalti.dsl as sd

        @sd.kernel(out_shape=lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype))
        def double(x_ref, o_ref):
            o_ref[...] = x_ref[...] * 2

        @sd.kernel(out_shape=lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), mesh_axis="x",
                   symmetric=lambda x: [sd.Symmetric(x.shape, x.dtype), sd.Semaphores(1)])
        def unordered(x_ref, out_ref, box, sems):  # no wait: a race
            n, me = sd.device_count(), sd.device_index()
            sd.remote_ref(box, (me + 1) % n)[...] = x_ref[...]
            sems[0].signal((me + 1) % n)
            out_ref[...] = box[...]

        mesh = jax.sharding.Mesh(np.array(jax.devices()[:2]), ("x",))
        for kernel in (double, c.all_gather, unordered):
            jax.jit(jax.shard_map(kernel, mesh=mesh, in_specs=P("x"), out_specs=P("x")))(
                jnp.ones((32, 128), jnp.float32))
    """, timeout=120)


# ---- one launch over N devices, without shard_map -------------------------------------

def _module(kernel: sd.Kernel, *specs: object, devices: int) -> CompiledModule:
    _, compiled = kernel.compile(*specs, devices=devices)
    return CompiledModule(compiled.ptx, {compiled.name: compiled.signature})


@sd.kernel(out_shape=lambda x, devices: S((devices * x.shape[0], x.shape[1]), x.dtype),
           mesh_axis="x",
           symmetric=lambda x, devices: [sd.Symmetric((devices * x.shape[0], x.shape[1]),
                                                      x.dtype), sd.Semaphores(1)])
def gather_without_wait(x_ref, out_ref, gathered, sems):
    """The all-gather with its semaphore wait left out: a planted race."""
    rows, me = x_ref.shape[0], sd.device_index()
    for peer in range(sd.device_count()):
        sd.remote_ref(gathered, peer)[me * rows:me * rows + rows, :] = x_ref[...]
        sems[0].signal(peer)
    out_ref[...] = gathered[...]


@pytest.mark.parametrize("devices", [2, 4])
def test_a_missing_semaphore_wait_is_reported_as_a_race(devices):
    module = _module(gather_without_wait, S((8, 128), jnp.float32), devices=devices)
    xs = [np.full((8, 128), d, np.float32) for d in range(devices)]
    with pytest.raises(SimError, match=r"race between devices on device \d's symmetric buffer"
                                       r".*test_collectives.py"):
        run_simulated_devices(module, [(x, np.zeros((devices * 8, 128), np.float32))
                                       for x in xs])


@sd.kernel(out_shape=lambda x: S(x.shape, x.dtype), mesh_axis="x",
           symmetric=[sd.Semaphores(1)])
def waits_for_too_much(x_ref, out_ref, sems):
    for peer in range(sd.device_count()):
        sems[0].signal(peer)
    sems[0].wait(sd.device_count() + 1)
    out_ref[...] = x_ref[...]


def test_a_wait_no_device_satisfies_is_a_deadlock_naming_each_device():
    module = _module(waits_for_too_much, S((8, 128), jnp.float32), devices=2)
    x = np.zeros((8, 128), np.float32)
    with pytest.raises(SimError, match=r"deadlock.*device 0 block.*device 1 block"):
        run_simulated_devices(module, [(x, x), (x, x)])


@sd.kernel(out_shape=lambda x, devices: S((devices, *x.shape), x.dtype), mesh_axis="x",
           symmetric=lambda x, devices: [sd.Symmetric((devices, *x.shape), x.dtype),
                                         sd.Semaphores(2)])
def ring(x_ref, out_ref, slots, sems):
    """Each device passes every shard it holds to the next device, devices - 1 times (a
    traced peer: (me + 1) % devices), signalling and waiting each step on alternating
    semaphores."""
    devices, me = sd.device_count(), sd.device_index()
    slots[me, :] = x_ref[...]
    sems[0].signal(me)  # the own shard is in place
    for step in range(devices - 1):
        sems[step % 2].wait(1)
        held = (me - step + devices) % devices
        sd.remote_ref(slots, (me + 1) % devices)[held, :] = slots[held, :]
        sems[(step + 1) % 2].signal((me + 1) % devices)
    sems[(devices - 1) % 2].wait(1)
    for slot in range(devices):
        out_ref[slot, :] = slots[slot, :]


@pytest.mark.parametrize("devices", [2, 3, 8])
def test_a_ring_all_gather_with_traced_peers(devices):
    module = _module(ring, S((256,), jnp.float32), devices=devices)
    xs = [np.arange(256, dtype=np.float32) + 1000 * d for d in range(devices)]
    after = run_simulated_devices(module, [(x, np.zeros((devices, 256), np.float32))
                                           for x in xs])
    for d in range(devices):
        np.testing.assert_array_equal(after[d][1], np.stack(xs))


COUNT_KERNEL = """
func.func @count(%out: memref<2x128xi32>) attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 3 : i64, smalti.mesh_axis = "x"} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = "smalti.device_count"() : () -> index
  %d = "smalti.device_index"() {axis = "x"} : () -> index
  %ni = arith.index_cast %n : index to i32
  %di = arith.index_cast %d : index to i32
  %vn = vector.broadcast %ni : i32 to vector<1x128xi32>
  %vd = vector.broadcast %di : i32 to vector<1x128xi32>
  "smalti.vector_store"(%vn, %out, %c0, %c0) : (vector<1x128xi32>, memref<2x128xi32>, index, index) -> ()
  "smalti.vector_store"(%vd, %out, %c1, %c0) : (vector<1x128xi32>, memref<2x128xi32>, index, index) -> ()
  return
}
"""


def test_device_index_and_count_from_mlir():
    module = compile_mlir(COUNT_KERNEL)
    after = run_simulated_devices(module, [(np.zeros((2, 128), np.int32),)] * 3)
    for d in range(3):
        np.testing.assert_array_equal(after[d][0], [[3] * 128, [d] * 128])


def test_the_device_count_must_match_the_compiled_one():
    module = compile_mlir(COUNT_KERNEL)
    with pytest.raises(ValueError, match="compiled for 3 devices"):
        run_simulated_devices(module, [(np.zeros((2, 128), np.int32),)] * 2)


def test_dsl_errors_name_what_is_wrong():
    with pytest.raises(ValueError, match="give the mesh axis"):
        sd.kernel(out_shape=S((8,), jnp.float32), symmetric=[sd.Semaphores(1)])
    with pytest.raises(ValueError, match="positive count"):
        sd.Semaphores(0)

    @sd.kernel(out_shape=lambda x: S(x.shape, x.dtype), mesh_axis="x",
               symmetric=[sd.Semaphores(1)])
    def signals_a_missing_device(x_ref, out_ref, sems):
        sems[0].signal(5)
        out_ref[...] = x_ref[...]

    with pytest.raises(IndexError, match=r"device 5 is out of range for the kernel's 4 "
                                         r"devices"):
        signals_a_missing_device.trace(S((8, 128), jnp.float32), devices=4)

    @sd.kernel(out_shape=lambda x: S(x.shape, x.dtype), mesh_axis="x")
    def remote_of_an_argument(x_ref, out_ref):
        out_ref[...] = sd.remote_ref(x_ref, 0)[...]

    with pytest.raises(TypeError, match="remote_ref takes a symmetric ref"):
        remote_of_an_argument.trace(S((8, 128), jnp.float32), devices=2)


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
def test_a_half_precision_all_reduce_sums_in_f32_and_rounds_once(dtype):
    from examples.collectives import all_reduce

    devices = 4
    module = _module(all_reduce, S((64, 128), dtype), devices=devices)
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((64, 128)).astype(dtype) for _ in range(devices)]
    after = run_simulated_devices(module, [(x, np.zeros_like(x)) for x in xs])
    expected = sum(x.astype(np.float32) for x in xs).astype(dtype)  # one rounding
    for d in range(devices):
        np.testing.assert_array_equal(after[d][1], expected)


RED_KERNEL = """
func.func @sum_by_red(%x: memref<8x128xf32>, %out: memref<8x128xf32>) attributes {
    smalti.kernel, smalti.grid = array<i64: 1>, smalti.devices = 4 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c4096 = arith.constant 4096 : index
  %sum = "smalti.slice_symmetric"(%c0) : (index) -> memref<8x128xf32, "symmetric">
  %sems = "smalti.slice_symmetric"(%c4096) : (index) -> memref<1xi32, "symmetric">
  %v = "smalti.vector_load"(%x, %c0, %c0) : (memref<8x128xf32>, index, index) -> vector<8x128xf32>
  "smalti.multimem_red"(%v, %sum, %c0, %c0) {reduction = "add"} : (vector<8x128xf32>, memref<8x128xf32, "symmetric">, index, index) -> ()
  scf.for %p = %c0 to %c4 step %c1 {
    "smalti.semaphore_signal"(%sems, %c0, %p) : (memref<1xi32, "symmetric">, index, index) -> ()
  }
  "smalti.semaphore_wait"(%sems, %c0) {value = 4 : i64} : (memref<1xi32, "symmetric">, index) -> ()
  %all = "smalti.vector_load"(%sum, %c0, %c0) : (memref<8x128xf32, "symmetric">, index, index) -> vector<8x128xf32>
  "smalti.vector_store"(%all, %out, %c0, %c0) : (vector<8x128xf32>, memref<8x128xf32>, index, index) -> ()
  return
}
"""


def test_multimem_red_adds_every_device_into_every_device():
    """Integers, so that the sum is the same in any order the reductions land."""
    module = compile_mlir(RED_KERNEL)
    xs = [np.arange(1024, dtype=np.float32).reshape(8, 128) * (d + 1) for d in range(4)]
    after = run_simulated_devices(module, [(x, np.zeros_like(x)) for x in xs])
    for d in range(4):
        np.testing.assert_array_equal(after[d][1], sum(xs))


@sd.kernel(out_shape=lambda x: S(x.shape, x.dtype), mesh_axis="x",
           symmetric=lambda x: [sd.Symmetric(x.shape, x.dtype), sd.Semaphores(1)])
def max_by_red(x_ref, out_ref, result, sems):
    """Each device reduces its x into every device's `result` (an i32 max)."""
    sd.multimem_red(result, x_ref[...], "max")
    for peer in range(sd.device_count()):
        sems[0].signal(peer)
    sems[0].wait(sd.device_count())
    out_ref[...] = result[...]


def test_multimem_red_from_the_dsl():
    module = _module(max_by_red, S((4, 128), jnp.int32), devices=3)
    rng = np.random.default_rng(2)
    xs = [rng.integers(0, 1000, (4, 128)).astype(np.int32) for _ in range(3)]
    after = run_simulated_devices(module, [(x, np.zeros_like(x)) for x in xs])
    for d in range(3):
        np.testing.assert_array_equal(after[d][1], np.maximum.reduce(xs))


def _gather_by_tma(x_ref, out_ref, bars, tile, staged, sems, *, wait: bool = True) -> None:
    """An all-gather through TMA: each device stages its shard, then TMA-loads every
    device's copy (a traced peer) into shared memory and TMA-stores it into its output; it
    tells each peer when it is done reading, and waits for all before exiting. Without
    `wait`, it reads the peers' copies without waiting for them to be staged."""
    rows, devices, me = x_ref.shape[0], sd.device_count(), sd.device_index()
    staged[...] = x_ref[...]
    for peer in range(devices):
        sems[0].signal(peer)
    if wait:
        sems[0].wait(devices)
    for step in range(devices):
        source = (me + step) % devices
        bars[0].arrive_expect_tx(tile.nbytes)
        sd.async_copy(sd.remote_ref(staged, source).at[...], tile, bars[0])
        bars[0].wait(step % 2)
        sd.async_store(tile, out_ref.at[source * rows:source * rows + rows, :])
        sd.async_store_wait()
        sems[1].signal(source)
    sems[1].wait(devices)
    if not wait:
        sems[0].wait(devices)  # leave the semaphores at zero


_TMA_GATHER = dict(
    out_shape=lambda x, devices: S((devices * x.shape[0], x.shape[1]), x.dtype),
    mesh_axis="x", smem=lambda x, devices: [sd.Barriers(1), sd.SMEM(x.shape, x.dtype)],
    symmetric=lambda x, devices: [sd.Symmetric(x.shape, x.dtype), sd.Semaphores(2)])


@sd.kernel(**_TMA_GATHER)
def gather_by_tma(x_ref, out_ref, bars, tile, staged, sems):
    _gather_by_tma(x_ref, out_ref, bars, tile, staged, sems)


@sd.kernel(**_TMA_GATHER)
def gather_by_tma_without_wait(x_ref, out_ref, bars, tile, staged, sems):
    _gather_by_tma(x_ref, out_ref, bars, tile, staged, sems, wait=False)


def test_a_tma_load_from_a_peer_without_its_semaphore_is_a_race():
    module = _module(gather_by_tma_without_wait, S((64, 64), jnp.bfloat16), devices=2)
    x = np.ones((64, 64), jnp.bfloat16)
    with pytest.raises(SimError, match=r"(?s)race between devices.*cp\.async\.bulk\.tensor"):
        run_simulated_devices(module, [(x, np.zeros((128, 64), jnp.bfloat16))] * 2)


@pytest.mark.parametrize("devices", [2, 4])
def test_tma_loads_from_peers_symmetric_buffers(devices):
    module = _module(gather_by_tma, S((64, 64), jnp.bfloat16), devices=devices)
    assert module.signature("gather_by_tma").tensor_maps[0].symmetric_offset == 0
    rng = np.random.default_rng(devices)
    xs = [rng.standard_normal((64, 64)).astype(jnp.bfloat16) for _ in range(devices)]
    after = run_simulated_devices(module, [(x, np.zeros((devices * 64, 64), jnp.bfloat16))
                                           for x in xs])
    for d in range(devices):
        np.testing.assert_array_equal(after[d][1], np.concatenate(xs))
