"""Small kernel texts for tests: one op applied over a laid-out tile, or a copy."""

from __future__ import annotations


def elementwise_kernel(op: str, element: str, arity: int, shape: tuple[int, int] = (4, 128),
                       result_element: str | None = None) -> str:
    """A kernel computing `out = op(in0, ..., in{arity-1})` over one tile."""
    result_element = result_element or element
    rows, cols = shape
    vin = f"vector<{rows}x{cols}x{element}>"
    vout = f"vector<{rows}x{cols}x{result_element}>"
    min_ = f"memref<{rows}x{cols}x{element}>"
    mout = f"memref<{rows}x{cols}x{result_element}>"
    params = ", ".join(f"%in{i}: {min_}" for i in range(arity))
    loads = "\n".join(
        f'  %v{i} = "smalti.vector_load"(%in{i}, %c0, %c0) : ({min_}, index, index) -> {vin}'
        for i in range(arity))
    operands = ", ".join(f"%v{i}" for i in range(arity))
    if op in ("arith.extf", "arith.truncf", "arith.sitofp", "arith.fptosi", "arith.uitofp",
              "arith.fptoui"):
        compute = f"  %r = {op} {operands} : {vin} to {vout}"
    else:
        compute = f"  %r = {op} {operands} : {vout}"
    return f"""
func.func @kernel({params}, %out: {mout})
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
{loads}
{compute}
  "smalti.vector_store"(%r, %out, %c0, %c0) : ({vout}, {mout}, index, index) -> ()
  return
}}
"""


def copy_kernel(element: str, source_shape: tuple[int, ...], tile: tuple[int, ...],
                grid: int, layout: str | None = None, index_offset: int = 0) -> str:
    """Block i copies the tile at column i * tile[-1] + index_offset into block i of out."""
    src = f"memref<{'x'.join(map(str, source_shape))}x{element}>"
    dst_shape = (*tile[:-1], tile[-1] * grid)
    dst = f"memref<{'x'.join(map(str, dst_shape))}x{element}>"
    vec = f"vector<{'x'.join(map(str, tile))}x{element}>"
    zeros = ", ".join(["%c0"] * (len(tile) - 1))
    attrs = f" {{out_layouts = [{layout}]}}" if layout else ""
    return f"""
func.func @copy(%src: {src}, %dst: {dst}) attributes {{smalti.kernel, smalti.grid = array<i64: {grid}>}} {{
  %c0 = arith.constant 0 : index
  %off = arith.constant {index_offset} : index
  %width = arith.constant {tile[-1]} : index
  %b = gpu.block_id x
  %start = arith.muli %b, %width : index
  %col = arith.addi %start, %off : index
  %v = "smalti.vector_load"(%src, {zeros}{", " if zeros else ""}%col){attrs} : ({src}, {"index, " * (len(tile) - 1)}index) -> {vec}
  "smalti.vector_store"(%v, %dst, {zeros}{", " if zeros else ""}%start) : ({vec}, {dst}, {"index, " * (len(tile) - 1)}index) -> ()
  return
}}
"""
