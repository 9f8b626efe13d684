"""Warp-specialised regions in the DSL (`sd.warpgroup_region`) and the warp-specialised matmul
written with them (examples/matmul_ws.py): the IR it traces to against the reference
examples/matmul_128x256x64_ws.mlir, setmaxnreg and the PTX/SASS instruction mix, ptxas,
numbers under jax.jit through the simulator (the 4-stage ring wrapped several times), a
planted hazard, jax.export for CUDA, and misuse errors that name the user's line."""

from __future__ import annotations

import inspect
import re
from collections import Counter
from functools import cache
from pathlib import Path

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import export
from jaxlib.mlir import ir

import smalti.dsl as sd
from smalti.dialect.context import make_context
from smalti.dialect.diagnostics import DiagnosticError
from smalti.ptx.toolchain import compile_ptx, disassemble, sass_opcode_counts
from smalti.runtime import compile_mlir, launcher, run_simulated
from smalti.runtime.cache import ptxas_available
from smalti.runtime.compiler import CompiledModule, compile_module
from smalti.runtime.simulate import check_arguments
from smalti.runtime.tensor_maps import sim_tensor_maps
from smalti.sim import SimError, run_ptx
from tests.dsl_helpers import isolated_cache, line_of, load_example  # noqa: F401
from tests.test_matmul import _assert_within_one_ulp

BF16 = jnp.bfloat16
F32 = jnp.float32
THIS_FILE = __file__
REFERENCE = Path(__file__).resolve().parents[1] / "examples" / "matmul_128x256x64_ws.mlir"
needs_ptxas = pytest.mark.skipif(not ptxas_available(), reason="ptxas is not installed")
# Index arithmetic is associated differently from the .mlir kernel (the DSL recomputes
# `program_id * 128` in each region), so only these PTX opcodes may differ in count.
INDEX_ARITHMETIC = ("add.s64", "mul.lo.s64")


@cache
def example():
    return load_example("matmul_ws")


def specs(m: int, n: int, k: int) -> tuple[jax.ShapeDtypeStruct, jax.ShapeDtypeStruct]:
    return jax.ShapeDtypeStruct((m, k), BF16), jax.ShapeDtypeStruct((k, n), BF16)


@cache
def compiled(m: int, n: int, k: int) -> CompiledModule:
    return compile_module(example().matmul_ws.trace(*specs(m, n, k)).module)


@cache
def reference() -> CompiledModule:
    return compile_mlir(REFERENCE.read_text(), REFERENCE.name)


def inputs(m: int, n: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16),
            rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16),
            np.zeros((m, n), ml_dtypes.bfloat16))


def ptx_opcodes(ptx: str) -> Counter:
    return Counter(re.findall(r"^\t(?:@!?%p\d+ )?([a-z][\w.:]*)", ptx, re.MULTILINE))


# The traced IR ----------------------------------------------------------------------------
def _top_level(func: ir.Operation) -> list[ir.Operation]:
    return [op.operation for op in func.regions[0].blocks[0]]


def _program(func: ir.Operation) -> list[tuple]:
    """Per warpgroup_region: its attributes and, in order, each smalti/scf op with its
    attributes, its constant operands and the shared memory it names (barrier arrays by
    position, since the empty barriers start at 32 here and at 64 in the .mlir kernel;
    other slices by offset)."""
    barriers = [op.results[0] for op in _top_level(func) if op.name == "smalti.slice_smem"
                and "i64" in str(op.results[0].type)]

    def memory(value: ir.Value) -> object:
        if value in barriers:
            return ("barriers", barriers.index(value))
        owner = value.owner
        if isinstance(owner, ir.Block) or owner.name not in ("smalti.slice_smem",
                                                             "arith.constant"):
            return None
        if owner.name == "arith.constant":
            return str(owner.attributes["value"])
        offset = ir.IntegerAttr(owner.operands[0].owner.attributes["value"]).value
        return (offset, str(value.type))

    def body(block: ir.Block) -> list[tuple]:
        ops = []
        for op in block:
            op = op.operation
            if op.name.startswith(("smalti.", "scf.")):
                attributes = _attributes(op)
                ops.append((op.name, attributes,
                            [m for m in map(memory, op.operands) if m is not None]))
            for region in op.regions:
                for inner in region.blocks:
                    ops += body(inner)
        return ops

    return [(_attributes(op), body(op.regions[0].blocks[0]))
            for op in _top_level(func) if op.name == "smalti.warpgroup_region"]


def _attributes(op: ir.Operation) -> list[tuple[str, str]]:
    return sorted((name, str(op.attributes[name])) for name in op.attributes)


def test_traces_to_the_reference_kernels_regions():
    traced = example().matmul_ws.trace(*specs(512, 512, 512))
    assert traced.grid == (4, 2) and traced.smem_bytes == 197632
    func = traced.module.regions[0].blocks[0].operations[0].operation  # the kernel
    names = [op.name for op in _top_level(func) if op.name != "arith.constant"]
    # Shared memory and barriers first, the block ids, then only the three roles.
    assert names == (["smalti.slice_smem"] * 16 + ["smalti.initialize_barrier"] * 2
                     + ["gpu.block_id"] * 2 + ["smalti.warpgroup_region"] * 3 + ["func.return"])
    with make_context():
        module = ir.Module.parse(REFERENCE.read_text())
        expected = _program(module.body.operations[0].operation)
    got = _program(func)
    assert [attributes for attributes, _ in got] == [
        [("max_registers", "40 : i64"), ("warpgroup", "0 : i64")],
        [("max_registers", "232 : i64"), ("warpgroup", "1 : i64")],
        [("max_registers", "232 : i64"), ("warpgroup", "2 : i64")]]
    assert got == expected
    # Each region is located at its decorator's line of the example.
    fn = example().matmul_ws.fn
    lines = [int(re.search(r":(\d+):", str(op.location)).group(1))
             for op in _top_level(func) if op.name == "smalti.warpgroup_region"]
    consumer = line_of("@sd.warpgroup_region(warpgroups=1 + c", fn)
    assert lines == [line_of("@sd.warpgroup_region(warpgroups=0", fn), consumer, consumer]


# PTX, ptxas and SASS -----------------------------------------------------------------------
def test_roles_set_budgets_with_setmaxnreg_and_match_the_reference_ptx():
    ptx = compiled(512, 512, 512).ptx
    assert ".maxntid 384, 1, 1\n" in ptx
    roles = re.findall(r"setp\.eq\.u32 %p\d+, %r\d+, (\d);\n\t@!%p\d+ bra \$role_end_\d+;\n"
                       r"\tsetmaxnreg\.(inc|dec)\.sync\.aligned\.u32 (\d+);", ptx)
    assert roles == [("0", "dec", "40"), ("1", "inc", "232"), ("2", "inc", "232")]
    counts, expected = ptx_opcodes(ptx), ptx_opcodes(reference().ptx)
    # Per round of 4 K tiles (one pass of each loop body): 4 x (2 A halves + 4 64-column
    # boxes of B) TMA loads, 2 consumers x 4 stages x 4 k16 steps of m64n256k16 wgmma.
    assert counts["wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16"] == 32
    loads = [k for k in counts if k.startswith("cp.async.bulk.tensor.2d.shared::cluster")]
    assert [counts[k] for k in loads] == [24]
    assert counts["mbarrier.try_wait.parity.shared::cta.b64"] == 12
    assert counts["mbarrier.arrive.shared::cta.b64"] == 8
    assert ({k: v for k, v in counts.items() if k not in INDEX_ARITHMETIC}
            == {k: v for k, v in expected.items() if k not in INDEX_ARITHMETIC})
    assert abs(counts.total() - expected.total()) <= 0.01 * expected.total()


@needs_ptxas
def test_ptxas_compiles_without_spills_or_warnings_to_the_reference_sass():
    result = compile_ptx(compiled(512, 512, 512).ptx, arch="sm_90a")
    assert "0 bytes spill stores, 0 bytes spill loads" in result.log
    assert not re.search(r"C75\d\d", result.log), result.log
    counts = sass_opcode_counts(disassemble(result.cubin))
    expected = sass_opcode_counts(disassemble(compile_ptx(reference().ptx).cubin))
    memory_and_mma = ("HGMMA", "UTMA", "SYNCS", "STS", "LDS", "BAR", "WARPGROUP", "FENCE",
                      "USETMAXREG")
    assert any(k.startswith("USETMAXREG") for k in counts)
    assert ({k: v for k, v in counts.items() if k.startswith(memory_and_mma)}
            == {k: v for k, v in expected.items() if k.startswith(memory_and_mma)})
    assert compiled(512, 512, 512).signature().tensor_maps == reference().signature().tensor_maps


# Numbers -----------------------------------------------------------------------------------
@pytest.mark.parametrize("m, n, k", [(256, 512, 256), (128, 256, 768)],
                         ids=["2x2-tiles-1-round", "3-rounds"])
def test_under_jit_matches_jnp_dot(m, n, k):
    keys = jax.random.split(jax.random.key(m + k), 2)
    a = jax.random.normal(keys[0], (m, k), F32).astype(BF16)
    b = jax.random.normal(keys[1], (k, n), F32).astype(BF16)
    out = jax.jit(example().matmul_ws)(a, b)
    assert out.shape == (m, n) and out.dtype == BF16
    _assert_within_one_ulp(np.asarray(out), np.asarray(a), np.asarray(b))
    # Against jnp.dot(preferred_element_type=f32).astype(bf16): one bf16 ulp, plus the f32
    # summation-order bound for sums that cancel.
    got = np.asarray(out, np.float32)
    want = np.asarray(example().reference(a, b), np.float32)
    ulp = np.spacing(np.abs(want).astype(ml_dtypes.bfloat16)).astype(np.float32)
    slack = 2.0**-20 * (np.abs(np.asarray(a, np.float32)) @ np.abs(np.asarray(b, np.float32)))
    assert (np.abs(got - want) <= ulp + slack).all()


@pytest.mark.parametrize("policy", ["latest", "random"])
def test_no_hazards_when_async_work_completes_late(policy):
    """"latest" completes every TMA copy and wgmma as late as allowed; 3 rounds make the
    producer wait on each empty barrier's phases 0 and 1."""
    a, b, c = inputs(128, 256, 768, seed=6)
    out = run_simulated(compiled(128, 256, 768), a, b, c, async_completion=policy, seed=7)[-1]
    _assert_within_one_ulp(out, a, b)


def test_removing_the_producers_empty_wait_is_reported():
    ptx = compiled(128, 256, 768).ptx
    planted, count = re.subn(r"\$wait_0:\n\tmbarrier\.try_wait[^\n]*\n\t@!%p\d+ bra \$wait_0;\n",
                             "", ptx, count=1)
    assert count == 1
    signature = compiled(128, 256, 768).signature()
    buffers = check_arguments(signature, inputs(128, 256, 768, seed=8))
    with pytest.raises(SimError):
        run_ptx(planted, signature.name, signature.grid, signature.block,
                [*buffers, *sim_tensor_maps(signature, buffers)], signature.smem_bytes,
                async_completion="latest")


@needs_ptxas
def test_export_for_cuda_carries_the_cubin():
    name = launcher.TARGET_NAME
    a, b = specs(256, 512, 256)
    exported = export.export(jax.jit(example().matmul_ws), platforms=["cuda"],
                             disabled_checks=[export.DisabledSafetyCheck.custom_call(name)])(
        a, b)
    call = next(line for line in exported.mlir_module().splitlines()
                if f"custom_call @{name}" in line)
    _, kernel = example().matmul_ws.compile(a, b)
    assert kernel.cubin is not None and kernel.cubin.hex().upper() in call
    assert 'kernel = "matmul_ws"' in call
    assert "launch = dense<[2, 2, 1, 384, 1, 1, 1, 1, 1, 197632]> : tensor<10xi64>" in call
    assert exported.platforms == ("cuda",)
    assert exported.out_avals[0].shape == (256, 512) and exported.out_avals[0].dtype == BF16


def test_main_runs_under_jit_and_reports_no_element_off(capsys):
    example().main(128, 256, 256)
    assert capsys.readouterr().out.startswith("matmul_ws 128x256x256 on cpu: 0 elements off")


def test_unsupported_shapes_raise_before_tracing():
    with pytest.raises(ValueError, match="K of 256"):
        example().matmul_ws.trace(*specs(128, 256, 128))


# Misuse -------------------------------------------------------------------------------------
M128 = jax.ShapeDtypeStruct((128, 128), F32)


@pytest.mark.parametrize("misuse, error, message", [
    ("one_warpgroup", ValueError, "needs a kernel of several warpgroups"),
    ("out_of_range", ValueError, "names warpgroup 3, but kernel body has 3 \\(0 to 2\\)"),
    ("twice", ValueError, r"names a warpgroup twice: \[1, 1\]"),
    ("overlap", ValueError, "warpgroup 2 already runs the warpgroup_region at "),
    ("registers", ValueError, r"register budget 100 must be a multiple of 8 in \[24, 256\]"),
    ("too_many_registers", ValueError, r"register budget 264 must be a multiple of 8"),
    ("registers_type", TypeError, "registers must be an int, got float"),
    ("in_fori", ValueError, "must stand at the top level of the kernel body"),
    ("nested", ValueError, "must stand at the top level of the kernel body"),
    ("after_budget", ValueError, "may only hold more warpgroup_regions"),
    ("leak", ValueError, r"uses a value traced inside the warpgroup_region at .*\[0\] run"),
    ("result", TypeError, "must return None"),
])
def test_region_misuse_names_the_users_line(misuse, error, message):
    @sd.kernel(out_shape=M128, warpgroups=1 if misuse == "one_warpgroup" else 3, name="body")
    def body(x_ref, out_ref):
        match misuse:
            case "one_warpgroup":
                @sd.warpgroup_region(warpgroups=0)  # MARK: misuse
                def _():
                    pass
            case "out_of_range":
                @sd.warpgroup_region(warpgroups=(1, 3))  # MARK: misuse
                def _():
                    pass
            case "twice":
                @sd.warpgroup_region(warpgroups=[1, 1])  # MARK: misuse
                def _():
                    pass
            case "overlap":
                @sd.warpgroup_region(warpgroups=2)
                def _():
                    pass

                @sd.warpgroup_region(warpgroups=(1, 2))  # MARK: misuse
                def _():
                    pass
            case "registers":
                @sd.warpgroup_region(warpgroups=0, registers=100)  # MARK: misuse
                def _():
                    pass
            case "too_many_registers":
                @sd.warpgroup_region(warpgroups=0, registers=264)  # MARK: misuse
                def _():
                    pass
            case "registers_type":
                @sd.warpgroup_region(warpgroups=0, registers=40.0)  # MARK: misuse
                def _():
                    pass
            case "in_fori":
                def step(i, _):
                    @sd.warpgroup_region(warpgroups=0)  # MARK: misuse
                    def _():
                        pass

                sd.fori(0, 2, step)
            case "nested":
                @sd.warpgroup_region(warpgroups=0)
                def _():
                    @sd.warpgroup_region(warpgroups=1)  # MARK: misuse
                    def _():
                        pass
            case "after_budget":
                @sd.warpgroup_region(warpgroups=0, registers=40)
                def _():
                    pass

                out_ref[...] = x_ref[...]  # MARK: misuse
            case "leak":
                loaded = []

                @sd.warpgroup_region(warpgroups=0)
                def _():
                    loaded.append(x_ref[...])

                @sd.warpgroup_region(warpgroups=1)
                def _():
                    out_ref[...] = loaded[0]  # MARK: misuse
            case "result":
                @sd.warpgroup_region(warpgroups=0)  # MARK: misuse
                def _():
                    return x_ref[...]

    with pytest.raises(error, match=message) as caught:
        body.trace(M128)
    # The first marked line after this misuse's `case`.
    lines, first = inspect.getsourcelines(body.fn)
    case = line_of(f'case "{misuse}"', body.fn)
    line = next(first + i for i, text in enumerate(lines)
                if first + i > case and "# MARK: misuse" in text)
    assert str(caught.value).startswith(f"{THIS_FILE}:{line}:"), str(caught.value)


def test_register_file_overflow_is_reported_at_the_kernel_and_its_regions():
    @sd.kernel(out_shape=M128, warpgroups=3)
    def greedy(x_ref, out_ref):
        @sd.warpgroup_region(warpgroups=0, registers=240)  # MARK: producer
        def _():
            out_ref[...] = x_ref[...]

        @sd.warpgroup_region(warpgroups=(1, 2), registers=240)  # MARK: consumers
        def _():
            pass

    with pytest.raises(DiagnosticError, match="need 92160 registers, more than the 65536") \
            as caught:
        greedy.compile(M128)
    message = str(caught.value)
    for marker in ("MARK: producer", "MARK: consumers"):
        assert f"{THIS_FILE}:{line_of(marker, greedy.fn)}:" in message, message


def test_regions_run_their_own_code_only():
    """Warpgroup 0 writes the left half, warpgroups 1 and 2 (one region) the right half
    scaled; a region with a budget of its own gives registers back (setmaxnreg.dec)."""
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((64, 256), F32), warpgroups=3)
    def split(x_ref, out_ref):
        @sd.warpgroup_region(warpgroups=0, registers=24)
        def _():
            out_ref[:, 0:128] = x_ref[:, 0:128]

        @sd.warpgroup_region(warpgroups=(1, 2))
        def _():
            out_ref[:, 128:256] = x_ref[:, 128:256] * 2.0

    x = jax.random.normal(jax.random.key(3), (64, 256), F32)
    traced = split.trace(x)
    assert "warpgroup = array<i64: 1, 2>" in traced.mlir
    _, kernel = split.compile(x)
    assert "setmaxnreg.dec.sync.aligned.u32 24;" in kernel.ptx
    expected = np.concatenate([np.asarray(x)[:, :128], 2 * np.asarray(x)[:, 128:]], axis=1)
    np.testing.assert_array_equal(np.asarray(jax.jit(split)(x)), expected)
