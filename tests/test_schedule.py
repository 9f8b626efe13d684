"""The collective-matmul schedule cost model (smalti/schedule), its kernel attribute
(`smalti.schedule`), the DSL's `record_schedule` and `smalti-opt --smalti-explain-schedule`."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from jaxlib.mlir import ir

import smalti.dsl as sd
from smalti.dialect.context import make_context
from smalti.dialect.diagnostics import DiagnosticError
from smalti.dialect.schedule_attr import SCHEDULE_ATTR, kernel_schedule, set_kernel_schedule
from smalti.schedule import (
    H100_SXM,
    CollectiveMatmulProblem,
    explain,
    plan_collective_matmul,
    schedule_fields,
    schedule_from_fields,
)
from smalti.schedule.hardware import CONSTANT_SOURCES

ROOT = Path(__file__).resolve().parents[1]
AG, RS = "all_gather_matmul", "matmul_reduce_scatter"
S = jax.ShapeDtypeStruct


def big(kind: str, devices: int, **changes: object) -> CollectiveMatmulProblem:
    """A realistic size: 1024 rows per device, k = n = 4096, a persistent kernel on 132 SMs."""
    problem = CollectiveMatmulProblem(kind, m=1024, n=4096, k=4096, devices=devices,
                                      ctas=132)
    return dataclasses.replace(problem, **changes)


def best_of(schedule, order: str):
    return next(c for c in schedule.candidates if c.order == order)


@pytest.mark.parametrize("kind", [AG, RS])
@pytest.mark.parametrize("devices", [2, 4, 8])
def test_overlap_beats_no_overlap_when_compute_and_transfer_are_comparable(kind, devices):
    schedule = plan_collective_matmul(big(kind, devices))
    # A 1024 x 4096 bf16 shard takes ~19 us over NVLink; its matmul ~36 us: comparable.
    assert schedule.predicted_s < 0.8 * schedule.no_overlap_s
    for candidate in schedule.candidates:
        assert candidate.predicted_s <= candidate.no_overlap_s * (1 + 1e-12)


@pytest.mark.parametrize("kind", [AG, RS])
@pytest.mark.parametrize("devices", [4, 8])
@pytest.mark.parametrize("dtype", ["bf16", "f8E4M3FN"])
def test_the_naive_order_loses_for_four_devices_or_more(kind, devices, dtype):
    schedule = plan_collective_matmul(big(kind, devices, dtype=dtype))
    assert schedule.order != "naive"
    naive = best_of(schedule, "naive")
    assert naive.predicted_s > 1.3 * schedule.predicted_s
    if kind == AG:  # devices - 1 readers share one peer's outgoing link in every step
        assert max(step.readers for step in naive.steps) == devices - 1
        assert all(step.readers == 1 for step in schedule.choice.steps)
    else:  # the owner of each block receives every partial at once, after its compute
        assert naive.tail_s > 1.5 * schedule.choice.tail_s
    assert "naive order" in explain(schedule)


def test_ring_orders_and_xor_tie_and_ties_break_deterministically():
    schedule = plan_collective_matmul(big(AG, 8))
    ring, backward, xor = (best_of(schedule, o) for o in
                           ("ring_forward", "ring_backward", "xor"))
    assert ring.predicted_s == backward.predicted_s == xor.predicted_s
    assert schedule.order == "ring_forward"
    assert schedule.source_offsets == tuple(range(8))
    assert plan_collective_matmul(big(AG, 8)) == schedule
    assert xor.source_offsets is None  # me ^ s is no fixed offset
    assert xor.sources[3] == tuple(3 ^ s for s in range(8))
    # Reduce-scatter computes its own block last.
    rs = plan_collective_matmul(big(RS, 4))
    assert rs.source_offsets == (1, 2, 3, 0)
    # Without a power-of-2 device count there is no xor order.
    odd = plan_collective_matmul(big(AG, 3, m=256))
    assert {c.order for c in odd.candidates} == {"ring_forward", "ring_backward", "naive"}


def test_chunk_choice_follows_compute_per_byte():
    link_bound = CollectiveMatmulProblem(AG, m=512, n=128, k=128, devices=4)
    compute_bound = dataclasses.replace(link_bound, n=4096, k=4096)
    small_n = plan_collective_matmul(link_bound)
    large_n = plan_collective_matmul(compute_bound)
    # Little compute per fetched byte: each chunk pays the NVLink latency, so tiny chunks
    # lose and the whole shard is one chunk.
    assert small_n.chunk_rows == 512
    tiny = next(c for c in small_n.candidates
                if c.order == small_n.order and c.chunk_rows == 64)
    assert tiny.predicted_s > 2 * small_n.predicted_s
    # Much compute per byte: fetches hide behind the tensor cores, and small chunks shorten
    # the fill (the first fetch, which nothing hides).
    assert large_n.chunk_rows < small_n.chunk_rows
    # With 132 CTAs a chunk must hold enough 64 x 256 tiles to fill the SMs.
    many = plan_collective_matmul(big(AG, 4))
    assert many.chunk_rows >= 512
    assert best_of(many, "ring_forward").chunk_rows == many.chunk_rows


def test_given_choices_are_evaluated_not_replaced():
    problem = big(RS, 8)
    given = plan_collective_matmul(problem, chunk_rows=256, order="naive")
    assert given.given and given.chunk_rows == 256 and given.order == "naive"
    assert len(given.candidates) == 1
    best = plan_collective_matmul(problem)
    assert given.predicted_s > best.predicted_s
    # Hand-written offsets, named when they match a named order.
    offsets = plan_collective_matmul(problem, chunk_rows=1024,
                                     source_offsets=(1, 2, 3, 4, 5, 6, 7, 0))
    assert offsets.order == "ring_forward" and offsets.choice == best.choice
    custom = plan_collective_matmul(problem, chunk_rows=1024,
                                    source_offsets=(3, 1, 2, 4, 5, 6, 7, 0))
    assert custom.order == "offsets" and custom.source_offsets == (3, 1, 2, 4, 5, 6, 7, 0)
    # Only the chunk given: the orders are searched with that chunk.
    chunk_only = plan_collective_matmul(problem, chunk_rows=512)
    assert not chunk_only.given
    assert {c.chunk_rows for c in chunk_only.candidates} == {512}
    assert "given (checked, not rewritten)" in explain(given)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: CollectiveMatmulProblem(AG, m=100, n=128, k=128, devices=4),
     "m = 100 rows is not a multiple of 64"),
    (lambda: CollectiveMatmulProblem(AG, m=128, n=128, k=128, devices=0),
     "devices must be a positive integer"),
    (lambda: CollectiveMatmulProblem(AG, m=128, n=128, k=128, devices=2, dtype="f64"),
     "unknown operand dtype 'f64'"),
    (lambda: CollectiveMatmulProblem("all_reduce_matmul", m=128, n=128, k=128, devices=2),
     "unknown collective matmul kind"),
    (lambda: CollectiveMatmulProblem(AG, m=128, n=0, k=128, devices=2),
     "n must be a positive integer"),
])
def test_impossible_problems_are_value_errors(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_impossible_choices_are_value_errors():
    problem = CollectiveMatmulProblem(AG, m=128, n=128, k=128, devices=4)
    with pytest.raises(ValueError, match="chunk_rows 96 must be a multiple of 64 that divides"):
        plan_collective_matmul(problem, chunk_rows=96)
    with pytest.raises(ValueError, match=r"must be a permutation of 0\.\.3"):
        plan_collective_matmul(problem, source_offsets=(0, 1, 1, 2))
    with pytest.raises(ValueError, match="must start with 0"):
        plan_collective_matmul(problem, source_offsets=(1, 0, 2, 3))
    with pytest.raises(ValueError, match="must end with 0"):
        plan_collective_matmul(dataclasses.replace(problem, kind=RS),
                               source_offsets=(0, 1, 2, 3))
    with pytest.raises(ValueError, match="xor order needs a power-of-2"):
        plan_collective_matmul(dataclasses.replace(problem, devices=3), order="xor")
    with pytest.raises(ValueError, match="unknown order 'spiral'"):
        plan_collective_matmul(problem, order="spiral")
    with pytest.raises(ValueError, match="does not visit peers in the source_offsets"):
        plan_collective_matmul(problem, order="ring_backward", source_offsets=(0, 1, 2, 3))


def test_fp8_counts_its_block_scales_and_runs_twice_as_fast():
    bf16 = CollectiveMatmulProblem(AG, m=128, n=128, k=256, devices=2)
    fp8 = dataclasses.replace(bf16, dtype="f8E4M3FN")
    assert bf16.a_row_bytes() == 512 and fp8.a_row_bytes() == 256 + 2 * 4
    assert H100_SXM.flops_per_s("f8E4M3FN") == pytest.approx(2 * H100_SXM.flops_per_s("bf16"),
                                                             rel=1e-3)
    assert plan_collective_matmul(big(AG, 4, dtype="f8E4M3FN")).choice.breakdown.compute_s \
        == pytest.approx(plan_collective_matmul(big(AG, 4)).choice.breakdown.compute_s / 2,
                         rel=0.1)


def test_every_constant_has_a_source():
    names = {name for name, _, _ in H100_SXM.constants()}
    assert names == set(CONSTANT_SOURCES)
    for _, _, source in H100_SXM.constants():
        assert source.split(":")[0] in {"datasheet", "hopper-blog", "datasheet/hopper-blog",
                                        "cuda-guide", "estimate"}


def test_explain_names_the_choice_the_bottleneck_the_runners_up_and_the_constants():
    schedule = plan_collective_matmul(CollectiveMatmulProblem(RS, m=128, n=128, k=128,
                                                              devices=4))
    text = explain(schedule)
    for expected in ("problem: matmul_reduce_scatter on 4 device(s)",
                     f"choice: chunk_rows={schedule.chunk_rows}, order=ring_forward",
                     "predicted: ", "without overlap: ", "bottleneck: ",
                     "steps of device ", "step 3: block ", "(own)",
                     "candidates (best first):", "ring_backward ties",
                     "nvlink_bytes_per_s = 450 GB/s", "semaphore_s = 3.00 us  [estimate"):
        assert expected in text, expected


def test_fields_round_trip_through_the_kernel_attribute():
    schedule = plan_collective_matmul(big(AG, 8, dtype="f8E4M3FN"))
    fields = schedule_fields(schedule)
    with make_context():
        module = ir.Module.parse("func.func @k() attributes {smalti.kernel, "
                                 "smalti.grid = array<i64: 1>} { return }")
        func = module.body.operations[0].operation
        assert kernel_schedule(func) is None
        set_kernel_schedule(func, fields)
        assert isinstance(func.attributes[SCHEDULE_ATTR], ir.DictAttr)
        assert "source_offsets = array<i64: 0, 1, 2, 3, 4, 5, 6, 7>" in str(func)
        read = kernel_schedule(func)
    assert read == fields
    again = schedule_from_fields(read)
    assert again.choice == schedule.choice and again.given


def test_malformed_attributes_are_errors_naming_the_kernel():
    with make_context():
        module = ir.Module.parse("func.func @mm() attributes {smalti.kernel, "
                                 "smalti.grid = array<i64: 1>, smalti.schedule = "
                                 "{m = 1.0 : f32}} { return }")
        func = module.body.operations[0].operation
        with pytest.raises(DiagnosticError, match=r"kernel @mm: 'smalti\.schedule' field 'm' "
                                                  r"must be an integer"):
            kernel_schedule(func)
        with pytest.raises(TypeError, match="schedule field 'x'"):
            set_kernel_schedule(func, {"x": 1.5})
    with pytest.raises(ValueError, match="unknown field"):
        schedule_from_fields({"kind": AG, "color": "red"})
    with pytest.raises(ValueError, match="needs 'source_offsets' or a named 'order'"):
        schedule_from_fields({"kind": AG, "m": 128, "n": 128, "k": 128, "devices": 2,
                              "dtype": "bf16", "chunk_rows": 64})


def test_record_schedule_stamps_the_traced_kernel():
    schedule = plan_collective_matmul(CollectiveMatmulProblem(AG, m=128, n=128, k=128,
                                                              devices=4))

    @sd.kernel(out_shape=lambda x: S(x.shape, x.dtype), mesh_axis="x")
    def ag(x_ref, out_ref):
        sd.record_schedule(schedule)
        out_ref[...] = x_ref[...]

    module = ag.trace(S((128, 128), jnp.float32), devices=4).module
    with module.context:
        func = next(op.operation for op in module.regions[0].blocks[0].operations
                    if op.operation.name == "func.func")
        assert kernel_schedule(func) == schedule_fields(schedule)

    with pytest.raises(ValueError, match="runs on 2 devices, but the recorded schedule is "
                                         "for 4"):
        ag.trace(S((128, 128), jnp.float32), devices=2)
    with pytest.raises(RuntimeError, match="only valid inside the body"):
        sd.record_schedule(schedule)


def test_explain_schedule_flag_leaves_the_ir_unchanged(tmp_path):
    source = ROOT / "lit_tests" / "tools" / "explain_schedule.mlir"
    plain = subprocess.run([sys.executable, "-m", "smalti.tools.opt", str(source),
                            "--split-input-file"], capture_output=True, text=True, cwd=ROOT)
    explained = subprocess.run([sys.executable, "-m", "smalti.tools.opt", str(source),
                                "--split-input-file", "--smalti-explain-schedule"],
                               capture_output=True, text=True, cwd=ROOT)
    assert plain.returncode == explained.returncode == 0, explained.stderr
    assert plain.stdout == explained.stdout
    assert "@ag_matmul: recorded schedule" in explained.stderr
    assert "@plain: no schedule recorded" in explained.stderr
