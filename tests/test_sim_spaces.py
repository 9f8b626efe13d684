"""Module-scope .global/.const variables with initialisers, per-thread .local memory, the
%clock/%clock64/%globaltimer counters, and fma.rn.f64 against exact rational arithmetic."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from smalti.sim import SimError, run_ptx
from tests.async_kernels import HEADER

VARIABLES = HEADER + """
.global .align 4 .u32 table[4] = {10, 20, 30, 40};
.global .align 4 .u32 counter;
.const .align 4 .f32 scale = 2.5;
.const .align 8 .f64 offsets[2] = {0.25, -1.5};

.visible .entry k(.param .u64 out)
{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<20>;
	.reg .f32 	%f<4>;
	.reg .f64 	%fd<4>;
	.reg .b64 	%rd<16>;
	.local .align 8 .b8 scratch[32];
	ld.param.u64 	%rd1, [out];
	mov.u32 	%r1, %tid.x;
	// table[tid % 4] through a register address taken with mov
	and.b32 	%r2, %r1, 3;
	mov.u64 	%rd2, table;
	mul.wide.u32 	%rd3, %r2, 4;
	add.s64 	%rd4, %rd2, %rd3;
	ld.global.u32 	%r3, [%rd4];
	// every thread counts itself in the zero-initialised .global counter
	atom.global.add.u32 	%r4, [counter], 1;
	// .const scalars and arrays
	ld.const.f32 	%f1, [scale];
	cvt.rn.f32.u32 	%f2, %r1;
	mul.rn.f32 	%f3, %f1, %f2;
	ld.const.f64 	%fd1, [offsets+8];
	// .local: each thread writes its own words, then reads them back (also generically)
	st.local.u32 	[scratch], %r1;
	mul.lo.u32 	%r5, %r1, 3;
	st.local.u32 	[scratch+4], %r5;
	mov.u64 	%rd5, scratch;
	cvta.local.u64 	%rd6, %rd5;
	ld.u32 	%r6, [%rd6+4];
	ld.local.u32 	%r7, [scratch];
	add.u32 	%r8, %r6, %r7;
	bar.sync 	0;
	ld.global.u32 	%r9, [counter];
	mul.wide.u32 	%rd7, %r1, 32;
	add.s64 	%rd8, %rd1, %rd7;
	st.global.u32 	[%rd8], %r3;
	st.global.u32 	[%rd8+4], %r9;
	st.global.f32 	[%rd8+8], %f3;
	st.global.u32 	[%rd8+12], %r8;
	st.global.f64 	[%rd8+16], %fd1;
	ret;
}
"""


def test_module_variables_and_local_memory():
    threads = 64
    for _ in range(2):  # every launch starts from the initialisers again
        out = np.zeros((threads, 8), np.uint32)
        run_ptx(VARIABLES, "k", 1, threads, [out])
        tid = np.arange(threads)
        np.testing.assert_array_equal(out[:, 0], (tid % 4 + 1) * 10)
        np.testing.assert_array_equal(out[:, 1], threads)
        np.testing.assert_array_equal(out[:, 2].view(np.float32), 2.5 * tid)
        np.testing.assert_array_equal(out[:, 3], 4 * tid)
        np.testing.assert_array_equal(out[:, 4:6].copy().view(np.float64)[:, 0], -1.5)


def kernel_with(body: str, decls: str = "") -> str:
    return HEADER + f"""{decls}
.visible .entry k(.param .u64 out)
{{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<20>;
	.reg .b64 	%rd<16>;
	ld.param.u64 	%rd1, [out];
	mov.u32 	%r1, %tid.x;
{body}
	ret;
}}
"""


@pytest.mark.parametrize("body, decls, message", [
    ("	.local .align 4 .b8 buf[8];\n	ld.local.u32 	%r2, [buf+4];", "",
     "uninitialised local memory"),
    ("	.local .align 4 .b8 buf[8];\n	st.local.u32 	[buf+8], %r1;", "", "out-of-bounds local"),
    ("	st.const.u32 	[c], %r1;", ".const .align 4 .u32 c;", "read-only"),
    ("	ld.global.u32 	%r2, [g+8];", ".global .align 4 .u32 g[2];",
     "out-of-bounds global load .* .global variable g"),
])
def test_bad_accesses_to_module_and_local_variables_are_reported(body, decls, message):
    with pytest.raises(SimError, match=message):
        run_ptx(kernel_with(body, decls), "k", 1, 32, [np.zeros(1, np.uint32)])


def test_clock_registers_are_monotone():
    body = """
	mov.u64 	%rd2, %clock64;
	mov.u32 	%r2, %clock;
	mov.u64 	%rd3, %globaltimer;
	mov.u64 	%rd4, %clock64;
	mov.u32 	%r3, %clock;
	mov.u64 	%rd5, %globaltimer;
	mul.wide.u32 	%rd6, %r1, 48;
	add.s64 	%rd7, %rd1, %rd6;
	st.global.u64 	[%rd7], %rd2;
	st.global.u64 	[%rd7+8], %rd4;
	cvt.u64.u32 	%rd8, %r2;
	cvt.u64.u32 	%rd9, %r3;
	st.global.u64 	[%rd7+16], %rd8;
	st.global.u64 	[%rd7+24], %rd9;
	st.global.u64 	[%rd7+32], %rd3;
	st.global.u64 	[%rd7+40], %rd5;"""
    out = np.zeros((32, 6), np.uint64)
    run_ptx(kernel_with(body), "k", 1, 32, [out])
    assert (out[:, 1] > out[:, 0]).all() and (out[:, 3] > out[:, 2]).all()
    assert (out[:, 5] > out[:, 4]).all()
    assert (out[:, 2] > out[:, 0]).all()  # one clock: later reads see later times


FMA64 = HEADER + """
.visible .entry fma(.param .u64 a, .param .u64 b, .param .u64 c, .param .u64 out)
{
	.reg .b32 	%r<4>;
	.reg .f64 	%fd<5>;
	.reg .b64 	%rd<12>;
	ld.param.u64 	%rd1, [a];
	ld.param.u64 	%rd2, [b];
	ld.param.u64 	%rd3, [c];
	ld.param.u64 	%rd4, [out];
	mov.u32 	%r1, %tid.x;
	mov.u32 	%r2, %ctaid.x;
	mov.u32 	%r3, %ntid.x;
	mad.lo.u32 	%r1, %r2, %r3, %r1;
	mul.wide.u32 	%rd5, %r1, 8;
	add.s64 	%rd6, %rd1, %rd5;
	add.s64 	%rd7, %rd2, %rd5;
	add.s64 	%rd8, %rd3, %rd5;
	add.s64 	%rd9, %rd4, %rd5;
	ld.global.f64 	%fd1, [%rd6];
	ld.global.f64 	%fd2, [%rd7];
	ld.global.f64 	%fd3, [%rd8];
	fma.rn.f64 	%fd4, %fd1, %fd2, %fd3;
	st.global.f64 	[%rd9], %fd4;
	ret;
}
"""


def exact_fma(a: float, b: float, c: float) -> float:
    """The correctly rounded fma, from exact rationals (IEEE zero signs and specials)."""
    if not (np.isfinite(a) and np.isfinite(b)):
        return a * b + c  # the infinite or NaN product decides
    if not np.isfinite(c):
        return c  # a finite product plus an infinity or NaN
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        return a * b + c if c == 0 and (a == 0 or b == 0) else 0.0
    try:
        return float(exact)
    except OverflowError:
        return float("inf") if exact > 0 else float("-inf")


def fma_cases(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n) * 2.0 ** rng.integers(-60, 60, n)
    b = rng.standard_normal(n) * 2.0 ** rng.integers(-60, 60, n)
    c = rng.standard_normal(n) * 2.0 ** rng.integers(-120, 120, n)
    hard = n // 2  # c cancels the rounded product: the result is the product's rounding error
    c[:hard] = -(a[:hard] * b[:hard]) * (1 + rng.choice([0, 2.0 ** -52, -(2.0 ** -53)], hard))
    tiny = slice(hard, hard + n // 8)  # products near and below the subnormal range
    a[tiny] *= 2.0 ** -500
    b[tiny] *= 2.0 ** -480
    c[tiny] *= 2.0 ** -900
    huge = slice(hard + n // 8, hard + n // 4)
    a[huge] *= 2.0 ** 500
    b[huge] *= 2.0 ** 480
    return a, b, c


def run_fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    out = np.zeros_like(a)
    run_ptx(FMA64, "fma", len(a) // 128, 128, [a, b, c, out])
    return out


def test_fma_rn_f64_is_correctly_rounded():
    a, b, c = fma_cases(2048, 3)
    out = run_fma(a, b, c)
    expected = np.array([exact_fma(*t) for t in zip(a, b, c, strict=True)])
    np.testing.assert_array_equal(out.view(np.uint64), expected.view(np.uint64))
    with np.errstate(over="ignore"):
        plain = a * b + c  # two roundings differ somewhere, so the test can tell them apart
    assert (plain != expected).sum() > 100


def test_fma_rn_f64_special_values():
    inf, nan = np.inf, np.nan
    cases = [(inf, 0.0, 1.0), (inf, 2.0, -inf), (1e300, 1e300, -inf), (2.0, 3.0, nan),
             (-0.0, 1.0, -0.0), (0.0, -1.0, 0.0), (1.0, 1.0, -1.0), (1e300, 1e10, 0.0),
             (5e-324, 0.5, 0.0), (-5e-324, 0.5, -0.0)]
    a, b, c = (np.array([t[i] for t in cases] * 13, np.float64)[:128] for i in range(3))
    out = run_fma(a, b, c)
    expected = [nan, nan, -inf, nan, -0.0, 0.0, 0.0, inf, 0.0, -0.0]
    expected = np.array((expected * 13)[:128])
    np.testing.assert_array_equal(np.isnan(out), np.isnan(expected))
    ok = ~np.isnan(expected)
    np.testing.assert_array_equal(out[ok].view(np.uint64), expected[ok].view(np.uint64))
