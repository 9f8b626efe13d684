"""Timing launches with CUDA events, without a GPU: the launcher brackets each launch of a
kernel being timed with cuEventRecord on its stream and reads cuEventElapsedTime, against the
recording stand-in for libcuda.so.1, whose events run on a deterministic per-stream clock that
each launch advances by the device time the test gives its kernel. Times come back exactly as
that clock dictates, per kernel (kernels timed at once never mix) and per stream; a failing
event call is an error naming it; the stand-in's events follow the driver API's rules; and
`sd.autotune`'s device timer ranks candidates by these device times."""

from __future__ import annotations

import ctypes
import functools
import re
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import smalti.dsl as sd
from smalti.dsl.autotune import Candidate, device_timer
from smalti.runtime import jax_integration, launcher
from smalti.runtime.launcher import LaunchError
from smalti.runtime.simulate import NUMPY_DTYPES
from tests import test_launcher_driver as driver_tests
from tests.launcher import fake_driver
from tests.test_launcher_driver import HOST_TARGET, STREAM, host_call, prepare

pytestmark = driver_tests.pytestmark
# Fixtures shared with test_launcher_driver: compiled kernels, the stand-in, the FFI handler.
compiled, driver, host_target = driver_tests.compiled, driver_tests.driver, \
    driver_tests.host_target

POINTWISE, MATMUL = "pointwise_f32.mlir", "matmul_128x128x64.mlir"
OTHER_STREAM = STREAM + 0x100000  # another stream of device 0 (bits 4-7 name the device)


def set_durations(monkeypatch, **milliseconds: float) -> None:
    """Each named kernel's device time per launch on the stand-in's clock."""
    monkeypatch.setenv(fake_driver.KERNEL_MS_VARIABLE,
                       fake_driver.kernel_milliseconds(milliseconds))


def identity(kernel) -> tuple[str, bytes]:
    """(entry name, cubin): how the launcher's timing knows a compiled kernel."""
    return kernel.signature.name, kernel.cubin


def test_each_timed_launch_reads_its_device_time_from_the_clock(compiled, library, driver,
                                                               monkeypatch):
    run = prepare(compiled(POINTWISE))
    name, cubin = identity(run.kernel)
    run.run(library)  # not timed: no events
    assert driver.calls("cuEventCreate") == driver.calls("cuEventRecord") == []
    launcher.start_timing(library, name, cubin)
    for milliseconds in (0.25, 0.5, 1.75):
        set_durations(monkeypatch, **{name: milliseconds})
        run.run(library)
    assert launcher.stop_timing(library, name, cubin) == [0.25, 0.5, 1.75]
    creates = driver.calls("cuEventCreate")
    assert [c["flags"] for c in creates] == [0] * 6  # timing enabled: a pair per launch
    names = [c["call"] for c in driver.calls() if c["call"] != "cuMemsetD8Async"]
    launches = [i for i, n in enumerate(names) if n == "cuLaunchKernelEx"]
    for i in launches[1:]:  # the timed ones: between a start and an end record
        assert names[i - 1] == names[i + 1] == "cuEventRecord"
    records = driver.calls("cuEventRecord")
    assert {r["stream"] for r in records} == {STREAM}
    assert [r["event"] for r in records] == [c["event"] for c in creates]
    assert len(driver.calls("cuEventSynchronize")) == 3
    assert [c["milliseconds"] for c in driver.calls("cuEventElapsedTime")] == [0.25, 0.5, 1.75]

    driver.clear()
    with launcher.kernel_timer(library, name, cubin) as times:
        run.run(library)
        assert times == []  # read when the block ends
    assert times == [1.75]
    assert driver.calls("cuEventCreate") == []  # the kernel's events are reused
    assert [r["event"] for r in driver.calls("cuEventRecord")] in (
        [c["event"] for c in creates[i:i + 2]] for i in range(0, 6, 2))
    launcher.reset(library)
    destroyed = {c["event"] for c in driver.calls("cuEventDestroy_v2") if c["result"] == 0}
    assert destroyed == {c["event"] for c in creates}


def test_kernels_timed_at_once_and_streams_do_not_mix(compiled, library, driver, monkeypatch):
    pointwise, matmul = prepare(compiled(POINTWISE)), prepare(compiled(MATMUL))
    set_durations(monkeypatch, **{pointwise.signature.name: 0.5, matmul.signature.name: 2.0})
    with launcher.kernel_timer(library, *identity(pointwise.kernel)) as pointwise_times, \
            launcher.kernel_timer(library, *identity(matmul.kernel)) as matmul_times:
        for stream in (STREAM, OTHER_STREAM, STREAM):
            launcher.launch_core(library, pointwise.attributes, pointwise.addresses(),
                                 stream=stream)
            launcher.launch_core(library, matmul.attributes, matmul.addresses(), stream=stream)
    assert pointwise_times == [0.5] * 3 and matmul_times == [2.0] * 3
    # A pair of events per kernel and launch in flight, each created on its stream's context.
    assert len(driver.calls("cuEventCreate")) == 2 * 3 * 2
    # Each record captured its own stream's clock, which both kernels advance.
    records = driver.calls("cuEventRecord")
    assert [r["stream"] for r in records] == [STREAM] * 4 + [OTHER_STREAM] * 4 + [STREAM] * 4
    for first in (0, 4, 8):
        clocks = [r["clock_ms"] - records[first]["clock_ms"] for r in records[first:first + 4]]
        assert clocks == [0.0, 0.5, 0.5, 2.5]
    assert records[8]["clock_ms"] - records[0]["clock_ms"] == 2.5  # STREAM's clock went on


def test_a_long_timing_keeps_the_last_launches_with_bounded_events(compiled, library, driver,
                                                                   monkeypatch):
    run = prepare(compiled(POINTWISE))
    name, cubin = identity(run.kernel)
    launcher.start_timing(library, name, cubin)
    for _ in range(launcher.TIMED_LAUNCHES):
        run.run(library)
    set_durations(monkeypatch, **{name: 0.75})
    for _ in range(2):
        run.run(library)
    times = launcher.stop_timing(library, name, cubin)
    assert len(times) == launcher.TIMED_LAUNCHES and times[-2:] == [0.75, 0.75]
    assert times[:-2] == [0.0] * (launcher.TIMED_LAUNCHES - 2)  # the first two were dropped
    # The dropped launches' events were recorded again: one pair more than the kept ones.
    assert len(driver.calls("cuEventCreate")) == 2 * (launcher.TIMED_LAUNCHES + 1)


def test_a_kernel_is_timed_once_at_a_time(compiled, library, driver):
    name, cubin = identity(compiled(POINTWISE))
    with pytest.raises(LaunchError, match=f"kernel {name} is not being timed") as caught:
        launcher.stop_timing(library, name, cubin)
    assert (caught.value.status, caught.value.call) == (launcher.STATUS_INVALID_ARGUMENT, "")
    launcher.start_timing(library, name, cubin)
    with pytest.raises(LaunchError, match=f"kernel {name} is already being timed"):
        launcher.start_timing(library, name, cubin)
    assert launcher.stop_timing(library, name, cubin) == []


@pytest.mark.parametrize("symbol,when", [("cuEventCreate", "launch"),
                                         ("cuEventRecord", "launch"),
                                         ("cuEventSynchronize", "stop"),
                                         ("cuEventElapsedTime", "stop")])
def test_a_failing_event_call_is_named(symbol, when, compiled, library, driver, monkeypatch):
    run = prepare(compiled(POINTWISE))
    name, cubin = identity(run.kernel)
    code, described = fake_driver.DEFAULT_FAILURES[symbol]
    launcher.start_timing(library, name, cubin)
    monkeypatch.setenv(fake_driver.FAIL_VARIABLE, symbol)
    failing = (lambda: run.run(library)) if when == "launch" else \
        (lambda: launcher.stop_timing(library, name, cubin))
    if when == "stop":
        monkeypatch.delenv(fake_driver.FAIL_VARIABLE)
        run.run(library)
        monkeypatch.setenv(fake_driver.FAIL_VARIABLE, symbol)
    with pytest.raises(LaunchError, match=re.escape(f"{symbol} failed: {described}")) as caught:
        failing()
    assert (caught.value.status, caught.value.call, caught.value.cuda_error) == (
        launcher.STATUS_DRIVER_ERROR, symbol, code)
    assert f"kernel {name}" in str(caught.value)
    monkeypatch.delenv(fake_driver.FAIL_VARIABLE)
    if when == "launch":  # the failed launch never ran; timing goes on
        assert driver.calls("cuLaunchKernelEx") == []
        run.run(library)
        assert launcher.stop_timing(library, name, cubin) == [0.0]
    else:  # timing stopped; the kernel's events are reusable
        launcher.start_timing(library, name, cubin)
        run.run(library)
        assert launcher.stop_timing(library, name, cubin) == [0.0]


def test_timing_through_the_xla_ffi_handler(compiled, host_target, library, driver,
                                            monkeypatch):
    """The handler XLA calls (here bound on the CPU platform, null stream) times the same."""
    kernel = compiled(POINTWISE)
    set_durations(monkeypatch, **{kernel.signature.name: 0.125})
    with launcher.kernel_timer(library, *identity(kernel)) as times:
        host_call(kernel, outputs=1)
        host_call(kernel, outputs=1)
    assert times == [0.125, 0.125]
    assert {r["stream"] for r in driver.calls("cuEventRecord")} == {0}


# ---------------------------------------------------------------------------------------
# The stand-in's events, called directly (a private copy) against the driver API's rules.

@pytest.fixture
def events(libcuda, tmp_path, monkeypatch) -> ctypes.CDLL:
    """A private copy of the stand-in, with device 0's context current on this thread."""
    monkeypatch.setenv(fake_driver.LOG_VARIABLE, str(tmp_path / "calls.jsonl"))
    monkeypatch.delenv(fake_driver.FAIL_VARIABLE, raising=False)
    copy = tmp_path / "copy" / "libcuda.so.1"
    copy.parent.mkdir()
    shutil.copy(libcuda, copy)
    fake = ctypes.CDLL(str(copy))
    context = ctypes.c_void_p()
    assert fake.cuStreamGetCtx(ctypes.c_void_p(STREAM), ctypes.byref(context)) == 0
    assert fake.cuCtxPushCurrent_v2(context) == 0
    yield fake
    assert fake.cuCtxPopCurrent_v2(ctypes.byref(context)) == 0


def create(fake: ctypes.CDLL, flags: int = 0) -> ctypes.c_void_p:
    event = ctypes.c_void_p()
    assert fake.cuEventCreate(ctypes.byref(event), flags) == 0
    return event


def elapsed(fake: ctypes.CDLL, start, end) -> tuple[int, float]:
    milliseconds = ctypes.c_float(-1)
    return fake.cuEventElapsedTime(ctypes.byref(milliseconds), start, end), milliseconds.value


def test_the_stand_ins_events_follow_the_driver_api(events):
    fake, stream = events, ctypes.c_void_p(STREAM)
    start, end = create(fake), create(fake)
    assert elapsed(fake, start, end)[0] == fake_driver.CUDA_ERROR_INVALID_HANDLE  # unrecorded
    assert fake.cuEventRecord(start, stream) == 0
    assert fake.cuEventRecord(end, stream) == 0
    assert elapsed(fake, start, end)[0] == fake_driver.CUDA_ERROR_NOT_READY  # not complete
    assert fake.cuEventSynchronize(end) == 0  # completes the stream's work up to `end`
    assert elapsed(fake, start, end) == (0, 0.0)
    untimed = create(fake, fake_driver.EVENT_DISABLE_TIMING)
    assert fake.cuEventRecord(untimed, stream) == 0
    assert fake.cuEventSynchronize(untimed) == 0
    assert elapsed(fake, start, untimed)[0] == fake_driver.CUDA_ERROR_INVALID_HANDLE
    other_device = ctypes.c_void_p(fake_driver.stream_of(1))
    assert fake.cuEventRecord(start, other_device) == fake_driver.CUDA_ERROR_INVALID_HANDLE
    assert fake.cuStreamSynchronize(stream) == 0
    for event in (start, end, untimed):
        assert fake.cuEventDestroy_v2(event) == 0
    assert fake.cuEventDestroy_v2(start) == fake_driver.CUDA_ERROR_INVALID_HANDLE
    assert fake.cuEventCreate(None, 0) == fake_driver.CUDA_ERROR_INVALID_VALUE


# ---------------------------------------------------------------------------------------
# sd.autotune's device timer on the stand-in.

X = jax.ShapeDtypeStruct((128, 128), jnp.float32)
DEVICE_MS = {"fast": 0.125, "slow": 0.5, "medium": 0.25}


def make_doubler(config: sd.Config) -> sd.Kernel:
    """out = 2 x, its kernel named after the config (the stand-in's durations are by name)."""
    def double(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0

    return sd.kernel(out_shape=lambda x: jax.ShapeDtypeStruct(x.shape, jnp.float32),
                     name=f"double_{config.speed}")(double)


def through_the_launcher(candidate) -> list:
    """One launch of the candidate through the XLA FFI handler (on the CPU platform)."""
    signature = candidate.compiled.signature
    outputs = [jax.ShapeDtypeStruct(a.shape, NUMPY_DTYPES[a.dtype])
               for a in signature.args[len(candidate.args):]]
    call = jax.ffi.ffi_call(HOST_TARGET, jax_integration.cuda_results(signature, outputs))
    return call(*candidate.args, **jax_integration.ffi_attributes(candidate.compiled))


def test_autotune_ranks_candidates_by_their_device_times(host_target, library, driver,
                                                         monkeypatch):
    set_durations(monkeypatch, **{f"double_{speed}": ms for speed, ms in DEVICE_MS.items()})
    timer = functools.partial(device_timer, repeats=4, rounds=3, library=library,
                              launch=through_the_launcher)
    tuned = sd.autotune(configs=[{"speed": speed} for speed in DEVICE_MS], cache=False,
                        timer=timer)(make_doubler)
    report = tuned.tune(np.ones((128, 128), np.float32))
    assert report.method == "measured"
    assert [r.config.speed for r in report.ranked] == ["fast", "medium", "slow"]
    assert [r.score for r in report.ranked] == [0.125e-3, 0.25e-3, 0.5e-3]
    assert report.ranked[0].details == "125.00 us per launch"
    # Per candidate: a warm-up launch, then 3 rounds of 4 timed ones.
    launches = [c["kernel"] for c in driver.calls("cuLaunchKernelEx")]
    assert launches == [f"double_{speed}" for speed in DEVICE_MS for _ in range(13)]
    assert len(driver.calls("cuEventElapsedTime")) == 3 * 3 * 4


def test_without_the_launcher_the_device_timer_falls_back_to_the_host_clock(library, driver):
    """A call that never reaches the launcher (here: the CPU simulator) has no event times."""
    config = sd.Config({"speed": "fast"})
    kernel = make_doubler(config)
    traced, code = kernel.compile(X)
    x = np.ones((128, 128), np.float32)
    candidate = Candidate(0, config, kernel, traced, code, (x,))
    seconds = device_timer(candidate, repeats=1, rounds=1, library=library)
    assert seconds > 0
    assert driver.calls() == []
