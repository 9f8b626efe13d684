"""The DSL's async machinery (shared memory, barriers, TMA, wgmma, `when`) and the matmul
example written with it (examples/matmul.py): the IR it traces to, ptxas and SASS, numbers
under jax.jit through the simulator, and misuse errors that name the user's line."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jaxlib.mlir import ir

import smalti.dsl as sd
from smalti.ptx.toolchain import compile_ptx, disassemble, sass_opcode_counts
from smalti.runtime import compile_mlir, run_simulated
from smalti.runtime.cache import ptxas_available
from smalti.runtime.compiler import compile_module
from tests.dsl_helpers import isolated_cache, line_of, load_example  # noqa: F401
from tests.test_matmul import _assert_within_one_ulp

BF16 = jnp.bfloat16
F32 = jnp.float32
THIS_FILE = __file__
REFERENCE = Path(__file__).resolve().parents[1] / "examples" / "matmul_128x128x64.mlir"
needs_ptxas = pytest.mark.skipif(not ptxas_available(), reason="ptxas is not installed")


@cache
def example():
    return load_example("matmul")


def specs(m: int, n: int, k: int) -> tuple[jax.ShapeDtypeStruct, jax.ShapeDtypeStruct]:
    return jax.ShapeDtypeStruct((m, k), BF16), jax.ShapeDtypeStruct((k, n), BF16)


def ops_named(module: ir.Operation, name: str) -> list[ir.Operation]:
    found = []

    def visit(op):
        if op.operation.name == name:
            found.append(op.operation)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return found


def slices(module: ir.Operation) -> list[tuple[int, str]]:
    """(offset, result type) of every slice_smem, in order."""
    return [(ir.IntegerAttr(op.operands[0].owner.attributes["value"]).value,
             str(op.results[0].type)) for op in ops_named(module, "smalti.slice_smem")]


def smem(shape: str) -> str:
    return f"memref<{shape}, #gpu.address_space<workgroup>>"


def test_matmul_traces_to_the_reference_kernels_ops():
    traced = example().matmul.trace(*specs(512, 512, 512))
    assert traced.grid == (4, 4) and traced.smem_bytes == 66560
    # The offsets of examples/matmul_128x128x64.mlir: barriers, A stages, C over A, B stages.
    assert slices(traced.module) == [
        (0, smem("2xi64")), (1024, smem("128x64xbf16")), (17408, smem("128x64xbf16")),
        (1024, smem("128x128xbf16")), (33792, smem("64x128xbf16")),
        (50176, smem("64x128xbf16"))]
    names = [op.name for op in ops_named(traced.module, "func.func")[0].regions[0].blocks[0]]
    program = " ".join(n for n in names if n.startswith(("smalti.", "scf.")))
    assert program == ("smalti.slice_smem " * 6 + "smalti.initialize_barrier "
                       + "smalti.arrive_expect_tx smalti.async_load smalti.async_load scf.for "
                       + "smalti.vector_store smalti.async_store smalti.async_store_wait")
    loop = ops_named(traced.module, "scf.for")[0]
    body = " ".join(op.name for op in loop.regions[0].blocks[0]
                    if op.name.startswith(("smalti.", "scf.")))
    assert body == ("smalti.arrive_expect_tx smalti.async_load smalti.async_load smalti.wait "
                    "smalti.wgmma scf.if smalti.wait smalti.wgmma scf.yield")
    branch = ops_named(traced.module, "scf.if")[0]
    assert re.match(r"%\w+ = arith.cmpi slt, %\w+, %c8 ", str(branch.operands[0].owner))
    assert len(ops_named(traced.module, "smalti.async_load")) == 6


def test_every_op_is_located_at_a_line_of_the_example():
    fn = example().matmul.fn
    traced = example().matmul.trace(*specs(256, 256, 128))
    lines: dict[str, set[int]] = {}

    def visit(op):
        match = re.fullmatch(r'loc\("(.*)":(\d+):(\d+)\)', str(op.location))
        assert match and match.group(1) == fn.__code__.co_filename, (op.name, op.location)
        lines.setdefault(op.operation.name, set()).add(int(match.group(2)))
        return ir.WalkResult.ADVANCE

    traced.module.walk(visit)
    expected = {"smalti.slice_smem": ["sd.SMEM((STAGES, BLOCK_M", "sd.SMEM((BLOCK_M, BLOCK_N)",
                                      "sd.SMEM((STAGES, BLOCK_K", "sd.Barriers(STAGES)"],
                "smalti.initialize_barrier": ["sd.Barriers(STAGES)"],
                "smalti.wgmma": ["acc = sd.wgmma(", "return sd.wgmma("],
                "smalti.async_load": ["sd.async_copy(a_ref", "sd.async_copy(b_ref"],
                "scf.if": ["@sd.when("], "smalti.vector_store": ["c_smem[...] ="]}
    for name, markers in expected.items():
        assert lines[name] == {line_of(m, fn) for m in markers}, name


@needs_ptxas
def test_matmul_compiles_to_the_reference_sass_without_spills():
    compiled = compile_module(example().matmul.trace(*specs(512, 512, 512)).module)
    result = compile_ptx(compiled.ptx, arch="sm_90a")
    assert "0 bytes spill stores, 0 bytes spill loads" in result.log
    counts = sass_opcode_counts(disassemble(result.cubin))
    for opcode in ("HGMMA", "UTMALDG", "UTMASTG"):
        assert any(k.startswith(opcode) for k in counts), opcode
    reference = compile_mlir(REFERENCE.read_text(), REFERENCE.name)
    assert compiled.signature().tensor_maps == reference.signature().tensor_maps
    expected = sass_opcode_counts(disassemble(compile_ptx(reference.ptx).cubin))
    # The same tensor-core, TMA, barrier and shared-memory instructions as the .mlir kernel
    # (index arithmetic is associated differently, so integer ops may differ a little).
    memory_and_mma = ("HGMMA", "UTMA", "SYNCS", "STS", "LDS", "BAR", "WARPGROUP", "FENCE")
    assert ({k: v for k, v in counts.items() if k.startswith(memory_and_mma)}
            == {k: v for k, v in expected.items() if k.startswith(memory_and_mma)})
    assert abs(counts.total() - expected.total()) <= 0.02 * expected.total()


def test_matmul_under_jit_matches_jnp_dot():
    keys = jax.random.split(jax.random.key(1), 2)
    a = jax.random.normal(keys[0], (256, 128), F32).astype(BF16)
    b = jax.random.normal(keys[1], (128, 256), F32).astype(BF16)
    out = jax.jit(example().matmul)(a, b)
    assert out.shape == (256, 256) and out.dtype == BF16
    expected = np.asarray(example().reference(a, b))
    # Within one bf16 ulp of the f32 product (the tolerance of tests/test_matmul.py) ...
    _assert_within_one_ulp(np.asarray(out), np.asarray(a), np.asarray(b))
    # ... and of jnp.dot(preferred_element_type=f32).astype(bf16).
    got, want = np.asarray(out, np.float32), expected.astype(np.float32)
    ulp = np.spacing(np.abs(want).astype(ml_dtypes.bfloat16)).astype(np.float32)
    assert (np.abs(got - want) <= ulp).all()


@pytest.mark.parametrize("policy", ["latest", "random"])
def test_matmul_has_no_hazards_when_async_work_completes_late(policy):
    """The simulator reports a missing wait or fence as a SimError; "latest" completes every
    TMA copy and wgmma as late as allowed."""
    compiled = compile_module(example().matmul.trace(*specs(256, 128, 256)).module)
    rng = np.random.default_rng(4)
    a = rng.standard_normal((256, 256)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((256, 128)).astype(ml_dtypes.bfloat16)
    c = np.zeros((256, 128), ml_dtypes.bfloat16)
    out = run_simulated(compiled, a, b, c, async_completion=policy, seed=5)[-1]
    _assert_within_one_ulp(out, a, b)


def test_smem_over_227_kib_names_the_declaration_line():
    with pytest.raises(ValueError) as caught:
        @sd.kernel(out_shape=jax.ShapeDtypeStruct((128, 128), BF16),
                   smem=[sd.SMEM((4, 128, 128), BF16),
                         sd.SMEM((2, 128, 256), F32)])  # MARK: too much
        def big(x_ref, out_ref, a_smem, b_smem):
            pass
    line = line_of("MARK: too much", test_smem_over_227_kib_names_the_declaration_line)
    message = str(caught.value)
    assert message.startswith(f"{THIS_FILE}:{line}:"), message
    assert "393216 bytes" in message and "227 KiB" in message


def test_wgmma_operand_of_the_wrong_dtype_names_the_users_line():
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128, 128), F32),
               smem=[sd.SMEM((128, 64), F32), sd.SMEM((64, 128), BF16)])
    def wrong(x_ref, out_ref, a_smem, b_smem):
        out_ref[...] = sd.wgmma(sd.zeros((128, 128)), a_smem, b_smem)  # MARK: f32 A

    with pytest.raises(TypeError, match=r"wgmma's A \(float32\) and B \(bfloat16\) do not "
                                        "pair") as caught:
        wrong.trace(jax.ShapeDtypeStruct((128, 128), F32))
    line = line_of("MARK: f32 A", wrong.fn)
    assert str(caught.value).startswith(f"{THIS_FILE}:{line}:")


@pytest.mark.parametrize("misuse, error, message", [
    ("traced_stage", IndexError, r"the stage index of a_smem ranges over \[2, 2\] \(at "
                                 r"program_id\(0\) = 0\); it must stay in \[0, 2\)"),
    ("whole_stages", TypeError, "a_smem has 2 stages; pass one of them"),
    ("shape", ValueError, r"the window of x_ref has shape \(64, 64\) but a_smem\[0\] has shape "
                          r"\(128, 64\)"),
    ("bool", TypeError, "branch on it with smalti.dsl.when"),
    ("barrier", IndexError, "barrier 2 is out of range for bars with 2 barriers"),
])
def test_async_misuse_names_the_users_line(misuse, error, message):
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128, 128), BF16),
               smem=[sd.Barriers(2), sd.SMEM((2, 128, 64), BF16)])
    def body(x_ref, out_ref, bars, a_smem):
        i = sd.program_id(0)
        match misuse:
            case "traced_stage":
                sd.async_copy(x_ref.at[:, 0:64], a_smem[i + 2], bars[0])  # MARK: misuse
            case "whole_stages":
                sd.async_copy(x_ref.at[:, 0:64], a_smem, bars[0])  # MARK: misuse
            case "shape":
                sd.async_copy(x_ref.at[0:64, 0:64], a_smem[0], bars[0])  # MARK: misuse
            case "bool":
                if i < 3:  # MARK: misuse
                    pass
            case "barrier":
                bars[2].wait(0)  # MARK: misuse

    with pytest.raises(error, match=message) as caught:
        body.trace(jax.ShapeDtypeStruct((128, 128), BF16))
    line = line_of(f'"{misuse}"', body.fn) + 1
    assert str(caught.value).startswith(f"{THIS_FILE}:{line}:"), str(caught.value)


def test_smem_plan_aligns_arrays_pads_stages_and_overlaps_unions():
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128,), F32),
               smem=[sd.Barriers(3, arrival_count=128), sd.SMEM((3, 8, 40), BF16),
                     sd.Union(sd.SMEM((128,), F32), sd.Barriers(1)), sd.SMEM((16,), F32)])
    def plan(x_ref, out_ref, bars, staged, row, one, tail):
        row[...] = x_ref[...]
        out_ref[...] = row[...]

    traced = plan.trace(jax.ShapeDtypeStruct((128,), F32))
    # A stage of 8x40 bf16 is 640 bytes, padded to 1024 so every stage is swizzle-aligned.
    assert slices(traced.module) == [
        (0, smem("3xi64")), (1024, smem("8x40xbf16")), (2048, smem("8x40xbf16")),
        (3072, smem("8x40xbf16")), (4096, smem("128xf32")), (4096, smem("1xi64")),
        (5120, smem("16xf32"))]
    assert traced.smem_bytes == 5184
    counts = [ir.IntegerAttr(op.attributes["arrival_count"]).value
              for op in ops_named(traced.module, "smalti.initialize_barrier")]
    assert counts == [128, 1]


def test_when_traces_an_scf_if_or_decides_while_tracing():
    @sd.kernel(grid=(4,), out_shape=jax.ShapeDtypeStruct((512,), F32))
    def guarded(x_ref, out_ref):
        i = sd.program_id(0) * 128
        out_ref[i:i + 128] = x_ref[i:i + 128]

        @sd.when(i >= 256)
        def _():
            out_ref[i:i + 128] = x_ref[i:i + 128] * 2.0

        @sd.when(i - i > 0)  # known while tracing: never emitted
        def _():
            out_ref[i:i + 128] = x_ref[i:i + 128] * 3.0

    x = jax.random.normal(jax.random.key(2), (512,), F32)
    traced = guarded.trace(x)
    assert len(ops_named(traced.module, "scf.if")) == 1
    assert len(ops_named(traced.module, "arith.mulf")) == 1
    expected = np.asarray(x) * np.repeat([1.0, 1.0, 2.0, 2.0], 128).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(jax.jit(guarded)(x)), expected)
