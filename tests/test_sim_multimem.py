"""multimem.ld_reduce / multimem.st / multimem.red on the multicast address of a launch over
several devices (smalti.sim.Multicast), checked against numpy; the race checker and spin waits
see them; bad addresses and forms are clear errors."""

from dataclasses import dataclass

import ml_dtypes
import numpy as np
import pytest

from smalti.ptx.toolchain import ToolchainError, compile_ptx, find_tool
from smalti.sim import Multicast, SimError, run_ptx, run_ptx_devices

DEVICES = (2, 4, 8)
THREADS = 32
HALF = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}


def needs_ptxas() -> None:
    try:
        find_tool("ptxas")
    except ToolchainError:
        pytest.skip("ptxas is not installed")


@dataclass(frozen=True)
class Form:
    """A multimem type and vector form: `type` (.f16x2 etc.), vector length `count`."""

    type: str
    count: int = 1

    @property
    def container(self) -> int:
        """Bytes of one register's value."""
        return {"f16": 2, "bf16": 2, "f64": 8, "u64": 8, "s64": 8, "b64": 8}.get(self.type, 4)

    @property
    def nbytes(self) -> int:
        return self.container * self.count

    @property
    def element(self) -> type:
        """numpy dtype of one element (halves of a pair are two)."""
        base = self.type.removesuffix("x2")
        return {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32,
                "f64": np.float64, "u32": np.uint32, "s32": np.int32, "b32": np.uint32,
                "u64": np.uint64, "s64": np.int64, "b64": np.uint64}[base]

    @property
    def registers(self) -> list[str]:
        prefix = {2: "%h", 8: "%x"}.get(self.container, "%r")
        if self.type == "f32":
            prefix = "%f"
        elif self.type == "f64":
            prefix = "%fd"
        return [f"{prefix}{j}" for j in range(self.count)]

    @property
    def operand(self) -> str:
        regs = self.registers
        return regs[0] if self.count == 1 else "{" + ", ".join(regs) + "}"

    @property
    def suffix(self) -> str:
        return (f".v{self.count}" if self.count > 1 else "") + f".{self.type}"

    def stores(self, base: str) -> str:
        """Plain stores of the registers to [base + j * container]."""
        kind = {"f32": "f32", "f64": "f64"}.get(self.type, f"b{self.container * 8}")
        return "\n".join(f"    st.global.{kind} [{base}+{j * self.container}], {r};"
                         for j, r in enumerate(self.registers))

    def loads(self, base: str) -> str:
        kind = {"f32": "f32", "f64": "f64"}.get(self.type, f"b{self.container * 8}")
        return "\n".join(f"    ld.global.{kind} {r}, [{base}+{j * self.container}];"
                         for j, r in enumerate(self.registers))


HEADER = """
.version 8.2
.target sm_90a
.address_size 64
"""
REGISTERS = """
    .reg .b16 %h<8>;
    .reg .b32 %r<12>;
    .reg .f32 %f<4>;
    .reg .f64 %fd<2>;
    .reg .b64 %x<2>;
    .reg .b64 %rd<12>;
    .reg .pred %p<4>;"""


def ld_reduce_kernel(form: Form, op: str, acc: bool = False, sem: str = "") -> str:
    """Thread t reduces the vector at multicast offset t * nbytes over the devices and
    stores it to out[t]."""
    opcode = f"multimem.ld_reduce{sem}.global.{op}{'.acc::f32' if acc else ''}{form.suffix}"
    return HEADER + f"""
.visible .entry k(.param .u64 mc, .param .u64 out)
.maxntid {THREADS}, 1, 1
{{{REGISTERS}
    ld.param.u64 %rd0, [mc];
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r10, %tid.x;
    mul.wide.u32 %rd2, %r10, {form.nbytes};
    add.s64 %rd3, %rd0, %rd2;
    add.s64 %rd4, %rd1, %rd2;
    {opcode} {form.operand}, [%rd3];
{form.stores("%rd4")}
    ret;
}}
"""


def red_kernel(form: Form, op: str, sem: str = "") -> str:
    """Thread t reduces src[t] (its device's) into every device's copy at offset t * nbytes."""
    return HEADER + f"""
.visible .entry k(.param .u64 mc, .param .u64 src)
.maxntid {THREADS}, 1, 1
{{{REGISTERS}
    ld.param.u64 %rd0, [mc];
    ld.param.u64 %rd1, [src];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r10, %tid.x;
    mul.wide.u32 %rd2, %r10, {form.nbytes};
    add.s64 %rd3, %rd0, %rd2;
    add.s64 %rd4, %rd1, %rd2;
{form.loads("%rd4")}
    multimem.red{sem}.global.{op}{form.suffix} [%rd3], {form.operand};
    ret;
}}
"""


INT_FORMS = [("add", "u32"), ("add", "s32"), ("add", "u64"),
             *[(op, t) for op in ("min", "max") for t in ("u32", "s32", "u64", "s64")],
             *[(op, t) for op in ("and", "or", "xor") for t in ("b32", "b64")]]
FLOAT_FORMS = [Form("f16", 2), Form("f16", 4), Form("f16", 8), Form("f16x2"), Form("f16x2", 2),
               Form("f16x2", 4), Form("bf16", 2), Form("bf16", 4), Form("bf16", 8),
               Form("bf16x2"), Form("bf16x2", 2), Form("bf16x2", 4)]
LD_REDUCE = ([(op, Form(t), False) for op, t in INT_FORMS]
             + [("add", f, acc) for f in FLOAT_FORMS for acc in (False, True)]
             + [("add", Form("f32", c), False) for c in (1, 2, 4)]
             + [("add", Form("f64"), False)]
             + [(op, f, False) for op in ("min", "max") for f in FLOAT_FORMS])
RED = ([(op, Form(t)) for op, t in INT_FORMS]
       + [("add", f) for f in FLOAT_FORMS]
       + [("add", Form("f32", c)) for c in (1, 2, 4)] + [("add", Form("f64"))])


def name(case) -> str:
    op, form, *acc = case
    return f"{op}{'.acc::f32' if acc and acc[0] else ''}{form.suffix}"


def random_elements(form: Form, n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, THREADS, elements) values of each device's buffer, spread over magnitudes so that
    half-precision sums round."""
    per = form.nbytes // np.dtype(form.element).itemsize
    shape = (n, THREADS, per)
    if np.dtype(form.element).kind in "iu":
        info = np.iinfo(form.element)
        return rng.integers(info.min, info.max, shape, dtype=form.element, endpoint=True)
    magnitude = 2.0 ** rng.integers(-6, 6, shape)
    return (rng.standard_normal(shape) * magnitude).astype(form.element)


def expected_reduction(values: np.ndarray, op: str, acc: bool) -> np.ndarray:
    """The reduction over axis 0 (devices, in order), rounded as the ISA says."""
    dtype = values.dtype
    if dtype.kind in "iu":
        fn = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and,
              "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
        return fn.reduce(values, axis=0, dtype=dtype)
    if op in ("min", "max"):
        return (np.min if op == "min" else np.max)(values, axis=0)
    if acc:  # accumulate in f32 (every step rounded to f32), round once
        total = values[0].astype(np.float32)
        for v in values[1:]:
            total = total + v.astype(np.float32)
        return total.astype(dtype)
    total = values[0]
    for v in values[1:]:  # each partial sum rounded to the type
        total = (total.astype(np.float64) + v.astype(np.float64)).astype(dtype)
    return total


def test_kernels_assemble():
    needs_ptxas()
    for op, form, acc in LD_REDUCE:
        compile_ptx(ld_reduce_kernel(form, op, acc))
    for op, form in RED:
        compile_ptx(red_kernel(form, op))
    for text in (all_gather(), all_gather(""), all_gather(POLL_ALL), all_gather(POLL_ALL, 1)):
        compile_ptx(text)


@pytest.mark.parametrize("n", DEVICES)
@pytest.mark.parametrize("case", LD_REDUCE, ids=name)
def test_ld_reduce(case, n):
    op, form, acc = case
    rng = np.random.default_rng(len(name(case)) * 31 + n)
    values = random_elements(form, n, rng)
    symmetric = [v.copy() for v in values]
    out = np.zeros((n, THREADS, values.shape[2]), form.element)
    run_ptx_devices(ld_reduce_kernel(form, op, acc), "k", 1, THREADS,
                    [[Multicast(), out[d]] for d in range(n)], symmetric=symmetric)
    expected = expected_reduction(values, op, acc)
    for d in range(n):
        np.testing.assert_array_equal(out[d].view(np.uint8), expected.view(np.uint8))
        np.testing.assert_array_equal(symmetric[d], values[d])  # loads write nothing


@pytest.mark.parametrize("type_", ["f16", "bf16"])
def test_acc_f32_rounds_once(type_):
    """1 + 4 half-ulps: rounded at every step (ties to even) the sum stays 1; accumulated in
    f32 it is 1 + 2 ulps."""
    n = 5
    dtype = HALF[type_]
    ulp = float(ml_dtypes.finfo(dtype).eps)
    values = np.full((n, THREADS, 2), ulp / 2, dtype)
    values[0] = 1
    for acc, total in ((False, 1.0), (True, 1 + 2 * ulp)):
        out = np.zeros((n, THREADS, 2), dtype)
        run_ptx_devices(ld_reduce_kernel(Form(type_, 2), "add", acc), "k", 1, THREADS,
                        [[Multicast(), out[d]] for d in range(n)],
                        symmetric=[v.copy() for v in values])
        np.testing.assert_array_equal(out.astype(np.float64), total)


@pytest.mark.parametrize("n", DEVICES)
@pytest.mark.parametrize("case", RED, ids=name)
def test_red(case, n):
    """Every device reduces its src into every copy: each copy ends as the reduction of the
    initial buffer and all srcs (floats: small integers, exact in any order)."""
    op, form = case
    rng = np.random.default_rng(len(name(case)) * 17 + n)
    initial = random_elements(form, 1, rng)[0]
    src = random_elements(form, n, rng)
    if np.dtype(form.element).kind == "f":
        initial = rng.integers(-16, 16, initial.shape).astype(form.element)
        src = rng.integers(-16, 16, src.shape).astype(form.element)
    symmetric = [initial.copy() for _ in range(n)]
    run_ptx_devices(red_kernel(form, op), "k", 1, THREADS,
                    [[Multicast(), src[d]] for d in range(n)], symmetric=symmetric)
    expected = expected_reduction(np.concatenate([initial[None], src]), op, False)
    for d in range(n):
        np.testing.assert_array_equal(symmetric[d].view(np.uint8), expected.view(np.uint8))


@pytest.mark.parametrize("type_", ["f16", "bf16"])
def test_red_rounds_each_sum_to_the_type(type_):
    """Adding a half-ulp to 1 rounds (ties to even) back to 1, on every copy, every time."""
    n = 4
    dtype = HALF[type_]
    half_ulp = float(ml_dtypes.finfo(dtype).eps) / 2
    symmetric = [np.ones((THREADS, 2), dtype) for _ in range(n)]
    src = np.full((n, THREADS, 2), half_ulp, dtype)
    run_ptx_devices(red_kernel(Form(type_, 2), "add"), "k", 1, THREADS,
                    [[Multicast(), src[d]] for d in range(n)], symmetric=symmetric)
    np.testing.assert_array_equal(np.stack(symmetric).astype(np.float64), 1.0)


# All-gather by multicast stores: device r's CHUNK words land at [16 + 4 * (r * CHUNK + t)] of
# every device's buffer; each device then signals every device with one
# multimem.red.release.sys (word 0 counts the signals), waits for all of them on its own copy
# (WAIT) and copies its buffer out.
CHUNK = 32
ALL_GATHER = HEADER + """
.visible .entry all_gather(.param .u64 mc, .param .u64 mine, .param .u32 rank,
                           .param .u32 ndev, .param .u64 src, .param .u64 out)
.maxntid 32, 1, 1
{
    .reg .b32 %r<12>;
    .reg .b64 %rd<16>;
    .reg .pred %p<4>;
    ld.param.u64 %rd0, [mc];
    ld.param.u64 %rd1, [mine];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u32 %r0, [rank];
    ld.param.u32 %r1, [ndev];
    mov.u32 %r2, %tid.x;
    ld.param.u64 %rd2, [src];
    cvta.to.global.u64 %rd2, %rd2;
    mul.wide.u32 %rd3, %r2, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.u32 %r3, [%rd4];
    mad.lo.u32 %r4, %r0, 32, %r2;
    mul.wide.u32 %rd5, %r4, 4;
    add.s64 %rd6, %rd0, %rd5;
    multimem.st.weak.global.u32 [%rd6+16], %r3;
    bar.sync 0;
    setp.ne.u32 %p0, %r2, 0;
    @%p0 bra $wait;
    multimem.red.release.sys.global.add.u32 [%rd0], 1;
$wait:
WAIT
    bar.sync 0;
    ld.param.u64 %rd8, [out];
    cvta.to.global.u64 %rd8, %rd8;
    mov.u32 %r5, 0;
$get:
    mad.lo.u32 %r7, %r5, 32, %r2;
    mul.wide.u32 %rd9, %r7, 4;
    add.s64 %rd10, %rd1, %rd9;
    ld.global.u32 %r8, [%rd10+16];
    add.s64 %rd11, %rd8, %rd9;
    st.global.u32 [%rd11], %r8;
    add.u32 %r5, %r5, 1;
    setp.lt.u32 %p1, %r5, %r1;
    @%p1 bra $get;
    ret;
}
"""
SPIN = """$spin:
    ld.acquire.sys.global.u32 %r6, [%rd1];
    setp.lt.u32 %p2, %r6, %r1;
    @%p2 bra $spin;"""
# The poll as a multimem.ld_reduce: the least signal count over the devices' copies.
POLL_ALL = """$spin:
    multimem.ld_reduce.acquire.sys.global.min.u32 %r6, [%rd0];
    setp.lt.u32 %p2, %r6, NEED;
    @%p2 bra $spin;"""


def all_gather(wait: str = SPIN, need: int | None = None) -> str:
    return ALL_GATHER.replace("WAIT", wait.replace("NEED", "%r1" if need is None
                                                   else str(need)))


def run_all_gather(n: int, ptx: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    src = np.arange(n * CHUNK, dtype=np.uint32).reshape(n, CHUNK) * 7 + 1
    symmetric = [np.zeros(4 + n * CHUNK, np.uint32) for _ in range(n)]
    out = np.zeros((n, n * CHUNK), np.uint32)
    args = [[Multicast(), symmetric[d], np.uint32(d), np.uint32(n), src[d], out[d]]
            for d in range(n)]
    run_ptx_devices(ptx, "all_gather", 1, CHUNK, args, symmetric=symmetric)
    return src, np.stack(symmetric), out


def line_of(ptx: str, text: str) -> int:
    return next(i for i, line in enumerate(ptx.splitlines(), 1) if text in line)


@pytest.mark.parametrize("wait", ["ld", "ld_reduce"])
@pytest.mark.parametrize("n", DEVICES)
def test_all_gather_by_multicast_stores(n, wait):
    """multimem.st puts each device's chunk into every buffer, one multimem.red.release.sys
    per device signals all; the wait (ld.acquire.sys on the own copy, or a
    multimem.ld_reduce.acquire.sys.min poll over every copy) orders the plain reads."""
    src, symmetric, out = run_all_gather(n, all_gather(SPIN if wait == "ld" else POLL_ALL))
    np.testing.assert_array_equal(out, np.tile(src.reshape(-1), (n, 1)))
    np.testing.assert_array_equal(symmetric[:, 4:], out)
    np.testing.assert_array_equal(symmetric[:, 0], n)


def test_plain_reads_of_multicast_stores_without_a_wait_race():
    """Without the wait, a device's plain read of its buffer is unordered with another
    device's multimem.st into it: a race naming both lines."""
    ptx = all_gather("")
    with pytest.raises(SimError, match="race between devices") as info:
        run_all_gather(2, ptx)
    message = str(info.value)
    assert info.value.line == line_of(ptx, "ld.global.u32 %r8")
    assert f"line {line_of(ptx, 'multimem.st')}" in message


@pytest.mark.parametrize(("sem", "race"), [(".weak", True), (".relaxed.gpu", True),
                                           (".relaxed.sys", False)])
def test_concurrent_multicast_stores_are_strong_only_at_sys_scope(sem, race):
    """Every device stores into the same multicast word: weak or .gpu-scope stores race with
    each other across devices, .relaxed.sys ones do not."""
    ptx = HEADER + f"""
.visible .entry k(.param .u64 mc, .param .u32 rank)
{{
    .reg .b32 %r<2>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd0, [mc];
    ld.param.u32 %r0, [rank];
    multimem.st{sem}.global.u32 [%rd0], %r0;
    ret;
}}
"""
    needs_ptxas()
    compile_ptx(ptx)
    symmetric = [np.zeros(4, np.uint32) for _ in range(2)]
    args = [[Multicast(), np.uint32(d)] for d in range(2)]
    if race:
        with pytest.raises(SimError, match="race between devices"):
            run_ptx_devices(ptx, "k", 1, 1, args, symmetric=symmetric)
        return
    run_ptx_devices(ptx, "k", 1, 1, args, symmetric=symmetric)
    assert len({int(s[0]) for s in symmetric}) == 1  # one store landed last everywhere


def test_a_multimem_poll_never_satisfied_is_a_deadlock():
    """Each device waits until every copy counts n + 1 signals; only n come: every device's
    thread 0 spins at the multimem.ld_reduce, which the report names."""
    n = 2
    ptx = all_gather(POLL_ALL, need=n + 1)
    with pytest.raises(SimError, match="spin deadlock") as info:
        run_all_gather(n, ptx)
    poll = line_of(ptx, "multimem.ld_reduce")
    for d in range(n):
        assert f"device {d} block (0, 0, 0) (32 thread(s)) polls line {poll}" in str(info.value)


# Errors: a kernel that accesses [mc + offset] with the instruction INST.
PROBE = HEADER + """
.visible .entry k(.param .u64 mc, .param .u64 offset)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd0, [mc];
    ld.param.u64 %rd1, [offset];
    add.s64 %rd2, %rd0, %rd1;
    mov.u32 %r0, 5;
    mov.u32 %r1, 6;
    INST
    ret;
}
"""


def run_probe(inst: str, offset: int, mc=None, symmetric: bool = True) -> str:
    ptx = PROBE.replace("INST", inst)
    buffers = [np.zeros(16, np.uint32) for _ in range(2)] if symmetric else None
    mc = Multicast() if mc is None else mc
    run_ptx_devices(ptx, "k", 1, 1, [[mc, np.uint64(offset)] for _ in range(2)],
                    symmetric=buffers)
    return ptx


@pytest.mark.parametrize("inst", ["ld.global.u32 %r0, [%rd2];", "st.u32 [%rd2], %r0;",
                                  "atom.global.add.u32 %r0, [%rd2], 1;"])
def test_plain_access_to_a_multicast_address_is_a_fault(inst):
    with pytest.raises(SimError, match=r"multicast address .* accessed only by multimem") as info:
        run_probe(inst, 8)
    assert info.value.line == line_of(PROBE.replace("INST", inst), inst)


@pytest.mark.parametrize(("offset", "message"), [
    (2, "misaligned multimem.ld_reduce of 4 bytes at multicast offset 2"),
    (64, "out-of-bounds multimem.ld_reduce of 4 bytes at multicast offset 64: the symmetric "
         "buffers have 64 bytes")])
def test_bad_multimem_addresses_are_faults(offset, message):
    inst = "multimem.ld_reduce.global.add.u32 %r0, [%rd2];"
    with pytest.raises(SimError, match=message) as info:
        run_probe(inst, offset)
    assert info.value.line == line_of(PROBE, "INST")


def test_multimem_on_an_ordinary_pointer_is_a_fault():
    """The device's own symmetric buffer is not a multicast address."""
    ptx = PROBE.replace("INST", "multimem.st.global.u32 [%rd2], %r0;")
    buffers = [np.zeros(16, np.uint32) for _ in range(2)]
    with pytest.raises(SimError, match="not a multicast address"):
        run_ptx_devices(ptx, "k", 1, 1, [[buffers[d], np.uint64(0)] for d in range(2)],
                        symmetric=buffers)


def test_multicast_needs_symmetric_buffers():
    with pytest.raises(SimError, match=r"Multicast.*needs symmetric buffers"):
        run_probe("multimem.st.global.u32 [%rd2], %r0;", 0, symmetric=False)
    with pytest.raises(SimError, match=r"Multicast.*needs symmetric buffers"):
        run_ptx(PROBE.replace("INST", ""), "k", 1, 1, [Multicast(), np.uint64(0)])


@pytest.mark.parametrize(("inst", "detail"), [
    ("multimem.ld_reduce.global.min.f32 %r0, [%rd2];", "min does not take .f32"),
    ("multimem.red.global.min.v2.f16 [%rd2], {%h0, %h1};", "min does not take .f16"),
    ("multimem.ld_reduce.global.add.v2.u32 {%r0, %r1}, [%rd2];", "no vector of integers"),
    ("multimem.ld_reduce.global.add.v2.f64 {%rd0, %rd1}, [%rd2];", "does not come in .v2"),
    ("multimem.ld_reduce.acquire.global.add.u32 %r0, [%rd2];", "need a scope"),
    ("multimem.ld_reduce.global.add.acc::f32.f32 %r0, [%rd2];", "acc::f32"),
    ("multimem.ld_reduce.global.add.e4m3x4 %r0, [%rd2];", "fp8"),
])
def test_unsupported_forms_are_named(inst, detail):
    with pytest.raises(SimError, match="unsupported PTX instruction") as info:
        run_probe(inst.replace("%h", "%r"), 0)
    assert detail in str(info.value)
