"""`smalti.runtime.export` / `smalti.dsl.export` as a user meets them: one call exports a
function with smalti kernels for the CPU, CUDA or both; it serializes, reads back in another
process, and runs there; misuse fails with a message that names the problem and holds no
cubin bytes. And a failing kernel on the CPU is one error naming it."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import smalti.dsl as sd
from smalti.runtime import cpu_target, deserialize, export, launcher
from tests.dsl_helpers import isolated_cache, line_of, load_example  # noqa: F401


def _pointwise_args():
    return (jnp.linspace(-1, 1, 256 * 384, dtype=jnp.float32).reshape(256, 384),
            jnp.arange(384, dtype=jnp.float32), jnp.full((256,), 0.5, jnp.float32))


def test_one_call_exports_for_cpu_and_cuda_and_the_blob_runs_back(tmp_path):
    example = load_example("pointwise")
    args = _pointwise_args()
    exported = sd.export(example.scale_shift, platforms=["cpu", "cuda"])(*args)
    assert exported.platforms == ("cpu", "cuda")
    blob = exported.serialize()
    back = deserialize(blob)
    np.testing.assert_array_equal(np.asarray(back.call(*args)),
                                  np.asarray(example.reference(*args)))


def test_a_serialized_export_runs_in_a_fresh_process(tmp_path):
    """Nothing of the exporting process is needed: the CPU call carries the PTX and the
    signature, and `deserialize` registers smalti's targets."""
    example = load_example("pointwise")
    args = _pointwise_args()
    path = tmp_path / "scale_shift.bin"
    path.write_bytes(export(example.scale_shift, platforms=["cpu", "cuda"])(*args).serialize())
    np.save(tmp_path / "want.npy", np.asarray(example.reference(*args)))
    script = textwrap.dedent(f"""
        import numpy as np, jax.numpy as jnp
        from smalti.runtime import deserialize
        exported = deserialize(open({str(path)!r}, "rb").read())
        x = jnp.linspace(-1, 1, 256 * 384, dtype=jnp.float32).reshape(256, 384)
        out = exported.call(x, jnp.arange(384, dtype=jnp.float32),
                            jnp.full((256,), 0.5, jnp.float32))
        assert np.array_equal(np.asarray(out), np.load({str(tmp_path / "want.npy")!r}))
        print("ran")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ran"


def test_export_takes_jitted_and_plain_functions():
    example = load_example("pointwise")
    specs = tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in _pointwise_args())
    for function in (example.scale_shift, jax.jit(example.scale_shift),
                     lambda x, s, b: example.scale_shift(x, s, b) * 2):
        exported = export(function, platforms=["cpu"])(*specs)
        assert exported.platforms == ("cpu",)
        assert f"custom_call @{cpu_target.TARGET_NAME}" in exported.mlir_module()


def test_a_platform_smalti_does_not_run_on_is_refused():
    example = load_example("pointwise")
    with pytest.raises(ValueError, match="smalti kernels run on cpu and cuda; cannot export "
                                         "for rocm, tpu"):
        export(example.scale_shift, platforms=["cuda", "tpu", "rocm"])


def test_other_unsafe_custom_calls_are_named_without_smaltis_bytes():
    """JAX's check still guards the user's own custom calls; its message lists those only,
    not smalti's calls with their cubins."""
    example = load_example("pointwise")
    args = _pointwise_args()

    def f(x, scale, shift):
        y = example.scale_shift(x, scale, shift)
        return jax.ffi.ffi_call("users_own_target", jax.ShapeDtypeStruct(y.shape, y.dtype))(y)

    with pytest.raises(ValueError, match="custom calls whose targets have no compatibility") \
            as caught:
        export(f, platforms=["cuda"])(*args)
    message = str(caught.value)
    assert "users_own_target" in message
    assert launcher.TARGET_NAME not in message.split("disabled_checks:")[0]
    assert "cubin" not in message and "7F454C46" not in message  # no ELF image in hex


def test_a_failing_kernel_on_the_cpu_is_one_error_naming_it(capfd):
    """A kernel that waits for a barrier phase nothing completes: the simulator's deadlock
    comes back as the call's one error, naming the kernel, the user's line and the PTX
    line, with nothing else printed."""

    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128,), jnp.float32), smem=[sd.Barriers(1)])
    def stuck(x_ref, o_ref, bars):
        bars[0].wait(0)  # nobody arrives
        o_ref[...] = x_ref[...]

    line = line_of("nobody arrives", stuck.fn)
    with pytest.raises(Exception, match=r"smalti kernel stuck: SimError: mbarrier deadlock") \
            as caught:
        jax.block_until_ready(jax.jit(stuck)(jnp.ones(128, jnp.float32)))
    message = str(caught.value)
    assert f"{__file__}:{line}:" in message  # the user's line
    assert re.search(r"at line \d+ \(.*\): `mbarrier\.try_wait", message)  # the PTX line
    assert "Traceback" not in message
    printed = capfd.readouterr()
    assert "Traceback" not in printed.err and "Exception ignored" not in printed.err


def test_buffers_that_do_not_match_the_signature_are_refused_by_the_cpu_target():
    """A hand-made call whose buffers disagree with the signature it carries (as a corrupted
    export would) fails naming the buffer, instead of reading past XLA's memory."""

    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128,), jnp.float32))
    def plus_one(x_ref, out_ref):
        out_ref[...] = x_ref[...] + 1.0

    _, compiled = plus_one.compile(jax.ShapeDtypeStruct((128,), jnp.float32))
    cpu_target.register_cpu_target()
    call = jax.ffi.ffi_call(cpu_target.TARGET_NAME, jax.ShapeDtypeStruct((128,), jnp.float32))
    with pytest.raises(Exception, match=r"smalti kernel plus_one: ValueError: buffer #0 holds "
                                        r"256 bytes, not a float32\[128\]"):
        jax.block_until_ready(call(jnp.zeros(64, jnp.float32),
                                   **cpu_target.cpu_attributes(compiled)))
