"""The PTX simulator end to end: kernels built with KernelBuilder, checked against numpy."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from smalti.ptx import (
    Address,
    Guard,
    Immediate,
    KernelBuilder,
    Label,
    Module,
    Register,
    Symbol,
    VectorOperand,
    format_instruction,
    print_module,
)
from smalti.sim import SimError, run_module


def module_of(kb: KernelBuilder) -> Module:
    return Module(kernels=(kb.build(),))


def global_pointer(kb: KernelBuilder, name: str) -> Register:
    param = kb.param(name)
    raw = kb.compute("ld.param.u64", "u64", Address(param))
    return kb.compute("cvta.to.global.u64", "u64", raw)


def global_index(kb: KernelBuilder) -> Register:
    return kb.compute("mad.lo.s32", "s32", kb.special("%ctaid.x"), kb.special("%ntid.x"),
                      kb.special("%tid.x"))


def pointwise_kernel(dtype: str, vectors: int) -> Module:
    """out = a * b + c, each thread handling `vectors` 16-byte vectors of each array."""
    kb = KernelBuilder(f"pointwise_{dtype}")
    a, b, c, out = (global_pointer(kb, n) for n in "abco")
    index = global_index(kb)
    lanes = 4  # four 32-bit registers per 16 bytes
    reg_type = "f32" if dtype == "f32" else "b32"
    for j in range(vectors):
        chunk = kb.compute("mad.lo.s32", "s32", index, vectors, j)
        offset = kb.compute("mul.wide.s32", "s64", chunk, 16)
        loaded = {}
        for name, base in (("a", a), ("b", b), ("c", c)):
            address = kb.compute("add.s64", "s64", base, offset)
            regs = [kb.reg(reg_type) for _ in range(lanes)]
            kb.emit(f"ld.global.nc.v4.{reg_type}", VectorOperand(tuple(regs)), Address(address))
            loaded[name] = regs
        results = []
        for x, y, z in zip(loaded["a"], loaded["b"], loaded["c"], strict=True):
            if dtype == "f32":
                p = kb.compute("mul.rn.f32", "f32", x, y)
                results.append(kb.compute("add.rn.f32", "f32", p, z))
            else:
                p = kb.compute("mul.rn.bf16x2", "bf16x2", x, y)
                results.append(kb.compute("add.rn.bf16x2", "bf16x2", p, z))
        address = kb.compute("add.s64", "s64", out, offset)
        kb.emit(f"st.global.v4.{reg_type}", Address(address), VectorOperand(tuple(results)))
    kb.emit("ret")
    return module_of(kb)


def test_pointwise_f32_matches_numpy_exactly():
    rng = np.random.default_rng(0)
    n = 8 * 64 * 4 * 2
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    a[:8] = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-45, 3e38, -3e38]
    out = np.zeros(n, np.float32)
    run_module(pointwise_kernel("f32", 2), "pointwise_f32", 8, 64, [a, b, c, out])
    with np.errstate(over="ignore"):
        expected = a * b + c
    np.testing.assert_array_equal(out.view(np.uint32)[~np.isnan(expected)],
                                  expected.view(np.uint32)[~np.isnan(expected)])
    assert np.isnan(out[np.isnan(expected)]).all()


def test_pointwise_bf16x2_matches_ml_dtypes_exactly():
    rng = np.random.default_rng(1)
    n = 4 * 32 * 8
    a, b, c = (rng.standard_normal(n).astype(ml_dtypes.bfloat16) for _ in range(3))
    out = np.zeros(n, ml_dtypes.bfloat16)
    run_module(pointwise_kernel("bf16", 1), "pointwise_bf16", 4, 32, [a, b, c, out])
    expected = a * b + c  # each op rounds to bf16, like mul.rn then add.rn
    np.testing.assert_array_equal(out.view(np.uint16), expected.view(np.uint16))


def test_divergent_if_else_reconverges():
    kb = KernelBuilder("parity")
    out = global_pointer(kb, "out")
    tid = kb.special("%tid.x")
    odd = kb.compute("and.b32", "b32", tid, 1)
    is_odd = kb.compute("setp.ne.s32", "pred", odd, 0)
    value = kb.reg("u32")
    else_label, join = kb.new_label("else"), kb.new_label("join")
    kb.emit("bra", else_label, guard=Guard(is_odd))
    kb.emit("mul.lo.u32", value, tid, 10)  # even threads
    kb.emit("bra.uni", join)
    kb.place(else_label)
    kb.emit("add.u32", value, tid, 1000)  # odd threads
    kb.place(join)
    final = kb.compute("add.u32", "u32", value, 7)  # runs once, for all threads together
    offset = kb.compute("mul.wide.u32", "u64", tid, 4)
    address = kb.compute("add.s64", "s64", out, offset)
    kb.emit("st.global.u32", Address(address), final)
    kb.emit("ret")
    out_array = np.zeros(64, np.uint32)
    run_module(module_of(kb), "parity", 1, 64, [out_array])
    t = np.arange(64, dtype=np.uint32)
    np.testing.assert_array_equal(out_array, np.where(t % 2 == 1, t + 1000, t * 10) + 7)


def test_loop_with_backward_branch_and_per_thread_trip_counts():
    kb = KernelBuilder("triangle")
    out = global_pointer(kb, "out")
    tid = kb.special("%tid.x")
    total, i = kb.reg("u32"), kb.reg("u32")
    kb.emit("mov.u32", total, 0)
    kb.emit("mov.u32", i, 0)
    top, done = kb.new_label("top"), kb.new_label("done")
    kb.place(top)
    finished = kb.compute("setp.ge.u32", "pred", i, tid)
    kb.emit("bra", done, guard=Guard(finished))
    kb.emit("add.u32", total, total, i)
    kb.emit("add.u32", i, i, 1)
    kb.emit("bra", top)
    kb.place(done)
    offset = kb.compute("mul.wide.u32", "u64", tid, 4)
    address = kb.compute("add.s64", "s64", out, offset)
    kb.emit("st.global.u32", Address(address), total)
    kb.emit("ret")
    out_array = np.zeros(40, np.uint32)
    run_module(module_of(kb), "triangle", 1, 40, [out_array])
    t = np.arange(40)
    np.testing.assert_array_equal(out_array, t * (t - 1) // 2)


def test_shared_memory_reversal_with_bar_sync():
    block = 128
    kb = KernelBuilder("reverse")
    data = global_pointer(kb, "data")
    buffer = kb.shared("buffer", block * 4)
    tid = kb.special("%tid.x")
    index = global_index(kb)
    offset = kb.compute("mul.wide.s32", "s64", index, 4)
    address = kb.compute("add.s64", "s64", data, offset)
    value = kb.compute("ld.global.f32", "f32", Address(address))
    base = kb.compute("mov.u32", "u32", buffer)
    slot = kb.compute("mad.lo.u32", "u32", tid, 4, base)
    kb.emit("st.shared.f32", Address(slot), value)
    kb.emit("bar.sync", 0)
    mirrored = kb.compute("sub.u32", "u32", block - 1, tid)
    other = kb.compute("mad.lo.u32", "u32", mirrored, 4, base)
    swapped = kb.compute("ld.shared.f32", "f32", Address(other))
    kb.emit("st.global.f32", Address(address), swapped)
    kb.emit("ret")
    values = np.arange(3 * block, dtype=np.float32)
    run_module(module_of(kb), "reverse", 3, block, [values])
    np.testing.assert_array_equal(values, np.arange(3 * block, dtype=np.float32)
                                  .reshape(3, block)[:, ::-1].reshape(-1))


def test_bar_sync_waits_for_threads_still_in_a_divergent_branch():
    """Threads that skip ahead must not read shared memory before the slow ones wrote it."""
    kb = KernelBuilder("late_writer")
    out = global_pointer(kb, "out")
    buffer = kb.shared("slot", 4)
    tid = kb.special("%tid.x")
    is_zero = kb.compute("setp.eq.u32", "pred", tid, 0)
    skip = kb.new_label("skip")
    kb.emit("bra", skip, guard=Guard(is_zero, negated=True))
    kb.emit("st.shared.u32", Address(buffer), 42)
    kb.place(skip)
    kb.emit("bar.sync", 0)
    seen = kb.compute("ld.shared.u32", "u32", Address(buffer))
    offset = kb.compute("mul.wide.u32", "u64", tid, 4)
    address = kb.compute("add.s64", "s64", out, offset)
    kb.emit("st.global.u32", Address(address), seen)
    kb.emit("ret")
    out_array = np.zeros(64, np.uint32)
    run_module(module_of(kb), "late_writer", 1, 64, [out_array])
    assert (out_array == 42).all()


def test_early_exit_threads_do_not_block_the_barrier():
    kb = KernelBuilder("early_exit")
    out = global_pointer(kb, "out")
    tid = kb.special("%tid.x")
    high = kb.compute("setp.ge.u32", "pred", tid, 16)
    kb.emit("ret", guard=Guard(high))
    kb.emit("bar.sync", 0)
    offset = kb.compute("mul.wide.u32", "u64", tid, 4)
    address = kb.compute("add.s64", "s64", out, offset)
    kb.emit("st.global.u32", Address(address), tid)
    kb.emit("ret")
    out_array = np.full(32, 99, np.uint32)
    run_module(module_of(kb), "early_exit", 1, 32, [out_array])
    np.testing.assert_array_equal(out_array, np.r_[np.arange(16), np.full(16, 99)])


def test_scalar_params_and_bounds_guarded_tail():
    kb = KernelBuilder("saxpy")
    x, y = global_pointer(kb, "x"), global_pointer(kb, "y")
    alpha = kb.compute("ld.param.f32", "f32", Address(kb.param("alpha", "f32")))
    n = kb.compute("ld.param.u32", "u32", Address(kb.param("n", "u32")))
    index = global_index(kb)
    outside = kb.compute("setp.ge.u32", "pred", index, n)
    exit_label = kb.new_label("exit")
    kb.emit("bra", exit_label, guard=Guard(outside))
    offset = kb.compute("mul.wide.u32", "u64", index, 4)
    xa = kb.compute("add.s64", "s64", x, offset)
    ya = kb.compute("add.s64", "s64", y, offset)
    xv = kb.compute("ld.global.f32", "f32", Address(xa))
    yv = kb.compute("ld.global.f32", "f32", Address(ya))
    kb.emit("st.global.f32", Address(ya), kb.compute("fma.rn.f32", "f32", alpha, xv, yv))
    kb.place(exit_label)
    kb.emit("ret")
    xs = np.linspace(-1, 1, 100, dtype=np.float32)
    ys = np.linspace(3, 4, 100, dtype=np.float32)
    expected = (np.float64(np.float32(0.3)) * xs + ys).astype(np.float32)
    run_module(module_of(kb), "saxpy", 4, 32, [xs, ys, np.float32(0.3), 100])
    np.testing.assert_array_equal(ys, expected)


def line_of(module: Module, text: str) -> int:
    lines = print_module(module).split("\n")
    return next(i + 1 for i, line in enumerate(lines) if line.strip() == text)


def test_out_of_bounds_store_names_line_thread_and_buffer():
    kb = KernelBuilder("overrun")
    out = global_pointer(kb, "out")
    tid = kb.special("%tid.x")
    offset = kb.compute("mul.wide.u32", "u64", tid, 4)
    address = kb.compute("add.s64", "s64", out, offset)
    kb.emit("st.global.u32", Address(address), tid)
    kb.emit("ret")
    module = module_of(kb)
    with pytest.raises(SimError) as info:
        run_module(module, "overrun", 1, 32, [np.zeros(20, np.uint32)])
    message = str(info.value)
    store = format_instruction(module.kernels[0].body[-2])
    assert store.startswith("st.global.u32")
    assert "out-of-bounds global store of 4 bytes" in message
    assert f"at line {line_of(module, store)}: `{store}`" in message
    assert "kernel 'overrun'" in message
    assert "block (0, 0, 0) thread (20, 0, 0)" in message
    assert "byte offset 80 of args[0]" in message


def test_unknown_opcode_is_reported_with_its_line():
    kb = KernelBuilder("mystery")
    kb.emit("foo.bar", kb.reg("u32"))
    kb.emit("ret")
    module = module_of(kb)
    line = line_of(module, format_instruction(module.kernels[0].body[0]))
    with pytest.raises(SimError, match=rf"unsupported PTX instruction 'foo.bar' at line {line}"):
        run_module(module, "mystery", 1, 1, [])


def test_unsupported_modifier_is_reported():
    kb = KernelBuilder("directed_f64")
    r = kb.reg("f64")
    kb.emit("fma.rz.f64", r, Immediate(1.0, "f64"), Immediate(2.0, "f64"),
            Immediate(3.0, "f64"))
    kb.emit("ret")
    with pytest.raises(SimError, match=r"unsupported PTX instruction 'fma.rz.f64' at line"):
        run_module(module_of(kb), "directed_f64", 1, 1, [])


def test_uninitialised_register_read_names_the_thread():
    kb = KernelBuilder("uninit")
    out = global_pointer(kb, "out")
    tid = kb.special("%tid.x")
    value = kb.reg("u32")
    odd = kb.compute("and.b32", "b32", tid, 1)
    is_odd = kb.compute("setp.ne.u32", "pred", odd, 0)
    kb.emit("mov.u32", value, 5, guard=Guard(is_odd))
    kb.emit("st.global.u32", Address(out), value)
    kb.emit("ret")
    with pytest.raises(SimError, match=r"uninitialised register %r\d+.*thread \(0, 0, 0\)"):
        run_module(module_of(kb), "uninit", 1, 2, [np.zeros(1, np.uint32)])


def test_wrong_argument_count_is_an_error():
    kb = KernelBuilder("one_arg")
    global_pointer(kb, "x")
    kb.emit("ret")
    with pytest.raises(SimError, match="1 kernel arguments expected, 0 given"):
        run_module(module_of(kb), "one_arg", 1, 1, [])


def test_special_registers_in_3d_launch():
    kb = KernelBuilder("ids")
    out = global_pointer(kb, "out")
    names = ["%tid.x", "%tid.y", "%tid.z", "%ctaid.x", "%ctaid.y", "%ntid.y", "%nctaid.x",
             "%laneid", "%warpid"]
    linear_block = kb.compute("mad.lo.u32", "u32", kb.special("%ctaid.y"),
                              kb.special("%nctaid.x"), kb.special("%ctaid.x"))
    local = kb.compute("mad.lo.u32", "u32", kb.special("%tid.z"), kb.special("%ntid.y"),
                       kb.special("%tid.y"))
    local = kb.compute("mad.lo.u32", "u32", local, kb.special("%ntid.x"), kb.special("%tid.x"))
    threads = kb.compute("mul.lo.u32", "u32", kb.special("%ntid.x"), kb.special("%ntid.y"))
    threads = kb.compute("mul.lo.u32", "u32", threads, kb.special("%ntid.z"))
    linear = kb.compute("mad.lo.u32", "u32", linear_block, threads, local)
    for k, name in enumerate(names):
        slot = kb.compute("mad.lo.u32", "u32", linear, len(names), k)
        offset = kb.compute("mul.wide.u32", "u64", slot, 4)
        address = kb.compute("add.s64", "s64", out, offset)
        kb.emit("st.global.u32", Address(address), kb.special(name))
    kb.emit("ret")
    grid, block = (2, 3, 1), (8, 3, 2)
    nthreads = 6 * 48
    out_array = np.zeros((nthreads, len(names)), np.uint32)
    run_module(module_of(kb), "ids", grid, block, [out_array])
    t = np.arange(nthreads)
    b, local_ids = t // 48, t % 48
    expected = np.stack([local_ids % 8, local_ids // 8 % 3, local_ids // 24, b % 2, b // 2,
                         np.full(nthreads, 3), np.full(nthreads, 2), local_ids % 32,
                         local_ids // 32], axis=1)
    np.testing.assert_array_equal(out_array, expected)


def test_pack_and_unpack_with_mov():
    kb = KernelBuilder("packing")
    out = global_pointer(kb, "out")
    lo, hi = kb.reg("b16"), kb.reg("b16")
    kb.emit("mov.b16", lo, 0x1234)
    kb.emit("mov.b16", hi, 0xABCD)
    packed = kb.compute("mov.b32", "b32", VectorOperand((lo, hi)))
    a, b = kb.reg("b16"), kb.reg("b16")
    kb.emit("mov.b32", VectorOperand((a, b)), packed)
    swapped = kb.compute("mov.b32", "b32", VectorOperand((b, a)))
    wide = kb.compute("mov.b64", "b64", VectorOperand((packed, swapped)))
    kb.emit("st.global.u64", Address(out), wide)
    kb.emit("ret")
    out_array = np.zeros(1, np.uint64)
    run_module(module_of(kb), "packing", 1, 1, [out_array])
    assert int(out_array[0]) == 0x1234ABCD_ABCD1234


def test_unknown_kernel_name():
    kb = KernelBuilder("present")
    kb.emit("ret")
    with pytest.raises(SimError, match="no kernel named 'absent'"):
        run_module(module_of(kb), "absent", 1, 1, [])


def test_symbols_are_printed_names():
    assert Symbol("%tid.x").name == "%tid.x" and Label("x").name == "x"
