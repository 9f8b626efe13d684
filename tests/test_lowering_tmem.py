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
from smalti.tiling import tmem_layout

ROOT = Path(__file__).resolve().parents[1]
LIT_FILE = ROOT / "lit_tests" / "lowering" / "tmem.mlir"
CHUNKS = LIT_FILE.read_text().split("// -----")
ARCH = "sm_100a"
# The .16x256b layout of a 128-row value (smalti.tiling.TMEM_LAYOUT_16X256B).
LAYOUT_16X256B = ("#smalti.tiled<tiling = [[128, 8], [32, 8], [16, 8], [8, 8], [1, 2]], "
                  "warp = [-10], lane = [-4, -3], vector = -1>")
DTYPES = {"f32": np.float32, "i32": np.int32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}


def _roundtrip(element: str, columns: int, store_at: int, load_at: int, *,
               cast: str | None = None, warpgroups: int = 1, dealloc: bool = True) -> str:
    """A kernel: %a (128x64) -> registers [-> layout_cast] -> TMEM columns from `store_at`
    -> registers (from `load_at`) -> %out; `columns` allocated (the ref spans them)."""
    packed = 32 // int(re.sub(r"\D", "", element))
    ref = f'memref<128x{columns * packed}x{element}, "tmem">'
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
