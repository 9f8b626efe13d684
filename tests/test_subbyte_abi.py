"""4-bit jax arrays in and out of smalti kernels: XLA hands jnp.int4 / jnp.float4_e2m1fn
buffers to the custom call two elements per byte (low nibble first) while its FFI says one
byte per element; numpy (ml_dtypes) keeps one per byte. The simulator's arguments, the CPU
custom call and the kernels must agree (smalti/runtime/subbyte.py). Runs under every jax
CI uses (0.10.2 and 0.12)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import smalti.dsl as sd
from smalti.runtime import subbyte
from smalti.runtime.dtypes import NUMPY_DTYPES
from tests.dsl_helpers import isolated_cache  # noqa: F401

SHAPE = (128, 256)
BF16 = jnp.bfloat16
FOUR_BIT = {"int4": jnp.int4, "float4_e2m1fn": jnp.float4_e2m1fn}


def codes(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Random 4-bit codes, every one of the 16 present."""
    values = np.random.default_rng(seed).integers(0, 16, shape).astype(np.uint8)
    values.reshape(-1)[:16] = np.arange(16)
    return values


def as_four_bit(values: np.ndarray, dtype: object) -> np.ndarray:
    return values.view(np.dtype(dtype))


@pytest.mark.parametrize(("name", "mlir"), [("int4", "i4"), ("float4_e2m1fn", "f4E2M1FN")])
def test_pack_and_unpack_every_code_in_both_nibbles(name, mlir):
    low, high = np.meshgrid(np.arange(16, dtype=np.uint8), np.arange(16, dtype=np.uint8))
    pairs = np.stack([low.reshape(-1), high.reshape(-1)], axis=-1)  # every byte
    array = as_four_bit(pairs, FOUR_BIT[name])
    packed = subbyte.pack(array)
    np.testing.assert_array_equal(packed, (pairs[:, 0] | pairs[:, 1] << 4).astype(np.uint8))
    np.testing.assert_array_equal(subbyte.unpack(packed, mlir, array.shape).view(np.uint8),
                                  pairs)
    assert subbyte.packed_bytes(mlir, (3, 5)) == 8


def _dequantize():
    @sd.kernel(out_shape=jax.ShapeDtypeStruct(SHAPE, BF16))
    def dequantize(x_ref, scale_ref, out_ref):
        out_ref[...] = x_ref[...].astype(BF16) * scale_ref[...]
    return dequantize


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("name", list(FOUR_BIT))
def test_dsl_kernel_takes_four_bit_jax_arrays(name, jit):
    dtype = FOUR_BIT[name]
    x = jnp.asarray(as_four_bit(codes(SHAPE, 1), dtype))
    scale = jnp.asarray(np.random.default_rng(2).standard_normal(SHAPE).astype(
        ml_dtypes.bfloat16))
    kernel = _dequantize()
    got = (jax.jit(kernel) if jit else kernel)(x, scale)
    want = np.asarray(x).astype(np.float32).astype(ml_dtypes.bfloat16) * np.asarray(scale)
    np.testing.assert_array_equal(np.asarray(got).view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("name", list(FOUR_BIT))
def test_dsl_kernel_returns_four_bit_jax_arrays(name, jit):
    """Outputs go back into XLA's packed buffer: a copy of odd and even columns shifted by
    one byte comes back element for element."""
    dtype = FOUR_BIT[name]

    @sd.kernel(out_shape=jax.ShapeDtypeStruct((8, 256), dtype))
    def shift(x_ref, out_ref):
        out_ref[:, 0:128] = x_ref[:, 128:256]
        out_ref[:, 128:256] = x_ref[:, 0:128]

    values = codes((8, 256), 3)
    x = jnp.asarray(as_four_bit(values, dtype))
    got = np.asarray((jax.jit(shift) if jit else shift)(x))
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got.view(np.uint8) & 0xF, np.roll(values, 128, axis=1))


def test_uint4_arrays_are_refused_by_name():
    x = jnp.asarray(as_four_bit(codes(SHAPE, 1), jnp.uint4))
    with pytest.raises(TypeError, match="uint4"):
        _dequantize()(x, jnp.zeros(SHAPE, BF16))


@pytest.mark.parametrize("dtype", ["i4", "f4E2M1FN"])
def test_four_bit_tensor_maps_are_byte_maps_of_half_the_width(dtype):
    """The launcher and the simulator describe a 4-bit map as a UINT8 map over the packed
    bytes: innermost extent and box halved, byte strides of the packed rows."""
    from smalti.dialect.kernel import KernelArg, KernelSignature, TensorMapRecord
    from smalti.runtime.jax_integration import TENSOR_MAP_DATA_TYPES, tensor_map_entries
    from smalti.runtime.tensor_maps import encode_arguments, sim_tensor_map

    record = TensorMapRecord("tm0", 0, dtype, (64, 512), (32, 256), 128)
    signature = KernelSignature(name="k", grid=(1, 1, 1), warpgroups=1,
                                args=(KernelArg("arg0", dtype, (64, 512)),), smem_bytes=0,
                                tensor_maps=(record,))
    entries = tensor_map_entries(record, signature)
    assert entries[:5] == [0, TENSOR_MAP_DATA_TYPES["i8"], 2, 3, 0]
    assert entries[5:7] == [256, 64]  # global dims, innermost first: bytes, rows
    assert entries[10] == 256  # the row stride in bytes
    assert entries[14:16] == [128, 32]  # the box: 128 bytes (256 elements) by 32 rows
    values = as_four_bit(codes((64, 512), 5), NUMPY_DTYPES[dtype])
    device = subbyte.pack(values)
    encoded = encode_arguments(record, device)
    assert (encoded.global_dims, encoded.global_strides, encoded.box_dims) == (
        (256, 64), (256,), (128, 32))
    mapped = sim_tensor_map(record, device)
    assert mapped.box == (32, 128)
    np.testing.assert_array_equal(np.asarray(mapped.array).view(np.uint8).reshape(-1), device)


def test_int4_weights_feed_wgmma_through_registers():
    """The mixed-input matmul path that needs no 4-bit shared memory: int4 weights cross
    global memory at 4 bits, convert in registers (prmt/lop3, no cvt), and reach wgmma as
    bf16 in shared memory."""
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((64, 64), jnp.float32),
               smem=[sd.SMEM((128, 64), BF16)])
    def int4_matmul(x_ref, w_ref, out_ref, w_smem):
        w_smem[...] = w_ref[...].astype(BF16)
        out_ref[...] = sd.wgmma(sd.zeros((64, 64)), x_ref[...], w_smem)

    rng = np.random.default_rng(6)
    x = rng.standard_normal((64, 128)).astype(ml_dtypes.bfloat16)
    w = as_four_bit(codes((128, 64), 7), jnp.int4)
    got = np.asarray(jax.jit(int4_matmul)(x, w))
    np.testing.assert_allclose(got, x.astype(np.float32) @ w.astype(np.float32), rtol=1e-5,
                               atol=1e-4)
    _, compiled = int4_matmul.compile(jax.ShapeDtypeStruct((64, 128), BF16),
                                      jax.ShapeDtypeStruct((128, 64), jnp.int4))
    assert "prmt.b32" in compiled.ptx and "cvt.rn.bf16" not in compiled.ptx
