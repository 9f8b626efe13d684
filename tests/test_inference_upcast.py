"""Bitwidth-aware layout inference (smalti/layout_inference/widening.py): 4- and 8-bit
integers widened in registers get conversion ("upcast") layouts with whole .b32 registers
of consecutive elements, and the relayout to the WGMMA layout (wgmma's A operand) goes
where the lowering moves least; checked for the layouts chosen, for numbers through the
simulator against numpy, and for the instructions a 128x128 int4 tile's conversion takes
with inference alone (no layout_cast)."""

from __future__ import annotations

import re
from collections import Counter

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jaxlib.mlir import ir

import smalti.dsl as sd
from smalti.dialect import attr_to_layouts, make_context, parse_module
from smalti.layout_inference import infer_layouts
from smalti.layout_inference.widening import packing_problem, upcast_hints
from smalti.ptx.toolchain import disassemble, sass_opcode_counts
from smalti.tiling import (
    WGMMA_LAYOUT,
    WGMMA_LAYOUT_UPCAST_2X,
    WGMMA_LAYOUT_UPCAST_4X,
    WGStridedLayout,
)
from smalti.tiling.canonical import UPCAST_STORE_LAYOUT

BF16 = jnp.bfloat16
LIMITS = {jnp.int4: 8, jnp.int8: 128}


def _wgmma_a_program(narrow: str, chain: tuple[str, ...]) -> str:
    """A 64x64 `narrow` value loaded, widened through `chain` (MLIR element types, the
    last bf16) and fed to wgmma as A from registers."""
    lines, value, element = [], "%x", narrow
    for i, wide in enumerate(chain):
        op = "arith.sitofp" if element == narrow else "arith.truncf"
        lines.append(f"  %v{i} = {op} {value} : vector<64x64x{element}> to "
                     f"vector<64x64x{wide}>")
        value, element = f"%v{i}", wide
    body = "\n".join(lines)
    return f"""
func.func @k(%w: memref<64x64x{narrow}>, %out: memref<64x64xf32>) {{
  %c0 = arith.constant 0 : index
  %acc = arith.constant dense<0.0> : vector<64x64xf32>
  %b = "smalti.slice_smem"(%c0) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %x = "smalti.vector_load"(%w, %c0, %c0) : (memref<64x64x{narrow}>, index, index) -> vector<64x64x{narrow}>
{body}
  %d = "smalti.wgmma"(%acc, {value}, %b) : (vector<64x64xf32>, vector<64x64xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>) -> vector<64x64xf32>
  "smalti.vector_store"(%d, %out, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  return
}}"""


def _inferred(text: str) -> list[tuple[str, list, list, str | None]]:
    """(op name, in_layouts, out_layouts, `inferred` kind) of each op after inference."""
    context = make_context()
    with context, ir.Location.unknown():
        module = parse_module(text, "upcast.mlir", context)
        infer_layouts(module)
        func = module.regions[0].blocks[0].operations[0]
        ops = []
        for op in func.regions[0].blocks[0].operations:
            attributes = op.operation.attributes
            layouts = [attr_to_layouts(attributes[name]) if name in attributes else []
                       for name in ("in_layouts", "out_layouts")]
            kind = (ir.StringAttr(attributes["inferred"]).value if "inferred" in attributes
                    else None)
            ops.append((op.operation.name, *layouts, kind))
        return ops


@pytest.mark.parametrize("narrow, chain, load_layout", [
    ("i4", ("bf16",), WGMMA_LAYOUT_UPCAST_4X),
    ("i8", ("bf16",), WGMMA_LAYOUT_UPCAST_2X),
    ("i8", ("f32", "bf16"), WGMMA_LAYOUT_UPCAST_2X),
    ("i4", ("f32", "bf16"), WGMMA_LAYOUT_UPCAST_4X),
])
def test_narrow_loads_widened_for_wgmma_take_conversion_layouts(narrow, chain, load_layout):
    """The load and every conversion in the conversion layout; one relayout by shuffles,
    of the bf16 value (half the words of the f32 one), just before wgmma."""
    ops = _inferred(_wgmma_a_program(narrow, chain))
    (load,) = [op for op in ops if op[0] == "smalti.vector_load"]
    assert load[2] == [load_layout]
    casts = [op for op in ops if op[0] == "smalti.layout_cast"]
    assert [(cast[1], cast[2], cast[3]) for cast in casts] == [
        ([load_layout], [WGMMA_LAYOUT], "shuffles")]
    assert [op[0] for op in ops].index("smalti.layout_cast") + 1 == [
        op[0] for op in ops].index("smalti.wgmma")
    converted = [op for op in ops if op[0] in ("arith.sitofp", "arith.truncf")]
    assert all(op[1] == op[2] == [load_layout] for op in converted)


def test_upcast_hints_by_consumer():
    """Kept in registers: the narrowest vector first (UPCAST_2X for bytes; 4-bit values need
    8 to a register); stored at 16 bits: the row-store layout (16-byte stores); at 32 bits,
    four columns."""
    shape = (64, 128)
    assert upcast_hints(shape, 8, None) == [WGMMA_LAYOUT_UPCAST_2X, WGMMA_LAYOUT_UPCAST_4X,
                                            UPCAST_STORE_LAYOUT]
    assert upcast_hints(shape, 4, None) == [WGMMA_LAYOUT_UPCAST_4X, UPCAST_STORE_LAYOUT]
    assert upcast_hints(shape, 8, 16)[0] == UPCAST_STORE_LAYOUT
    assert upcast_hints(shape, 4, 16)[0] == UPCAST_STORE_LAYOUT
    assert upcast_hints(shape, 8, 32)[0] == WGMMA_LAYOUT_UPCAST_2X
    assert packing_problem(shape, 4)(WGMMA_LAYOUT) == (
        "a 4-bit value converts a .b32 register at a time: its layout's vector of 2 "
        "elements (8 bits) does not fill whole registers")
    assert packing_problem(shape, 8)(WGStridedLayout(16)) is None


def test_upcast_store_layout_is_its_figure():
    """Thread t (warp w, g = (t % 32) // 4, q = t % 4) holds row 8w + g, columns 8q..8q+7 of
    each 32 x 32 block, as one register vector."""
    index = UPCAST_STORE_LAYOUT.element_index((32, 64))  # [thread, register, vector, dim]
    t = np.arange(128)
    rows = 8 * (t // 32) + (t % 32) // 4
    for register, block in enumerate((0, 32)):
        np.testing.assert_array_equal(index[:, register, :, 0], np.repeat(rows[:, None], 8, 1))
        np.testing.assert_array_equal(index[:, register, :, 1],
                                      block + 8 * (t % 4)[:, None] + np.arange(8))


def _upcast_matmul(m: int, k: int, n: int) -> sd.Kernel:
    """out = w.astype(bf16) @ b: w (int4 or int8) converted in registers and fed to wgmma
    as A; no layout_cast anywhere."""

    @sd.kernel(out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
               smem=[sd.SMEM((k, n), BF16)])
    def upcast_matmul(w_ref, b_ref, out_ref, b_smem):
        b_smem[...] = b_ref[...]
        out_ref[...] = sd.wgmma(sd.zeros((m, n)), w_ref[...].astype(BF16), b_smem)

    return upcast_matmul


@pytest.mark.parametrize("w_dtype", [jnp.int4, jnp.int8])
def test_converted_weights_feed_wgmma_with_numpy_numbers(w_dtype):
    rng = np.random.default_rng(11)
    limit = LIMITS[w_dtype]
    w = rng.integers(-limit, limit, (128, 128)).astype(np.dtype(w_dtype))
    b = rng.standard_normal((128, 64)).astype(ml_dtypes.bfloat16)
    got = np.asarray(jax.jit(_upcast_matmul(128, 128, 64))(w, b))
    want = w.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-3)


def _ptx_counts(ptx: str) -> Counter[str]:
    return Counter(m.group(1) for m in re.finditer(r"^\t([a-z][\w.]*)", ptx, re.M))


def test_int4_tile_converts_in_a_few_bit_operations_per_eight_values():
    """A 128x128 int4 tile to bf16, by inference alone: per .b32 of 8 values one xor, 4
    prmt, 4 lop3 and 4 sub.bf16x2 (no cvt), then 3 shuffles of bf16 pairs to the WGMMA
    layout (lanes of a quad trade 3 of their 4 words)."""
    kernel = _upcast_matmul(128, 128, 64)
    _, compiled = kernel.compile(jax.ShapeDtypeStruct((128, 128), jnp.int4),
                                 jax.ShapeDtypeStruct((128, 64), BF16))
    counts = _ptx_counts(compiled.ptx)
    registers = 128 * 128 // 128 // 8  # .b32 registers of int4 per thread
    assert not [op for op in counts if re.match(r"cvt\.\w+\.(bf16|f16|f32|s8|s16|s32)", op)]
    assert counts["ld.global.b32"] == registers
    assert (counts["prmt.b32"], counts["lop3.b32"], counts["sub.rn.bf16x2"]) == (
        4 * registers, 4 * registers, 4 * registers)
    assert counts["shfl.sync.bfly.b32"] == 3 * registers
    sass = sass_opcode_counts(disassemble(compiled.cubin))
    assert (sass["PRMT"], sass["HADD2"], sass["SHFL"]) == (
        4 * registers, 4 * registers, 3 * registers)
