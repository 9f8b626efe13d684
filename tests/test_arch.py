"""Issue 16 foundations outside the layout algebra: `--arch=sm_100a` through compile,
signature and cache; Hopper-only ops refused for Blackwell at their line; the TMEM memory
space; FP4/FP6 and block-scale element types in the dialect, the runtime and the DSL."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jaxlib.mlir import ir

import smalti.dsl as sd
from smalti.dialect.checks import check_tmem_ref, is_smem_type, is_tmem_type, tmem_columns
from smalti.dialect.context import make_context
from smalti.dialect.diagnostics import DiagnosticError
from smalti.dialect.kernel import ARCHES, DEFAULT_ARCH, check_arch, kernel_signature
from smalti.dialect.launch import kernel_functions
from smalti.dsl import dtypes as dsl_dtypes
from smalti.ptx.toolchain import PtxasError, compile_ptx
from smalti.runtime import check_arguments
from smalti.runtime.cache import KernelCache, compile_kernel, decode_entry, ptxas_available
from smalti.runtime.compiler import compile_mlir
from smalti.runtime.dtypes import NUMPY_DTYPES, SCALE_TYPES
from smalti.runtime.signatures import signature_from_json, signature_to_json
from tests.dsl_helpers import isolated_cache  # noqa: F401

SCALE = """
func.func @scale(%a: memref<128x64xf32>, %out: memref<128x64xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x64xf32>, index, index) -> vector<128x64xf32>
  %w = arith.mulf %v, %v : vector<128x64xf32>
  "smalti.vector_store"(%w, %out, %c0, %c0) : (vector<128x64xf32>, memref<128x64xf32>, index, index) -> ()
  return
}
"""

WGMMA = """
func.func @mma(%out: memref<64x64xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %o_b = arith.constant 8192 : index
  %a = "smalti.slice_smem"(%c0) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %b = "smalti.slice_smem"(%o_b) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %acc = arith.constant dense<0.0> : vector<64x64xf32>
  %d = "smalti.wgmma"(%acc, %a, %b) : (vector<64x64xf32>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xbf16, #gpu.address_space<workgroup>>) -> vector<64x64xf32>
  "smalti.vector_store"(%d, %out, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  return
}
"""
WGMMA_LINE = 1 + WGMMA.splitlines().index(next(line for line in WGMMA.splitlines()
                                                if "smalti.wgmma" in line))

needs_ptxas = pytest.mark.skipif(not ptxas_available(), reason="needs ptxas")


# ---- --arch ---------------------------------------------------------------------------

def test_known_archs():
    assert DEFAULT_ARCH == "sm_90a"
    assert set(ARCHES) == {"sm_90a", "sm_100a"}
    assert check_arch("sm_100a").ptx_version == "8.6"
    with pytest.raises(ValueError, match=r"unknown GPU architecture 'sm_80'.*sm_90a, sm_100a"):
        check_arch("sm_80")
    with pytest.raises(ValueError, match="sm_80"):
        compile_mlir(SCALE, arch="sm_80")


@pytest.mark.parametrize(("arch", "version"), [("sm_90a", "8.0"), ("sm_100a", "8.6")])
def test_ptx_target_version_and_signature_name_the_arch(arch, version):
    compiled = compile_mlir(SCALE, arch=arch)
    assert f"\n.target {arch}\n" in compiled.ptx
    assert f"\n.version {version}\n" in compiled.ptx  # sm_100a needs PTX ISA 8.6
    assert compiled.arch == arch
    assert compiled.signature().arch == arch
    assert signature_from_json(signature_to_json(compiled.signature())).arch == arch


@needs_ptxas
def test_ptxas_assembles_for_sm_100a():
    cubin = compile_mlir(SCALE, arch="sm_100a").assemble().cubin
    assert cubin[:4] == b"\x7fELF"


@needs_ptxas
def test_ptxas_refuses_wgmma_for_sm_100a():
    """Why wgmma is refused up front: ptxas rejects it on Blackwell (PTX ISA: "wgmma.mma_async
    requires sm_90a")."""
    hopper = compile_mlir(WGMMA, arch="sm_90a")
    assert "wgmma.mma_async" in hopper.ptx
    if ptxas_available():
        hopper.assemble()
    blackwell_ptx = hopper.ptx.replace(".target sm_90a", ".target sm_100a").replace(
        ".version 8.0", ".version 8.6")
    with pytest.raises(PtxasError, match=r"not supported on \.target 'sm_100a'"):
        compile_ptx(blackwell_ptx, arch="sm_100a")


def test_wgmma_for_sm_100a_is_a_located_error():
    with pytest.raises(DiagnosticError) as caught:
        compile_mlir(WGMMA, "mma.mlir", arch="sm_100a")
    message = str(caught.value)
    assert f"mma.mlir:{WGMMA_LINE}:" in message
    assert "'smalti.wgmma' op needs sm_90a: sm_100a has no wgmma" in message
    assert "--arch=sm_90a" in message


def _kernel(arch: str) -> sd.Kernel:
    spec = jax.ShapeDtypeStruct((128, 128), jnp.float32)

    @sd.kernel(out_shape=spec, arch=arch)
    def add_one(x_ref, out_ref):
        out_ref[...] = x_ref[...] + 1.0

    return add_one


def test_cache_keeps_one_entry_per_arch(tmp_path):
    spec = jax.ShapeDtypeStruct((128, 128), jnp.float32)
    cache = KernelCache(tmp_path)
    hopper = compile_kernel(_kernel("sm_90a").trace(spec).module, arch="sm_90a", cache=cache)
    blackwell = compile_kernel(_kernel("sm_100a").trace(spec).module, arch="sm_100a",
                               cache=cache)
    assert hopper.key != blackwell.key
    assert sorted(p.stem for p in tmp_path.glob("*.json")) == sorted([hopper.key,
                                                                       blackwell.key])
    for compiled, arch in ((hopper, "sm_90a"), (blackwell, "sm_100a")):
        assert compiled.arch == compiled.signature.arch == arch
        assert f".target {arch}" in compiled.ptx
        on_disk = decode_entry((tmp_path / f"{compiled.key}.json").read_bytes(), compiled.key)
        assert on_disk.signature.arch == arch
        assert KernelCache(tmp_path).get(compiled.key) == compiled
    if ptxas_available():
        assert hopper.cubin is not None and blackwell.cubin is not None
        assert hopper.cubin != blackwell.cubin


def test_dsl_kernel_for_sm_100a_runs_in_the_simulator():
    kernel = _kernel("sm_100a")
    x = jnp.arange(128 * 128, dtype=jnp.float32).reshape(128, 128)
    np.testing.assert_array_equal(np.asarray(kernel(x)), np.asarray(x) + 1)


# ---- TMEM as a memory space ------------------------------------------------------------

_MODULES: list[ir.Module] = []  # keep parsed modules (and so their ops) alive


def _value(type_text: str) -> tuple[ir.Operation, ir.Value]:
    context = make_context()
    with context, ir.Location.unknown():
        module = ir.Module.parse(f'%t = "test.tmem"() : () -> {type_text}')
        _MODULES.append(module)
        op = module.body.operations[0]
        return op.operation, op.results[0]


def test_tmem_memory_space():
    op, value = _value('memref<128x256xf32, "tmem">')
    with op.context:
        assert is_tmem_type(value.type) and not is_smem_type(value.type)
        assert tmem_columns(value.type) == 256
        assert check_tmem_ref(op, value, "the accumulator").shape == [128, 256]
    op, value = _value('memref<64x512xbf16, "tmem">')  # 16-bit: two per column
    with op.context:
        assert tmem_columns(value.type) == 256
        check_tmem_ref(op, value, "the accumulator")
    op, value = _value('memref<128x64xf32, "symmetric">')
    with op.context:
        assert not is_tmem_type(value.type)


@pytest.mark.parametrize(("type_text", "problem"), [
    ("memref<128x64xf32>", "to be a TMEM memref"),
    ("memref<128x64xf32, #gpu.address_space<workgroup>>", "to be a TMEM memref"),
    ('memref<96x64xf32, "tmem">', "128 or 64 TMEM lanes"),
    ('memref<128xf32, "tmem">', "2-D of static shape"),
    ('memref<128x?xf32, "tmem">', "2-D of static shape"),
    ('memref<128x1024xf32, "tmem">', "spans 1024 TMEM columns; a CTA has 512"),
    ('memref<128x64xf64, "tmem">', "elements of 32, 16, 8, 4, 2 or 1 bits"),
])
def test_tmem_ref_errors(type_text, problem):
    op, value = _value(type_text)
    with op.context, pytest.raises(DiagnosticError, match=problem):
        check_tmem_ref(op, value, "the accumulator")


# ---- FP4 / FP6 data and block-scale types ----------------------------------------------

NEW_TYPES = {
    "f4E2M1FN": ml_dtypes.float4_e2m1fn, "f6E2M3FN": ml_dtypes.float6_e2m3fn,
    "f6E3M2FN": ml_dtypes.float6_e3m2fn, "f8E8M0FNU": ml_dtypes.float8_e8m0fnu,
}
BITS = {"f4E2M1FN": 4, "f6E2M3FN": 6, "f6E3M2FN": 6, "f8E8M0FNU": 8}


@pytest.mark.parametrize("name", sorted(NEW_TYPES))
def test_new_types_map_between_mlir_numpy_and_the_dsl(name):
    dtype = np.dtype(NEW_TYPES[name])
    assert NUMPY_DTYPES[name] == dtype
    assert dsl_dtypes.mlir_name(dtype) == name
    assert dsl_dtypes.is_float(dtype)
    assert dsl_dtypes.bit_width(dtype) == BITS[name]
    with make_context():
        assert str(dsl_dtypes.mlir_type(dtype)) == name
        assert dsl_dtypes.numpy_dtype(ir.Type.parse(name)) == dtype


def test_scale_types():
    assert SCALE_TYPES == {"ue8m0": "f8E8M0FNU", "ue4m3": "f8E4M3FN"}
    assert dsl_dtypes.SCALE_DTYPES["ue8m0"] == np.dtype(ml_dtypes.float8_e8m0fnu)
    assert dsl_dtypes.SCALE_DTYPES["ue4m3"] == dsl_dtypes.ue4m3 == np.dtype(
        ml_dtypes.float8_e4m3fn)


@pytest.mark.parametrize("dtype", [
    dsl_dtypes.float4_e2m1fn, dsl_dtypes.float6_e2m3fn, dsl_dtypes.float6_e3m2fn,
    dsl_dtypes.float8_e8m0fnu, dsl_dtypes.ue4m3,
], ids=lambda d: d.name)
def test_kernel_arguments_of_the_new_types_pass_the_checks(dtype):
    """A DSL kernel takes an array of the type (its spec, the traced memref, the kernel
    signature) and a launch's argument check takes a numpy array of it."""
    spec = jax.ShapeDtypeStruct((128, 128), jnp.float32)

    @sd.kernel(out_shape=spec)
    def scaled(s_ref, x_ref, out_ref):
        out_ref[...] = x_ref[...] + 1.0

    traced = scaled.trace(jax.ShapeDtypeStruct((128, 64), dtype), spec)
    name = dsl_dtypes.mlir_name(dtype)
    assert f"memref<128x64x{name}>" in traced.mlir
    with traced.module.context:
        signature = kernel_signature(kernel_functions(traced.module)[0])
    assert signature.args[0].dtype == name and signature.args[0].shape == (128, 64)
    args = (np.zeros((128, 64), dtype), np.ones((128, 128), np.float32),
            np.zeros((128, 128), np.float32))
    assert len(check_arguments(signature, args)) == 3
    with pytest.raises(TypeError, match="must have dtype"):
        check_arguments(signature, (np.zeros((128, 64), np.int8), *args[1:]))
