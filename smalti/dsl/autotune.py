"""`@sd.autotune`: choose, per key of the call's shapes, the best of several configs of a
kernel factory `make(config) -> sd.Kernel`.

Configs that cannot be built, traced or compiled, or that ptxas says spill registers or
serialise wgmma, are pruned, each with a report naming the config, the reason and the line.
The survivors are ranked by timing them on the GPU (through the launcher, as a call runs, each
launch's device time read from CUDA events the launcher records around it),
or, without one, by a static model of their machine code (smalti.schedule.autotune_model).
The choice is kept in memory and on disk (smalti.runtime.autotune_cache), so a later process
compiles only the chosen config.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import hashlib
import inspect
import json
import logging
import math
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from smalti.dialect.ops_memory import MAX_SMEM_BYTES
from smalti.dsl.autotune_report import (
    AutotuneError,
    AutotuneReport,
    Config,
    Pruned,
    Ranked,
    Reason,
    pruned_for,
)
from smalti.dsl.kernel import Kernel, Traced
from smalti.dsl.specs import ArraySpec, spec_of
from smalti.runtime import launcher
from smalti.runtime.autotune_cache import Choice, ChoiceCache, choice_key
from smalti.runtime.cache import CompiledKernel, cache_directory
from smalti.runtime.jax_integration import cuda_backend_present
from smalti.runtime.machine_code import machine_code
from smalti.runtime.quality import KernelQualityWarning, quality_problems
from smalti.schedule.autotune_model import estimate

VERBOSE_VARIABLE = "SMALTI_AUTOTUNE_VERBOSE"
MEASURED, STATIC_MODEL, CONFIG_ORDER = "measured", "static model", "config order"
WARPGROUP_THREADS = 128
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Candidate:
    """A config that compiled, as a timer sees it: the kernel, its traced and compiled
    forms, and the arrays to run it on."""

    index: int
    config: Config
    kernel: Kernel
    traced: Traced
    compiled: CompiledKernel
    args: tuple


Timer = Callable[[Candidate], float]


def device_timer(candidate: Candidate, *, repeats: int = 20, rounds: int = 3,
                 library: ctypes.CDLL | None = None,
                 launch: Callable[[Candidate], object] | None = None) -> float:
    """Seconds per launch of the candidate on the GPU: after a warm-up launch, `rounds`
    rounds of `repeats` launches, each launch's device time read from the CUDA events the
    launcher records around it (launcher.kernel_timer); the median over rounds of the mean.

    `launch` runs the candidate once (default: the jitted call, the launcher's custom call,
    as any call runs) through `library` (default: the launcher registered for CUDA). When
    the kernel has no cubin, the launcher cannot be built, or no launch reached its timing
    (the call went another way), the host clock of the back-to-back launches until their
    results are ready stands in."""
    import jax

    if launch is None:
        run = jax.jit(candidate.kernel)
        launch = lambda c: run(*c.args)  # noqa: E731
    jax.block_until_ready(launch(candidate))  # compiles, registers, loads the module
    rounds_ms = [_event_milliseconds(candidate, launch, library, repeats)
                 for _ in range(rounds)]
    if all(ms is not None for ms in rounds_ms):
        return statistics.median(rounds_ms) / 1e3
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(repeats):
            result = launch(candidate)
        jax.block_until_ready(result)
        times.append((time.perf_counter() - start) / repeats)
    return statistics.median(times)


def _event_milliseconds(candidate: Candidate, launch: Callable[[Candidate], object],
                        library: ctypes.CDLL | None, repeats: int) -> float | None:
    """The mean device time (ms) of `repeats` launches by the launcher's events; None when
    the launcher has no event times for the kernel (see device_timer)."""
    import jax

    cubin = candidate.compiled.cubin
    if cubin is None:
        return None
    try:
        library = launcher.load(cache_directory()) if library is None else library
    except launcher.LauncherBuildError:
        return None
    with launcher.kernel_timer(library, candidate.compiled.signature.name, cubin) as times:
        for _ in range(repeats):
            result = launch(candidate)
        jax.block_until_ready(result)
    return sum(times) / len(times) if times else None


def default_timer() -> Timer | None:
    """The device timer when this process has a CUDA backend, else None (static model)."""
    return device_timer if cuda_backend_present() else None


KeyFunction = Callable[..., object]


class Autotuned:
    """A kernel factory under `@sd.autotune`: call it like the kernel it makes."""

    def __init__(self, factory: Callable[[Config], Kernel], configs: tuple[Config, ...],
                 key: Sequence[str] | KeyFunction | None, dims: tuple[str, ...] | None,
                 timer: Timer | None, verbose: bool | None, cache: bool) -> None:
        functools.update_wrapper(self, factory)
        self.factory = factory
        self.configs = configs
        self.key = key
        self.dims = dims
        self.timer = timer
        self.verbose = verbose
        self.cache = cache
        self.name = factory.__name__
        self.report: AutotuneReport | None = None  # the last selection's
        self._kernels: dict[int, Kernel | Exception] = {}
        self._chosen: dict[object, tuple[Config, Kernel, AutotuneReport]] = {}

    def __repr__(self) -> str:
        return f"<smalti autotuned {self.name} over {len(self.configs)} configs>"

    def __call__(self, *args: Any) -> Any:
        """Run the chosen kernel on `args` (tuning first, for a key not seen yet)."""
        _, kernel = self.select(*args)
        return kernel(*args)

    def compile(self, *args: Any) -> tuple[Traced, CompiledKernel]:
        """The chosen kernel traced and compiled for `args` (arrays or ShapeDtypeStructs)."""
        _, kernel = self.select(*args)
        return kernel.compile(*args)

    def select(self, *args: Any) -> tuple[Config, Kernel]:
        """The config chosen for the key of `args`, and its kernel: from memory, from the
        on-disk cache (compiling no other config), or by tuning."""
        specs = tuple(spec_of(a, f"argument #{i} of {self.name}") for i, a in enumerate(args))
        key = self.key_of(specs)
        if key in self._chosen:
            config, kernel, self.report = self._chosen[key]
            return config, kernel
        report = self._cached(key) if self.cache else None
        if report is not None and isinstance(
                self._evaluate(report.chosen.index, report.chosen.config, args), Pruned):
            report = None  # the cached choice no longer compiles: tune again
        if report is None:
            report = self.tune(*args, key=key)
            if self.cache:
                self._store(key, report)
        index = report.chosen.index
        kernel = self._kernel(index)
        assert isinstance(kernel, Kernel)
        self._chosen[key] = (self.configs[index], kernel, report)
        self.report = report
        if self._verbose():
            print(report.format(), file=sys.stderr)
        return self.configs[index], kernel

    def tune(self, *args: Any, key: object = None) -> AutotuneReport:
        """Build, compile and rank every config for `args`; AutotuneError if all are pruned."""
        key = self.key_of(tuple(spec_of(a, f"argument #{i} of {self.name}")
                                for i, a in enumerate(args))) if key is None else key
        candidates: list[Candidate] = []
        pruned: list[Pruned] = []
        for index, config in enumerate(self.configs):
            outcome = self._evaluate(index, config, args)
            (pruned if isinstance(outcome, Pruned) else candidates).append(outcome)
        if not candidates:
            raise AutotuneError(self.name, key, tuple(pruned))
        timer = self.timer if self.timer is not None else default_timer()
        if timer is not None:
            ranked = [Ranked(c.index, c.config, seconds, f"{seconds * 1e6:.2f} us per launch")
                      for c, seconds in zip(candidates, measure(timer, candidates, args),
                                            strict=True)]
            method = MEASURED
        else:
            ranked, method = rank_statically(candidates)
        ranked.sort(key=lambda r: (r.score, r.index))
        return AutotuneReport(self.name, key, method, tuple(ranked), tuple(pruned))

    def key_of(self, specs: tuple[ArraySpec, ...]) -> object:
        """The tuning key of a call: the `key` names' sizes (bound by `dims`), or `key`'s
        value on the specs, or every shape; always with the inputs' dtypes."""
        dtypes = tuple(s.dtype.name for s in specs)
        if self.key is None:
            return tuple(s.shape for s in specs), dtypes
        if callable(self.key):
            value = self.key(*specs)
            try:
                hash(value)
            except TypeError:
                raise TypeError(f"autotune {self.name}: key(...) must return a hashable "
                                f"value, got {value!r}") from None
            return value, dtypes
        return tuple(self._sizes(specs)[name] for name in self.key), dtypes

    def _sizes(self, specs: tuple[ArraySpec, ...]) -> dict[str, int]:
        """Each dimension name of `dims` bound to its size in the call (ValueError when the
        call gives one name two sizes, or has other ranks than `dims` says)."""
        assert self.dims is not None
        if len(self.dims) != len(specs):
            raise ValueError(f"autotune {self.name}: dims names {len(self.dims)} inputs, the "
                             f"call has {len(specs)}")
        sizes: dict[str, int] = {}
        for position, (names, spec) in enumerate(zip(self.dims, specs, strict=True)):
            axes = names.split()
            if len(axes) != len(spec.shape):
                raise ValueError(f"autotune {self.name}: dims[{position}] = {names!r} names "
                                 f"{len(axes)} axes; argument #{position} has shape "
                                 f"{spec.shape}")
            for axis, size in zip(axes, spec.shape, strict=True):
                if sizes.setdefault(axis, size) != size:
                    raise ValueError(f"autotune {self.name}: dimension {axis} is "
                                     f"{sizes[axis]} and {size} in the same call")
        return sizes

    def _evaluate(self, index: int, config: Config, args: tuple) -> Candidate | Pruned:
        kernel = self._kernel(index)
        if isinstance(kernel, Exception):
            return pruned_for(index, config, kernel)
        code = kernel.fn.__code__
        where = f"{code.co_filename}:{code.co_firstlineno}"  # the kernel's line
        try:
            with warnings.catch_warnings():  # reported below, as a pruned config
                warnings.simplefilter("ignore", KernelQualityWarning)
                traced, compiled = kernel.compile(*args)
        except Exception as error:  # a config's failure is reported, never raised
            pruned = pruned_for(index, config, error)
            return pruned if pruned.where else dataclasses.replace(pruned, where=where)
        if traced.smem_bytes > MAX_SMEM_BYTES:  # scoped allocations above the declared
            return Pruned(index, config, Reason.SHARED_MEMORY,
                          f"kernel {kernel.name} uses {traced.smem_bytes} bytes of shared "
                          f"memory at its peak, more than {MAX_SMEM_BYTES}", where)
        report = compiled.report
        if report is not None and (report.spill_stores or report.spill_loads):
            return Pruned(index, config, Reason.SPILLS,
                          f"kernel {kernel.name} {quality_problems(report)[0]}", where)
        if report is not None and report.performance_failures:
            return Pruned(index, config, Reason.PTXAS_WARNING,
                          f"kernel {kernel.name}: " + "; ".join(report.performance_failures),
                          where)
        return Candidate(index, config, kernel, traced, compiled, args)

    def _kernel(self, index: int) -> Kernel | Exception:
        """The factory's kernel for config `index` (built once), or why it could not be."""
        if index not in self._kernels:
            try:
                kernel = self.factory(self.configs[index])
                if not isinstance(kernel, Kernel):
                    raise TypeError(f"autotune {self.name}: the factory must return an "
                                    f"sd.kernel, got {type(kernel).__name__}")
                self._kernels[index] = kernel
            except Exception as error:  # reported when the config is evaluated
                self._kernels[index] = error
        return self._kernels[index]

    def _store(self, key: object, report: AutotuneReport) -> None:
        """Keep the choice on disk; a cache that cannot be written is only a warning."""
        choice = Choice(report.chosen.index, report.chosen.config.as_dict(), report.method,
                        report.lines())
        try:
            ChoiceCache().put(self._choice_key(key), choice)
        except OSError as error:
            _log.warning("smalti: cannot store the autotune choice of %s: %s", self.name,
                         error)

    def _cached(self, key: object) -> AutotuneReport | None:
        choice = ChoiceCache().get(self._choice_key(key))
        if choice is None or not 0 <= choice.index < len(self.configs) \
                or self.configs[choice.index].as_dict() != choice.config:
            return None
        if isinstance(self._kernel(choice.index), Exception):
            return None
        config = self.configs[choice.index]
        return AutotuneReport(self.name, key, choice.method,
                              (Ranked(choice.index, config, 0.0, "cached"),), (),
                              from_cache=True, cached=choice.report)

    def _choice_key(self, key: object) -> str:
        return choice_key(self._identity, key, self._arch())

    @functools.cached_property
    def _identity(self) -> str:
        """The factory's name, a hash of its source and the configs: a choice made for other
        code or another list of configs is not reused."""
        try:
            source = inspect.getsource(self.factory)
        except (OSError, TypeError):
            source = self.factory.__code__.co_code.hex()
        configs = json.dumps([c.as_dict() for c in self.configs], sort_keys=True)
        digest = hashlib.sha256(f"{source}\n{configs}".encode()).hexdigest()[:16]
        return f"{self.factory.__module__}.{self.factory.__qualname__}:{digest}"

    def _arch(self) -> str:
        """The arch of the factory's kernels (the first config that builds)."""
        for index in range(len(self.configs)):
            kernel = self._kernel(index)
            if isinstance(kernel, Kernel):
                return kernel.arch
        return "unknown"

    def _verbose(self) -> bool:
        if self.verbose is not None:
            return self.verbose
        return os.environ.get(VERBOSE_VARIABLE, "") not in ("", "0")


def rank_statically(candidates: list[Candidate]) -> tuple[list[Ranked], str]:
    """Score each candidate with the static model (by its main loop when every candidate
    has one, else by all its SASS); by config order when ptxas made no cubin."""
    code = {c.index: machine_code(c.compiled) for c in candidates}
    if any(found is None for found in code.values()):
        return [Ranked(c.index, c.config, float(c.index), "no cubin (ptxas not found)")
                for c in candidates], CONFIG_ORDER
    use_loop = all(found.loop is not None and found.loop.macs for found in code.values())
    ranked = []
    for c in candidates:
        found = code[c.index]
        warpgroups = c.kernel.options.warpgroups
        loop = found.loop
        model = estimate(registers=found.registers, threads=WARPGROUP_THREADS * warpgroups,
                         shared_bytes=max(c.traced.smem_bytes, found.shared_bytes),
                         ctas=math.prod(c.traced.grid),
                         loop_instructions=None if loop is None else loop.length,
                         loop_macs=None if loop is None else loop.macs,
                         sass_instructions=found.sass_instructions, warpgroups=warpgroups,
                         use_loop=use_loop)
        ranked.append(Ranked(c.index, c.config, model.score, model.describe()))
    return ranked, STATIC_MODEL


def measure(timer: Timer, candidates: list[Candidate], args: tuple) -> list[float]:
    """Each candidate's time by `timer`, on concrete arrays and run eagerly, even while an
    enclosing jax.jit traces the call."""
    import jax

    with jax.ensure_compile_time_eval():
        inputs = concrete_inputs(args)
        return [float(timer(dataclasses.replace(c, args=inputs))) for c in candidates]


def concrete_inputs(args: tuple) -> tuple:
    """Arrays to time a kernel on: the call's own where they are concrete, else random
    arrays of their shapes and dtypes (inside jax.jit the arguments are tracers)."""
    import jax

    rng = np.random.default_rng(0)
    inputs = []
    for value in args:
        if isinstance(value, np.ndarray | jax.Array) and not isinstance(value, jax.core.Tracer):
            inputs.append(value)
        else:
            dtype = np.dtype(value.dtype)
            data = rng.standard_normal(value.shape) if dtype.kind == "f" else \
                rng.integers(0, 8, value.shape)
            inputs.append(jax.device_put(data.astype(dtype)))
    return tuple(inputs)


def autotune(*, configs: Sequence[Config | Mapping[str, object]],
             key: Sequence[str] | KeyFunction | None = None,
             dims: Sequence[str] | None = None, timer: Timer | None = None,
             verbose: bool | None = None, cache: bool = True
             ) -> Callable[[Callable[[Config], Kernel]], Autotuned]:
    """Decorate a kernel factory `make(config) -> sd.Kernel` into an autotuned kernel.

    `configs` are sd.Config values (or dicts); the factory reads them as `config.name`.
    `key` says when to tune again: a list of dimension names, bound to the inputs' axes by
    `dims` (one string per input, e.g. `dims=("M K", "K N")`); or a callable of the inputs'
    specs (.shape, .dtype) returning a hashable value; by default every input's shape. The
    inputs' dtypes are always part of the key. `timer(candidate) -> seconds` ranks by
    measurement (default: on a GPU, `device_timer`; without one, the static model).
    `verbose` (default: $SMALTI_AUTOTUNE_VERBOSE) prints each report to stderr; `cache=False`
    keeps choices in memory only."""
    if isinstance(configs, Config | Mapping) or not configs:
        raise ValueError("autotune needs configs=[sd.Config(...), ...]: a non-empty list")
    values = tuple(c if isinstance(c, Config) else Config(c) for c in configs)
    if key is not None and not callable(key):
        if isinstance(key, str) or not all(isinstance(k, str) for k in key):
            raise TypeError(f"autotune key must be a list of dimension names or a callable, "
                            f"got {key!r}")
        if dims is None:
            raise ValueError(f"autotune key={list(key)!r} names dimensions: say which axes "
                             "they are with dims=, one string per input (e.g. "
                             "dims=('M K', 'K N'))")
        named = {axis for names in dims for axis in names.split()}
        if missing := [k for k in key if k not in named]:
            raise ValueError(f"autotune key names {missing} are not in dims={list(dims)!r}")
    dims_value = None if dims is None else tuple(dims)

    def decorate(factory: Callable[[Config], Kernel]) -> Autotuned:
        if isinstance(factory, Kernel):
            raise TypeError("@sd.autotune decorates a kernel factory `def make(config): ... "
                            "return kernel`, not an sd.kernel: the grid, shared memory and "
                            "warpgroups usually depend on the config")
        return Autotuned(factory, values, key, dims_value, timer, verbose, cache)

    return decorate
