"""The 128x128x64 matmul on a ragged problem, M x N x K = 300 x 520 x 200: the edge tiles of
A and B reach past the arrays (TMA fills those elements with zeros, so they add nothing to
the sums) and the edge tiles of C are clipped by the TMA store. The module is the example
with its shapes, grid and K-tile counts replaced."""

from __future__ import annotations

import math
import re
from functools import cache
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from smalti.ptx.toolchain import compile_ptx
from smalti.runtime import compile_mlir, run_simulated
from tests.test_matmul import _assert_within_one_ulp

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "matmul_128x128x64.mlir"
BF16 = ml_dtypes.bfloat16
M, N, K = 300, 520, 200
TILE_M, TILE_N, TILE_K = 128, 128, 64


def ragged_module() -> str:
    """The example for M x N x K: A is M x K, B K x N, C M x N; ceil-divided grid; the
    K loop covers ceil(K / 64) tiles (an even count: two per iteration)."""
    k_tiles = math.ceil(K / TILE_K)
    assert k_tiles % 2 == 0
    text = EXAMPLE.read_text()
    signature = re.compile(r"%a: memref<512x512xbf16>, %b: memref<512x512xbf16>,\s*"
                           r"%c: memref<512x512xbf16>")
    text, count = signature.subn(f"%a: memref<{M}x{K}xbf16>, %b: memref<{K}x{N}xbf16>, "
                                 f"%c: memref<{M}x{N}xbf16>", text)
    assert count == 1
    for ref, shape in (("%a", (M, K)), ("%b", (K, N)), ("%c", (M, N))):
        # Each op's type list names the global ref where its operand list has it.
        text = _retype_operand(text, ref, f"memref<{shape[0]}x{shape[1]}xbf16>")
    grid = f"array<i64: {math.ceil(M / TILE_M)}, {math.ceil(N / TILE_N)}>"
    replacements = {"array<i64: 4, 4>": grid,
                    "%k_tiles = arith.constant 8": f"%k_tiles = arith.constant {k_tiles}",
                    "%half_tiles = arith.constant 4": f"%half_tiles = arith.constant "
                                                      f"{k_tiles // 2}"}
    for old, new in replacements.items():
        assert old in text
        text = text.replace(old, new)
    assert "512x512" not in text
    return text


def _retype_operand(text: str, ref: str, new_type: str) -> str:
    """In every generic op using `ref`, the type at its operand position becomes `new_type`."""
    lines = []
    for line in text.splitlines():
        match = re.match(r'(\s*(?:%\w+ = )?"smalti\.\w+"\()([^)]*)(\)[^:]*: \()(.*)$', line)
        if match and ref in [o.strip() for o in match.group(2).split(",")]:
            position = [o.strip() for o in match.group(2).split(",")].index(ref)
            types = _split_types(match.group(4))
            types[position] = new_type
            line = match.group(1) + match.group(2) + match.group(3) + ", ".join(types[:-1]) \
                + types[-1]
        lines.append(line)
    return "\n".join(lines) + "\n"


def _split_types(tail: str) -> list[str]:
    """`t1, t2, ...) -> r` into [t1, t2, ..., ') -> r'] (types may hold commas in <>)."""
    depth, start, parts = 0, 0, []
    for i, ch in enumerate(tail):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0 and ch == ",":
            parts.append(tail[start:i].strip())
            start = i + 1
        elif depth == 0 and ch == ")":
            parts.append(tail[start:i].strip())
            parts.append(tail[i:])
            return parts
    raise ValueError(f"no closing parenthesis in {tail!r}")


@cache
def compiled():
    return compile_mlir(ragged_module(), "matmul_ragged.mlir")


def test_ragged_module_assembles():
    result = compile_ptx(compiled().ptx, arch="sm_90a")
    assert "0 bytes spill stores, 0 bytes spill loads" in result.log
    assert not re.search(r"C75\d\d", result.log), result.log
    signature = compiled().signature()
    assert signature.grid == (3, 5, 1)
    assert {r.shape for r in signature.tensor_maps} == {(M, K), (K, N), (M, N)}


@pytest.mark.parametrize("policy", ["eager", "latest", "random"])
def test_simulator_matches_numpy_on_ragged_shapes(policy):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((M, K)).astype(BF16)
    b = rng.standard_normal((K, N)).astype(BF16)
    sentinel = np.full((M, N), 0, BF16)
    out = run_simulated(compiled(), a, b, sentinel, async_completion=policy, seed=5)[-1]
    _assert_within_one_ulp(out, a, b)
