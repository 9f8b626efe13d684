"""tcgen05.mma in the simulator: descriptor decoding against the ISA's bit tables, hand-written
sm_100a kernels (M = 128, N = 64..256, bf16/f16/tf32 from shared memory under every swizzle,
K- and MN-major, A from tensor memory) against numpy, the hazards of a missing commit or
wait, and Triton 3.9's own sm_100 matmul PTX.

Shared-memory operands are laid out here from the ISA's canonical layouts (8-row groups of
core matrices; rows of one swizzle span, the swizzle XOR on byte addresses) and described by
descriptors encoded here from the "Shared memory descriptor" and "Instruction descriptor"
bit tables.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from smalti.sim import SimError, run_ptx
from smalti.sim.ops.tcgen05_descriptors import InstructionDescriptor, SharedDescriptor
from tests.tcgen05_ptx import assembles, staged_prologue

HEADER = """.version 8.7
.target sm_100a
.address_size 64
"""
DTYPES = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "tf32": np.float32,
          "e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}
TYPE_CODE = {"f16": 0, "bf16": 1, "tf32": 2, "e4m3": 0, "e5m2": 1}
KIND = {"f16": "f16", "bf16": "f16", "tf32": "tf32", "e4m3": "f8f6f4", "e5m2": "f8f6f4"}
MODE = {None: 0, 128: 2, 64: 4, 32: 6}
A_BASE, B_BASE = 0, 65536




def smem_descriptor(start: int, lbo: int, sbo: int, span: int | None) -> int:
    """Bits 0-13 start >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4, 46-48 0b001, 61-63 swizzle."""
    return ((start >> 4) & 0x3FFF) | (((lbo >> 4) & 0x3FFF) << 16) | (
        ((sbo >> 4) & 0x3FFF) << 32) | (1 << 46) | (MODE[span] << 61)


def instruction_descriptor(atype: str, btype: str, n: int, m: int = 128, trans_a: int = 0,
                           trans_b: int = 0, neg_a: int = 0, neg_b: int = 0) -> int:
    """Bits 4-5 D type (1: f32), 7-9 A type, 10-12 B type, 13/14 negate A/B, 15/16 transpose
    A/B, 17-22 N >> 3, 24-28 M >> 4."""
    return (1 << 4) | (TYPE_CODE[atype] << 7) | (TYPE_CODE[btype] << 10) | (neg_a << 13) | (
        neg_b << 14) | (trans_a << 15) | (trans_b << 16) | ((n >> 3) << 17) | ((m >> 4) << 24)


# -- descriptor tables -------------------------------------------------------------------

def test_instruction_descriptor_fields() -> None:
    # Triton 3.9's descriptor for a 128x64 bf16 x bf16 -> f32 tile with B N-major
    d = InstructionDescriptor.decode(0x08110490, "f16")
    assert (d.dtype, d.atype, d.btype, d.m, d.n) == ("f32", "bf16", "bf16", 128, 64)
    assert (d.transpose_a, d.transpose_b, d.negate_a, d.negate_b, d.sparse) == (
        False, True, False, False, False)
    for n in (16, 64, 136, 256):
        d = InstructionDescriptor.decode(instruction_descriptor("tf32", "tf32", n, 128, 1, 0,
                                                                1, 1), "tf32")
        assert (d.atype, d.btype, d.n, d.m, d.transpose_a, d.transpose_b) == (
            "tf32", "tf32", n, 128, True, False)
        assert d.negate_a and d.negate_b
    d = InstructionDescriptor.decode((1 << 4) | (5 << 7) | (1 << 10) | (8 << 24), "f8f6f4")
    assert (d.atype, d.btype, d.m) == ("e2m1", "e5m2", 128)


@pytest.mark.parametrize(("span", "mode"), [(None, 0), (128, 2), (64, 4), (32, 6)])
def test_shared_descriptor_fields(span: int | None, mode: int) -> None:
    value = smem_descriptor(0x1230, 0x40, 0x400, span)
    d = SharedDescriptor.decode(value)
    assert (d.start, d.lbo, d.sbo, d.version, d.base_offset, d.swizzle_mode) == (
        0x1230, 0x40, 0x400, 1, 0, mode)
    assert d.problem() is None and d.canonical().span == span
    # Triton 3.9's: SBO 512, 64-byte swizzle / SBO 1024, 128-byte swizzle
    assert SharedDescriptor.decode(0x80004020 << 32).canonical().span == 64
    assert SharedDescriptor.decode((0x40004040 << 32) | 0x10).start == 0x100
    assert "0b001" in SharedDescriptor.decode(0x1230 >> 4).problem()
    assert "swizzling mode 1" in SharedDescriptor.decode(value & ~(7 << 61) | (1 << 61)).problem()


# -- operand images ------------------------------------------------------------------------

def swz(a: np.ndarray, span: int | None) -> np.ndarray:
    bits = {None: 0, 32: 1, 64: 3, 128: 7}[span]
    return a ^ (((a >> 7) & bits) << 4)


def place(smem: np.ndarray, offsets: np.ndarray, values: np.ndarray) -> None:
    raw = np.ascontiguousarray(values).view(np.uint8).reshape(values.size, -1)
    smem[offsets.reshape(-1, 1) + np.arange(raw.shape[1])] = raw


def k_major(smem: np.ndarray, base: int, mat: np.ndarray, span: int | None) -> list[int]:
    """mat (rows x K) K-major; one descriptor per 32 bytes of K."""
    rows, k_total = mat.shape
    e = mat.itemsize
    r, kb = np.arange(rows)[:, None], np.arange(k_total)[None, :] * e
    if span is None:  # core matrices of 8 rows x 16 bytes: K chunks LBO apart, rows SBO
        lbo, sbo = 128, 128 * (k_total * e // 16)
        off = (r // 8) * sbo + (kb // 16) * lbo + (r % 8) * 16 + kb % 16
        starts = [base + s * 2 * lbo for s in range(k_total * e // 32)]
    else:  # rows of one span, swizzled; 8-row groups SBO = 8 spans apart
        assert k_total * e == span
        lbo, sbo = 16, 8 * span
        off = r * span + kb
        starts = [base + 32 * s for s in range(span // 32)]
    place(smem, swz(base + off, span), mat)
    return [smem_descriptor(s, lbo, sbo, span) for s in starts]


def mn_major(smem: np.ndarray, base: int, mat: np.ndarray, span: int | None) -> list[int]:
    """mat (rows x K) stored MN-major (rows contiguous); one descriptor per 32 bytes of K."""
    rows, k_total = mat.shape
    e = mat.itemsize
    mb, k = np.arange(rows)[:, None] * e, np.arange(k_total)[None, :]
    per = 32 // e  # K elements per instruction
    if span is None:  # 16-byte MN chunks SBO apart, 8-K groups LBO apart
        sbo = 128
        lbo = (rows * e // 16) * 128
        off = mb % 16 + (mb // 16) * sbo + (k % 8) * 16 + (k // 8) * lbo
        starts = [base + (per // 8) * lbo * s for s in range(k_total // per)]
    else:  # MN spans LBO apart, 8-K groups of span-wide rows SBO apart
        sbo = 8 * span
        lbo = (k_total // 8) * sbo
        off = mb % span + (mb // span) * lbo + (k % 8) * span + (k // 8) * sbo
        starts = [base + (per // 8) * sbo * s for s in range(k_total // per)]
    place(smem, swz(base + off, span), mat)
    return [smem_descriptor(s, lbo, sbo, span) for s in starts]


# -- kernels -------------------------------------------------------------------------------

def mma_kernel(n: int, steps: int, kind: str, *, a_tmem_words: int = 0, commit: bool = True,
               wait: bool = True, smem_bytes: int = 131072, last: str = "%p3",
               commits: bool = False) -> str:
    """128 threads: copy the shared image from global, allocate 512 columns, thread 0 issues
    `steps` MMAs (descriptors from `descs`: A, B per step; D += from the second on) and a
    commit; everyone waits, then each warp reads its 32 lanes of D (N columns) to out. With
    `a_tmem_words`, A is first stored to tensor memory at column 256 (row i in lane i).
    `last`: the operands after idesc of the last MMA (%r24..%r27 hold 0x0000FFFF, 0, 1,
    0x80000000 for a disable-output-lane vector). `commits`: thread 0 commits every MMA to
    a barrier nobody waits on (`side`) and only then to the waited one."""
    a_operand = "[%r20]" if a_tmem_words else "%rd20"
    body = []
    for s in range(steps):
        a_load = (f"  add.u32 %r20, %r9, {256 + s * (a_tmem_words // steps)};" if a_tmem_words
                  else f"  ld.global.u64 %rd20, [%rd11+{16 * s}];")
        body.append(f"""{a_load}
  ld.global.u64 %rd21, [%rd11+{16 * s + 8}];
  setp.ne.u32 %p3, {s}, 0;
  tcgen05.mma.cta_group::1.kind::{kind} [%r9], {a_operand}, %rd21, %r10, \
{last if s == steps - 1 else "%p3"};""")
        if commits:
            body.append("  tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster"
                        ".b64 [side];")
    a_store = ""
    if a_tmem_words:
        words = ", ".join(f"%a{i}" for i in range(a_tmem_words))
        loads = "\n".join(f"  ld.global.b32 %a{i}, [%rd13+{4 * i}];" for i in range(a_tmem_words))
        a_store = f"""
  ld.param.u64 %rd12, [a_words];
  mul.wide.u32 %rd14, %r1, {4 * a_tmem_words};
  add.u64 %rd13, %rd12, %rd14;
{loads}
  add.u32 %r12, %r11, 256;
  tcgen05.st.sync.aligned.32x32b.x{a_tmem_words}.b32 [%r12], {{{words}}};
  tcgen05.wait::st.sync.aligned;
  tcgen05.fence::before_thread_sync;
  bar.sync 0;
  tcgen05.fence::after_thread_sync;"""
    chunk = min(n, 64)
    reads = []
    for c in range(n // chunk):
        regs = ", ".join(f"%q{i}" for i in range(chunk))
        stores = "\n".join(f"  st.global.b32 [%rd31+{4 * (c * chunk + i)}], %q{i};"
                           for i in range(chunk))
        reads.append(f"""  add.u32 %r13, %r11, {c * chunk};
  tcgen05.ld.sync.aligned.32x32b.x{chunk}.b32 {{{regs}}}, [%r13];
  tcgen05.wait::ld.sync.aligned;
{stores}""")
    waiting = """
WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p4, [bar], 0;
  @!%p4 bra WAIT;""" if wait else ""
    return HEADER + f"""
.visible .entry mma(.param .u64 image, .param .u64 descs, .param .u32 idesc,
                    .param .u64 a_words, .param .u64 out)
.reqntid 128
{{
  .reg .b32 %r<32>;
  .reg .b32 %q<64>;
  .reg .b32 %a<{max(a_tmem_words, 1)}>;
  .reg .b64 %rd<40>;
  .reg .pred %p<8>;
{staged_prologue(smem_bytes)}  .shared .align 8 .b64 side;
  ld.param.u32 %r10, [idesc];
  ld.param.u64 %rd11, [descs];
{a_store}
  mov.b32 %r24, 0x0000FFFF;
  mov.b32 %r25, 0;
  mov.b32 %r26, 1;
  mov.b32 %r27, 0x80000000;
  @!%p5 bra ISSUED;
  mbarrier.init.shared::cta.b64 [side], {steps};
{chr(10).join(body)}
  {"tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar];" if commit else ""}
ISSUED:{waiting}
  tcgen05.fence::after_thread_sync;
  ld.param.u64 %rd30, [out];
  mul.wide.u32 %rd32, %r1, {4 * n};
  add.u64 %rd31, %rd30, %rd32;
{chr(10).join(reads)}
  tcgen05.fence::before_thread_sync;
  bar.sync 0;
  @!%p2 bra DONE;
  tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r9, 512;
DONE:
  ret;
}}
"""


def operands(itype: str, n: int, k_total: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    dtype = DTYPES[itype]
    a = rng.integers(-4, 5, (128, k_total)).astype(np.float32) / 4
    b = rng.integers(-4, 5, (n, k_total)).astype(np.float32) / 4
    return a.astype(dtype), b.astype(dtype)


def run_mma(ptx: str, image: np.ndarray, descs: list[int], idesc: int, n: int,
            a_words: np.ndarray | None = None, policy: str = "eager") -> np.ndarray:
    out = np.zeros((128, n), np.float32)
    words = np.zeros(1, np.uint32) if a_words is None else a_words
    run_ptx(ptx, "mma", 1, 128, [image, np.array(descs, np.uint64), np.uint32(idesc), words,
                                 out], async_completion=policy)
    return out


CASES = [  # (A, B types, N, A swizzle, B swizzle, B MN-major)
    ("bf16", 64, 128, 128, True),
    ("bf16", 128, 64, 64, False),
    ("f16", 256, None, 64, False),
    ("f16", 64, 32, None, True),
    ("bf16", 192, 128, None, False),
    ("tf32", 128, 128, 128, False),
    ("tf32", 64, None, 32, False),
    ("e4m3", 128, 128, 128, False),
    ("e5m2", 64, None, 64, False),
]


@pytest.mark.parametrize(("itype", "n", "a_span", "b_span", "b_mn"), CASES)
@pytest.mark.parametrize("policy", ["eager", "latest"])
def test_mma_from_shared_memory_matches_numpy(itype: str, n: int, a_span, b_span, b_mn: bool,
                                             policy: str) -> None:
    e = np.dtype(DTYPES[itype]).itemsize
    spans = [s for s in (a_span, None if b_mn else b_span) if s is not None]
    k_total = (max(spans) if spans else 64) // e
    a, b = operands(itype, n, k_total)
    image = np.zeros(131072, np.uint8)
    a_descs = k_major(image, A_BASE, a, a_span)
    b_descs = (mn_major if b_mn else k_major)(image, B_BASE, b, b_span)
    steps = len(a_descs)
    descs = [v for pair in zip(a_descs, b_descs, strict=True) for v in pair]
    ptx = mma_kernel(n, steps, KIND[itype])
    assembles(ptx)
    idesc = instruction_descriptor(itype, itype, n, trans_b=int(b_mn))
    out = run_mma(ptx, image, descs, idesc, n, policy=policy)
    expected = a.astype(np.float64) @ b.astype(np.float64).T
    np.testing.assert_allclose(out, expected, rtol=0, atol=0)


def test_negations_and_a_from_tensor_memory() -> None:
    n, k_total = 64, 32
    a, b = operands("bf16", n, k_total, seed=1)
    image = np.zeros(131072, np.uint8)
    b_descs = k_major(image, B_BASE, b, None)
    words = np.ascontiguousarray(a).view(np.uint32)  # (128, 16): two bf16 per column
    ptx = mma_kernel(n, 2, "f16", a_tmem_words=16)
    assembles(ptx)
    descs = [v for d in b_descs for v in (0, d)]
    idesc = instruction_descriptor("bf16", "bf16", n, neg_a=1)
    out = run_mma(ptx, image, descs, idesc, n, a_words=words)
    np.testing.assert_array_equal(out, -(a.astype(np.float64) @ b.astype(np.float64).T))


def small_case() -> tuple[np.ndarray, list[int], int, np.ndarray]:
    a, b = operands("bf16", 64, 64)
    image = np.zeros(131072, np.uint8)
    descs = [v for pair in zip(k_major(image, A_BASE, a, 128), k_major(image, B_BASE, b, 128),
                               strict=True) for v in pair]
    return image, descs, instruction_descriptor("bf16", "bf16", 64), a.astype(
        np.float64) @ b.astype(np.float64).T


@pytest.mark.parametrize(("commit", "wait"), [(False, False), (True, False)])
def test_reading_d_before_the_commit_is_waited_on_is_a_hazard(commit: bool, wait: bool) -> None:
    image, descs, idesc, _ = small_case()
    ptx = mma_kernel(64, 4, "f16", commit=commit, wait=wait)
    assembles(ptx)
    with pytest.raises(SimError, match=r"tensor memory that the tcgen05.mma at line .* still "
                                       r"writes: a wait on the mbarrier"):
        run_mma(ptx, image, descs, idesc, 64)


def test_descriptor_faults() -> None:
    image, descs, idesc, _ = small_case()
    ptx = mma_kernel(64, 4, "f16")
    with pytest.raises(SimError, match="bits 46-48"):
        run_mma(ptx, image, [d & ~(7 << 46) for d in descs], idesc, 64)
    with pytest.raises(SimError, match=r"M = 256; \.cta_group::1 supports M = 64 and M = 128"):
        run_mma(ptx, image, descs, idesc & ~(31 << 24) | (16 << 24), 64)


# -- Triton 3.9's sm_100 matmuls -----------------------------------------------------------

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "tcgen05"
TRITON_TYPES = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16, "fp32": np.float32}


def triton_kernel(name: str) -> tuple[str, dict]:
    """Triton's PTX for `name`: compiled now when Triton is importable, else the fixture
    fixtures/tcgen05/generate_triton.py wrote."""
    if importlib.util.find_spec("triton") is not None:
        sys.path.insert(0, str(FIXTURES))
        try:
            import generate_triton
        finally:
            sys.path.remove(str(FIXTURES))
        return generate_triton.compile_one(name.removeprefix("triton_"))
    facts = json.loads((FIXTURES / f"{name}.json").read_text())
    return (FIXTURES / f"{name}.ptx").read_text(), facts


@pytest.mark.parametrize("name", ["triton_matmul_bf16", "triton_matmul_f16",
                                  "triton_matmul_tf32"])
@pytest.mark.parametrize("policy", ["eager", "latest", "random"])
def test_triton_sm100_matmul_matches_numpy(name: str, policy: str) -> None:
    ptx, facts = triton_kernel(name)
    assert "tcgen05.mma" in ptx and "tcgen05.commit" in ptx
    assembles(ptx)
    m, n, k = 256, 128, 4 * facts["BK"]
    rng = np.random.default_rng(3)
    dtype = TRITON_TYPES[facts["itype"]]
    a = (rng.integers(-8, 9, (m, k)) / 8).astype(dtype)
    b = (rng.integers(-8, 9, (k, n)) / 8).astype(dtype)
    c = np.zeros((m, n), np.float32)
    scratch = [np.zeros(16, np.uint8), np.zeros(16, np.uint8)]
    run_ptx(ptx, "matmul", (m // facts["BM"], n // facts["BN"], 1), facts["threads"],
            [a, b, c, np.int32(m), np.int32(n), np.int32(k), *scratch],
            shared_bytes=facts["shared"], async_completion=policy, seed=5)
    np.testing.assert_array_equal(c, a.astype(np.float64) @ b.astype(np.float64))


@pytest.mark.parametrize(("itype", "span"), [("bf16", 128), ("f16", None), ("tf32", 64)])
def test_mn_major_a(itype: str, span: int | None) -> None:
    """Transpose A (bit 15): A stored M-major, under each swizzle."""
    n = 64
    k_total = 32 // np.dtype(DTYPES[itype]).itemsize * 2
    a, b = operands(itype, n, k_total, seed=2)
    image = np.zeros(131072, np.uint8)
    a_descs = mn_major(image, A_BASE, a, span)
    b_descs = k_major(image, B_BASE, b, None)
    ptx = mma_kernel(n, len(a_descs), KIND[itype])
    assembles(ptx)
    descs = [v for pair in zip(a_descs, b_descs, strict=True) for v in pair]
    out = run_mma(ptx, image, descs, instruction_descriptor(itype, itype, n, trans_a=1), n)
    np.testing.assert_array_equal(out, a.astype(np.float64) @ b.astype(np.float64).T)


@pytest.mark.parametrize("policy", ["eager", "latest"])
def test_m64_puts_sixteen_rows_in_each_lane_quarter(policy: str) -> None:
    """M = 64 (.cta_group::1): row i of D is lane 32 (i // 16) + i % 16 (PTX ISA, "Data path
    layout organization"); the other half of each quarter stays untouched."""
    n = 64
    a, b = operands("bf16", n, 64, seed=4)
    a = a[:64]
    image = np.zeros(131072, np.uint8)
    descs = [v for pair in zip(k_major(image, A_BASE, a, 128), k_major(image, B_BASE, b, 128),
                               strict=True) for v in pair]
    ptx = mma_kernel(n, len(descs) // 2, "f16")
    assembles(ptx)
    out = run_mma(ptx, image, descs, instruction_descriptor("bf16", "bf16", n, m=64), n,
                  policy=policy)
    rows = [32 * (i // 16) + i % 16 for i in range(64)]
    np.testing.assert_array_equal(out[rows], a.astype(np.float64) @ b.astype(np.float64).T)
    assert not out[[r + 16 for r in rows]].any()


def step_products(a: np.ndarray, b: np.ndarray, steps: int) -> list[np.ndarray]:
    """Each MMA's A @ B^T over its slice of K (float64)."""
    k = a.shape[1] // steps
    return [a[:, k * s:k * (s + 1)].astype(np.float64) @ b[:, k * s:k * (s + 1)].astype(
        np.float64).T for s in range(steps)]


def test_disable_output_lane_and_scale_input_d() -> None:
    """The last MMA masks lanes 0-15, 64 and 127 (bit i of the four-word vector, lowest word
    first: 0x0000FFFF, 0, 1, 0x80000000), which keep the sum so far, and scales the old D by
    2^-2 everywhere else (PTX ISA, "tcgen05.mma": disable-output-lane, scale-input-d)."""
    a, b = operands("bf16", 64, 64, seed=6)
    image = np.zeros(131072, np.uint8)
    descs = [v for pair in zip(k_major(image, A_BASE, a, 128), k_major(image, B_BASE, b, 128),
                               strict=True) for v in pair]
    ptx = mma_kernel(64, 4, "f16", last="{%r24, %r25, %r26, %r27}, %p3, 2")
    assembles(ptx)
    out = run_mma(ptx, image, descs, instruction_descriptor("bf16", "bf16", 64), 64)
    *first, final = step_products(a, b, 4)
    before = sum(first)
    expected = final + before / 4
    masked = [*range(16), 64, 127]
    expected[masked] = before[masked]
    np.testing.assert_array_equal(out, expected.astype(np.float32))


def test_scale_input_d_needs_f16_or_tf32() -> None:
    ptx = mma_kernel(64, 1, "f8f6f4", last="%p3, 1")
    with pytest.raises(SimError, match=r"scale-input-d needs \.kind::f16 or \.kind::tf32"):
        run_mma(ptx, np.zeros(131072, np.uint8), [0, 0], 0, 64)


def test_a_commit_tracks_mmas_an_earlier_commit_tracked() -> None:
    """tcgen05.commit tracks all the thread's prior tcgen05 operations: CUTLASS commits each
    K block's MMAs to the stage's empty barrier, then once more to the accumulator's full
    barrier, which the epilogue waits on before reading D."""
    image, descs, idesc, expected = small_case()
    ptx = mma_kernel(64, 4, "f16", commits=True)
    assembles(ptx)
    for policy in ("eager", "latest"):
        np.testing.assert_array_equal(run_mma(ptx, image, descs, idesc, 64, policy=policy),
                                      expected)
