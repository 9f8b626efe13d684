"""Where the per-device calls of a collective kernel meet on JAX's CPU backend.

Under `jax.shard_map`, XLA calls the `smalti_simulate` custom call once per device, each on
its own thread. A collective kernel needs all of its devices in one simulated launch (their
symmetric buffers, semaphores and multicast reach each other), so each call joins the
pending launch of its kernel and device group, and the call that completes it runs the
launch for everyone; the others wait for its outcome. Calls of one device to one kernel
come in program order, so the k-th calls of every device meet in the same launch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

# How long a device waits for the others before the call fails (seconds).
MEETING_TIMEOUT = 600.0


class RendezvousError(RuntimeError):
    """The devices of a collective launch did not all arrive, or arrived wrongly."""


@dataclass
class _Launch:
    """One pending launch: what each arrived device brought, and its outcome."""

    devices: int
    arrived: dict[int, object] = field(default_factory=dict)
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


class Rendezvous:
    """Pending launches by key (kernel and device group)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[object, _Launch] = {}
        self._closed: str | None = None  # why no launch is taken any more (abort)

    def abort(self, reason: str) -> None:
        """Fail every pending launch (its devices' calls raise RendezvousError: `reason`)
        and refuse new ones."""
        with self._lock:
            self._closed = reason
            pending, self._pending = list(self._pending.values()), {}
        for launch in pending:
            launch.error = RendezvousError(f"a collective launch was abandoned: {reason}")
            launch.done.set()

    def join(self, key: object, devices: int, device: int, payload: object,
             run: Callable[[dict[int, object]], None], *, what: str,
             timeout: float = MEETING_TIMEOUT) -> None:
        """Bring device `device`'s `payload` to the launch of `key` over `devices` devices;
        once all have, `run(payloads by device)` runs once (on the last arriving thread).
        Returns when it has run; raises what it raised, on every device's thread."""
        if not 0 <= device < devices:
            raise RendezvousError(f"{what}: device index {device} is outside the "
                                  f"{devices} devices the kernel was compiled for")
        with self._lock:
            if self._closed is not None:
                raise RendezvousError(f"{what}: not launched: {self._closed}")
            launch = self._pending.setdefault(key, _Launch(devices))
            if device in launch.arrived:
                raise RendezvousError(
                    f"{what}: device {device} called it twice before devices "
                    f"{sorted(set(range(devices)) - set(launch.arrived))} called it once: is "
                    "it called under jax.shard_map over the mesh axis it was compiled for, on "
                    "every device of that axis?")
            launch.arrived[device] = payload
            last = len(launch.arrived) == devices
            if last:
                del self._pending[key]
        if last:
            try:
                run(launch.arrived)
            except BaseException as error:  # every device reports it
                launch.error = error
            finally:
                launch.done.set()
        elif not launch.done.wait(timeout):
            with self._lock:
                if self._pending.get(key) is launch:
                    del self._pending[key]
            missing = sorted(set(range(devices)) - set(launch.arrived))
            raise RendezvousError(f"{what}: devices {missing} did not call it within "
                                  f"{timeout:.0f} s; a collective kernel runs on all "
                                  f"{devices} devices of its mesh axis at once")
        if launch.error is not None:
            raise launch.error
