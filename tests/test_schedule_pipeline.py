"""The pipeline schedule model (smalti/schedule/pipeline.py), emit_pipeline's use of it when
max_concurrent_steps is None, its record in `smalti.schedule`, and the check of rings
written by hand (smalti/tools/hand_written_rings.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jaxlib.mlir import ir

import smalti.dsl as sd
from smalti.dialect.context import make_context
from smalti.dialect.diagnostics import DiagnosticError
from smalti.dialect.schedule_attr import kernel_schedules
from smalti.schedule import H100_SXM, PipelineProblem, explain_pipeline, plan_pipeline
from smalti.tools.explain_schedule import explain_kernel, explain_module
from tests.dsl_helpers import load_example

BF16, F32 = jnp.bfloat16, jnp.float32
MATMUL_STEP = PipelineProblem(step_bytes=32768, flops_per_step=2 * 128 * 128 * 64,
                              dtype="bf16")


def test_stages_cover_the_latency_and_no_more():
    """128x128x64 bf16: a step is bound by TMA (0.29 us); a load needs 0.79 us, so three
    loads in flight and four stages; one stage fewer leaves latency exposed."""
    plan = plan_pipeline(MATMUL_STEP)
    assert (plan.stages, plan.prefetch, plan.needed) == (4, 3, 4)
    assert plan.covers_latency and plan.fits_smem
    fewer = plan_pipeline(MATMUL_STEP, stages=3)
    assert fewer.given and not fewer.covers_latency
    assert fewer.effective_step_s > plan.effective_step_s == plan.step_s


def test_stages_are_capped_by_shared_memory_and_by_the_step_count():
    tight = plan_pipeline(PipelineProblem(step_bytes=32768, flops_per_step=0,
                                          other_smem_bytes=227 * 1024 - 2 * 32776))
    assert (tight.needed, tight.fits, tight.stages) == (4, 2, 2)
    short = plan_pipeline(PipelineProblem(step_bytes=32768, flops_per_step=0, steps=2))
    assert short.stages == 2
    assert any("more stages than steps" in line for line in short.reasons())


def test_more_tensor_core_work_per_step_needs_fewer_stages():
    """f32 (tf32) runs at half the bf16 rate: the steps are longer and hide the latency
    with fewer loads in flight."""
    tf32 = plan_pipeline(PipelineProblem(step_bytes=32768, flops_per_step=2 * 128 * 128 * 64,
                                         dtype="tf32"))
    assert tf32.mma_s == pytest.approx(2 * plan_pipeline(MATMUL_STEP).mma_s)
    assert tf32.stages < plan_pipeline(MATMUL_STEP).stages
    with pytest.raises(ValueError, match="no tensor-core rate for dtype 'f64'"):
        plan_pipeline(PipelineProblem(step_bytes=1024, flops_per_step=1, dtype="f64"))
    assert H100_SXM.smem_bytes_per_block == 232448


def matmul_kernel(k_tiles: int, stages: int | None):
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128, 128), F32))
    def matmul(a_ref, b_ref, c_ref):
        c_ref[...] = sd.emit_pipeline(
            lambda _, a, b, acc: sd.wgmma(acc, a, b), grid=k_tiles,
            in_specs=[sd.BlockSpec((128, 64), lambda j: (0, j)),
                      sd.BlockSpec((64, 128), lambda j: (j, 0))],
            max_concurrent_steps=stages, init_carry=sd.zeros((128, 128), F32))(a_ref, b_ref)

    a = jax.ShapeDtypeStruct((128, 64 * k_tiles), BF16)
    b = jax.ShapeDtypeStruct((64 * k_tiles, 128), BF16)
    return matmul.trace(a, b)


def test_emit_pipeline_without_a_stage_count_takes_the_models_and_records_it():
    traced = matmul_kernel(8, None)
    (func,) = [op for op in traced.module.regions[0].blocks[0].operations
               if "smalti.kernel" in op.attributes]
    (fields,) = kernel_schedules(func)
    assert fields["kind"] == "pipeline" and fields["variant"] == "emit_pipeline"
    assert (fields["stages"], fields["given"], fields["steps"]) == (4, 0, 8)
    assert (fields["step_bytes"], fields["flops_per_step"], fields["dtype"]) == (
        32768, 2 * 128 * 128 * 64, "bf16")
    assert str(fields["at"]).startswith(__file__)
    # four stages of 32 KiB and their barriers; the probe left nothing behind
    assert traced.smem_bytes == 4 * 32768 + 32
    assert "smalti.pipeline_probe" not in str(traced.module)
    assert "chosen by the model" in explain_pipeline(fields)


def test_4bit_blocks_count_half_a_byte_per_element():
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128,), F32))
    def copy_int4(w_ref, o_ref):
        sd.emit_pipeline(lambda _, w: None, grid=4, max_concurrent_steps=2,
                         in_specs=[sd.BlockSpec((64, 256), lambda j: (j, 0))])(w_ref)
        o_ref[...] = sd.zeros((128,), F32)

    traced = copy_int4.trace(jax.ShapeDtypeStruct((256, 256), jnp.int4))
    (func,) = [op for op in traced.module.regions[0].blocks[0].operations
               if "smalti.kernel" in op.attributes]
    (fields,) = kernel_schedules(func)
    assert fields["step_bytes"] == 64 * 256 // 2


def test_a_given_stage_count_is_kept_and_checked():
    traced = matmul_kernel(8, 2)
    report = explain_module(traced.module)
    assert "stages=2, prefetch distance=1 [given (checked, not rewritten)]" in report
    assert "warning: 2 stage(s) cannot cover the TMA latency (the model wants 4)" in report
    assert "note: the model recommends stages=4" in report
    assert traced.smem_bytes == 2 * 32768 + 16


@pytest.mark.parametrize("example,name,stages,note", [
    ("matmul", "matmul", 2, "note: the model recommends stages=4"),
    ("matmul_ws", "matmul_ws", 4, "note: the model recommends stages=3"),
])
def test_rings_written_by_hand_are_checked_not_rewritten(example, name, stages, note):
    spec = jax.ShapeDtypeStruct((512, 512), BF16)
    traced = getattr(load_example(example), name).trace(spec, spec)
    before = str(traced.module)
    report = explain_module(traced.module)
    assert f"@{name}: pipeline (hand_written) at {example}.py:" in report
    assert f"choice: stages={stages}, prefetch distance={stages - 1} [written by hand " \
           "(checked, not rewritten)]" in report
    assert note in report
    assert report.count("(hand_written)") == 1  # one ring, however many consumers
    assert str(traced.module) == before


def test_the_warp_specialized_pipeline_records_its_given_stage_count():
    """4 stages given: the model (a step of two consumers' 64x256x64 wgmmas outlasts its
    48 KiB of loads) wants 3; the fourth costs shared memory and buys nothing."""
    spec = jax.ShapeDtypeStruct((512, 512), BF16)
    traced = load_example("matmul_ws_pipelined").matmul_ws.trace(spec, spec)
    report = explain_module(traced.module)
    assert "recorded pipeline (emit_pipeline_warp_specialized) at " in report
    assert "stages=4, prefetch distance=3 [given (checked, not rewritten)]" in report
    assert "4194304 bf16 tensor-core flops" in report
    assert "stages beyond 3 buy no speed in the model and take 49160 B" in report
    assert "(hand_written)" not in report


@pytest.mark.parametrize("fields, message", [
    ('variant = "by_magic", stages = 2 : i64, step_bytes = 1024 : i64, '
     'flops_per_step = 0 : i64', "unknown pipeline variant 'by_magic'"),
    ('variant = "emit_pipeline", stages = 2 : i64, flops_per_step = 0 : i64',
     "missing field\\(s\\) step_bytes"),
    ('variant = "emit_pipeline", stages = "two", step_bytes = 1024 : i64, '
     'flops_per_step = 0 : i64', "field 'stages' must be an integer"),
    ('variant = "emit_pipeline", stages = 2 : i64, step_bytes = 1024 : i64, '
     'flops_per_step = 0 : i64, colour = "red"', "unknown pipeline field\\(s\\) colour"),
])
def test_a_malformed_pipeline_record_is_a_located_error(fields, message):
    text = (f'func.func @k() attributes {{smalti.kernel, smalti.grid = array<i64: 1>, '
            f'smalti.schedule = {{kind = "pipeline", {fields}}}}} {{\n  return\n}}')
    with make_context():
        module = ir.Module.parse(text)  # kept alive: its ops die with it (jaxlib 0.12)
        func = module.body.operations[0]
        with pytest.raises(DiagnosticError, match=f"kernel @k: invalid 'smalti.schedule': "
                                                  f"{message}"):
            explain_kernel(func.operation)
