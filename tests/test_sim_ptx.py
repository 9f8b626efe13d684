"""run_ptx on PTX text in the style nvcc emits: parsing, line numbers, predicates, guards."""

from __future__ import annotations

import numpy as np
import pytest

from smalti.sim import SimError, run_ptx

NVCC_AXPBY = """
.version 8.0
.target sm_90a
.address_size 64

.visible .entry axpby(
	.param .u64 axpby_param_0,
	.param .u64 axpby_param_1,
	.param .f32 axpby_param_2,
	.param .u32 axpby_param_3
)
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<6>;
	.reg .f32 	%f<5>;
	.reg .b64 	%rd<8>;

	ld.param.u64 	%rd1, [axpby_param_0];
	ld.param.u64 	%rd2, [axpby_param_1];
	ld.param.f32 	%f1, [axpby_param_2];
	ld.param.u32 	%r2, [axpby_param_3];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mad.lo.s32 	%r1, %r3, %r4, %r5;
	setp.ge.u32 	%p1, %r1, %r2;
	@%p1 bra 	$L__BB0_2;
	cvta.to.global.u64 	%rd3, %rd1;
	mul.wide.u32 	%rd4, %r1, 4;
	add.s64 	%rd5, %rd3, %rd4;
	ld.global.nc.f32 	%f2, [%rd5];
	cvta.to.global.u64 	%rd6, %rd2;
	add.s64 	%rd7, %rd6, %rd4;
	ld.global.f32 	%f3, [%rd7];
	fma.rn.f32 	%f4, %f1, %f2, %f3;
	st.global.f32 	[%rd7], %f4;
$L__BB0_2:
	ret;

}
"""


def test_nvcc_style_kernel_with_tail_guard():
    x = np.arange(1000, dtype=np.float32) / 7
    y = np.linspace(-5, 5, 1000, dtype=np.float32)
    expected = (np.float64(np.float32(2.5)) * x + y).astype(np.float32)
    run_ptx(NVCC_AXPBY, "axpby", (8, 1, 1), (128, 1, 1), [x, y, 2.5, 1000])
    np.testing.assert_array_equal(y, expected)


def test_parsed_line_numbers_in_errors():
    x = np.zeros(10, np.float32)
    y = np.zeros(10, np.float32)
    # n larger than the buffers: thread 10 loads past the end of x.
    with pytest.raises(SimError) as info:
        run_ptx(NVCC_AXPBY, "axpby", 1, 32, [x, y, 1.0, 32])
    message = str(info.value)
    line = NVCC_AXPBY.split("\n").index("\tld.global.nc.f32 \t%f2, [%rd5];") + 1
    assert f"at line {line}" in message
    assert "ld.global.nc.f32" in message
    assert "thread (10, 0, 0)" in message


SETP_FORMS = """
.version 8.0
.target sm_90a
.address_size 64

.visible .entry forms(.param .u64 forms_param_0, .param .u64 forms_param_1)
{
	.reg .pred %p<6>;
	.reg .b32 %r<12>;
	.reg .f32 %f<3>;
	.reg .b64 %rd<6>;

	ld.param.u64 %rd1, [forms_param_0];
	ld.param.u64 %rd2, [forms_param_1];
	mov.u32 %r1, %tid.x;
	mul.wide.u32 %rd3, %r1, 4;
	add.s64 %rd4, %rd1, %rd3;
	ld.global.f32 %f1, [%rd4];
	setp.gtu.f32 %p1, %f1, 0f00000000;
	setp.lt.and.f32 %p2|%p3, %f1, 0f40000000, %p1;
	selp.u32 %r2, 1, 0, %p1;
	selp.u32 %r3, 2, 0, %p2;
	selp.u32 %r4, 4, 0, %p3;
	setp.num.f32 %p4, %f1, %f1;
	not.pred %p5, %p4;
	selp.u32 %r5, 8, 0, %p5;
	or.b32 %r6, %r2, %r3;
	or.b32 %r7, %r4, %r5;
	or.b32 %r8, %r6, %r7;
	mul.wide.u32 %rd3, %r1, 4;
	add.s64 %rd5, %rd2, %rd3;
	st.global.u32 [%rd5], %r8;
	ret;
}
"""


def test_setp_combining_and_unordered_forms():
    values = np.array([-1.0, 0.0, 1.0, 2.0, 3.0, np.nan, np.inf, -0.0], np.float32)
    out = np.zeros(values.size, np.uint32)
    run_ptx(SETP_FORMS, "forms", 1, values.size, [values, out])
    with np.errstate(invalid="ignore"):
        p1 = (values > 0) | np.isnan(values)  # gtu: true for NaN
        lt = values < 2  # ordered: false for NaN
    p2 = lt & p1
    p3 = ~lt & p1
    expected = p1 * 1 + p2 * 2 + p3 * 4 + np.isnan(values) * 8
    np.testing.assert_array_equal(out, expected)


def test_unknown_kernel_in_ptx_text():
    with pytest.raises(SimError, match="no kernel named 'nope'"):
        run_ptx(NVCC_AXPBY, "nope", 1, 1, [])
