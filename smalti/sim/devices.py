"""One launch over several devices: each runs the kernel with its own arguments and memory,
and reaches the others' symmetric buffers through ordinary global pointers.

    run_ptx_devices(ptx, "kernel", grid, block,
                    [[PeerTable(), np.uint32(d), out[d]] for d in range(n)],
                    symmetric=[np.zeros(1024, np.uint32) for _ in range(n)])

The ABI, as the lowering will produce it:
- Device d runs `grid` x `block` threads with `args_per_device[d]`; its %ctaid, %nctaid and
  clusters are those of its own grid. Arrays in its arguments are its own device buffers.
  The device's index is not a special register: pass it as an argument (a `.u32`).
- `symmetric[d]` is device d's symmetric buffer; all have the same size (a collective
  kernel's scratch sits at the same offset on every device). The buffers are updated in
  place, like every array argument; `symmetric[d]` itself passed in device d's arguments
  is a pointer to that buffer.
- A `PeerTable()` argument, for a `.u64` pointer parameter, is a table of N `.u64` entries in
  the device's global memory: entry p is the address of device p's symmetric buffer. A
  kernel reaches a peer's buffer as `ld.global.u64 %rd, [table + 8*p]` and then loads from
  and stores to it like any global pointer (remote stores, loads and atomics).
- A `Multicast()` argument, for a `.u64` pointer parameter, is the multicast address M of the
  symmetric buffers, the same on every device: M + off names byte `off` of every device's
  buffer, for `multimem.ld_reduce` (the reduction over all devices), `multimem.st` and
  `multimem.red` (every device's copy). M lies in a window of its own, no ordinary memory:
  `ld`, `st`, atomics and bulk copies there fault, as do multimem accesses outside
  [M, M + size), misaligned or not at a multicast address (sim/multicast.py,
  sim/ops/multimem.py).
- Every device's buffers lie in one simulated address space at disjoint addresses, so a
  pointer of one device is valid on every other (as peer-mapped memory is on GPUs).
  Module-scope `.global`/`.const` variables have one copy per device.

The devices run interleaved, not one after another: their threads are scheduled together
(min-PC, sim/scheduler.py), and a thread polling memory in a loop (`ld.acquire.sys` or
`ld.volatile` on a flag another device sets with `st.release.sys`, `red.release.sys` or an
`atom.*.sys`) sleeps until others have run (sim/spin.py). A poll that no device will ever
satisfy is reported as a deadlock naming the devices, blocks and PTX lines of the polling
loads; a plain access to a symmetric buffer that conflicts with another device's access
without system-scope release/acquire between them is reported as a race naming both
devices and lines (sim/peers.py). Bulk copies to and from peers' symmetric buffers, tensor
(TMA, `cp.async.bulk.tensor` and `cp.reduce.async.bulk.tensor` through a tensor map over a
peer's buffer, sim/ops/tma.py) or not (sim/ops/bulk.py), are checked too, as weak accesses
at issue and again when the program synchronises with them.

Not modelled yet: fp8 multimem forms, ordering between the threads of one device in the
race check (a device is one agent), and deadlock proofs for polls whose registers change
every iteration (a loop that counts its polls, or reads %globaltimer for a timeout): those
let other threads run every few iterations but, if never satisfied, run forever.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from smalti.sim.errors import SimError
from smalti.sim.launch import Arg, Dim, _parsed, launch
from smalti.sim.multicast import Multicast
from smalti.sim.peers import PeerTable

__all__ = ["Multicast", "PeerTable", "run_ptx_devices"]


def run_ptx_devices(ptx_text: str, kernel: str, grid: Dim, block: Dim,
                    args_per_device: Sequence[Sequence[Arg]], *,
                    symmetric: Sequence[np.ndarray] | None = None, shared_bytes: int = 0,
                    cluster: Dim | None = None, async_completion: str = "eager",
                    seed: int = 0, spurious_waits: bool = False,
                    resident_clusters: int | None = None) -> None:
    """Run `kernel` on `len(args_per_device)` simulated devices at once: device d with
    `args_per_device[d]` and symmetric buffer `symmetric[d]` (see the module docstring for
    the ABI). Arrays are updated in place. The other options are run_ptx's, per device.
    """
    devices = len(args_per_device)
    if devices < 1:
        raise SimError("a launch needs at least one device", kernel=kernel)
    buffers = list(symmetric or ())
    if buffers and len(buffers) != devices:
        raise SimError(f"{len(buffers)} symmetric buffers given for {devices} devices",
                       kernel=kernel)
    if len({b.nbytes for b in buffers}) > 1 or any(b.nbytes == 0 for b in buffers):
        raise SimError("the symmetric buffers must have one size, above zero bytes, on every "
                       f"device; got {[b.nbytes for b in buffers]}", kernel=kernel)
    markers = [a for args in args_per_device for a in args if isinstance(a, PeerTable | Multicast)]
    if not buffers and markers:
        raise SimError(f"a {markers[0]!r} argument needs symmetric buffers", kernel=kernel)
    launch(_parsed(ptx_text), kernel, grid, block, args_per_device, shared_bytes,
           symmetric=buffers, cluster=cluster, async_completion=async_completion, seed=seed,
           spurious_waits=spurious_waits, resident_clusters=resident_clusters)
