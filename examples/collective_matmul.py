"""Collective matmuls that overlap communication with compute, in the DSL, called inside
`jax.shard_map` and checked against jax.numpy:

- `all_gather_matmul`: out = all_gather(A) @ B. Each device holds a row shard of A and a
  column block of B. While the tensor cores multiply one chunk of A's rows, TMA fetches the
  next chunk from the peer that holds it (a tensor map over that peer's symmetric buffer).
- `matmul_reduce_scatter`: out = reduce_scatter(A @ B) over row blocks. Each device holds
  a K shard of A and B. It computes the partial of every peer's row block first, publishes
  each through its symmetric buffer (a TMA store, then a semaphore), and computes its own
  block last, adding the peers' partials as TMA fetches them.
- `fp8_all_gather_matmul`: the all-gather matmul on float8_e4m3fn with per-block scales
  (one f32 per row and 128 columns of A, one per 128x128 block of B, as DeepSeek-V3 scales
  activations and weights): the quantized shards and their scales cross the links at one
  byte per element; the f32 accumulator of each 128-wide K block is scaled and summed in
  registers (promotion to f32 every K block).

The chunk size and the order in which each device visits its peers come from smalti's cost
model (`smalti.schedule`): `smalti-opt --smalti-explain-schedule` on a dumped kernel says why.
On a CPU the devices are XLA's host devices and each kernel runs in smalti's simulator, all
devices in one launch:

    python examples/collective_matmul.py 4      # 4 simulated devices (2, 4 or 8)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

if __name__ == "__main__" and "jax" not in sys.modules:  # host devices for the demo
    os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax.sharding import PartitionSpec as P

import smalti.dsl as sd
from smalti.dsl.dtypes import mlir_name
from smalti.schedule import CollectiveMatmulProblem, CollectiveSchedule, plan_collective_matmul

AXIS = "x"
BLOCK_N = 128  # output columns per CTA
BLOCK_K = 64  # bf16 K tile: one 128-byte swizzled row
SMEM_LIMIT = 227 * 1024 - 1024  # bytes a block may use, less room for barriers
WARPGROUP = 128  # threads
ACCUMULATOR_REGISTERS = 128  # per thread: half of 255, the rest for addresses, operands
SCALE_BLOCK = 128  # FP8: one scale per 128 columns of a row of A, per 128x128 block of B;
# also the FP8 K tile (128 one-byte elements: one 128-byte swizzled row)
STAGE_ROWS = 64  # rows each register copy of a shard into the symmetric heap moves
F32 = jnp.float32
E4M3 = jnp.float8_e4m3fn


def schedule(kind: str, m: int, n: int, k: int, devices: int, dtype: object,
             smem_bytes: Callable[[int], int], accumulators: int = 1) -> CollectiveSchedule:
    """The cost model's chunk size and peer order for one device's problem: its best
    candidate that the kernel can run. The kernels walk peers at fixed offsets from their
    own index (so not the xor pairing); their shared memory, `smem_bytes(chunk_rows)`, must
    fit in 227 KiB, and their `accumulators` f32 (chunk_rows, BLOCK_N) arrays in
    ACCUMULATOR_REGISTERS per thread."""
    problem = CollectiveMatmulProblem(kind, m=m, n=n, k=k, devices=devices,
                                      dtype=mlir_name(np.dtype(dtype)), ctas=n // BLOCK_N)
    plan = plan_collective_matmul(problem)
    runnable = [c for c in plan.candidates
                if c.source_offsets is not None and smem_bytes(c.chunk_rows) <= SMEM_LIMIT
                and accumulators * c.chunk_rows * BLOCK_N // WARPGROUP
                <= ACCUMULATOR_REGISTERS]
    if not runnable:
        raise ValueError(f"no schedule of {problem.describe()} fits the kernel")
    if runnable[0] != plan.choice:
        plan = plan_collective_matmul(problem, chunk_rows=runnable[0].chunk_rows,
                                      source_offsets=runnable[0].source_offsets)
    return plan


def _check(a_rows: int, k: int, n: int, k_tile: int, what: str) -> None:
    if a_rows % STAGE_ROWS or n % BLOCK_N or k % (2 * k_tile):
        raise ValueError(f"{what} needs A's rows per device a multiple of {STAGE_ROWS}, K a "
                         f"multiple of {2 * k_tile} and N a multiple of {BLOCK_N}; got rows "
                         f"{a_rows}, K {k}, N {n}")


Step = tuple[int, int]  # (offset of the peer from this device, first row of the chunk)


def stream_chunks(steps: list[Step], k_tiles: int, bars: object,
                  fetch: Callable[[Step, int, object], None],
                  multiply: Callable[[Step, object, int, object], object],
                  finish: Callable[[Step, object], None], init: Callable[[], object],
                  early: Callable[[Step], bool] = lambda step: True,
                  prepare: Callable[[Step], None] = lambda step: None) -> None:
    """Multiply chunk after chunk, each over its K tiles, through a two-stage TMA pipeline:
    `fetch(step, stage, k_tile)` starts the copies of one K tile into `stage` (completing
    bars[stage]), `multiply(step, acc, stage, k_tile)` adds its product, `finish(step, acc)` is the
    chunk's epilogue. While the tensor cores work on a step's last K tiles, TMA already
    fetches the next step's first, from whichever device holds it, unless `early(next)` is
    False: then `prepare(next)` (a semaphore wait) runs before its first fetch, after the
    step's K loop. Tile t of the walk is in stage t % 2; every step has an even number of K
    tiles, so both barriers of step j, iteration i are in phase j * k_tiles / 2 + i."""
    fetch(steps[0], 0, 0)
    for j, step in enumerate(steps):
        following = steps[j + 1] if j + 1 < len(steps) else None
        ahead = following is not None and early(following)
        base = j * (k_tiles // 2)

        def two_k_tiles(it: object, acc: object, step: Step = step,
                        following: Step | None = following, ahead: bool = ahead,
                        base: int = base) -> object:
            k_tile = it * 2
            fetch(step, 1, k_tile + 1)
            bars[0].wait(base + it)
            acc = multiply(step, acc, 0, k_tile)

            @sd.when(k_tile + 2 < k_tiles)
            def _():
                fetch(step, 0, k_tile + 2)  # stage 0 is free: its wgmma has completed

            if ahead:
                @sd.when(k_tile + 2 >= k_tiles)
                def _():
                    fetch(following, 0, 0)

            bars[1].wait(base + it)
            return multiply(step, acc, 1, k_tile + 1)

        acc = sd.fori(0, k_tiles // 2, two_k_tiles, init())
        if following is not None and not ahead:
            prepare(following)
            fetch(following, 0, 0)
        finish(step, acc)


def stage_shard(source: object, staged: object, k_tile: int) -> None:
    """staged[...] = source[...] through registers, STAGE_ROWS x k_tile at a time."""
    rows, k = source.shape
    tiles = k // k_tile

    def piece(i: object, carry: None) -> None:
        row, col = i // tiles * STAGE_ROWS, i % tiles * k_tile
        staged[row:row + STAGE_ROWS, col:col + k_tile] = \
            source[row:row + STAGE_ROWS, col:col + k_tile]

    sd.fori(0, rows // STAGE_ROWS * tiles, piece)


def gather_walk(plan: CollectiveSchedule, out_ref: object, c_smem: object, sems: object,
                bars: object, k_tiles: int, stage: Callable[[], None],
                fetch: Callable[[Step, int, object], None],
                multiply: Callable[[Step, object, int, object], object]) -> None:
    """The all-gather side of a collective matmul, for one CTA of BLOCK_N output columns:
    block 0 of each device runs `stage()` (its shard into the symmetric heap) and signals
    every device (sems[0], once per CTA there); the CTA multiplies every source's rows in the
    schedule's order, its own first (read from its inputs, while the peers stage theirs),
    waiting for the peers' staging only before its first chunk from a peer; each chunk's
    result goes to its rows of `out_ref` through `c_smem`. Then it tells every device it is
    done reading (sems[1]), and block 0 waits until nobody reads its staged shard."""
    devices, me = sd.device_count(), sd.device_index()
    m, chunk = out_ref.shape[0] // devices, plan.chunk_rows
    ctas = out_ref.shape[1] // BLOCK_N
    col = sd.program_id(0) * BLOCK_N

    @sd.when(sd.program_id(0) == 0)
    def _():
        stage()
        for peer in range(devices):
            sems[0].signal(peer, ctas)  # one for each CTA of the peer

    def finish(step: Step, acc: object) -> None:
        offset, row = step
        c_smem[...] = acc.astype(out_ref.dtype)
        first = (me + offset) % devices * m + row
        sd.async_store(c_smem, out_ref.at[first:first + chunk, col:col + BLOCK_N])
        sd.async_store_wait()

    steps = [(offset, row) for offset in plan.source_offsets for row in range(0, m, chunk)]
    first_remote = next((step for step in steps if step[0] != 0), None)
    stream_chunks(steps, k_tiles, bars, fetch, multiply, finish,
                  lambda: sd.zeros((chunk, BLOCK_N), F32),
                  early=lambda step: step != first_remote,  # it waits for every shard
                  prepare=lambda step: sems[0].wait(devices))
    for peer in range(devices):  # done reading every device's staged shard
        sems[1].signal(peer)

    @sd.when(sd.program_id(0) == 0)
    def _():
        sems[1].wait(devices * ctas)  # no device reads this one's staged shard any more


def _gather_plan(a: jax.ShapeDtypeStruct, b: jax.ShapeDtypeStruct, devices: int
                 ) -> CollectiveSchedule:
    m, k = a.shape
    _check(m, k, b.shape[1], BLOCK_K, "all_gather_matmul")
    size = np.dtype(a.dtype).itemsize
    return schedule("all_gather_matmul", m, b.shape[1], k, devices, a.dtype,
                    lambda chunk: (2 * (chunk + BLOCK_N) * BLOCK_K + chunk * BLOCK_N) * size)


@sd.kernel(
    grid=lambda a, b, devices: (b.shape[1] // BLOCK_N,),
    out_shape=lambda a, b, devices: jax.ShapeDtypeStruct((devices * a.shape[0], b.shape[1]),
                                                         a.dtype),
    mesh_axis=AXIS,
    smem=lambda a, b, devices: [
        sd.Barriers(2),
        sd.SMEM((2, _gather_plan(a, b, devices).chunk_rows, BLOCK_K), a.dtype),  # A tiles
        sd.SMEM((2, BLOCK_K, BLOCK_N), b.dtype),  # B tiles
        sd.SMEM((_gather_plan(a, b, devices).chunk_rows, BLOCK_N), a.dtype)],  # C chunk
    symmetric=lambda a, b, devices: [sd.Symmetric(a.shape, a.dtype), sd.Semaphores(2)],
)
def all_gather_matmul(a_ref, b_ref, out_ref, bars, a_smem, b_smem, c_smem, staged, sems):
    """out[p * m + i] = (A of device p)[i] @ B (`gather_walk`): TMA fetches the next K tile,
    and across a chunk's end the next chunk's first, from the peer that holds it, while
    wgmma works."""
    k = a_ref.shape[1]
    devices, me = sd.device_count(), sd.device_index()
    plan = _gather_plan(a_ref, b_ref, devices)
    sd.record_schedule(plan)
    chunk = plan.chunk_rows
    col = sd.program_id(0) * BLOCK_N

    def fetch(step: Step, stage: int, k_tile: object) -> None:
        offset, row = step
        source = a_ref if offset == 0 else sd.remote_ref(staged, (me + offset) % devices)
        k0 = k_tile * BLOCK_K
        bars[stage].arrive_expect_tx(a_smem[stage].nbytes + b_smem[stage].nbytes)
        sd.async_copy(source.at[row:row + chunk, k0:k0 + BLOCK_K], a_smem[stage], bars[stage])
        sd.async_copy(b_ref.at[k0:k0 + BLOCK_K, col:col + BLOCK_N], b_smem[stage], bars[stage])

    gather_walk(plan, out_ref, c_smem, sems, bars, k // BLOCK_K,
                lambda: stage_shard(a_ref, staged, BLOCK_K), fetch,
                lambda step, acc, stage, k_tile: sd.wgmma(acc, a_smem[stage], b_smem[stage]))


def _scatter_plan(a: jax.ShapeDtypeStruct, b: jax.ShapeDtypeStruct, devices: int
                  ) -> CollectiveSchedule:
    if a.shape[0] % devices:
        raise ValueError(f"matmul_reduce_scatter splits A's {a.shape[0]} rows into {devices} "
                         "blocks; they do not divide")
    m, k = a.shape[0] // devices, a.shape[1]
    _check(m, k, b.shape[1], BLOCK_K, "matmul_reduce_scatter")
    size = np.dtype(a.dtype).itemsize
    return schedule("matmul_reduce_scatter", m, b.shape[1], k, devices, a.dtype,
                    lambda chunk: ((2 * (chunk + BLOCK_N) * BLOCK_K + chunk * BLOCK_N) * size
                                   + 2 * chunk * BLOCK_N * 4), accumulators=2)


@sd.kernel(
    grid=lambda a, b, devices: (b.shape[1] // BLOCK_N,),
    out_shape=lambda a, b, devices: jax.ShapeDtypeStruct((a.shape[0] // devices, b.shape[1]),
                                                         a.dtype),
    mesh_axis=AXIS,
    smem=lambda a, b, devices: [
        sd.Barriers(4),
        sd.SMEM((2, _scatter_plan(a, b, devices).chunk_rows, BLOCK_K), a.dtype),
        sd.SMEM((2, BLOCK_K, BLOCK_N), b.dtype),
        sd.SMEM((2, _scatter_plan(a, b, devices).chunk_rows, BLOCK_N), F32),  # partials
        sd.SMEM((_scatter_plan(a, b, devices).chunk_rows, BLOCK_N), a.dtype)],
    symmetric=lambda a, b, devices: [sd.Symmetric((a.shape[0], b.shape[1]), F32),
                                     sd.Semaphores(devices * (b.shape[1] // BLOCK_N) + 1)],
)
def matmul_reduce_scatter(a_ref, b_ref, out_ref, bars, a_smem, b_smem, p_smem, c_smem,
                          partials, sems):
    """out = sum over devices p of (A_p @ B_p)[me * m:(me + 1) * m]. Step s computes the
    partial of block (me + offset[s]) % devices, chunk by chunk; a peer's partial goes to
    the own `partials` by TMA (a chunk's store overlaps the next chunk's wgmma), and the
    peer is signalled on semaphore (sender, CTA) when its block is whole. The own block comes
    last: for each chunk, the peers' partials are fetched into `p_smem` (the next while the
    current one is added) and summed onto the own partial in f32."""
    devices, me = sd.device_count(), sd.device_index()
    m, k = a_ref.shape[0] // devices, a_ref.shape[1]
    ctas = out_ref.shape[1] // BLOCK_N
    plan = _scatter_plan(a_ref, b_ref, devices)
    sd.record_schedule(plan)
    chunk = plan.chunk_rows
    cta = sd.program_id(0)
    col = cta * BLOCK_N
    # Peer p computes this device's block at the step whose offset is (me - p) % devices.
    senders = [(me - offset) % devices for offset in plan.source_offsets if offset != 0]
    fetched = 0  # partials fetched so far: the barrier of fetch i is 2 + i % 2

    def fetch(step: Step, stage: int, k_tile: object) -> None:
        offset, row = step
        first, k0 = (me + offset) % devices * m + row, k_tile * BLOCK_K
        bars[stage].arrive_expect_tx(a_smem[stage].nbytes + b_smem[stage].nbytes)
        sd.async_copy(a_ref.at[first:first + chunk, k0:k0 + BLOCK_K], a_smem[stage],
                      bars[stage])
        sd.async_copy(b_ref.at[k0:k0 + BLOCK_K, col:col + BLOCK_N], b_smem[stage], bars[stage])

    def fetch_partial(sender: object, row: int) -> None:
        nonlocal fetched
        slot = fetched % 2
        bars[2 + slot].arrive_expect_tx(p_smem[slot].nbytes)
        first = me * m + row
        sd.async_copy(sd.remote_ref(partials, sender).at[first:first + chunk,
                                                         col:col + BLOCK_N],
                      p_smem[slot], bars[2 + slot])
        fetched += 1

    published = 0  # partial chunks stored so far: chunk i goes through p_smem[i % 2]

    def finish(step: Step, acc: object) -> None:
        nonlocal published
        offset, row = step
        block = (me + offset) % devices
        if offset != 0:  # a peer's partial: publish it
            slot = published % 2
            sd.async_store_wait(1)  # the store two chunks back has read its slot
            p_smem[slot][...] = acc
            first = block * m + row
            sd.async_store(p_smem[slot], partials.at[first:first + chunk, col:col + BLOCK_N])
            published += 1
            if row + chunk == m:  # the block is whole: the signal waits for its writes
                sems[me * ctas + cta].signal(block)
            return
        if row == 0:
            sd.async_store_wait()  # p_smem is free for the peers' partials
            for sender in senders:
                sems[sender * ctas + cta].wait(1)
        done = fetched
        if senders:
            fetch_partial(senders[0], row)
        for i in range(len(senders)):
            if i + 1 < len(senders):
                fetch_partial(senders[i + 1], row)
            bars[2 + (done + i) % 2].wait((done + i) // 2)
            acc = acc + p_smem[(done + i) % 2][...]
        c_smem[...] = acc.astype(out_ref.dtype)
        sd.async_store(c_smem, out_ref.at[row:row + chunk, col:col + BLOCK_N])
        sd.async_store_wait()

    stream_chunks(
        [(offset, row) for offset in plan.source_offsets for row in range(0, m, chunk)],
        k // BLOCK_K, bars, fetch,
        lambda step, acc, stage, k_tile: sd.wgmma(acc, a_smem[stage], b_smem[stage]),
        finish, lambda: sd.zeros((chunk, BLOCK_N), F32))
    for peer in range(devices):  # done reading every device's `partials`
        sems[devices * ctas].signal(peer)
    sems[devices * ctas].wait(devices)


def _fp8_plan(a: jax.ShapeDtypeStruct, bt: jax.ShapeDtypeStruct, devices: int
              ) -> CollectiveSchedule:
    m, k = a.shape
    if bt.shape[1] != k:
        raise ValueError(f"fp8_all_gather_matmul needs A [m, K] and B^T [N, K]; got {a.shape} "
                         f"and {bt.shape}")
    _check(m, k, bt.shape[0], SCALE_BLOCK, "fp8_all_gather_matmul")
    return schedule("all_gather_matmul", m, bt.shape[0], k, devices, a.dtype,
                    lambda chunk: 2 * (chunk + BLOCK_N) * SCALE_BLOCK + chunk * BLOCK_N * 2,
                    accumulators=2)


@sd.kernel(
    grid=lambda a, a_scale, bt, bt_scale, devices: (bt.shape[0] // BLOCK_N,),
    out_shape=lambda a, a_scale, bt, bt_scale, devices: jax.ShapeDtypeStruct(
        (devices * a.shape[0], bt.shape[0]), jnp.bfloat16),
    mesh_axis=AXIS,
    smem=lambda a, a_scale, bt, bt_scale, devices: [
        sd.Barriers(2),
        sd.SMEM((2, _fp8_plan(a, bt, devices).chunk_rows, SCALE_BLOCK), E4M3),  # A tiles
        sd.SMEM((2, BLOCK_N, SCALE_BLOCK), E4M3),  # B^T tiles (K-major)
        sd.SMEM((_fp8_plan(a, bt, devices).chunk_rows, BLOCK_N), jnp.bfloat16)],
    symmetric=lambda a, a_scale, bt, bt_scale, devices: [
        sd.Symmetric(a.shape, E4M3), sd.Symmetric(a_scale.shape, F32), sd.Semaphores(2)],
)
def fp8_all_gather_matmul(a_ref, a_scale_ref, bt_ref, bt_scale_ref, out_ref, bars, a_smem,
                          bt_smem, c_smem, staged, staged_scales, sems):
    """out[p * m + i, j] = sum over K blocks kb of (A_p[i, kb] . B[kb, j]) * sa_p[i, kb] *
    sb[j // 128, kb]: the all-gather matmul of e4m3 shards with their scales (A's per row
    and 128 columns, B's per 128x128 block). Each K tile is one scale block: its f32 product
    is scaled and added to the f32 total in registers (promotion every 128 K). The shards
    travel as e4m3 by TMA, the scales (one f32 per 128 elements) by loads from the peer's
    `staged_scales`."""
    m, k = a_ref.shape
    devices, me = sd.device_count(), sd.device_index()
    plan = _fp8_plan(a_ref, bt_ref, devices)
    sd.record_schedule(plan)
    chunk = plan.chunk_rows
    cta = sd.program_id(0)
    row_of_b = cta * BLOCK_N

    def stage() -> None:
        stage_shard(a_ref, staged, SCALE_BLOCK)
        for row in range(0, m, STAGE_ROWS):
            staged_scales[row:row + STAGE_ROWS, :] = a_scale_ref[row:row + STAGE_ROWS, :]

    def source_of(offset: int, ref: object, staged_ref: object) -> object:
        return ref if offset == 0 else sd.remote_ref(staged_ref, (me + offset) % devices)

    def fetch(step: Step, stage: int, k_tile: object) -> None:
        offset, row = step
        k0 = k_tile * SCALE_BLOCK
        bars[stage].arrive_expect_tx(a_smem[stage].nbytes + bt_smem[stage].nbytes)
        sd.async_copy(source_of(offset, a_ref, staged).at[row:row + chunk, k0:k0 + SCALE_BLOCK],
                      a_smem[stage], bars[stage])
        sd.async_copy(bt_ref.at[row_of_b:row_of_b + BLOCK_N, k0:k0 + SCALE_BLOCK],
                      bt_smem[stage], bars[stage])

    def multiply(step: Step, total: object, stage: int, k_tile: object) -> object:
        """total + this K tile's product, scaled: the rows' scales come from where the
        chunk's A does."""
        offset, row = step
        scales = source_of(offset, a_scale_ref, staged_scales)
        part = sd.wgmma(sd.zeros((chunk, BLOCK_N), F32), a_smem[stage], bt_smem[stage].T)
        block_scale = bt_scale_ref[cta:cta + 1, k_tile:k_tile + 1].broadcast_to(
            (chunk, BLOCK_N))
        return total + part * scales[row:row + chunk, k_tile][:, None] * block_scale

    gather_walk(plan, out_ref, c_smem, sems, bars, k // SCALE_BLOCK, stage, fetch, multiply)


def quantize(x: np.ndarray, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """x [R, K] as e4m3 with one f32 scale per `rows` x 128 block (its max maps to 448, e4m3's
    largest finite value): rows=1 for A's per-row scales, 128 for B's block scales."""
    r, k = x.shape
    blocks = x.reshape(r // rows, rows, k // SCALE_BLOCK, SCALE_BLOCK)
    scale = np.maximum(np.abs(blocks).max((1, 3)), 1e-12) / 448.0
    q = (blocks / scale[:, None, :, None]).astype(ml_dtypes.float8_e4m3fn)
    return q.reshape(r, k), scale.astype(np.float32)


def reference_fp8(a: np.ndarray, a_scale: np.ndarray, bt: np.ndarray, bt_scale: np.ndarray
                  ) -> np.ndarray:
    """The dequantized product in f32: (A * sa) @ (B^T * sb)^T."""
    a32 = a.astype(F32) * np.repeat(a_scale, SCALE_BLOCK, axis=1)
    b32 = bt.astype(F32) * np.repeat(np.repeat(bt_scale, SCALE_BLOCK, 0), SCALE_BLOCK, 1)
    return a32 @ b32.T


def main(devices: int = 4) -> None:
    if len(jax.devices()) < devices:
        raise SystemExit(f"{devices} devices needed, JAX has {len(jax.devices())}; run with "
                         f"XLA_FLAGS=--xla_force_host_platform_device_count={devices}")
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:devices]), (AXIS,))

    def sharded(kernel: sd.Kernel, in_specs: tuple, out_spec: P) -> object:
        return jax.jit(jax.shard_map(kernel, mesh=mesh, in_specs=in_specs, out_specs=out_spec))

    rng = np.random.default_rng(0)
    m, k, n = 128, 256, 256  # per device: 2 CTAs, 4 K tiles per chunk
    a = jnp.asarray(rng.standard_normal((devices * m, k), F32), jnp.bfloat16)
    b = jnp.asarray(rng.standard_normal((k, devices * n), F32), jnp.bfloat16)
    out = sharded(all_gather_matmul, (P(AXIS), P(None, AXIS)), P(None, AXIS))(a, b)
    _close(out, jnp.dot(a, b, preferred_element_type=F32), "all_gather_matmul")

    x = jnp.asarray(rng.standard_normal((devices * m, devices * k), F32), jnp.bfloat16)
    w = jnp.asarray(rng.standard_normal((devices * k, n), F32), jnp.bfloat16)
    out = sharded(matmul_reduce_scatter, (P(None, AXIS), P(AXIS)), P(AXIS))(x, w)
    _close(out, jnp.dot(x, w, preferred_element_type=F32), "matmul_reduce_scatter")

    k8 = 2 * SCALE_BLOCK  # two scale blocks: two K tiles per chunk
    a8, a_scale = quantize(rng.standard_normal((devices * m, k8), F32), 1)
    bt8, bt_scale = quantize(rng.standard_normal((devices * n, k8), F32), SCALE_BLOCK)
    out = sharded(fp8_all_gather_matmul, (P(AXIS),) * 4, P(None, AXIS))(
        a8, a_scale, bt8, bt_scale)
    _close(out, reference_fp8(a8, a_scale, bt8, bt_scale), "fp8_all_gather_matmul")
    print(f"all_gather_matmul, matmul_reduce_scatter and fp8_all_gather_matmul match "
          f"jax.numpy on {devices} devices")


def _close(out: jax.Array, expected: object, what: str) -> None:
    """`out` (bf16) within two bf16 ulps of the f32 `expected` (plus 1e-3 where sums cancel
    to near zero): the tensor cores sum in f32 in another order, then the result rounds."""
    out, expected = np.asarray(out, F32), np.asarray(expected, F32)
    ulp = np.spacing(np.abs(expected).astype(ml_dtypes.bfloat16)).astype(F32)
    bad = np.abs(out - expected) > 2 * ulp + 1e-3
    if bad.any():
        raise SystemExit(f"{what}: {int(bad.sum())} of {bad.size} elements differ from "
                         f"jax.numpy (max |error| {np.abs(out - expected).max():.3g})")


if __name__ == "__main__":
    main(*map(int, sys.argv[1:2]))
