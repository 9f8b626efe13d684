"""Blackwell tensor-core MMA in the DSL (smalti/dsl/tcgen05.py): sd.tcgen05_mma into TMEM
accumulators (every dense kind, K accumulated across calls, a column window of the
accumulator, A from TMEM), sd.tcgen05_commit releasing barriers, and sd.tcgen05_copy from
shared into tensor memory, run under jax.jit through the simulator against numpy; misuse
gives errors located at the user's line."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import smalti.dsl as sd
from tests.dsl_helpers import isolated_cache, line_of  # noqa: F401

F32, BF16, F16 = jnp.float32, jnp.bfloat16, jnp.float16
E4M3, E5M2 = jnp.float8_e4m3fn, jnp.float8_e5m2
THIS_FILE = __file__
ARCH = "sm_100a"
S = jax.ShapeDtypeStruct


def _exact(shape: tuple[int, ...], dtype: object, rng: np.random.Generator) -> np.ndarray:
    """Quarters in [-2, 2): exact in every input type, so products and sums are exact."""
    return (rng.integers(-8, 8, shape) / 4).astype(dtype)


def _one_mma(in_dtypes: tuple[object, object], m: int, n: int, k: int, *, k_major: bool):
    """D = A @ B in one tcgen05_mma: A (m, k) and B by TMA (B declared (n, k) and passed
    as its transposed view when `k_major`), D f32 in TMEM, then stored."""
    b_shape = (n, k) if k_major else (k, n)

    @sd.kernel(out_shape=S((128, n), F32), arch=ARCH,
               smem=[sd.Barriers(2), sd.SMEM((m, k), in_dtypes[0]),
                     sd.SMEM(b_shape, in_dtypes[1]), sd.TMEM((128, n), F32)])
    def mma(a_ref, b_ref, out_ref, bars, a_smem, b_smem, acc):
        bars[0].arrive_expect_tx(a_smem.nbytes + b_smem.nbytes)
        sd.async_copy(a_ref, a_smem, bars[0])
        sd.async_copy(b_ref, b_smem, bars[0])
        bars[0].wait(0)
        sd.tcgen05_mma(acc, a_smem, b_smem.T if k_major else b_smem, accumulate=False)
        sd.tcgen05_commit(bars[1])
        bars[1].wait(0)
        out_ref[...] = acc[...]

    return mma


@pytest.mark.parametrize(("in_dtypes", "k", "k_major"), [
    ((BF16, BF16), 64, False), ((F16, F16), 32, False), ((BF16, BF16), 64, True),
    ((F32, F32), 32, True), ((E4M3, E5M2), 64, True)])
def test_one_mma_of_every_dense_kind(in_dtypes, k, k_major):
    rng = np.random.default_rng(0)
    a = _exact((128, k), in_dtypes[0], rng)
    b = _exact((128, k) if k_major else (k, 128), in_dtypes[1], rng)
    out = np.asarray(jax.jit(_one_mma(in_dtypes, 128, 128, k, k_major=k_major))(a, b))
    wide_b = b.astype(np.float32).T if k_major else b.astype(np.float32)
    np.testing.assert_array_equal(out, a.astype(np.float32) @ wide_b)


@pytest.mark.parametrize(("in_dtypes", "k"), [((F16, F16), 64), ((E4M3, E5M2), 64)])
def test_float16_accumulator_in_unpacked_tensor_memory(in_dtypes, k):
    """A float16 D (`.kind::f16` with f16 inputs, `.kind::f8f6f4`): one element per 32-bit
    TMEM column, so the accumulator is an unpacked TMEM array. Columns 64-191 start from
    values stored there (tcgen05.st .unpack::16b), take two MMAs (K split in halves,
    accumulate), and are loaded (tcgen05.ld .pack::16b): C + A @ B, exact in f16 (small
    integers)."""
    half = k // 2
    f8 = in_dtypes[0] == E4M3

    @sd.kernel(out_shape=S((128, 128), F16), arch=ARCH,
               smem=[sd.Barriers(2), sd.SMEM((2, 128, half), in_dtypes[0]),
                     sd.SMEM((2, 128, half) if f8 else (2, half, 128), in_dtypes[1]),
                     sd.TMEM((128, 256), F16, unpacked=True)])
    def mma(a_ref, b_ref, c_ref, out_ref, bars, a_smem, b_smem, acc):
        bars[0].arrive_expect_tx(2 * (a_smem[0].nbytes + b_smem[0].nbytes))
        for h in range(2):
            sd.async_copy(a_ref.at[:, h * half:(h + 1) * half], a_smem[h], bars[0])
            window = b_ref.at[:, h * half:(h + 1) * half] if f8 \
                else b_ref.at[h * half:(h + 1) * half, :]
            sd.async_copy(window, b_smem[h], bars[0])
        acc[:, 64:192] = c_ref[...]
        bars[0].wait(0)
        for h in range(2):
            sd.tcgen05_mma(acc.at[:, 64:192], a_smem[h], b_smem[h].T if f8 else b_smem[h],
                           accumulate=True)
        sd.tcgen05_commit(bars[1])
        bars[1].wait(0)
        out_ref[...] = acc[:, 64:192]

    rng = np.random.default_rng(5)
    a = rng.integers(-3, 4, (128, k)).astype(in_dtypes[0])
    b = rng.integers(-3, 4, (128, k) if f8 else (k, 128)).astype(in_dtypes[1])
    c = rng.integers(-64, 64, (128, 128)).astype(np.float16)
    out = np.asarray(jax.jit(mma)(a, b, c))
    wide_b = b.astype(np.float32).T if f8 else b.astype(np.float32)
    np.testing.assert_array_equal(out, (c + a.astype(np.float32) @ wide_b).astype(np.float16))


@pytest.mark.parametrize(("misuse", "message"), [
    ("packed_acc", r"tcgen05_mma writes a float16 accumulator one element per 32-bit TMEM "
                   r"column: declare packed sd.TMEM\(\(128, N\), jnp.float16, unpacked=True\)"),
    ("unpacked_a", r"tcgen05_mma reads A unpacked_a packed, two 16-bit elements per TMEM "
                   r"column"),
    ("copy", r"tcgen05_copy writes packed rows: unpacked cannot be unpacked"),
])
def test_unpacked_misuse_names_the_users_line(misuse, message):
    @sd.kernel(out_shape=S((128, 64), F32), arch=ARCH,
               smem=[sd.SMEM((128, 64), F16), sd.SMEM((64, 128), F16), sd.SMEM((128, 8), F16),
                     sd.TMEM((128, 128), F16), sd.TMEM((128, 128), F16, unpacked=True),
                     sd.TMEM((128, 64), F16, unpacked=True), sd.TMEM((128, 128), F32)])
    def body(x_ref, out_ref, a_smem, b_smem, rows, packed, unpacked, unpacked_a, acc):
        match misuse:
            case "packed_acc":
                sd.tcgen05_mma(packed, a_smem, b_smem, accumulate=False)
            case "unpacked_a":
                sd.tcgen05_mma(acc, unpacked_a, b_smem, accumulate=False)
            case "copy":
                sd.tcgen05_copy(rows, unpacked)

    with pytest.raises(TypeError, match=message) as caught:
        body.trace(S((64, 64), BF16))
    line = line_of(f'case "{misuse}"', body.fn) + 1
    assert str(caught.value).startswith(f"{THIS_FILE}:{line}:"), str(caught.value)


@pytest.mark.parametrize("policy", ["latest", "random"])
def test_k_accumulates_in_a_loop_into_a_column_window(policy):
    """The sum over the K tiles of a fori (accumulate=k > 0) into columns 128-255 of the
    accumulator, each MMA overlapping the next tile's TMA, the stages released by
    commits; late or random completion of the async work finds no hazard."""
    from smalti.runtime.compiler import compile_module
    from smalti.runtime.simulate import run_simulated

    k_tiles = 4

    @sd.kernel(out_shape=S((128, 128), F32), arch=ARCH,
               smem=[sd.Barriers(2), sd.Barriers(2), sd.SMEM((2, 128, 32), BF16),
                     sd.SMEM((2, 32, 128), BF16), sd.TMEM((128, 256), F32)])
    def looped(a_ref, b_ref, out_ref, full, free, a_smem, b_smem, acc):
        def fetch(s, k):
            full[s].arrive_expect_tx(a_smem[s].nbytes + b_smem[s].nbytes)
            sd.async_copy(a_ref.at[:, k * 32:k * 32 + 32], a_smem[s], full[s])
            sd.async_copy(b_ref.at[k * 32:k * 32 + 32, :], b_smem[s], full[s])

        fetch(0, 0)

        def body(k, _):
            s = k % 2

            @sd.when(k + 1 < k_tiles)
            def _():
                @sd.when(k > 0)
                def _():
                    free[(k + 1) % 2].wait((k - 1) // 2)  # MMAs of tile k - 1 are done

                fetch((k + 1) % 2, k + 1)

            full[s].wait(k // 2)
            sd.tcgen05_mma(acc.at[:, 128:256], a_smem[s], b_smem[s], accumulate=k > 0)
            sd.tcgen05_commit(free[s])

        sd.fori(0, k_tiles, body)
        free[(k_tiles - 1) % 2].wait((k_tiles - 1) // 2)  # the last tile's MMA: all done
        out_ref[...] = acc[:, 128:256]

    rng = np.random.default_rng(1)
    a = _exact((128, 32 * k_tiles), ml_dtypes.bfloat16, rng)
    b = _exact((32 * k_tiles, 128), ml_dtypes.bfloat16, rng)
    compiled = compile_module(looped.trace(a, b).module, arch=ARCH)
    out = run_simulated(compiled, a, b, np.zeros((128, 128), np.float32),
                        async_completion=policy, seed=2)[-1]
    np.testing.assert_array_equal(out, a.astype(np.float32) @ b.astype(np.float32))


def test_a_from_tensor_memory():
    """A stored into TMEM by the threads (bf16, two to a 32-bit column) times B from shared
    memory (.kind::f16 with A in tensor memory)."""
    @sd.kernel(out_shape=S((128, 64), F32), arch=ARCH,
               smem=[sd.Barriers(2), sd.SMEM((64, 64), BF16), sd.TMEM((128, 64), BF16),
                     sd.TMEM((128, 64), F32)])
    def tmem_a(a_ref, b_ref, out_ref, bars, b_smem, a_tmem, acc):
        bars[0].arrive_expect_tx(b_smem.nbytes)
        sd.async_copy(b_ref, b_smem, bars[0])
        a_tmem[...] = a_ref[...]
        bars[0].wait(0)
        sd.tcgen05_mma(acc, a_tmem, b_smem, accumulate=False)
        sd.tcgen05_commit(bars[1])
        bars[1].wait(0)
        out_ref[...] = acc[...]

    rng = np.random.default_rng(3)
    a = _exact((128, 64), ml_dtypes.bfloat16, rng)
    b = _exact((64, 64), ml_dtypes.bfloat16, rng)
    np.testing.assert_array_equal(np.asarray(jax.jit(tmem_a)(a, b)),
                                  a.astype(np.float32) @ b.astype(np.float32))


@pytest.mark.parametrize(("rows", "stages", "shape"), [
    (128, 1, None), (32, 2, None), (64, 1, "64x128b.warpx2::02_13"),
    (64, 1, "64x128b.warpx2::01_23")])
def test_copy_into_tensor_memory(rows, stages, shape):
    """Rows of 16 bytes (4 f32) stored to shared memory by the threads, copied into TMEM
    (one copy per stage, 4 columns apart), completed by a commit, loaded back."""
    smem_shape = (rows, 4) if stages == 1 else (stages, rows, 4)

    @sd.kernel(out_shape=S((128, 4 * stages), F32), arch=ARCH,
               smem=[sd.Barriers(1), sd.SMEM(smem_shape, F32), sd.TMEM((128, 32), F32)])
    def copy(x_ref, out_ref, bars, source, tmem):
        if stages == 1:
            source[...] = x_ref[0]
        else:
            for s in range(stages):
                source[s][...] = x_ref[s]
        sd.tcgen05_copy(source, tmem.at[:, 8:32], shape=shape)
        sd.tcgen05_commit(bars[0])
        bars[0].wait(0)
        out_ref[...] = tmem[:, 8:8 + 4 * stages]

    x = np.random.default_rng(5).standard_normal((stages, rows, 4)).astype(np.float32)
    out = np.asarray(jax.jit(copy)(x))
    for s in range(stages):
        lanes = {128: np.arange(128), 32: np.arange(128) % 32,
                 "64x128b.warpx2::02_13": (np.arange(128) // 32 % 2) * 32 + np.arange(128) % 32,
                 "64x128b.warpx2::01_23": (np.arange(128) // 64) * 32 + np.arange(128) % 32}
        source_row = lanes[shape if rows == 64 else rows]
        np.testing.assert_array_equal(out[:, 4 * s:4 * s + 4], x[s][source_row])


@pytest.mark.parametrize(("misuse", "error", "message"), [
    ("acc", TypeError, r"tcgen05_mma's accumulator must be a TMEM array declared in the "
                       r"kernel's smem=\[...\] \(sd.TMEM\) or a window of one"),
    ("staged", TypeError, r"tcgen05_mma's A a_smem has 2 stages; pass one of them"),
    ("global", TypeError, r"tcgen05_mma's B must be a shared-memory ref declared in the "
                          r"kernel's smem=\[...\]"),
    ("pair", TypeError, r"tcgen05_mma cannot multiply bf16 A by f16 B: tcgen05_mma pairs "
                        r"f16 with f16"),
    ("acc_dtype", TypeError, r"tcgen05_mma .kind::f16 accumulates in float32, not bfloat16 "
                             r"\(packed\)"),
    ("fit", ValueError, r"tcgen05_mma: A \(128, 64\) @ B \(64, 128\) does not fit the "
                        r"accumulator acc.at\[:, 0:64\] of 64 columns"),
    ("k_major", ValueError, r"tcgen05_mma reads float32 B only K-major: declare B as "
                            r"\(64, 32\) in smem"),
    ("accumulate", TypeError, r"tcgen05_mma's accumulate must be a Python bool or a "
                              r"comparison of traced indices \(like k > 0\), got int"),
    ("collective", ValueError, r"a collective tcgen05_mma \(.cta_group::2\) runs over CTA "
                               r"pairs: declare a cluster of an even number of blocks"),
    ("scales", TypeError, r"tcgen05_mma takes a_scale and b_scale together"),
    ("tmem_a", ValueError, r"tcgen05_mma reads A narrow_a from all the 64 columns of its TMEM "
                           r"allocation .*: declare it \(128, 64\), not \(128, 48\)"),
    ("commit", TypeError, r"tcgen05_commit's barrier must be one barrier, like bars\[i\]"),
    ("copy_rows", ValueError, r"tcgen05_copy moves rows of 16 bytes: f32_smem has rows of 32 "
                              r"float32 \(128 bytes\)"),
    ("copy_dtype", TypeError, r"tcgen05_copy between rows \(float32\) and packed "
                              r"\(bfloat16\): dtypes differ"),
    ("copy_wide", ValueError, r"tcgen05_copy writes 4 columns of acc, more than the 2 of "
                              r"acc.at\[:, 126:128\]"),
])
def test_misuse_names_the_users_line(misuse, error, message):
    @sd.kernel(out_shape=S((128, 64), F32), arch=ARCH,
               smem=[sd.Barriers(1), sd.SMEM((2, 128, 64), BF16), sd.SMEM((64, 128), BF16),
                     sd.SMEM((64, 128), F16), sd.SMEM((128, 32), F32),
                     sd.SMEM((32, 64), F32), sd.SMEM((128, 4), F32),
                     sd.TMEM((128, 128), F32), sd.TMEM((128, 128), BF16),
                     sd.TMEM((128, 48), BF16)])
    def body(x_ref, out_ref, bars, a_smem, b_smem, h_smem, f32_smem, fb_smem, rows, acc,
             packed, narrow_a):
        a = a_smem[0]
        match misuse:
            case "acc":
                sd.tcgen05_mma(out_ref, a, b_smem, accumulate=False)  # MARK
            case "staged":
                sd.tcgen05_mma(acc, a_smem, b_smem, accumulate=False)  # MARK
            case "global":
                sd.tcgen05_mma(acc, a, x_ref, accumulate=False)  # MARK
            case "pair":
                sd.tcgen05_mma(acc, a, h_smem, accumulate=False)  # MARK
            case "acc_dtype":
                sd.tcgen05_mma(packed, a, b_smem, accumulate=False)  # MARK
            case "fit":
                sd.tcgen05_mma(acc.at[:, 0:64], a, b_smem, accumulate=False)  # MARK
            case "k_major":
                sd.tcgen05_mma(acc.at[:, 0:64], f32_smem, fb_smem, accumulate=False)  # MARK
            case "accumulate":
                sd.tcgen05_mma(acc, a, b_smem, accumulate=1)  # MARK
            case "collective":
                sd.tcgen05_mma(acc, a, b_smem, accumulate=False, collective=True)  # MARK
            case "scales":
                sd.tcgen05_mma(acc, a, b_smem, accumulate=False, a_scale=acc)  # MARK
            case "tmem_a":
                sd.tcgen05_mma(acc, narrow_a, b_smem, accumulate=False)  # MARK
            case "commit":
                sd.tcgen05_commit(bars)  # MARK
            case "copy_rows":
                sd.tcgen05_copy(f32_smem, acc)  # MARK
            case "copy_dtype":
                sd.tcgen05_copy(rows, packed)  # MARK
            case "copy_wide":
                sd.tcgen05_copy(rows, acc.at[:, 126:128])  # MARK

    with pytest.raises(error, match=message) as caught:
        body.trace(S((64, 64), BF16))
    line = line_of(f'case "{misuse}"', body.fn) + 1
    assert str(caught.value).startswith(f"{THIS_FILE}:{line}:"), str(caught.value)


def _scale_blocks(scales: np.ndarray) -> np.ndarray:
    """(128, 4) scale factors as the (32, 16) block tcgen05_copy's .32x128b.warpx4 spreads
    over the lanes: byte 4c + s of row j is factor s of row 32c + j
    (smalti/dialect/ops_tcgen05.py, "Scale factors in TMEM")."""
    return scales.reshape(4, 32, 4).transpose(1, 0, 2).reshape(32, 16)


def test_block_scaled_mxfp8():
    """MXFP8: e4m3 A and B with one E8M0 scale per 32 elements of K, the scales copied into
    TMEM by tcgen05_copy before the MMA reads them."""
    e8m0 = jnp.float8_e8m0fnu

    @sd.kernel(out_shape=S((128, 128), F32), arch=ARCH,
               smem=[sd.Barriers(2), sd.SMEM((128, 128), E4M3), sd.SMEM((128, 128), E4M3),
                     sd.SMEM((32, 16), e8m0), sd.SMEM((32, 16), e8m0),
                     sd.TMEM((128, 128), F32), sd.TMEM((128, 16), e8m0),
                     sd.TMEM((128, 16), e8m0)])
    def mxfp8(a_ref, bt_ref, sa_ref, sb_ref, out_ref, bars, a_smem, bt_smem, sa_smem, sb_smem,
              acc, a_scale, b_scale):
        bars[0].arrive_expect_tx(a_smem.nbytes + bt_smem.nbytes + sa_smem.nbytes
                                 + sb_smem.nbytes)
        for source, destination in ((a_ref, a_smem), (bt_ref, bt_smem), (sa_ref, sa_smem),
                                    (sb_ref, sb_smem)):
            sd.async_copy(source, destination, bars[0])
        bars[0].wait(0)
        sd.tcgen05_copy(sa_smem, a_scale)
        sd.tcgen05_copy(sb_smem, b_scale)
        sd.tcgen05_mma(acc, a_smem, bt_smem.T, accumulate=False, a_scale=a_scale,
                       b_scale=b_scale)
        sd.tcgen05_commit(bars[1])
        bars[1].wait(0)
        out_ref[...] = acc[...]

    rng = np.random.default_rng(6)
    a = _exact((128, 128), ml_dtypes.float8_e4m3fn, rng)
    bt = _exact((128, 128), ml_dtypes.float8_e4m3fn, rng)
    sa, sb = (np.exp2(rng.integers(-3, 4, (128, 4))).astype(ml_dtypes.float8_e8m0fnu)
              for _ in range(2))
    out = np.asarray(jax.jit(mxfp8)(a, bt, _scale_blocks(sa), _scale_blocks(sb)))
    np.testing.assert_array_equal(out, _scaled(a, sa) @ _scaled(bt, sb).T)


def _scaled(x: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """x (rows, K) times its scale per 32 elements of K, in f32."""
    return x.astype(np.float32) * np.repeat(scales.astype(np.float32), 32, axis=1)
