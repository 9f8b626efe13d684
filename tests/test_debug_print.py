"""smalti.debug_print on the simulator: the printed numbers are the kernel's, reassembled."""

import re

import ml_dtypes
import numpy as np
import pytest

from smalti.runtime import compile_mlir, run_simulated
from smalti.runtime.cache import ptxas_available
from smalti.tiling import WGMMA_LAYOUT, WGSplatLayout, WGStridedLayout

BF16 = ml_dtypes.bfloat16
SMEM = "#gpu.address_space<workgroup>"
LINE = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): (?:\[(?P<tags>[^\]]*)\] )?(?P<text>.*)$",
                  re.DOTALL)

# A real wgmma accumulator (WGMMA layout), then a strided load of the same output buffer.
WGMMA_KERNEL = f"""func.func @mm(%a: memref<64x64xbf16>, %b: memref<64x64xbf16>, %out: memref<64x64xf32>)
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %o_a = arith.constant 1024 : index
  %o_b = arith.constant 9216 : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<1xi64, {SMEM}>
  %sa = "smalti.slice_smem"(%o_a) : (index) -> memref<64x64xbf16, {SMEM}>
  %sb = "smalti.slice_smem"(%o_b) : (index) -> memref<64x64xbf16, {SMEM}>
  "smalti.initialize_barrier"(%bars) {{arrival_count = 1 : i64}} : (memref<1xi64, {SMEM}>) -> ()
  "smalti.arrive_expect_tx"(%bars, %c0) {{bytes = 16384 : i64}} : (memref<1xi64, {SMEM}>, index) -> ()
  "smalti.async_load"(%a, %sa, %bars, %c0, %c0, %c0) : (memref<64x64xbf16>, memref<64x64xbf16, {SMEM}>, memref<1xi64, {SMEM}>, index, index, index) -> ()
  "smalti.async_load"(%b, %sb, %bars, %c0, %c0, %c0) : (memref<64x64xbf16>, memref<64x64xbf16, {SMEM}>, memref<1xi64, {SMEM}>, index, index, index) -> ()
  %p = arith.constant 0 : i32
  "smalti.wait"(%bars, %c0, %p) : (memref<1xi64, {SMEM}>, index, i32) -> ()
  %acc = arith.constant dense<0.0> : vector<64x64xf32>
  %d = "smalti.wgmma"(%acc, %sa, %sb) : (vector<64x64xf32>, memref<64x64xbf16, {SMEM}>, memref<64x64xbf16, {SMEM}>) -> vector<64x64xf32>
  "smalti.debug_print"(%d) {{format = "acc = {{}}"}} : (vector<64x64xf32>) -> ()
  "smalti.vector_store"(%d, %out, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  "smalti.warpgroup_barrier"() : () -> ()
  %s = "smalti.vector_load"(%out, %c0, %c0) : (memref<64x64xf32>, index, index) -> vector<64x64xf32>
  %t = arith.mulf %s, %s : vector<64x64xf32>
  "smalti.debug_print"(%t) {{format = "squared: {{}} (strided)"}} : (vector<64x64xf32>) -> ()
  return
}}
"""


def _run(text: str, *args):
    lines: list[str] = []
    compiled = compile_mlir(text, "kernel.mlir")
    outputs = run_simulated(compiled, *args, print_fn=lines.append)
    return compiled, [LINE.match(line) for line in lines], outputs


def _numbers(text: str, dtype) -> np.ndarray:
    """The numbers of a printed numpy array (any shape), flattened."""
    words = text.replace("[", " ").replace("]", " ").split()
    return np.array([float(w) for w in words], np.float64).astype(dtype)


def _array(match: re.Match, prefix: str, suffix: str, shape, dtype) -> np.ndarray:
    text = match["text"]
    assert text.startswith(prefix) and text.endswith(suffix), text[:80]
    return _numbers(text[len(prefix):len(text) - len(suffix)], dtype).reshape(shape)


def test_wgmma_and_strided_tiles_print_numpy_values():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 64)).astype(BF16)
    b = rng.standard_normal((64, 64)).astype(BF16)
    compiled, lines, outputs = _run(WGMMA_KERNEL, a, b, np.zeros((64, 64), np.float32))
    records = compiled.signature().debug_prints
    assert [r.layout for r in records] == [WGMMA_LAYOUT, WGStridedLayout(4)]
    assert compiled.ptx.index("mm_param_tmap1") < compiled.ptx.index("mm_param_debug")
    out = outputs[-1]  # the kernel's own result: the printed values must be exactly it
    np.testing.assert_allclose(out, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-5,
                               atol=1e-4)
    assert len(lines) == 2 and all(lines)
    first, second = lines
    assert (first["file"], first["line"], first["tags"]) == ("kernel.mlir", "17", None)
    np.testing.assert_array_equal(_array(first, "acc = ", "", (64, 64), np.float32), out)
    assert second["line"] == "22"
    np.testing.assert_array_equal(
        _array(second, "squared: ", " (strided)", (64, 64), np.float32), out * out)


GRID_KERNEL = """func.func @grid(%a: memref<8x256xbf16>, %x: f32, %n: i32, %out: memref<8x256xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 2>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c128 = arith.constant 128 : index
  %bx = gpu.block_id x
  %col = arith.muli %bx, %c128 : index
  %v = "smalti.vector_load"(%a, %c0, %col) : (memref<8x256xbf16>, index, index) -> vector<8x128xbf16>
  "smalti.debug_print"(%v) {format = "tile {}"} : (vector<8x128xbf16>) -> ()
  "smalti.debug_print"(%bx) {format = "bx = {}"} : (index) -> ()
  "smalti.debug_print"(%x) {format = "x = {}"} : (f32) -> ()
  "smalti.debug_print"(%n) {format = "n = {}"} : (i32) -> ()
  %s = vector.broadcast %x : f32 to vector<4x128xf32>
  "smalti.debug_print"(%s) {format = "splat {}"} : (vector<4x128xf32>) -> ()
  %r = scf.for %i = %c0 to %c3 step %c1 iter_args(%acc = %v) -> (vector<8x128xbf16>) {
    %next = arith.addf %acc, %acc : vector<8x128xbf16>
    "smalti.debug_print"(%next) {format = "loop {}"} : (vector<8x128xbf16>) -> ()
    scf.yield %next : vector<8x128xbf16>
  }
  %never = arith.cmpi slt, %n, %n : i32
  scf.if %never {
    "smalti.debug_print"(%n) {format = "unreached {}"} : (i32) -> ()
  }
  "smalti.vector_store"(%r, %out, %c0, %col) : (vector<8x128xbf16>, memref<8x256xbf16>, index, index) -> ()
  return
}
"""


def test_grid_scalars_splat_and_loop_print_per_block_in_launch_order():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((8, 256)).astype(BF16)
    compiled, lines, outputs = _run(GRID_KERNEL, a, np.float32(0.1), np.int32(-7),
                                    np.zeros((8, 256), BF16))
    splat = compiled.signature().debug_prints[4]
    assert splat.layout == WGSplatLayout() and splat.values == 128
    assert len(lines) == 12 and all(lines)  # the print under the untaken scf.if is absent
    by_block = [lines[:6], lines[6:]]
    for block, group in enumerate(by_block):
        tags = f"block ({block}, 0, 0)"
        assert [m["line"] for m in group] == ["10", "11", "12", "13", "15", "18"]
        assert [m["tags"] for m in group] == [tags] * 5 + [f"{tags}, last of 3 runs"]
        tile = a[:, block * 128:(block + 1) * 128]
        np.testing.assert_array_equal(_array(group[0], "tile ", "", (8, 128), BF16), tile)
        assert group[1]["text"] == f"bx = {block}"
        assert group[2]["text"] == "x = 0.1"  # f32 0.1, shortest round-trip form
        assert group[3]["text"] == "n = -7"
        np.testing.assert_array_equal(_array(group[4], "splat ", "", (4, 128), np.float32),
                                      np.full((4, 128), np.float32(0.1)))
        last = _array(group[5], "loop ", "", (8, 128), BF16)
        np.testing.assert_array_equal(last, tile * 8)
        np.testing.assert_array_equal(outputs[-1][:, block * 128:(block + 1) * 128], last)


WARPGROUPS_KERNEL = """func.func @roles(%a: memref<128x64xf32>) attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.warpgroups = 2 : i64} {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x64xf32>, index, index) -> vector<64x64xf32>
  "smalti.debug_print"(%v) {format = "both {}"} : (vector<64x64xf32>) -> ()
  "smalti.warpgroup_region"() ({
    %w = "smalti.vector_load"(%a, %c64, %c0) : (memref<128x64xf32>, index, index) -> vector<64x64xf32>
    "smalti.debug_print"(%w) {format = "second {}"} : (vector<64x64xf32>) -> ()
  }) {warpgroup = 1 : i64} : () -> ()
  return
}
"""


def test_each_warpgroup_prints_its_own_instance():
    a = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    _, lines, _ = _run(WARPGROUPS_KERNEL, a)
    assert [(m["line"], m["tags"]) for m in lines] == [
        ("6", "warpgroup 0"), ("6", "warpgroup 1"), ("9", "warpgroup 1")]
    for match, expected in zip(lines, (a[:64], a[:64], a[64:]), strict=True):
        prefix = "both " if match["line"] == "6" else "second "
        np.testing.assert_array_equal(_array(match, prefix, "", (64, 64), np.float32),
                                      expected)


def test_default_output_goes_to_stderr(capsys):
    text = """func.func @k(%n: i32) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  "smalti.debug_print"(%n) {format = "n is {} here"} : (i32) -> ()
  return
}
"""
    run_simulated(compile_mlir(text, "k.mlir"), np.int32(42))
    captured = capsys.readouterr()
    assert captured.err == "k.mlir:2: n is 42 here\n" and captured.out == ""


def test_kernels_without_prints_take_no_debug_buffer():
    compiled = compile_mlir(WARPGROUPS_KERNEL.replace('"smalti.debug_print"', "// "), "k.mlir")
    assert compiled.signature().debug_prints == ()
    assert compiled.signature().debug_buffer_bytes == 0
    assert "_param_debug" not in compiled.ptx


@pytest.mark.skipif(not ptxas_available(), reason="ptxas not found")
@pytest.mark.parametrize("text", [WGMMA_KERNEL, GRID_KERNEL, WARPGROUPS_KERNEL],
                         ids=["wgmma", "grid", "warpgroups"])
def test_debug_prints_assemble(text):
    compile_mlir(text, "kernel.mlir").assemble()


CONSTANTS_KERNEL = """func.func @k() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %f = arith.constant 0.1 : f32
  %i = arith.constant -3 : i32
  %h = arith.constant 1.5 : bf16
  %c = arith.constant 12345678901 : index
  "smalti.debug_print"(%f) {format = "f = {}"} : (f32) -> ()
  "smalti.debug_print"(%i) {format = "i = {}"} : (i32) -> ()
  "smalti.debug_print"(%h) {format = "h = {}"} : (bf16) -> ()
  "smalti.debug_print"(%c) {format = "c = {}"} : (index) -> ()
  return
}
"""


def test_constant_scalars_print_their_values():
    _, lines, _ = _run(CONSTANTS_KERNEL)
    assert [m["text"] for m in lines] == ["f = 0.1", "i = -3", "h = 1.5", "c = 12345678901"]
    if ptxas_available():
        compile_mlir(CONSTANTS_KERNEL, "k.mlir").assemble()


BYTES_KERNEL = """func.func @bytes(%a: memref<4x128xf8E4M3FN>, %b: memref<128xi8>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128xf8E4M3FN>, index, index) -> vector<4x128xf8E4M3FN>
  "smalti.debug_print"(%x) {format = "x = {}"} : (vector<4x128xf8E4M3FN>) -> ()
  %y = "smalti.vector_load"(%b, %c0) {out_layouts = [#smalti.strided<vec = 1>]} : (memref<128xi8>, index) -> vector<128xi8>
  "smalti.debug_print"(%y) {format = "y = {}"} : (vector<128xi8>) -> ()
  %z = arith.constant dense<-1.5> : vector<4x128xf8E4M3FN>
  "smalti.debug_print"(%z) {format = "z = {}"} : (vector<4x128xf8E4M3FN>) -> ()
  return
}
"""


def test_eight_bit_vectors_print_their_values():
    """fp8 packed four to a register, i8 one to a register's low byte, and an fp8 splat
    constant: the printed arrays are the kernel's."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 128)).astype(ml_dtypes.float8_e4m3fn)
    y = rng.integers(-128, 128, 128).astype(np.int8)
    compiled, lines, _ = _run(BYTES_KERNEL, x, y)
    assert [m["text"][:4] for m in lines] == ["x = ", "y = ", "z = "]
    fp8 = ml_dtypes.float8_e4m3fn  # printed as the shortest text that reads back as it
    np.testing.assert_array_equal(_array(lines[0], "x = ", "", (4, 128), fp8), x)
    np.testing.assert_array_equal(_array(lines[1], "y = ", "", (128,), np.int8), y)
    np.testing.assert_array_equal(_array(lines[2], "z = ", "", (4, 128), np.float32),
                                  np.full((4, 128), -1.5, np.float32))
    if ptxas_available():
        compiled.assemble()


def test_dsl_debug_print_prints_arrays_and_indices_at_the_users_lines(capfd):
    """sd.debug_print under jax.jit: one line per block, located at the Python source."""
    import jax
    import jax.numpy as jnp

    import smalti.dsl as sd

    @sd.kernel(grid=(2,), out_shape=jax.ShapeDtypeStruct((8, 256), jnp.float32))
    def show(x_ref, out_ref):
        col = sd.program_id(0) * 128
        x = x_ref[:, col:col + 128]
        sd.debug_print("col = {}", col)
        sd.debug_print("tile = {}", x * 2.0)
        out_ref[:, col:col + 128] = x

    x = np.arange(8 * 256, dtype=np.float32).reshape(8, 256)
    jax.block_until_ready(jax.jit(show)(jnp.asarray(x)))
    err = capfd.readouterr().err
    records = re.split(rf"(?m)^(?={re.escape(__file__)}:\d+: )", err)
    lines = [m for r in records if (m := LINE.match(r.rstrip("\n")))]
    assert len(lines) == 4
    by_block = {(m["tags"], m["text"].split(" = ")[0]): m for m in lines}
    for block in range(2):
        col_line = by_block[(f"block ({block}, 0, 0)", "col")]
        tile_line = by_block[(f"block ({block}, 0, 0)", "tile")]
        assert col_line["file"] == __file__ and col_line["text"] == f"col = {block * 128}"
        np.testing.assert_array_equal(_array(tile_line, "tile = ", "", (8, 128), np.float32),
                                      x[:, block * 128:(block + 1) * 128] * 2)
        assert int(tile_line["line"]) == int(col_line["line"]) + 1


def test_dsl_debug_print_format_needs_one_placeholder():
    import jax
    import jax.numpy as jnp

    import smalti.dsl as sd

    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128,), jnp.float32))
    def bad(out_ref):
        sd.debug_print("no placeholder", sd.program_id(0))

    with pytest.raises(ValueError, match=r"test_debug_print.py:\d+:\d+: .*exactly one '\{\}'"):
        bad.trace()
