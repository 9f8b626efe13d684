"""What autotuning says about each config: `sd.Config`, why a config was pruned (with the
source line where there is one), how the survivors ranked, and the error when none survived."""

from __future__ import annotations

import enum
import re
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from smalti.dialect.diagnostics import DiagnosticError, format_location
from smalti.dsl.smem import SharedMemoryLimitError
from smalti.runtime import PtxasCrash, PtxasError

_SMALTI_DIR = str(Path(__file__).resolve().parents[1])
_LOCATED = re.compile(r"^(?P<where>[^\s:][^:\n]*:\d+(?::\d+)?): (?:error: )?")
_SCALARS = (bool, int, float, str, type(None))


class Config(Mapping):
    """One point of the search: named values the kernel factory reads as `config.name` or
    `config["name"]`. Values are ints, floats, strings, bools or None (they are stored in
    the on-disk choice cache)."""

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, object] | None = None, /, **kwargs: object) -> None:
        merged = {**(values or {}), **kwargs}
        for name, value in merged.items():
            if not isinstance(name, str) or not name.isidentifier():
                raise TypeError(f"sd.Config names must be identifiers, got {name!r}")
            if not isinstance(value, _SCALARS):
                raise TypeError(f"sd.Config value {name}={value!r} must be an int, float, str, "
                                f"bool or None")
        object.__setattr__(self, "_values", dict(merged))

    def __getattr__(self, name: str) -> object:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"{self} has no value {name!r}") from None

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("sd.Config is immutable")

    def __getitem__(self, name: str) -> object:
        return self._values[name]

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._values.items())))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self._values) == dict(other)

    def __repr__(self) -> str:
        return "Config(" + ", ".join(f"{k}={v!r}" for k, v in self._values.items()) + ")"

    def as_dict(self) -> dict[str, object]:
        return dict(self._values)


class Reason(enum.Enum):
    """Why a config was pruned."""

    SHARED_MEMORY = "shared memory over 227 KiB"
    SPILLS = "register spills"
    PTXAS_WARNING = "ptxas performance warning"
    PTXAS_ERROR = "ptxas error"
    PTXAS_CRASH = "ptxas crash"
    INFERENCE_CONFLICT = "layout inference conflict"
    COMPILE_ERROR = "compile error"
    TRACE_ERROR = "tracing error"


@dataclass(frozen=True)
class Pruned:
    """A config that cannot run well or at all: the reason, the message and the source
    position (`file:line[:col]`) it points at, when there is one."""

    index: int
    config: Config
    reason: Reason
    message: str
    where: str | None

    def format(self) -> str:
        at = f" at {self.where}" if self.where else ""
        return f"pruned #{self.index} {self.config}: {self.reason.value}{at}: {self.message}"


@dataclass(frozen=True)
class Ranked:
    """A config that compiled: its score (seconds measured, or the static model's score;
    lower is better) and how the score came about."""

    index: int
    config: Config
    score: float
    details: str

    def format(self) -> str:
        return f"#{self.index} {self.config}: {self.details}"


@dataclass(frozen=True)
class AutotuneReport:
    """One tuning of one kernel for one key: the survivors best first, the pruned configs,
    how they were ranked ('measured', 'static model', or 'config order' without ptxas), and
    whether the choice came from the on-disk cache (then only the chosen one was compiled,
    and `cached` holds the lines of the report that chose it)."""

    kernel: str
    key: object
    method: str
    ranked: tuple[Ranked, ...]
    pruned: tuple[Pruned, ...]
    from_cache: bool = False
    cached: tuple[str, ...] = ()

    @property
    def chosen(self) -> Ranked:
        return self.ranked[0]

    def lines(self) -> tuple[str, ...]:
        """The report without its heading: the chosen config, the others, the pruned."""
        if self.from_cache:
            return self.cached
        return (*(("chosen " if i == 0 else "") + r.format() for i, r in enumerate(self.ranked)),
                *(p.format() for p in self.pruned))

    def format(self) -> str:
        if self.from_cache:
            head = (f"autotune {self.kernel} for key {self.key}: #{self.chosen.index} "
                    f"{self.chosen.config} from the autotune cache; it was chosen thus:")
        else:
            head = (f"autotune {self.kernel} for key {self.key}: {len(self.ranked)} config(s) "
                    f"ranked by {self.method}, {len(self.pruned)} pruned")
        return "\n".join([head, *("  " + line for line in self.lines())])

    __str__ = format


class AutotuneError(ValueError):
    """Every config was pruned; the message lists each with its reason and line."""

    def __init__(self, kernel: str, key: object, pruned: tuple[Pruned, ...]) -> None:
        self.pruned = pruned
        lines = "\n".join("  " + p.format() for p in pruned)
        super().__init__(f"autotune {kernel} for key {key}: every one of the {len(pruned)} "
                         f"configs was pruned:\n{lines}")


def pruned_for(index: int, config: Config, error: Exception) -> Pruned:
    """The report for a config whose kernel could not be built, traced or compiled."""
    match error:
        case SharedMemoryLimitError():
            reason = Reason.SHARED_MEMORY
        case PtxasCrash():
            reason = Reason.PTXAS_CRASH
        case PtxasError():
            reason = Reason.PTXAS_ERROR
        case DiagnosticError() if "cannot be given a layout" in str(error):
            reason = Reason.INFERENCE_CONFLICT
        case DiagnosticError():
            reason = Reason.COMPILE_ERROR
        case _:
            reason = Reason.TRACE_ERROR
    where, message = located(error)
    if reason is Reason.TRACE_ERROR and not isinstance(error, ValueError | TypeError
                                                       | IndexError | ZeroDivisionError):
        message = f"{type(error).__name__}: {message}"
    return Pruned(index, config, reason, message, where)


def located(error: Exception) -> tuple[str | None, str]:
    """The source position an error points at and its message without that prefix: a
    DiagnosticError's first location, a `file:line:col: ` prefix, else the innermost frame
    of the traceback outside smalti (the user's factory or kernel body)."""
    text = str(error).strip()
    if isinstance(error, DiagnosticError) and error.diagnostics:
        where = format_location(error.diagnostics[0].location)
        if where != "<unknown>":
            return where, _strip(text, where)
    if (match := _LOCATED.match(text)) is not None:
        return match.group("where"), text[match.end():]
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if not str(Path(f.filename).resolve()).startswith(_SMALTI_DIR)]
    if frames:
        return f"{frames[-1].filename}:{frames[-1].lineno}", text
    return None, text


def _strip(text: str, where: str) -> str:
    prefix = f"{where}: error: "
    return text[len(prefix):] if text.startswith(prefix) else text
