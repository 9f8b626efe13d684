"""Multicast addresses: one address naming the same byte of every device's symmetric buffer.

On a GPU a multicast object (cuMulticastCreate, NVLink SHARP) is bound to one buffer per
device; its address, accessed by `multimem.ld_reduce`, `multimem.st` and `multimem.red`, reaches
all of them at once (PTX ISA, "Data Movement and Conversion Instructions: multimem"). In a
launch over several devices (smalti.sim.devices) a `Multicast()` argument passes every device
the same address, MULTICAST_WINDOW: MULTICAST_WINDOW + off names byte `off` of each device's
symmetric buffer. The window is not backed by ordinary memory: `ld`, `st`, atomics and bulk
copies to it fault (the PTX ISA leaves them undefined), naming the multicast address.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from smalti.sim.errors import Fault
from smalti.sim.lanes import Lanes
from smalti.sim.memory import MULTICAST_SPAN, MULTICAST_WINDOW


class Multicast:
    """A kernel argument for a `.u64` pointer parameter: the multicast address of the launch's
    symmetric buffers (the same on every device; see the module docstring)."""

    def __repr__(self) -> str:
        return "Multicast()"


@dataclass(frozen=True)
class MulticastGroup:
    """The symmetric buffers a multicast address reaches: `bases[p]` is device p's buffer's
    device address, `size` their common size in bytes."""

    bases: tuple[int, ...]
    size: int

    @property
    def devices(self) -> int:
        return len(self.bases)

    def offsets(self, addresses: np.ndarray, nbytes: int, lanes: Lanes, what: str
                ) -> np.ndarray:
        """Byte offsets into the symmetric buffers of per-lane multicast `addresses`, each
        accessing `nbytes`; a Fault when an address is outside the multicast window,
        misaligned (PTX ISA: naturally aligned, vectors to their whole size) or past the
        buffers' end."""
        offset = addresses.astype(np.uint64) - np.uint64(MULTICAST_WINDOW)  # wraps below
        outside = offset >= np.uint64(MULTICAST_SPAN)
        if outside.any():
            first = int(np.argmax(outside))
            raise Fault(f"{what} at address {int(addresses[first]):#x}, which is not a "
                        "multicast address: multimem instructions take the address a "
                        "smalti.sim.Multicast() argument passes (plus an offset)",
                        lanes.first(outside))
        misaligned = offset % np.uint64(nbytes) != 0
        if misaligned.any():
            first = int(np.argmax(misaligned))
            raise Fault(f"misaligned {what} of {nbytes} bytes at multicast offset "
                        f"{int(offset[first])}", lanes.first(misaligned))
        beyond = offset + np.uint64(nbytes) > np.uint64(self.size)
        if beyond.any():
            first = int(np.argmax(beyond))
            raise Fault(f"out-of-bounds {what} of {nbytes} bytes at multicast offset "
                        f"{int(offset[first])}: the symmetric buffers have {self.size} bytes",
                        lanes.first(beyond))
        return offset

    def addresses(self, offsets: np.ndarray) -> np.ndarray:
        """(devices, n) device addresses of `offsets` in each device's symmetric buffer."""
        return np.array(self.bases, np.uint64)[:, None] + offsets[None, :]
