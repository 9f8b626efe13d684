"""Tensor maps a kernel builds (tensormap.replace, tensormap.cp_fenceproxy), tensor maps
described as cuTensorMapEncodeTiled's arguments (TensorMapEncodeTiled, a unit dimension with
stride 0), and struct parameters holding pointers and maps (ParamStruct)."""

from __future__ import annotations

import numpy as np
import pytest

from smalti.sim import ParamStruct, SimError, TensorMap, TensorMapEncodeTiled, run_ptx
from smalti.sim.tensormap_memory import DeviceMap
from tests.async_kernels import tma_load_kernel

HEADER = ".version 8.0\n.target sm_90a\n.address_size 64\n"

# Thread 0 builds a 2-D f32 map of `src` (rows x 32, box 8 x 32) from zeros in shared memory,
# copies it to `maps` (global) with tensormap.cp_fenceproxy (warp 0), then TMA-loads the box at
# row 8 and the block copies it to `out`. FIELDS may be edited by a test.
FIELDS = """	tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%rd7], %rd3;
	tensormap.replace.tile.rank.shared::cta.b1024.b32 [%rd7], 1;
	tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%rd7], 0, 32;
	tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%rd7], 1, 8;
	tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%rd7], 0, 32;
	tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%rd7], 1, %r20;
	tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%rd7], 0, 128;
	tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%rd7], 0, 1;
	tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%rd7], 1, 1;
	tensormap.replace.tile.elemtype.shared::cta.b1024.b32 [%rd7], 7;
	tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [%rd7], 3;"""

BUILD = HEADER + """
.visible .entry build(.param .u64 src, .param .u32 rows, .param .u64 maps,
                      .param .u64 out)
{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<24>;
	.reg .b64 	%rd<16>;
	.shared .align 1024 .b8 smem[1024];
	.shared .align 128 .b8 tmap[128];
	.shared .align 8 .b64 bar;

	ld.param.u64 	%rd3, [src];
	ld.param.u32 	%r20, [rows];
	ld.param.u64 	%rd4, [maps];
	ld.param.u64 	%rd1, [out];
	cvta.to.global.u64 	%rd2, %rd1;
	mov.u32 	%r1, %tid.x;
	mov.u32 	%r2, tmap;
	setp.lt.u32 	%p1, %r1, 32;
	shl.b32 	%r3, %r1, 2;
	add.u32 	%r4, %r2, %r3;
	@%p1 st.shared.u32 	[%r4], 0;
	bar.sync 	0;
	cvt.u64.u32 	%rd7, %r2;
	setp.ne.u32 	%p2, %r1, 0;
	@%p2 bra 	BUILT;
FIELDS
	mbarrier.init.shared::cta.b64 	[bar], 1;
BUILT:
	bar.sync 	0;
	@%p1 tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [%rd4], [%rd7], 128;
	@%p1 fence.proxy.tensormap::generic.acquire.gpu [%rd4], 128;
	bar.sync 	0;
	@%p2 bra 	LOADED;
	mov.u32 	%r5, 8;
	mov.u32 	%r6, 0;
	mbarrier.arrive.expect_tx.shared::cta.b64 	_, [bar], 1024;
	cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes [smem], [%rd4, {%r6, %r5}], [bar];
LOADED:
WAIT:
	mbarrier.try_wait.parity.shared::cta.b64 	%p3, [bar], 0;
	@!%p3 bra 	WAIT;
	mov.u32 	%r7, smem;
	shl.b32 	%r8, %r1, 3;
	add.u32 	%r9, %r7, %r8;
	ld.shared.v2.u32 	{%r10, %r11}, [%r9];
	cvt.u64.u32 	%rd5, %r8;
	add.s64 	%rd6, %rd2, %rd5;
	st.global.v2.u32 	[%rd6], {%r10, %r11};
	ret;
}
""".replace("FIELDS", FIELDS)


def swizzled_box(src: np.ndarray, row: int) -> np.ndarray:
    """The 8 x 32 f32 box at `row` as 128B-swizzled shared memory holds it."""
    box = src[row:row + 8].reshape(-1).view(np.uint8).reshape(8, 8, 16)
    out = np.empty_like(box)
    for r in range(8):
        for chunk in range(8):
            out[r, chunk ^ r] = box[r, chunk]
    return out.reshape(-1)


def test_a_kernel_builds_a_tensor_map_and_loads_through_it():
    src = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    maps = np.zeros(128, np.uint8)
    out = np.zeros(1024, np.uint8)
    run_ptx(BUILD, "build", 1, 128, [src, np.uint32(16), maps, out])
    np.testing.assert_array_equal(out, swizzled_box(src, 8))
    fields = DeviceMap.read(maps)
    assert (fields.rank, fields.box, fields.dims, fields.strides) == (2, (32, 8), (32, 16),
                                                                      (128,))


def test_rows_past_the_built_extent_are_zero_filled():
    src = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    out = np.zeros(1024, np.uint8)
    run_ptx(BUILD, "build", 1, 128, [src, np.uint32(12), np.zeros(128, np.uint8), out])
    expected = src.copy()
    expected[12:] = 0
    np.testing.assert_array_equal(out, swizzled_box(expected, 8))


def test_a_field_left_unset_is_reported_at_the_tma():
    ptx = BUILD.replace(FIELDS.split("\n")[2] + "\n", "")  # no inner box dimension
    with pytest.raises(SimError, match="not a valid tensor map: a zero in the global") as info:
        run_ptx(ptx, "build", 1, 128, [np.zeros((16, 32), np.float32), np.uint32(16),
                                       np.zeros(128, np.uint8), np.zeros(1024, np.uint8)])
    assert "cp.async.bulk.tensor" in str(info.value)


def test_a_map_beyond_its_buffer_is_reported():
    with pytest.raises(SimError, match="not a valid tensor map: out-of-bounds"):
        run_ptx(BUILD, "build", 1, 128, [np.zeros((16, 32), np.float32), np.uint32(64),
                                         np.zeros(128, np.uint8), np.zeros(1024, np.uint8)])


def test_replacing_the_address_of_a_copied_host_map():
    """A host map passed as a parameter, copied to shared memory, its global address
    replaced (CUTLASS's grouped GEMMs do so): the copy reads the new tensor."""
    ptx = BUILD.replace(FIELDS, """	ld.param.u64 	%rd8, [first];
	tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%rd7], %rd3;""")
    ptx = ptx.replace(".param .u64 out)", ".param .u64 out, .param .u64 other)")
    ptx = ptx.replace(".param .u64 maps,", ".param .u64 maps, .param .align 64 .b8 first[128],")
    # copy the parameter map into shared memory instead of zeros
    ptx = ptx.replace("@%p1 st.shared.u32 \t[%r4], 0;", """mov.b64 	%rd9, first;
	cvta.param.u64 	%rd10, %rd9;
	cvt.u64.u32 	%rd11, %r3;
	add.s64 	%rd12, %rd10, %rd11;
	@%p1 ld.u32 	%r12, [%rd12];
	@%p1 st.shared.u32 	[%r4], %r12;""")
    first = np.full((16, 32), -1.0, np.float32)
    second = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    out = np.zeros(1024, np.uint8)
    host = TensorMap(first, box=(8, 32), swizzle=128)
    # `first` is a device buffer of the launch (its address is what the copy holds at first)
    run_ptx(ptx, "build", 1, 128, [second, np.uint32(16), np.zeros(128, np.uint8), host, out,
                                   first])
    np.testing.assert_array_equal(out, swizzled_box(second, 8))


def test_encode_tiled_arguments_with_a_unit_dimension_of_stride_zero():
    a = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    # rank 3, innermost first: 32 columns, 16 rows (128-byte stride), a batch of 1 (stride 0)
    encoded = TensorMapEncodeTiled(a, "CU_TENSOR_MAP_DATA_TYPE_FLOAT32", (32, 16, 1),
                                   (128, 0), (32, 16, 1), swizzle="NONE",
                                   l2_promotion="L2_128B", oob_fill="NONE")
    record = encoded.tensor_map()
    assert record.array.shape == (1, 16, 32) and record.array.strides == (0, 128, 4)
    ptx = tma_load_kernel(3, [(0, (0, 0, 0))], a.nbytes, a.nbytes)
    out = np.zeros(a.nbytes, np.uint8)
    run_ptx(ptx, "tma_load", 1, 128, [encoded, out])
    np.testing.assert_array_equal(out.view(np.float32).reshape(16, 32), a)


def test_encode_tiled_16u4_align8b_copies_packed_nibbles():
    """CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B (13): dimensions and box count 4-bit elements,
    packed two to a byte in global and shared memory alike (CUTLASS's NVFP4 operands): a
    box of 128 elements x 8 rows is 64 bytes a row, under the 64-byte swizzle."""
    packed = np.random.default_rng(3).integers(0, 256, (16, 64), dtype=np.uint8)
    encoded = TensorMapEncodeTiled(packed, 13, (128, 16, 1), (64, 0), (128, 8, 1),
                                   swizzle="64B")
    assert encoded.tensor_map().array.shape == (1, 16, 64)
    ptx = tma_load_kernel(3, [(0, (0, 8, 0))], 512, 1024)
    out = np.zeros(512, np.uint8)
    run_ptx(ptx, "tma_load", 1, 128, [encoded, out])
    rows = out.reshape(8, 64)
    chunks = np.arange(4)[None, :] ^ ((np.arange(8)[:, None] // 2) % 4)  # 64B: a ^ (a>>7&3)<<4
    for r in range(8):
        for c in range(4):
            np.testing.assert_array_equal(rows[r, 16 * chunks[r, c]:16 * chunks[r, c] + 16],
                                          packed[8 + r, 16 * c:16 * c + 16])
    with pytest.raises(ValueError, match="multiples of 16 elements"):
        TensorMapEncodeTiled(packed, 13, (120, 16, 1), (64, 0), (120, 8, 1)).tensor_map()


@pytest.mark.parametrize(("change", "message"), [
    ({"global_strides": (100, 0)}, "multiples of 16"),
    ({"global_strides": (128, 128), "global_dim": (32, 16, 2)}, "spans bytes"),
    ({"box_dim": (32, 16)}, "box_dim has 2 entries"),
    ({"data_type": "FLOAT17"}, "unknown data_type"),
    ({"swizzle": "64B"}, "swizzle span"),
])
def test_encode_tiled_arguments_are_checked_as_the_driver_does(change, message):
    a = np.zeros((16, 32), np.float32)
    arguments = {"data_type": "FLOAT32", "global_dim": (32, 16, 1), "global_strides": (128, 0),
                 "box_dim": (32, 16, 1), **change}
    with pytest.raises(ValueError, match=message):
        TensorMapEncodeTiled(a, **arguments).tensor_map()


STRUCT = HEADER + """
.visible .entry k(.param .align 64 .b8 params[192])
{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<12>;
	.reg .b64 	%rd<12>;
	.shared .align 1024 .b8 smem[2048];
	.shared .align 8 .b64 bar;

	mov.b64 	%rd1, params;
	ld.param.u64 	%rd2, [%rd1+8];
	cvta.to.global.u64 	%rd3, %rd2;
	ld.param.u32 	%r9, [%rd1];
	add.s64 	%rd4, %rd1, 64;
	cvta.param.u64 	%rd5, %rd4;
	mov.u32 	%r1, %tid.x;
	setp.eq.u32 	%p1, %r1, 0;
	@!%p1 bra 	WAIT;
	mbarrier.init.shared::cta.b64 	[bar], 1;
	mbarrier.arrive.expect_tx.shared::cta.b64 	_, [bar], 2048;
	cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes [smem], [%rd5, {%r9, %r9}], [bar];
WAIT:
	bar.sync 	0;
WAIT2:
	mbarrier.try_wait.parity.shared::cta.b64 	%p2, [bar], 0;
	@!%p2 bra 	WAIT2;
	mov.u32 	%r2, smem;
	shl.b32 	%r3, %r1, 4;
	add.u32 	%r4, %r2, %r3;
	ld.shared.v4.u32 	{%r5, %r6, %r7, %r8}, [%r4];
	cvt.u64.u32 	%rd6, %r3;
	add.s64 	%rd7, %rd3, %rd6;
	st.global.v4.u32 	[%rd7], {%r5, %r6, %r7, %r8};
	ret;
}
"""


def test_struct_parameter_with_a_pointer_and_a_tensor_map():
    a = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    out = np.zeros(2048, np.uint8)
    data = bytearray(192)
    data[0:4] = np.uint32(0).tobytes()  # the box coordinate
    params = ParamStruct(bytes(data), pointers={8: out},
                         tensor_maps={64: TensorMap(a, box=(16, 32))})
    run_ptx(STRUCT, "k", 1, 128, [params])
    np.testing.assert_array_equal(out.view(np.float32).reshape(16, 32), a)


def test_struct_placements_are_checked():
    with pytest.raises(ValueError, match="tensor map offset 72"):
        ParamStruct(bytes(192), tensor_maps={72: TensorMap(np.zeros((8, 8), np.float32),
                                                           box=(8, 8))})
    with pytest.raises(ValueError, match="pointer offset 4"):
        ParamStruct(bytes(192), pointers={4: np.zeros(4)})
    with pytest.raises(SimError, match="takes 192 bytes; the ParamStruct has 64"):
        run_ptx(STRUCT, "k", 1, 128, [ParamStruct(bytes(64))])
