"""The simulator's exceptions: `SimError` for users, `Fault`/`Unsupported` raised inside."""

from __future__ import annotations

from smalti.ptx.module import SourceLocation


class SimError(RuntimeError):
    """A kernel failed in the simulator; the message names kernel, PTX line, the source line
    the PTX's `.loc` gives for it (`source`: a SourceLocation with file, line, column),
    instruction and thread."""

    def __init__(
        self,
        message: str,
        *,
        kernel: str | None = None,
        line: int | None = None,
        text: str | None = None,
        thread: str | None = None,
        detail: str | None = None,
        source: SourceLocation | None = None,
    ) -> None:
        self.reason = message
        self.kernel = kernel
        self.line = line  # the PTX line
        self.text = text
        self.thread = thread
        self.detail = detail
        self.source = source  # the compiler's input line (`.loc`), when the PTX has one
        parts = [message]
        if line is not None:
            parts.append(f" at line {line}")
        if source is not None:
            parts.append(f" ({source})")
        if text is not None:
            parts.append(f": `{text}`")
        context = []
        if kernel is not None:
            context.append(f"kernel '{kernel}'")
        if thread is not None:
            context.append(thread)
        if context:
            parts.append(f" ({', '.join(context)})")
        if detail:
            parts.append(f": {detail}")
        super().__init__("".join(parts))


class SimWarning(UserWarning):
    """The kernel ran, but did something whose outcome the PTX ISA leaves open; the message
    names kernel, PTX line, instruction and threads, as a SimError does. Turn warnings of this
    category into errors with `warnings.simplefilter("error", SimWarning)`."""


class NondeterministicStoreWarning(SimWarning):
    """One store instruction wrote different values to one address from several threads:
    one of them lands (PTX ISA), which one the hardware does not say."""


class Fault(Exception):
    """Raised by instruction semantics at run time; `thread` is the launch-wide thread id."""

    def __init__(self, message: str, thread: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.thread = thread


class NotConverged(Exception):
    """Raised by a warp-synchronous instruction (before any effect) when some non-exited
    members of its lanes' warps have not reached it yet. `waiting` (a bool mask over the
    launch) holds the active lanes that must wait at the instruction for them; `fault` is the
    error to report if they never come (the scheduler's hold, sim/scheduler.py)."""

    def __init__(self, waiting, fault: Fault) -> None:
        super().__init__(fault.message)
        self.waiting = waiting
        self.fault = fault


class Unsupported(Exception):
    """Raised while decoding an instruction the simulator does not implement."""

    def __init__(self, detail: str | None = None) -> None:
        super().__init__(detail or "")
        self.detail = detail
