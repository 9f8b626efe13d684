"""Tensor memory in the DSL (smalti/dsl/tmem.py): `sd.TMEM` declarations among a kernel's
scratch buffers, allocated at kernel start and freed at its end, and `TmemRef` loads and
stores of column windows, run under jax.jit through the simulator against numpy; misuse
gives errors located at the user's line."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import smalti.dsl as sd
from smalti.dialect import DiagnosticError
from smalti.runtime.compiler import compile_module
from smalti.runtime.simulate import run_simulated
from tests.dsl_helpers import isolated_cache, line_of  # noqa: F401

F32, BF16 = jnp.float32, jnp.bfloat16
THIS_FILE = __file__
ARCH = "sm_100a"
S = jax.ShapeDtypeStruct


def smalti_ops(traced: sd.Traced) -> list[str]:
    """The smalti ops of the kernel body, in order, with their TMEM attributes."""
    names = re.findall(r'"(smalti\.\w+)"\(.*?\)( \{(?:columns|column) = \d+ : i64\})?',
                       traced.mlir)
    return [name + attrs for name, attrs in names]


@pytest.mark.parametrize("dtype", [np.float32, np.int32, ml_dtypes.bfloat16, np.float16])
def test_store_then_load_at_a_column_offset(dtype):
    """A value stored into the upper half of a TMEM array comes back unchanged."""
    @sd.kernel(out_shape=S((128, 64), dtype), arch=ARCH, smem=[sd.TMEM((128, 128), dtype)])
    def roundtrip(x_ref, out_ref, tmem):
        tmem[:, 64:128] = x_ref[...]
        out_ref[...] = tmem[:, 64:]

    rng = np.random.default_rng(0)
    if dtype == np.int32:
        x = rng.integers(-(2**31), 2**31 - 1, (128, 64), dtype=np.int32)
    else:
        x = rng.standard_normal((128, 64)).astype(dtype)
    np.testing.assert_array_equal(np.asarray(jax.jit(roundtrip)(x)), x)


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16])
def test_unpacked_store_then_load_at_any_column(dtype):
    """An unpacked 16-bit array (one element per 32-bit column) round-trips a value from an
    odd column (tcgen05.st .unpack::16b, tcgen05.ld .pack::16b); it allocates C columns,
    not C / 2."""
    @sd.kernel(out_shape=S((128, 64), dtype), arch=ARCH,
               smem=[sd.TMEM((128, 128), dtype, unpacked=True)])
    def roundtrip(x_ref, out_ref, tmem):
        tmem[:, 33:97] = x_ref[...]
        out_ref[...] = tmem[:, 33:97]

    traced = roundtrip.trace(S((128, 64), dtype))
    assert "smalti.tmem_alloc\"() {columns = 128 : i64}" in traced.mlir
    assert "strided<[256, 2]>, \"tmem\">" in traced.mlir
    ptx = compile_module(traced.module, arch=ARCH).ptx
    assert ".unpack::16b.b32" in ptx and ".pack::16b.b32" in ptx
    x = np.random.default_rng(1).standard_normal((128, 64)).astype(dtype)
    np.testing.assert_array_equal(np.asarray(jax.jit(roundtrip)(x)), x)


@pytest.mark.parametrize("policy", ["latest", "random"])
def test_stage_chosen_at_run_time(policy):
    """A staged array sd.TMEM((2, 128, 64), ...): block b writes stage b % 2 (a traced
    index, `smalti.tmem_stage`) and stage 1 - b % 2 (a static one), then reads both."""
    @sd.kernel(grid=(4,), out_shape=S((4, 128, 128), F32), arch=ARCH,
               smem=[sd.TMEM((2, 128, 64), F32)])
    def staged(x_ref, out_ref, tmem):
        b = sd.program_id(0)
        tmem[0][:, :] = 0.0
        tmem[1][:, :] = 0.0
        tmem[b % 2][:, :] = x_ref[b]
        out_ref[b, :, 0:64] = tmem[0][:, :]
        out_ref[b, :, 64:128] = tmem[1][...]

    traced = staged.trace(S((4, 128, 64), F32))
    assert traced.mlir.count('"smalti.tmem_stage"') == 5
    x = np.random.default_rng(3).standard_normal((4, 128, 64)).astype(np.float32)
    compiled = compile_module(traced.module, arch=ARCH)
    out = run_simulated(compiled, x, np.zeros((4, 128, 128), np.float32),
                        async_completion=policy, seed=1)[-1]
    want = np.zeros((4, 128, 128), np.float32)
    for b in range(4):
        want[b, :, 64 * (b % 2):64 * (b % 2) + 64] = x[b]
    np.testing.assert_array_equal(out, want)


def test_two_arrays_among_smem_declarations_take_their_places():
    """Body parameters follow the declaration order; a (128, 96) f32 array takes 128 columns,
    the widest region is allocated first, the permit given up after the last allocation and
    every region freed at the end."""
    @sd.kernel(out_shape=S((128, 96), F32), arch=ARCH,
               smem=[sd.TMEM((128, 32), BF16), sd.SMEM((128, 96), F32),
                     sd.TMEM((128, 96), F32)])
    def mix(x_ref, out_ref, small, tile, acc):
        assert isinstance(small, sd.TmemRef) and small.shape == (128, 32)
        assert small.columns == 16 and small.dtype == BF16
        assert tile.is_smem and tile.shape == (128, 96)
        assert acc.shape == (128, 96) and acc.columns == 96
        acc[...] = x_ref[...]
        small[:, 0:32] = x_ref[:, 32:64].astype(BF16)
        tile[:, 0:32] = acc[:, 0:32] * 2.0 + small[...].astype(F32)
        tile[:, 32:96] = acc[:, 32:96] * 2.0
        out_ref[...] = tile[...]

    traced = mix.trace(S((128, 96), F32))
    assert smalti_ops(traced)[:4] == [
        "smalti.slice_smem", "smalti.tmem_alloc {columns = 128 : i64}",
        "smalti.tmem_alloc {columns = 32 : i64}", "smalti.tmem_relinquish_alloc_permit"]
    assert smalti_ops(traced)[-2:] == ["smalti.tmem_dealloc", "smalti.tmem_dealloc"]
    assert 'memref<128x128xf32, "tmem">' in traced.mlir  # padded to the allocation
    x = np.random.default_rng(1).standard_normal((128, 96)).astype(np.float32)
    expected = 2 * x
    expected[:, :32] += x[:, 32:64].astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(mix(x)), expected)


def test_a_scalar_store_fills_the_columns():
    @sd.kernel(out_shape=S((128, 64), F32), arch=ARCH, smem=[sd.TMEM((128, 64), F32)])
    def fill(x_ref, out_ref, tmem):
        tmem[...] = 0.5
        tmem[:, 32:64] = x_ref[:, 0:32]
        out_ref[...] = tmem[:, :]

    x = np.random.default_rng(2).standard_normal((128, 64)).astype(np.float32)
    expected = np.concatenate([np.full((128, 32), 0.5, np.float32), x[:, :32]], axis=1)
    np.testing.assert_array_equal(np.asarray(fill(x)), expected)


@pytest.mark.parametrize("policy", ["latest", "random"])
def test_each_warpgroup_allocates_its_own_region(policy):
    """With two warpgroups each allocates (and frees) its own region; none gives up the
    permit, which would stop the other's allocation."""
    @sd.kernel(out_shape=S((128, 64), F32), arch=ARCH, warpgroups=2,
               smem=[sd.TMEM((128, 256), F32)])
    def both(x_ref, out_ref, tmem):
        tmem[:, 128:192] = x_ref[...] + 1.0
        out_ref[...] = tmem[:, 128:192]

    traced = both.trace(S((128, 64), F32))
    assert "smalti.tmem_relinquish_alloc_permit" not in traced.mlir
    x = np.random.default_rng(3).standard_normal((128, 64)).astype(np.float32)
    compiled = compile_module(traced.module, arch=ARCH)
    out = run_simulated(compiled, x, np.zeros_like(x), async_completion=policy, seed=1)[1]
    np.testing.assert_array_equal(out, x + 1)


def test_wrong_arch_names_the_declaration():
    @sd.kernel(out_shape=S((128, 32), F32),
               smem=[sd.TMEM((128, 32), F32)])  # MARK: declared
    def hopper(x_ref, out_ref, tmem):
        tmem[...] = x_ref[...]
        out_ref[...] = tmem[...]

    with pytest.raises(DiagnosticError) as caught:
        hopper(np.zeros((128, 32), np.float32))
    line = line_of("MARK: declared", test_wrong_arch_names_the_declaration)
    assert re.search(rf"{re.escape(THIS_FILE)}:{line}:\d+: error: 'smalti\.tmem_alloc' op needs "
                     r"sm_100a: sm_90a has no tensor memory \(tcgen05\)", str(caught.value))


@pytest.mark.parametrize(("declaration", "error", "message"), [
    ("rows", ValueError, r"TMEM arrays span all 128 lanes: the shape must be \(128, C\), got "
                         r"\(64, 128\)"),
    ("rank", ValueError, r"TMEM needs a 2-D shape of positive Python ints"),
    ("dtype", TypeError, r"TMEM: unsupported dtype"),
    ("wide", ValueError, r"spans 1024 32-bit columns; a CTA has 512"),
    ("unpacked", TypeError, r"TMEM\(..., unpacked=True\) holds 16-bit elements one per "
                            r"32-bit column, not float32"),
    ("wide_unpacked", ValueError, r"spans 640 32-bit columns; a CTA has 512"),
    ("stages", ValueError, r"TMEM stages are a power of two \(they split a power-of-two "
                           r"allocation evenly\), got 3"),
    ("stage_cells", ValueError, r"TMEM stages start at a 32-bit column: 33 bfloat16 columns "
                                r"are not whole columns"),
])
def test_bad_declarations_name_their_line(declaration, error, message):
    with pytest.raises(error, match=message) as caught:
        match declaration:
            case "rows":
                sd.TMEM((64, 128), F32)  # MARK: bad
            case "rank":
                sd.TMEM((128,), F32)  # MARK: bad
            case "dtype":
                sd.TMEM((128, 64), np.float64)  # MARK: bad
            case "wide":
                sd.TMEM((128, 1024), F32)  # MARK: bad
            case "unpacked":
                sd.TMEM((128, 64), F32, unpacked=True)  # MARK: bad
            case "wide_unpacked":
                sd.TMEM((128, 640), np.float16, unpacked=True)  # MARK: bad
            case "stages":
                sd.TMEM((3, 128, 64), F32)  # MARK: bad
            case "stage_cells":
                sd.TMEM((2, 128, 33), BF16)  # MARK: bad
    line = line_of(f'case "{declaration}"', test_bad_declarations_name_their_line) + 1
    assert str(caught.value).startswith(f"{THIS_FILE}:{line}:"), str(caught.value)


def test_more_columns_than_the_cta_has_names_the_declaration():
    with pytest.raises(ValueError) as caught:
        @sd.kernel(out_shape=S((128, 32), F32), arch=ARCH,
                   smem=[sd.TMEM((128, 512), F32),
                         sd.TMEM((128, 32), BF16)])  # MARK: over
        def greedy(out_ref, big, small):
            pass
    line = line_of("MARK: over", test_more_columns_than_the_cta_has_names_the_declaration)
    assert str(caught.value).startswith(f"{THIS_FILE}:{line}:")
    assert "kernel greedy allocates 544 columns of tensor memory up to this array" in str(
        caught.value)


@pytest.mark.parametrize(("misuse", "error", "message"), [
    ("rows", IndexError, r"tmem is read and written across all 128 lanes: its first index "
                         r"must be ':', got 0:64"),
    ("bounds", IndexError, r"columns \[32:96\] are out of bounds \(or empty\) for tmem of "
                           r"shape \(128, 64\)"),
    ("traced", IndexError, r"the columns of tmem must be static Python ints"),
    ("odd", IndexError, r"columns of packed \(bfloat16\) start at a 32-bit TMEM column, a "
                        r"multiple of 2; got 3"),
    ("dtype", TypeError, r"storing a bfloat16 array into tmem of dtype float32; cast it"),
    ("shape", ValueError, r"cannot broadcast"),
    ("narrow", TypeError, r"loading from scales: tcgen05.ld/st move 32- or 16-bit elements, "
                          r"not float8_e4m3fn"),
    ("stage_range", IndexError, r"the stage index of staged ranges over \[0, 1\] \(at "
                                r".*\); it must stay in \[0, 1\): take it modulo the stages"),
    ("stage_static", IndexError, r"stage 2 is out of range for staged with 1 stages"),
    ("stage_type", TypeError, r"index staged with a stage \(a Python int or a traced index\), "
                              r"got float"),
])
def test_misuse_names_the_users_line(misuse, error, message):
    @sd.kernel(grid=(2,), out_shape=S((128, 64), F32), arch=ARCH,
               smem=[sd.TMEM((128, 64), F32), sd.TMEM((128, 64), BF16),
                     sd.TMEM((128, 64), jnp.float8_e4m3fn), sd.TMEM((1, 128, 32), F32)])
    def body(x_ref, out_ref, tmem, packed, scales, staged):
        i = sd.program_id(0)
        match misuse:
            case "rows":
                out_ref[0:64, :] = tmem[0:64, :]  # MARK: misuse
            case "bounds":
                out_ref[:, 0:64] = tmem[:, 32:96]  # MARK: misuse
            case "traced":
                out_ref[:, 0:32] = tmem[:, i * 32:i * 32 + 32]  # MARK: misuse
            case "odd":
                packed[:, 3:35] = x_ref[:, 0:32].astype(BF16)  # MARK: misuse
            case "dtype":
                tmem[...] = x_ref[...].astype(BF16)  # MARK: misuse
            case "shape":
                tmem[:, 0:32] = x_ref[...]  # MARK: misuse
            case "narrow":
                out_ref[...] = scales[...].astype(F32)  # MARK: misuse
            case "stage_range":
                out_ref[:, 0:32] = staged[i][...]  # MARK: misuse
            case "stage_static":
                out_ref[:, 0:32] = staged[2][...]  # MARK: misuse
            case "stage_type":
                out_ref[:, 0:32] = staged[0.0][...]  # MARK: misuse

    with pytest.raises(error, match=message) as caught:
        body.trace(S((128, 64), F32))
    line = line_of(f'case "{misuse}"', body.fn) + 1
    assert str(caught.value).startswith(f"{THIS_FILE}:{line}:"), str(caught.value)


def test_budgeted_warpgroup_regions_cannot_free_tmem_yet():
    @sd.kernel(out_shape=S((128, 32), F32), arch=ARCH, warpgroups=2,
               smem=[sd.TMEM((128, 32), F32)])  # MARK: declared
    def specialised(out_ref, tmem):
        @sd.warpgroup_region(0, registers=40)
        def _():
            pass

    with pytest.raises(ValueError, match="TMEM arrays are freed by every warpgroup at the end "
                                         "of the kernel body") as caught:
        specialised.trace()
    line = line_of("MARK: declared", test_budgeted_warpgroup_regions_cannot_free_tmem_yet)
    assert str(caught.value).startswith(f"{THIS_FILE}:{line}:")
