"""The TMEM ops (smalti/dialect/ops_tmem.py) compiled for sm_100a and run in the simulator
against numpy: a vector loaded from global memory is stored into tensor memory, loaded back
(at a column offset, in the same or another tcgen05 layout) and stored to global memory; the
region is freed. Also: the lit kernels assemble with ptxas, and wrong use (the wrong arch, an
impossible layout) gives located errors."""

from __future__ import annotations

import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from smalti.dialect import DiagnosticError, layout_to_attr, make_context
from smalti.runtime import compile_mlir
from smalti.runtime.simulate import run_simulated
from smalti.sim.errors import SimError
from smalti.tiling import LayoutError, tmem_layout

ROOT = Path(__file__).resolve().parents[1]
LIT_FILE = ROOT / "lit_tests" / "lowering" / "tmem.mlir"
CHUNKS = LIT_FILE.read_text().split("// -----")
ARCH = "sm_100a"
# The .16x256b layout of a 128-row value (smalti.tiling.TMEM_LAYOUT_16X256B).
LAYOUT_16X256B = ("#smalti.tiled<tiling = [[128, 8], [32, 8], [16, 8], [8, 8], [1, 2]], "
                  "warp = [-10], lane = [-4, -3], vector = -1>")
DTYPES = {"f32": np.float32, "i32": np.int32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}


def _roundtrip(element: str, columns: int, store_at: int, load_at: int, *,
               cast: str | None = None, warpgroups: int = 1, dealloc: bool = True,
               unpacked: bool = False) -> str:
    """A kernel: %a (128x64) -> registers [-> layout_cast] -> TMEM columns from `store_at`
    -> registers (from `load_at`) -> %out; `columns` allocated (the ref spans them;
    `unpacked`: 16-bit elements one per column)."""
    packed = 32 // int(re.sub(r"\D", "", element))
    ref = f'memref<128x{columns * packed}x{element}, "tmem">'
    if unpacked:
        ref = f'memref<128x{columns}x{element}, strided<[{2 * columns}, 2]>, "tmem">'
    vector = f"vector<128x64x{element}>"
    value = "%v"
    body = ""
    if cast is not None:
        body = (f'%c = "smalti.layout_cast"(%v) {{new_layout = {cast}}} : ({vector}) -> '
                f"{vector}\n")
        value = "%c"
    free = f'"smalti.tmem_dealloc"(%t) : ({ref}) -> ()' if dealloc else ""
    return f"""
func.func @roundtrip(%a: memref<128x64x{element}>, %out: memref<128x64x{element}>)
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>,
                 smalti.warpgroups = {warpgroups} : i64}} {{
  %c0 = arith.constant 0 : index
  %t = "smalti.tmem_alloc"() {{columns = {columns} : i64}} : () -> {ref}
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x64x{element}>, index, index) -> {vector}
  {body}
  "smalti.tmem_store"({value}, %t) {{column = {store_at} : i64}} : ({vector}, {ref}) -> ()
  %w = "smalti.tmem_load"(%t) {{column = {load_at} : i64}} : ({ref}) -> {vector}
  "smalti.vector_store"(%w, %out, %c0, %c0) : ({vector}, memref<128x64x{element}>, index, index) -> ()
  {free}
  "smalti.tmem_relinquish_alloc_permit"() : () -> ()
  return
}}
"""


def _data(element: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if element == "i32":
        return rng.integers(-(2**31), 2**31 - 1, (128, 64), dtype=np.int32)
    return rng.standard_normal((128, 64)).astype(DTYPES[element])


def _run(text: str, a: np.ndarray, **options) -> np.ndarray:
    compiled = compile_mlir(text, "roundtrip", arch=ARCH)
    return run_simulated(compiled, a, np.zeros_like(a), **options)[1]


@pytest.mark.parametrize("element", ["f32", "i32", "bf16", "f16"])
@pytest.mark.parametrize("policy", ["eager", "latest"])
def test_roundtrip_through_tmem(element, policy):
    a = _data(element)
    text = _roundtrip(element, 64, 0, 0)
    np.testing.assert_array_equal(_run(text, a, async_completion=policy), a)


@pytest.mark.parametrize("element", ["f32", "bf16"])
def test_column_offset(element):
    """Stored in the second half of a 128-column region and loaded back from there."""
    a = _data(element, 1)
    text = _roundtrip(element, 128, 64, 64)
    np.testing.assert_array_equal(_run(text, a), a)


def test_stored_in_16x256b_loaded_in_32x32b():
    """The value goes into TMEM through the .16x256b layout (two instructions per warp, one
    per 16-lane half) and comes back through .32x32b: the cells, not the registers, agree."""
    a = _data("f32", 2)
    text = _roundtrip("f32", 64, 0, 0, cast=LAYOUT_16X256B)
    compiled = compile_mlir(text, "roundtrip", arch=ARCH)
    assert "tcgen05.st.sync.aligned.16x256b.x8.b32" in compiled.ptx
    assert "tcgen05.ld.sync.aligned.32x32b.x64.b32" in compiled.ptx
    result = run_simulated(compiled, a, np.zeros_like(a), async_completion="random", seed=3)
    np.testing.assert_array_equal(result[1], a)


@pytest.mark.parametrize("element", ["f32", "bf16"])
@pytest.mark.parametrize(("shape", "num"), [("16x64b", 4), ("16x128b", 2), ("16x256b", 1),
                                            ("16x32bx2", 4), ("32x32b", 8)])
def test_every_data_movement_shape(shape, num, element):
    """Stored through each tcgen05.st shape's layout (smalti.tiling.tmem_layout), loaded
    back through .32x32b; .16x32bx2 passes its immHalfSplitoff (the halves adjacent)."""
    bits = 32 if element == "f32" else 16
    with make_context():
        layout = str(layout_to_attr(tmem_layout(shape, num, bits)))
    a = _data(element, 6)
    compiled = compile_mlir(_roundtrip(element, 64, 0, 0, cast=layout), "roundtrip", arch=ARCH)
    stores = re.findall(r"tcgen05\.st\.sync\.aligned\.(\w+)\.x(\d+)\.b32 \[%r\d+\](, \d+)?",
                        compiled.ptx)
    assert {store[0] for store in stores} == {shape}
    if shape == "16x32bx2":
        assert all(split == f", {int(count)}" for _, count, split in stores), stores
    result = run_simulated(compiled, a, np.zeros_like(a), async_completion="latest")
    np.testing.assert_array_equal(result[1], a)


@pytest.mark.parametrize("element", ["f16", "bf16"])
@pytest.mark.parametrize(("shape", "num"), [("16x64b", 4), ("16x128b", 2), ("16x256b", 1),
                                            ("32x32b", 8)])
def test_unpacked_every_data_movement_shape(shape, num, element):
    """Unpacked 16-bit refs (one element per 32-bit column) from the odd column 33:
    tcgen05.st .unpack::16b through each shape's layout, each register spanning two columns
    (so blocks of a layout lie twice as far apart), loaded back through .32x32b
    .pack::16b."""
    with make_context():
        layout = str(layout_to_attr(tmem_layout(shape, num, 16)))
    a = _data(element, 7)
    text = _roundtrip(element, 128, 33, 33, cast=layout, unpacked=True)
    compiled = compile_mlir(text, "roundtrip", arch=ARCH)
    stores = re.findall(r"tcgen05\.st\.sync\.aligned\.(\w+)\.x(\d+)\.unpack::16b\.b32 "
                        r"\[%r\d+\](, \d+)?", compiled.ptx)
    assert {store[0] for store in stores} == {shape}
    assert "tcgen05.ld.sync.aligned.32x32b.x32.pack::16b.b32" in compiled.ptx
    result = run_simulated(compiled, a, np.zeros_like(a), async_completion="latest")
    np.testing.assert_array_equal(result[1], a)


@pytest.mark.parametrize("policy", ["latest", "random"])
def test_stage_chosen_at_run_time(policy):
    """The lit kernel tmem_stage.mlir: block b stores its rows of %a into stage b (of 2) of
    a zeroed 128-column region through `tmem_stage` with the block index, then loads all
    128 columns: %a's values in its stage's columns, zeros in the other."""
    text = (ROOT / "lit_tests" / "lowering" / "tmem_stage.mlir").read_text()
    a = np.random.default_rng(8).standard_normal((256, 64)).astype(np.float32)
    compiled = compile_mlir(text, "tmem_stage.mlir", arch=ARCH)
    out = run_simulated(compiled, a, np.full((256, 128), np.nan, np.float32),
                        async_completion=policy, seed=4)[1]
    want = np.zeros((256, 128), np.float32)
    want[:128, :64], want[128:, 64:] = a[:128], a[128:]
    np.testing.assert_array_equal(out, want)


def test_unpacked_16x32bx2_is_a_located_error():
    """.16x32bx2's immHalfSplitoff under .pack::16b is not modelled: refused at the op."""
    with make_context():
        layout = str(layout_to_attr(tmem_layout("16x32bx2", 4, 16)))
    text = _roundtrip("f16", 128, 0, 0, cast=layout, unpacked=True)
    with pytest.raises(DiagnosticError, match=r"'smalti.tmem_store' op moves an unpacked "
                                              r"16-bit TMEM ref with .16x32bx2"):
        compile_mlir(text, "roundtrip", arch=ARCH)


ROUNDED = """
func.func @rounded(%a: memref<128x64xf32>, %out: memref<128x64xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %t = "smalti.tmem_alloc"() {columns = 64 : i64} : () -> memref<128x64xf32, "tmem">
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x64xf32>, index, index)
      -> vector<128x64xf32>
  "smalti.tmem_store"(%v, %t) : (vector<128x64xf32>, memref<128x64xf32, "tmem">) -> ()
  %w = "smalti.tmem_load"(%t) : (memref<128x64xf32, "tmem">) -> vector<128x64xf32>
  %h = arith.truncf %w : vector<128x64xf32> to vector<128x64xbf16>
  "smalti.vector_store"(%h, %out, %c0, %c0)
      : (vector<128x64xbf16>, memref<128x64xbf16>, index, index) -> ()
  "smalti.tmem_dealloc"(%t) : (memref<128x64xf32, "tmem">) -> ()
  return
}
"""


def test_loaded_value_that_is_stored_gets_16_byte_vectors():
    """An f32 value loaded from TMEM, rounded to bf16 and stored: inference gives the load
    .32x32b's threads with 8 columns to a register vector (tcgen05.ld.32x32b still moves it
    register for register), so each thread's 128-byte bf16 row is 8 16-byte stores, not
    64 2-byte ones; the numbers are the rounded input."""
    a = _data("f32", 7)
    compiled = compile_mlir(ROUNDED, "rounded", arch=ARCH)
    assert "tcgen05.ld.sync.aligned.32x32b.x64.b32" in compiled.ptx
    stores = re.findall(r"^\s*st\.global\.(\S+)", compiled.ptx, re.MULTILINE)
    assert stores == ["v4.b32"] * 8, stores
    result = run_simulated(compiled, a, np.zeros((128, 64), ml_dtypes.bfloat16))[1]
    np.testing.assert_array_equal(result, a.astype(ml_dtypes.bfloat16))


def test_strided_value_is_relaid_out_before_the_store():
    """A value fixed to a strided layout (no tcgen05.st moves it) is relaid out by the
    layout_cast inference inserts."""
    a = _data("f32", 4)
    text = _roundtrip("f32", 64, 0, 0, cast="#smalti.strided<vec = 4>")
    np.testing.assert_array_equal(_run(text, a), a)


def test_two_warpgroups_each_allocate():
    """Each warpgroup allocates its own region (its own shared slot) and frees it."""
    a = _data("i32", 5)
    text = _roundtrip("i32", 64, 0, 0, warpgroups=2)
    np.testing.assert_array_equal(_run(text, a), a)


def test_a_region_not_freed_is_reported():
    """The simulator's leak check at CTA exit: without tmem_dealloc the run fails."""
    text = _roundtrip("f32", 64, 0, 0, dealloc=False)
    with pytest.raises(SimError, match="still allocated"):
        _run(text, _data("f32"))


def test_wrong_arch_is_a_located_error():
    text = _roundtrip("f32", 64, 0, 0)
    with pytest.raises(DiagnosticError) as error:
        compile_mlir(text, "roundtrip.mlir", arch="sm_90a")
    message = str(error.value)
    assert re.search(r"roundtrip\.mlir:\d+:\d+: error: 'smalti\.tmem_alloc' op needs sm_100a: "
                     r"sm_90a has no tensor memory \(tcgen05\); compile with --arch=sm_100a",
                     message), message


def test_columns_out_of_range_is_a_located_error():
    text = _roundtrip("f32", 64, 0, 0).replace("columns = 64", "columns = 48")
    with pytest.raises(DiagnosticError, match=r"roundtrip\.mlir:\d+:\d+: error: "
                                              r"'smalti\.tmem_alloc' op 'columns' must be a "
                                              r"power of two from 32 to 512, got 48"):
        compile_mlir(text, "roundtrip.mlir", arch=ARCH)


def test_tmem_ref_from_a_global_memref_is_a_located_error():
    text = _roundtrip("f32", 64, 0, 0).replace(
        '"smalti.tmem_load"(%t)', '"smalti.tmem_load"(%a)').replace(
        '"smalti.tmem_load"(%a) {column = 0 : i64} : (memref<128x64xf32, "tmem">)',
        '"smalti.tmem_load"(%a) {column = 0 : i64} : (memref<128x64xf32>)')
    with pytest.raises(DiagnosticError, match=r"roundtrip\.mlir:\d+:\d+: error: "
                                              r"'smalti\.tmem_load' op expects the ref to load "
                                              r"from to be a TMEM memref"):
        compile_mlir(text, "roundtrip.mlir", arch=ARCH)


def test_a_layout_no_tcgen05_shape_moves_is_a_located_error():
    """A loaded value cast to a splat: no layout of the load's result satisfies both."""
    text = _roundtrip("f32", 64, 0, 0).replace(
        '"smalti.vector_store"(%w,',
        '%s = "smalti.layout_cast"(%w) {new_layout = #smalti.splat} : '
        '(vector<128x64xf32>) -> vector<128x64xf32>\n  "smalti.vector_store"(%s,')
    with pytest.raises(DiagnosticError, match=r"tmem_load moves a tcgen05\.ld/st layout"):
        compile_mlir(text, "roundtrip.mlir", arch=ARCH)


@pytest.mark.parametrize("index", range(len(CHUNKS)))
def test_lit_kernels_assemble_without_spills(index):
    chunk = CHUNKS[index]
    name = re.search(r"func\.func @(\w+)", chunk).group(1)
    compiled = compile_mlir(chunk, f"{LIT_FILE}:{name}", arch=ARCH)
    result = compiled.assemble()
    for kernel in compiled.kernels:
        report = result.reports[kernel]
        assert (report.spill_stores, report.spill_loads, report.stack_frame) == (0, 0, 0)
    assert ".target sm_100a" in compiled.ptx


def test_row_vector_layouts_are_realised_by_32x32b_register_for_register():
    """.32x32b's thread map with any number of whole registers' columns to a vector is moved
    by .32x32b (smalti.tiling.tmem.TmemAccess.realises); its own layout has one register's
    columns to a vector. A vector splitting a 16-bit register's pair is refused, and so is
    a layout whose threads hold other rows (.16x256b's)."""
    from smalti.tiling import TmemAccess
    from smalti.tiling.tmem import tmem_accesses, tmem_row_layout

    for vector, bits in ((8, 32), (4, 32), (1, 32), (8, 16), (2, 16), (16, 8)):
        layout = tmem_row_layout(vector, bits)
        found = tmem_accesses(layout, (128, 64), bits)
        assert [(a.shape, a.num) for a in found] == [("32x32b", 64 * bits // 32)], (vector, bits)
        table = found[0].instruction_registers((128, 64), layout)
        per = 32 // bits
        columns = np.arange(64).reshape(-1, per)  # the columns of each isa register
        np.testing.assert_array_equal(table[0, 5, :, :, 0], columns // vector)
        np.testing.assert_array_equal(table[0, 5, :, :, 1], columns % vector)
    with pytest.raises(LayoutError, match="whole registers"):
        tmem_row_layout(1, 16)
    assert not TmemAccess("32x32b", 64).realises(tmem_layout("16x256b", 8), (128, 64))
