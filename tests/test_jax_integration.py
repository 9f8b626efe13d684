"""The JAX side: the CUDA launcher builds, `jax.export` for CUDA carries the custom call and
the cubin on a CPU-only machine, attributes encode launches and tensor maps, and calls with
wrong arrays fail before anything runs."""

from __future__ import annotations

import ctypes
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

import smalti.dsl as sd
from smalti.dialect.kernel import KernelArg, KernelSignature, TensorMapRecord
from smalti.runtime import jax_integration, launcher
from smalti.runtime.cache import CompiledKernel, ptxas_available
from tests.dsl_helpers import isolated_cache, load_example  # noqa: F401

NAME = launcher.TARGET_NAME


@pytest.fixture(scope="module")
def launcher_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("launcher")


def test_launcher_compiles_and_exports_its_handler(launcher_dir):
    tmp_path = launcher_dir
    path = launcher.build(tmp_path)
    assert path.exists() and path.suffix == ".so"
    library = ctypes.cdll.LoadLibrary(str(path))
    assert library.SmaltiLaunch  # the XLA FFI handler symbol
    assert launcher.build(tmp_path) == path  # cached by content
    assert not list(tmp_path.glob("*.tmp"))


def test_launcher_registers_as_a_cuda_ffi_target(launcher_dir):
    assert launcher.register(launcher_dir) == NAME


@pytest.mark.skipif(not ptxas_available(), reason="ptxas not installed: no cubin to carry")
def test_export_for_cuda_carries_the_custom_call_and_the_cubin():
    example = load_example("pointwise")
    args = (jnp.zeros((256, 384), jnp.float32), jnp.zeros((384,), jnp.float32),
            jnp.zeros((256,), jnp.float32))
    exported = export.export(jax.jit(example.scale_shift), platforms=["cuda"],
                             disabled_checks=[export.DisabledSafetyCheck.custom_call(NAME)])(
        *args)
    text = exported.mlir_module()
    call = next(line for line in text.splitlines() if f"custom_call @{NAME}" in line)
    _, compiled = example.scale_shift.compile(*args)
    assert compiled.cubin is not None
    assert compiled.cubin.hex().upper() in call
    assert 'kernel = "scale_shift"' in call
    assert "launch = dense<[3, 2, 1, 128, 1, 1, 1, 1, 1, 0]> : tensor<10xi64>" in call
    assert "tensor_maps = dense<> : tensor<0xi64>" in call
    assert "pure_callback" not in text and "callback" not in call
    assert exported.platforms == ("cuda",)
    assert exported.out_avals[0].shape == (256, 384)


def test_export_for_cpu_uses_the_simulator_callback():
    example = load_example("pointwise")
    args = (jax.ShapeDtypeStruct((128, 128), jnp.float32),
            jax.ShapeDtypeStruct((128,), jnp.float32), jax.ShapeDtypeStruct((128,), jnp.float32))
    lowered = jax.jit(example.scale_shift).lower(*args).as_text()
    assert "callback" in lowered and NAME not in lowered


def test_tensor_map_records_encode_innermost_first():
    signature = KernelSignature(
        "k", (1, 1, 1), 1, (KernelArg("arg0", "bf16", (256, 64)),),
        tensor_maps=(TensorMapRecord("tma0", 0, "bf16", (256, 64), (64, 64), 128),))
    entries = jax_integration.tensor_map_attribute(signature)
    assert entries.dtype == np.int64 and entries.size == jax_integration.RECORD_SIZE
    assert list(entries) == [0, 9, 2, 3, 0,            # arg, BFLOAT16, rank, SWIZZLE_128B, fill
                             64, 256, 0, 0, 0,         # dims, innermost first
                             128, 0, 0, 0,             # byte stride of dim 1
                             64, 64, 0, 0, 0,          # box
                             1, 1, 0, 0, 0]            # element strides
    source = launcher.SOURCE.read_text()
    assert f"kRecordSize = {jax_integration.RECORD_SIZE}" in source


def test_ffi_attributes_hold_launch_configuration():
    signature = KernelSignature("k", (4, 2, 1), 2, (KernelArg("arg0", "f32", (8,)),), 1024,
                                cluster=(2, 1, 1))
    compiled = CompiledKernel("key", ".version 8.0", signature, b"\x7fELF", "sm_90a")
    attributes = jax_integration.ffi_attributes(compiled)  # the cluster: the kernel's
    assert list(attributes["launch"]) == [4, 2, 1, 256, 1, 1, 2, 1, 1, 1024]
    assert attributes["cubin"].tobytes() == b"\x7fELF" and attributes["kernel"] == "k"
    same = jax_integration.ffi_attributes(compiled, (2,))
    assert list(same["launch"]) == list(attributes["launch"])
    with pytest.raises(ValueError, match=r"compiled for clusters of \(2, 1, 1\) CTAs"):
        jax_integration.ffi_attributes(compiled, (1, 1, 1))


def test_call_checks_against_the_compiled_signature():
    signature = KernelSignature("k", (1, 1, 1), 1, (KernelArg("arg0", "f32", (128,)),
                                                    KernelArg("arg1", "f32", (128,))))
    outputs = [((128,), np.dtype(np.float32))]
    with pytest.raises(TypeError, match="argument #0 of kernel k must have dtype float32"):
        jax_integration.check_call(signature, [jnp.zeros(128, jnp.int32)], outputs)
    with pytest.raises(ValueError, match=re.escape("argument #0 of kernel k must have shape "
                                                   "(128,), got (64,)")):
        jax_integration.check_call(signature, [jnp.zeros(64)], outputs)
    with pytest.raises(TypeError, match="takes 1 input arrays, got 2"):
        jax_integration.check_call(signature, [jnp.zeros(128)] * 2, outputs)


def test_vmap_runs_the_kernel_per_batch_element():
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128,), jnp.float32))
    def plus_one(x_ref, out_ref):
        out_ref[...] = x_ref[...] + 1.0

    x = jnp.arange(3 * 128, dtype=jnp.float32).reshape(3, 128)
    np.testing.assert_array_equal(np.asarray(jax.vmap(plus_one)(x)), np.asarray(x) + 1)
