"""`@sd.autotune` on a CPU: every pruning reason reported with its config, reason and line;
the static model's ranking of real matmul configs; measured ranking through a fake timer;
the on-disk choice cache (hits compile only the chosen config; racing writers leave whole
entries); the error when every config is pruned; the chosen kernel's numbers."""

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
from smalti.dsl.autotune_report import Reason
from smalti.ptx.sass import main_loop
from smalti.ptx.toolchain import find_tool
from smalti.runtime.autotune_cache import Choice, ChoiceCache
from smalti.runtime.cache import compiler_version
from smalti.schedule.autotune_model import occupancy
from tests.dsl_helpers import isolated_cache, line_of, load_example  # noqa: F401

F32, BF16 = jnp.float32, jnp.bfloat16
THIS_FILE = __file__
X = jax.ShapeDtypeStruct((128, 128), F32)
ROOT = Path(__file__).resolve().parents[1]


def make_scale(config: sd.Config) -> sd.Kernel:
    """out = 2 x, or, as `config.kind` says, a kernel that fails in one way."""
    out_shape = lambda x: jax.ShapeDtypeStruct(x.shape, F32)  # noqa: E731
    name = f"scale_{config.kind}"
    if config.kind == "factory":
        raise ValueError("the factory refuses this config")  # the factory's refusal
    if config.kind == "smem":
        smem = [sd.SMEM((256, 256), F32)]  # 256 KiB
        return sd.kernel(out_shape=out_shape, smem=smem, name=name)(
            lambda x_ref, o_ref, s_ref: None)

    def scale(x_ref, o_ref):
        match config.kind:
            case "conflict":
                y = sd.layout_cast(x_ref[...], "#smalti.splat")  # the splat cast
                o_ref[...] = y + 1.0
            case "trace":
                o_ref[...] = x_ref[0:256, :]  # past the end
            case "spills":  # x, e and t live across the sum: 384 f32 per thread
                x = x_ref[...]
                e, t = sd.exp(x), sd.tanh(x)
                s = (x * e * t).sum(axis=1)[:, None]
                o_ref[...] = x * s + e * s + t * s
            case _:
                o_ref[...] = x_ref[...] * 2.0  # refused by the fake ptxas when 'ptxas'

    return sd.kernel(out_shape=out_shape, name=name)(scale)


@pytest.fixture
def fake_ptxas(tmp_path: Path, monkeypatch):
    """SMALTI_PTXAS: the real ptxas, but refusing kernels named scale_ptxas and saying that
    kernels named scale_serial serialise their wgmma (C7510). The compiler version (which
    names the ptxas in use) is computed anew under it and after it."""
    script = tmp_path / "ptxas"
    script.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        if grep -q 'scale_ptxas' kernel.ptx; then
            echo "ptxas kernel.ptx, line 3; error   : refused by the test's ptxas"
            exit 1
        fi
        {find_tool("ptxas")} "$@" || exit $?
        if grep -q 'scale_serial' kernel.ptx; then
            echo "ptxas info    : (C7510) Potential Performance Loss: wgmma.mma_async" \
                 "instructions are serialized in the test's ptxas"
        fi
    """))
    script.chmod(0o755)
    monkeypatch.setenv("SMALTI_PTXAS", str(script))
    compiler_version.cache_clear()
    yield
    monkeypatch.undo()
    compiler_version.cache_clear()


KINDS = ["smem", "spills", "ptxas", "serial", "conflict", "trace", "factory", "good"]


def test_each_config_that_cannot_compile_is_pruned_with_its_reason_and_line(fake_ptxas):
    tuned = sd.autotune(configs=[{"kind": kind} for kind in KINDS], cache=False)(make_scale)
    report = tuned.tune(X)
    assert [r.config.kind for r in report.ranked] == ["good"]
    pruned = {p.config.kind: p for p in report.pruned}
    assert list(pruned) == KINDS[:-1]  # in config order, none dropped

    smem = pruned["smem"]
    assert smem.reason is Reason.SHARED_MEMORY
    assert smem.where == f"{THIS_FILE}:{line_of('256 KiB', make_scale)}:17"
    assert "declares 262144 bytes of shared memory" in smem.message

    spills = pruned["spills"]
    assert spills.reason is Reason.SPILLS
    assert spills.where == f"{THIS_FILE}:{line_of('def scale', make_scale)}"
    assert spills.message.startswith("kernel scale_spills spills registers to local memory")

    refused = pruned["ptxas"]
    assert refused.reason is Reason.PTXAS_ERROR
    assert "refused by the test's ptxas" in refused.message

    serial = pruned["serial"]
    assert serial.reason is Reason.PTXAS_WARNING
    assert serial.message == ("kernel scale_serial: (C7510) Potential Performance Loss: "
                              "wgmma.mma_async instructions are serialized in the test's "
                              "ptxas")

    conflict = pruned["conflict"]
    assert conflict.reason is Reason.INFERENCE_CONFLICT
    assert conflict.where.startswith(f"{THIS_FILE}:{line_of('splat cast', make_scale)}:")
    assert "no relayout resolves it" in conflict.message

    trace = pruned["trace"]
    assert trace.reason is Reason.TRACE_ERROR
    assert trace.where.startswith(f"{THIS_FILE}:{line_of('past the end', make_scale)}:")

    factory = pruned["factory"]
    assert factory.reason is Reason.TRACE_ERROR
    assert factory.where == f"{THIS_FILE}:{line_of('the factory', make_scale)}"
    assert factory.message == "the factory refuses this config"

    text = report.format()
    for p in report.pruned:  # the report names each config, its reason and its line
        assert f"pruned #{p.index} Config(kind={p.config.kind!r}): {p.reason.value}" in text
    assert f"at {THIS_FILE}:{line_of('past the end', make_scale)}:" in text
    assert text.splitlines()[1].startswith("  chosen #7 Config(kind='good'): ")


def test_when_every_config_is_pruned_one_error_lists_them_all():
    tuned = sd.autotune(configs=[{"kind": "smem"}, {"kind": "trace"}, {"kind": "conflict"}],
                        cache=False)(make_scale)
    with pytest.raises(sd.AutotuneError) as info:
        tuned(np.zeros((128, 128), np.float32))
    message = str(info.value)
    assert "every one of the 3 configs was pruned" in message, message
    for index, reason in enumerate([Reason.SHARED_MEMORY, Reason.TRACE_ERROR,
                                    Reason.INFERENCE_CONFLICT]):
        assert f"pruned #{index} Config(kind=" in message and reason.value in message
    assert [p.reason for p in info.value.pruned] == [Reason.SHARED_MEMORY, Reason.TRACE_ERROR,
                                                     Reason.INFERENCE_CONFLICT]


def test_measured_ranking_uses_the_timer_and_breaks_ties_by_config_order():
    seconds = {0: 2e-6, 1: 1e-6, 2: 1e-6}
    configs = [{"kind": "good", "n": n} for n in range(3)]
    tuned = sd.autotune(configs=configs, cache=False,
                        timer=lambda candidate: seconds[candidate.index])(make_scale)
    report = tuned.tune(X)
    assert report.method == "measured"
    assert [r.index for r in report.ranked] == [1, 2, 0]
    assert report.ranked[0].details == "1.00 us per launch"


def test_inside_jit_the_timer_runs_the_kernel_on_concrete_arrays():
    """Under jax.jit the call's arguments are tracers: the timer gets random arrays of
    their shapes and can launch the kernel (as device_timer does, on a GPU)."""
    outputs = {}

    def timer(candidate):
        assert not any(isinstance(a, jax.core.Tracer) for a in candidate.args)
        outputs[candidate.index] = np.asarray(candidate.kernel(*candidate.args))
        return float(candidate.index)

    tuned = sd.autotune(configs=[{"kind": "good"}, {"kind": "good", "n": 1}], cache=False,
                        timer=timer)(make_scale)
    x = np.arange(64 * 128, dtype=np.float32).reshape(64, 128)
    np.testing.assert_array_equal(np.asarray(jax.jit(tuned)(x)), 2 * x)
    assert sorted(outputs) == [0, 1] and outputs[0].shape == (64, 128)
    assert tuned.report.method == "measured"


def test_verbose_prints_the_report(monkeypatch, capsys):
    tuned = sd.autotune(configs=[{"kind": "good"}, {"kind": "trace"}],
                        timer=lambda candidate: 1.0)(make_scale)
    monkeypatch.setenv("SMALTI_AUTOTUNE_VERBOSE", "1")
    tuned.select(X)
    err = capsys.readouterr().err
    assert "chosen #0 Config(kind='good')" in err
    assert "pruned #1 Config(kind='trace'): tracing error at" in err


# The static model on the matmul of examples/matmul_autotuned.py.

A128 = jax.ShapeDtypeStruct((128, 128), BF16)


@pytest.fixture(scope="module")
def example():
    return load_example("matmul_autotuned")


def test_the_static_model_ranks_real_matmul_configs(example):
    """128x128 (@) 256x128: one CTA's work is the whole time, so 64x128 tiles on two SMs
    win, then the 4-stage loop (fewer SASS per K tile) over the 2-stage one. At 2048x2048,
    every SM is busy: 3 CTAs per SM overlap one's issue with another's HGMMAs and both
    tensor-bound configs tie (config order breaks it); 4 stages fit one CTA per SM only."""
    small = example.matmul.tune(jax.ShapeDtypeStruct((128, 256), BF16),
                                jax.ShapeDtypeStruct((256, 128), BF16))
    assert small.method == "static model"
    assert [r.index for r in small.ranked] == [2, 1, 0]
    assert [p.index for p in small.pruned] == [3]
    assert small.pruned[0].reason is Reason.SHARED_MEMORY
    assert small.pruned[0].where.startswith(f"{example.__file__}:")
    best = small.ranked[0].details
    assert "2 CTAs in 1 wave(s), main loop" in best and "per 1k MACs" in best, best
    assert all(a.score < b.score
               for a, b in zip(small.ranked, small.ranked[1:], strict=False))

    large = example.matmul.tune(jax.ShapeDtypeStruct((2048, 256), BF16),
                                jax.ShapeDtypeStruct((256, 2048), BF16))
    assert [r.index for r in large.ranked] == [0, 2, 1]
    assert large.ranked[0].score == large.ranked[1].score < large.ranked[2].score
    assert "1 CTA/SM (by shared memory), 256 CTAs in 2 wave(s)" in large.ranked[2].details


def test_equal_configs_tie_and_keep_their_order(example):
    same = example.CONFIGS[0]
    tuned = sd.autotune(configs=[same, dict(same)], cache=False)(example.matmul.factory)
    report = tuned.tune(A128, A128)
    assert report.ranked[0].score == report.ranked[1].score
    assert [r.index for r in report.ranked] == [0, 1]


def test_occupancy_is_bounded_by_registers_shared_memory_and_threads():
    assert occupancy(128, 166, 66560).ctas_per_sm == 3  # 166 -> 168 per thread: 12 warps
    assert occupancy(128, 166, 66560).limited_by == "registers"
    assert occupancy(128, 90, 132096).limited_by == "shared memory"
    assert occupancy(384, 168, 0).ctas_per_sm == 1
    assert occupancy(128, 32, 0).ctas_per_sm == 16  # 2048 threads


def test_the_chosen_kernel_computes_the_matmul(example):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 128)).astype(BF16)
    b = rng.standard_normal((128, 128)).astype(BF16)
    got = np.asarray(jax.jit(example.matmul)(a, b), np.float32)
    assert example.matmul.report.chosen.config == example.CONFIGS[2]
    want = a.astype(np.float64) @ b.astype(np.float64)
    ulp = np.abs(want.astype(BF16).astype(np.float32)) * 2.0**-7
    assert (np.abs(got - want) <= ulp + 1e-5 * np.abs(a.astype(np.float64)) @ np.abs(
        b.astype(np.float64))).all()


# The choice cache.


def test_a_cached_choice_compiles_only_the_chosen_config():
    built = []

    def make(config):
        built.append(config.kind)
        return make_scale(config)

    configs = [{"kind": "trace"}, {"kind": "good"}, {"kind": "good", "copy": 1}]
    first = sd.autotune(configs=configs, timer=lambda c: float(3 - c.index))(make)
    first(np.ones((128, 128), np.float32))
    assert first.report.chosen.index == 2 and not first.report.from_cache
    assert sorted(built) == ["good", "good", "trace"]

    built.clear()  # a new process: a new Autotuned over the same factory and configs
    second = sd.autotune(configs=configs, timer=lambda c: pytest.fail("tuned again"))(make)
    out = second(np.ones((128, 128), np.float32))
    np.testing.assert_array_equal(np.asarray(out), 2.0)
    assert second.report.from_cache and second.report.chosen.index == 2
    assert built == ["trace", "good"]  # the arch from the first that builds, then the chosen
    assert second.report.lines() == first.report.lines()
    assert "from the autotune cache" in second.report.format()

    tuned_again = []  # another key, or another list of configs, tunes again
    second.timer = lambda c: tuned_again.append(c.index) or 1.0
    second.select(jax.ShapeDtypeStruct((64, 128), F32))
    assert not second.report.from_cache and tuned_again == [1, 2]
    other = sd.autotune(configs=configs[1:], timer=lambda c: 1.0)(make)
    other.select(X)
    assert not other.report.from_cache


def test_key_names_bind_dimensions_and_keep_dtypes():
    tuned = sd.autotune(configs=[{"kind": "good"}], key=["M"], dims=("M N",))(make_scale)
    first = tuned.key_of((sd.ArraySpec((128, 128), np.dtype(np.float32)),))
    again = tuned.key_of((sd.ArraySpec((128, 256), np.dtype(np.float32)),))
    assert first == again == ((128,), ("float32",))
    with pytest.raises(ValueError, match="names dimensions: say which axes"):
        sd.autotune(configs=[{"kind": "good"}], key=["M"])
    with pytest.raises(TypeError, match="not an sd\\.kernel"):
        sd.autotune(configs=[{}])(make_scale(sd.Config(kind="good")))


RACER = """
import sys
from pathlib import Path
from smalti.runtime.autotune_cache import Choice, ChoiceCache
from smalti.runtime.cache import compiler_version
cache, which, go = ChoiceCache(Path(sys.argv[1])), int(sys.argv[2]), Path(sys.argv[3])
while not go.exists():  # both writers start together, while the test reads
    pass
for i in range(150):
    cache.put("k" * 64, Choice(which, {"writer": which, "padding": "x" * 4096 * which},
                               "static model", tuple(f"line {n}" for n in range(50))))
"""


def test_racing_writers_leave_a_whole_entry(tmp_path):
    directory, go = tmp_path / "autotune", tmp_path / "go"
    racers = [subprocess.Popen([sys.executable, "-c", RACER, str(directory), str(which),
                                str(go)], env={**os.environ, "JAX_PLATFORMS": "cpu"})
              for which in (1, 2)]
    cache, seen = ChoiceCache(directory), set()
    go.touch()
    while any(r.poll() is None for r in racers):
        choice = cache.get("k" * 64)
        if choice is not None:  # never torn: one writer's whole entry
            assert choice.config["writer"] == choice.index
            assert len(choice.config["padding"]) == 4096 * choice.index
            seen.add(choice.index)
    assert [r.wait() for r in racers] == [0, 0]
    assert seen  # entries were read while both wrote
    final = cache.get("k" * 64)
    assert final is not None and final.index in (1, 2) and len(final.report) == 50
    assert not list(directory.glob(".*.tmp"))  # no temporary file left behind


TUNER = """
import sys
from pathlib import Path
import smalti.dsl as sd
from tests.test_autotune import X, make_scale
go = Path(sys.argv[1])
while not go.exists():  # both processes tune at once
    pass
tuned = sd.autotune(configs=[{"kind": "good"}, {"kind": "good", "copy": 1}])(make_scale)
tuned.select(X)
print(tuned.report.chosen.index, tuned.report.from_cache)
"""


def test_processes_tuning_at_once_agree_and_a_third_hits_the_cache(tmp_path):
    go = tmp_path / "go"
    tuners = [subprocess.Popen([sys.executable, "-c", TUNER, str(go)], cwd=ROOT,
                               stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "JAX_PLATFORMS": "cpu"}) for _ in range(2)]
    go.touch()
    outputs = [t.communicate(timeout=300)[0].split() for t in tuners]
    assert [t.returncode for t in tuners] == [0, 0]
    assert [chosen for chosen, _ in outputs] == ["0", "0"]  # alike, whoever wrote first
    entries = list((Path(os.environ["SMALTI_CACHE_DIR"]) / "autotune").iterdir())
    assert len(entries) == 1 and entries[0].suffix == ".json"  # one whole entry, no temp
    third = sd.autotune(configs=[{"kind": "good"}, {"kind": "good", "copy": 1}])(make_scale)
    third.select(X)
    assert third.report.from_cache and third.report.chosen.index == 0


def test_a_corrupted_entry_is_a_miss(tmp_path):
    cache = ChoiceCache(tmp_path)
    cache.put("a" * 64, Choice(0, {"kind": "good"}, "measured"))
    path = cache.path("a" * 64)
    path.write_bytes(path.read_bytes().replace(b"good", b"evil"))
    assert cache.get("a" * 64) is None and not path.exists()


SASS = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
.L_x_0:
        /*0010*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R2 ;
.L_x_1:
        /*0020*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24 ;
        /*0030*/                   HGMMA.64x256x16.F32.BF16 R88, gdesc[UR12], R88, gsb0 ;
        /*0040*/                   IADD3 R2, R2, 0x1, RZ ;
        /*0050*/               @P1 BRA `(.L_x_1) ;
        /*0060*/               @P2 BRA `(.L_x_0) ;
        /*0070*/                   EXIT ;
"""


def test_the_main_loop_is_the_innermost_loop_around_the_first_mma():
    loop = main_loop(SASS)
    assert loop is not None and loop.length == 4 and loop.hgmma == loop.mma == 2
    assert loop.macs == 64 * 128 * 16 + 64 * 256 * 16
    blackwell = main_loop(SASS.replace("HGMMA.64x128x16.F32.BF16", "UTCHMMA")
                          .replace("HGMMA.64x256x16.F32.BF16", "UTCHMMA"))
    assert blackwell is not None and blackwell.mma == 2 and blackwell.macs == 0
    assert main_loop(SASS.replace("HGMMA", "FFMA")) is None
