"""The JAX side: the CUDA launcher builds, `smalti.runtime.export` for CUDA carries the custom
call and the cubin on a CPU-only machine, the CPU path is the simulator's custom call,
attributes encode launches and tensor maps, a kernel's debug buffer is an extra result printed
as the simulator prints it, and calls with wrong arrays fail before anything runs."""

from __future__ import annotations

import ctypes
import functools
import re

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import smalti.dsl as sd
from smalti.dialect.context import make_context, parse_module
from smalti.dialect.kernel import KernelArg, KernelSignature, TensorMapRecord
from smalti.runtime import cpu_target, jax_integration, launcher, simulate
from smalti.runtime import export as smalti_export
from smalti.runtime.cache import CompiledKernel, KernelCache, compile_kernel, ptxas_available
from smalti.runtime.compiler import CompiledModule
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
    assert library.smalti_launch_core  # the driver-facing core, for ctypes callers
    assert launcher.build(tmp_path) == path  # cached by content
    assert not list(tmp_path.glob("*.tmp"))


def test_launcher_registers_as_a_cuda_ffi_target(launcher_dir):
    assert launcher.register(launcher_dir) == NAME


@pytest.mark.skipif(not ptxas_available(), reason="ptxas not installed: no cubin to carry")
def test_export_for_cuda_carries_the_custom_call_and_the_cubin():
    example = load_example("pointwise")
    args = (jnp.zeros((256, 384), jnp.float32), jnp.zeros((384,), jnp.float32),
            jnp.zeros((256,), jnp.float32))
    exported = smalti_export(example.scale_shift, platforms=["cuda"])(*args)
    text = exported.mlir_module()
    call = next(line for line in text.splitlines() if f"custom_call @{NAME}" in line)
    _, compiled = example.scale_shift.compile(*args)
    assert compiled.cubin is not None
    assert compiled.cubin.hex().upper() in call
    assert 'kernel = "scale_shift"' in call
    assert "debug_bytes = 0 : i64" in call  # no debug_print: no debug buffer
    assert "launch = dense<[3, 2, 1, 128, 1, 1, 1, 1, 1, 0]> : tensor<10xi64>" in call
    assert "tensor_maps = dense<> : tensor<0xi64>" in call
    assert "pure_callback" not in text and "callback" not in call
    assert exported.platforms == ("cuda",)
    assert exported.out_avals[0].shape == (256, 384)


def test_the_cpu_path_is_the_simulators_custom_call():
    """Lowered for the CPU, a kernel is `smalti_simulate` carrying its PTX and signature: no
    Python callback (which could neither lower for several platforms nor serialize)."""
    example = load_example("pointwise")
    args = (jax.ShapeDtypeStruct((128, 128), jnp.float32),
            jax.ShapeDtypeStruct((128,), jnp.float32), jax.ShapeDtypeStruct((128,), jnp.float32))
    lowered = jax.jit(example.scale_shift).lower(*args).as_text()
    [call] = [line for line in lowered.splitlines()
              if f"custom_call @{cpu_target.TARGET_NAME}" in line]
    assert "ptx = " in call and ".visible .entry scale_shift(" in call
    assert '\\22name\\22: \\22scale_shift\\22' in call  # the signature's JSON
    assert "callback" not in lowered and NAME not in lowered


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
    source = (launcher.DIRECTORY / "core.h").read_text()
    assert f"kRecordSize = {jax_integration.RECORD_SIZE}" in source


def test_ffi_attributes_hold_launch_configuration():
    signature = KernelSignature("k", (4, 2, 1), 2, (KernelArg("arg0", "f32", (8,)),), 1024,
                                cluster=(2, 1, 1))
    compiled = CompiledKernel("key", ".version 8.0", signature, b"\x7fELF", "sm_90a")
    attributes = jax_integration.ffi_attributes(compiled)  # the cluster: the kernel's
    assert list(attributes["launch"]) == [4, 2, 1, 256, 1, 1, 2, 1, 1, 1024]
    assert attributes["cubin"].tobytes() == b"\x7fELF" and attributes["kernel"] == "k"
    assert attributes["debug_bytes"] == 0
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


def test_differentiating_a_kernel_names_it_and_says_what_to_do():
    """jax.grad through a kernel with no custom_vjp is a TypeError naming the kernel (not
    jax's message about an FFI call); stop_gradient and a custom_vjp make it work."""
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128,), jnp.float32))
    def doubled(x_ref, out_ref):
        out_ref[...] = x_ref[...] * 2.0

    x = jnp.arange(128, dtype=jnp.float32)
    with pytest.raises(TypeError, match=r"kernel doubled has no derivative: .*jax\.custom_vjp"):
        jax.grad(lambda x: doubled(x).sum())(x)
    assert float(jax.grad(lambda x: doubled(jax.lax.stop_gradient(x)).sum() + x.sum())(x)[0]) == 1

    @jax.custom_vjp
    def twice(x):
        return doubled(x)

    twice.defvjp(lambda x: (doubled(x), None), lambda _, g: (doubled(g),))
    np.testing.assert_array_equal(np.asarray(jax.jit(jax.grad(lambda x: twice(x).sum()))(x)),
                                  np.full(128, 2.0, np.float32))


def test_launcher_binds_exactly_the_attributes_python_sets():
    source = (launcher.DIRECTORY / "launcher.cc").read_text()
    bound = set(re.findall(r'\.(?:template )?Attr<.*?>\("(\w+)"\)', source))
    signature = KernelSignature("k", (1, 1, 1), 1, (KernelArg("arg0", "f32", (8,)),))
    compiled = CompiledKernel("key", ".version 8.0", signature, b"", "sm_90a")
    assert bound == set(jax_integration.ffi_attributes(compiled))


# Two blocks; a vector, a scalar, and a print in a loop whose count ("last of 3 runs") is only
# right when the launcher zeroes the debug buffer before every launch.
DEBUG_KERNEL = """func.func @dbg(%a: memref<8x256xbf16>, %out: memref<8x256xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 2>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c128 = arith.constant 128 : index
  %bx = gpu.block_id x
  %col = arith.muli %bx, %c128 : index
  %v = "smalti.vector_load"(%a, %c0, %col) : (memref<8x256xbf16>, index, index) -> vector<8x128xbf16>
  "smalti.debug_print"(%v) {format = "tile {}"} : (vector<8x128xbf16>) -> ()
  "smalti.debug_print"(%bx) {format = "bx = {}"} : (index) -> ()
  %r = scf.for %i = %c0 to %c3 step %c1 iter_args(%acc = %v) -> (vector<8x128xbf16>) {
    %next = arith.addf %acc, %acc : vector<8x128xbf16>
    "smalti.debug_print"(%next) {format = "loop {}"} : (vector<8x128xbf16>) -> ()
    scf.yield %next : vector<8x128xbf16>
  }
  "smalti.vector_store"(%r, %out, %c0, %col) : (vector<8x128xbf16>, memref<8x256xbf16>, index, index) -> ()
  return
}
"""
DEBUG_OUTPUTS = [((8, 256), np.dtype(ml_dtypes.bfloat16))]
# Per block: two 8x128 bf16 prints (16-byte header + 2048 bytes) and an index (16 + 8, padded
# to 32).
DEBUG_BYTES = 2 * (2064 + 32 + 2064)


def compile_debug_kernel() -> CompiledKernel:
    """DEBUG_KERNEL compiled (cubin when ptxas is there), outside any disk cache."""
    context = make_context()
    module = parse_module(DEBUG_KERNEL, "debug.mlir", context)
    with context:
        return compile_kernel(module, cache=KernelCache(None))


def simulated_module(compiled: CompiledKernel) -> CompiledModule:
    return CompiledModule(compiled.ptx, {compiled.name: compiled.signature}, compiled.arch)


def debug_input() -> np.ndarray:
    rng = np.random.default_rng(3)
    return rng.standard_normal((8, 256)).astype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("cuda_here", [False, True])
def test_export_for_cuda_gives_the_custom_call_the_debug_buffer_result(monkeypatch, cuda_here):
    """Exported from a machine with or without CUDA: the call has the u8 result, the user
    does not, and no Python callback is staged (it could not be serialized): a warning says
    the exported CUDA code will not print."""
    monkeypatch.setattr(jax_integration, "cuda_backend_present", lambda: cuda_here)
    monkeypatch.setattr(jax_integration, "register", lambda directory: NAME)
    compiled = compile_debug_kernel()
    if compiled.cubin is None:
        compiled = CompiledKernel(compiled.key, compiled.ptx, compiled.signature, b"\x7fELF")
    assert compiled.signature.debug_buffer_bytes == DEBUG_BYTES
    assert jax_integration.ffi_attributes(compiled)["debug_bytes"] == DEBUG_BYTES

    def run(a):
        return jax_integration.call_kernel(compiled, [a], DEBUG_OUTPUTS)[0]

    with pytest.warns(UserWarning, match=r"debug_print output of smalti kernel\(s\) dbg is not "
                                         "printed by the exported CUDA code"):
        exported = smalti_export(run, platforms=["cuda"])(jnp.zeros((8, 256), jnp.bfloat16))
    text = exported.mlir_module()
    call = next(line for line in text.splitlines() if f"custom_call @{NAME}" in line)
    assert f"debug_bytes = {DEBUG_BYTES} : i64" in call
    assert f"(tensor<8x256xbf16>) -> (tensor<8x256xbf16>, tensor<{DEBUG_BYTES}xui8>)" in call
    assert "callback" not in text
    assert [(a.shape, a.dtype) for a in exported.out_avals] == [((8, 256), jnp.bfloat16)]


def _cuda_branch(closed: jax.core.ClosedJaxpr):
    """The CUDA branch of call_kernel's platform_dependent switch (inside the custom_jvp
    that refuses derivatives)."""
    [call] = [e for e in closed.jaxpr.eqns if e.primitive.name == "custom_jvp_call"]
    cond = next(e for e in call.params["call_jaxpr"].jaxpr.eqns if e.primitive.name == "cond")
    index = cond.params["branches_platforms"].index(("cuda",))
    return cond.params["branches"][index].jaxpr


def test_cuda_branch_prints_the_debug_result_as_the_simulator_does(monkeypatch, capsys):
    """Traced as where CUDA is present: the launcher's last result (u8[DEBUG_BYTES]) goes to
    a debug callback, and that callback prints exactly what run_simulated printed from the
    same buffer."""
    monkeypatch.setattr(jax_integration, "cuda_backend_present", lambda: True)
    monkeypatch.setattr(jax_integration, "register", lambda directory: NAME)
    compiled = compile_debug_kernel()
    if compiled.cubin is None:  # the CUDA branch needs one to launch
        compiled = CompiledKernel(compiled.key, compiled.ptx, compiled.signature, b"\x7fELF")
    a = debug_input()
    closed = jax.make_jaxpr(
        lambda x: jax_integration.call_kernel(compiled, [x], DEBUG_OUTPUTS)[0])(a)
    branch = _cuda_branch(closed)
    [launch] = [e for e in branch.eqns if e.primitive.name == "ffi_call"]
    [callback] = [e for e in branch.eqns if e.primitive.name == "debug_callback"]
    assert [(v.aval.shape, v.aval.dtype) for v in launch.outvars] == [
        ((8, 256), jnp.bfloat16), ((DEBUG_BYTES,), np.uint8)]
    assert callback.invars == [launch.outvars[-1]]
    assert branch.outvars == launch.outvars[:1]  # the debug buffer is not an output

    run_ptx, buffers = simulate.run_ptx, []

    def spy(*args, **kwargs):
        run_ptx(*args, **kwargs)
        buffers.append(args[4][-1].copy())  # the hidden debug buffer, after the run

    monkeypatch.setattr(simulate, "run_ptx", spy)
    capsys.readouterr()
    outputs = simulate.run_simulated(simulated_module(compiled), a,
                                     np.zeros((8, 256), ml_dtypes.bfloat16))
    printed = capsys.readouterr().err
    [buffer] = buffers
    assert buffer.dtype == np.uint8 and buffer.shape == (DEBUG_BYTES,)
    lines = re.split(r"\n(?=debug\.mlir:)", printed.rstrip("\n"))  # arrays span lines
    assert [line.split(":")[1] for line in lines] == ["10", "11", "14"] * 2
    assert lines[4] == "debug.mlir:11: [block (1, 0, 0)] bx = 1"
    assert lines[5].startswith("debug.mlir:14: [block (1, 0, 0), last of 3 runs] loop [[")
    np.testing.assert_array_equal(outputs[-1], a * 8)

    callback.params["callback"](buffer)  # the function jax.debug.callback calls
    assert capsys.readouterr().err == printed
    # And through JAX's own callback machinery (here on CPU).
    jax.jit(functools.partial(jax_integration.stage_debug_print, compiled.signature))(buffer)
    jax.effects_barrier()
    assert capsys.readouterr().err == printed


BF16_2D = jax.ShapeDtypeStruct((256, 512), jnp.bfloat16)
EXPORTED_EXAMPLES = {  # example -> (the jitted entry point, its argument specs, kernel names)
    "pointwise": (lambda m: m.scale_shift,
                  (jax.ShapeDtypeStruct((256, 384), jnp.float32),
                   jax.ShapeDtypeStruct((384,), jnp.float32),
                   jax.ShapeDtypeStruct((256,), jnp.float32)), ["scale_shift"]),
    "softmax": (lambda m: m.softmax, (jax.ShapeDtypeStruct((256, 512), jnp.float32),),
                ["softmax"]),
    "matmul": (lambda m: m.matmul, (jax.ShapeDtypeStruct((256, 256), jnp.bfloat16),) * 2,
               ["matmul"]),
    "matmul_ws": (lambda m: m.matmul_ws, (BF16_2D, jax.ShapeDtypeStruct((512, 512),
                                                                         jnp.bfloat16)),
                  ["matmul_ws"]),
    "flash_attention": (lambda m: (lambda q, k, v: (m.flash_attention(q, k, v),
                                                    m.flash_attention(q, k, v, causal=True))),
                        (jax.ShapeDtypeStruct((2, 256, 64), jnp.bfloat16),) * 3,
                        ["attention", "causal_attention"]),
}


@pytest.mark.skipif(not ptxas_available(), reason="ptxas (nvidia-cuda-nvcc) is not installed")
@pytest.mark.parametrize("name", list(EXPORTED_EXAMPLES))
def test_every_example_exports_for_cuda_with_its_cubins(name):
    """smalti.runtime.export(..., platforms=['cpu', 'cuda']) of each example on this CPU-only
    machine: one CUDA custom call per kernel, each carrying a cubin (an ELF image) and its
    kernel name, one CPU custom call per kernel carrying its PTX; and it serializes."""
    entry, specs, kernels = EXPORTED_EXAMPLES[name]
    function = entry(load_example(name))
    exported = smalti_export(function, platforms=["cpu", "cuda"])(*specs)
    lines = exported.mlir_module().splitlines()
    calls = [line for line in lines if f"custom_call @{NAME}" in line]
    assert [re.search(r'kernel = "(\w+)"', c).group(1) for c in calls] == kernels
    for call in calls:
        cubin = re.search(r'cubin = dense<"0x([0-9A-F]+)"', call)
        assert cubin is not None and bytes.fromhex(cubin.group(1))[:4] == b"\x7fELF"
    simulated = [line for line in lines if f"custom_call @{cpu_target.TARGET_NAME}" in line]
    assert [re.search(r"\.visible \.entry (\w+)\(", c).group(1) for c in simulated] == kernels
    assert exported.platforms == ("cpu", "cuda")
    assert len(exported.serialize()) > 0
