"""Static kernel quality of each smalti.ops kernel against a Triton peer, for sm_90a.

    python benchmarks/ops_quality.py [--json] [--no-peer] [--only NAME ...]

One entry per kernel (`ops()`): the smalti kernel at the op's default configuration and a
representative shape, and a Triton kernel written by us in the style of Triton's tutorials
(benchmarks/triton_ops/) at the same shape with the same tiles. Both PTXs are assembled by
the same ptxas (`ptxas -v`, sm_90a) and disassembled by the same nvdisasm, for: registers,
spill bytes, shared memory (static plus the dynamic amount the launch asks for), the main
loop's SASS instructions and those per unit of work, and ptxas's warnings. The Triton half
needs Triton (`pip install -e '.[bench]'`); `--no-peer` measures smalti alone.

The main loop of a kernel with tensor-core work is the innermost loop holding the first HGMMA
in a loop (as `smalti.ptx.sass.main_loop`, passing over out-of-line code that branches back
into the straight line); loops may be unrolled or hold several pipeline
steps, so its length is divided by the units its HGMMAs do (their multiply-accumulates over
those of one unit for one warpgroup). The row kernels (norms, softmax) have no HGMMA: each
innermost loop (statistics, then result) handles one column tile per iteration, and the
figure per unit is their sum.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from smalti.ptx.ptxas_log import warning_code
from smalti.ptx.sass import innermost_loops, main_loop
from smalti.ptx.toolchain import compile_ptx, disassemble

BF16, F32, I8 = jnp.bfloat16, jnp.float32, jnp.int8
# Representative shapes, stated once (BENCHMARKS.md quotes them).
ROWS, HIDDEN = 4096, 4096  # norms and softmax: x [ROWS, HIDDEN] bf16, weights bf16
MATMUL = 4096  # matmul and quantized_matmul: M = N = K
GROUP = 128  # quantized_matmul's default group_size
BATCH, SEQ, HEADS, HEAD_DIM = 1, 4096, 16, 128  # attention, [batch, seq, heads, head_dim]
SCALE = 1 / math.sqrt(HEAD_DIM)
SMS = 132  # an H100 SXM's SMs: the persistent matmuls' programs
RAGGED_GROUPS = 8  # ragged_dot: lhs [MATMUL, MATMUL], rhs [RAGGED_GROUPS, MATMUL, MATMUL]
# paged_attention, one decoding step: q [batch, heads, head_dim], 4 query heads per K/V head,
# pages of 64 tokens, 2048 tokens per sequence; 256 (sequence, K/V head) programs, so the op
# does not split sequences (nor does its Triton peer).
DECODE_BATCH, DECODE_HEADS, KV_HEADS, PAGE, PAGES = 32, 32, 8, 64, 32



@dataclass(frozen=True)
class Built:
    """A kernel's PTX and the dynamic shared memory (bytes) its launch provides."""

    ptx: str
    dynamic_smem: int


@dataclass(frozen=True)
class SmaltiSide:
    """A smalti.ops kernel (a factory, since most are cached per configuration) and the
    specs of its inputs."""

    kernel: Callable[[], Any]
    args: tuple[jax.ShapeDtypeStruct, ...]

    def build(self) -> Built:
        compiled = self.kernel().compile(*self.args)[1]
        return Built(compiled.ptx, compiled.signature.smem_bytes)


@dataclass(frozen=True)
class TritonSide:
    """A Triton peer: `module.function` of benchmarks/triton_ops, its pointer arguments
    (name -> Triton type) and constexprs, and its launch configuration."""

    kernel: str
    pointers: Mapping[str, str]
    constexprs: Mapping[str, object]
    num_warps: int = 4
    num_stages: int = 2

    def build(self) -> Built:
        peers = _triton_ops()
        module, function = self.kernel.split(".")
        fn = getattr(importlib.import_module(f"triton_ops.{module}"), function)
        compiled = peers.compile_for_hopper(fn, dict(self.pointers), dict(self.constexprs),
                                            num_warps=self.num_warps,
                                            num_stages=self.num_stages)
        return Built(compiled.ptx, compiled.dynamic_smem)


@functools.cache
def _triton_ops() -> Any:
    """benchmarks/triton_ops, imported (with Triton) only when a peer is built."""
    sys.path.insert(0, str(Path(__file__).parent))
    return importlib.import_module("triton_ops")


@dataclass(frozen=True)
class Entry:
    """One row of the table: a kernel of an op, at a stated shape, and its Triton peer.
    `unit_macs`: multiply-accumulates one warpgroup's HGMMAs do per unit of the main loop
    (None for the row kernels, whose unit is one column tile per loop iteration)."""

    name: str
    shape: str
    unit: str
    smalti: SmaltiSide
    triton: TritonSide | None
    unit_macs: int | None = None

    @property
    def op(self) -> str:
        """The smalti.ops function the entry measures (its name's first word)."""
        return self.name.split()[0]


@dataclass(frozen=True)
class Figures:
    """What ptxas and nvdisasm say of one kernel."""

    registers: int
    spill_bytes: int  # stored plus loaded
    smem_bytes: int  # static plus dynamic
    loops: tuple[int, ...]  # SASS instructions of the main loop (row kernels: each loop)
    per_unit: float | None  # SASS instructions per unit of work
    warnings: tuple[str, ...] = field(default=())  # ptxas warning codes (C7515, ...)


def loop_figures(sass: str, unit_macs: int | None) -> tuple[tuple[int, ...], float | None]:
    """The main loop's (or, for row kernels, each loop's) length, and SASS per unit."""
    if unit_macs is None:
        lengths = tuple(loop.length for loop in innermost_loops(sass))
        return lengths, float(sum(lengths)) if lengths else None
    loop = main_loop(sass)
    if loop is None or not loop.macs:
        return (), None
    return (loop.length,), loop.length * unit_macs / loop.macs


def measure(built: Built, unit_macs: int | None) -> Figures:
    """Assemble `built`'s PTX for sm_90a and read its resources and SASS."""
    result = compile_ptx(built.ptx, arch="sm_90a")
    (report,) = result.reports.values()
    loops, per_unit = loop_figures(disassemble(result.cubin), unit_macs)
    codes = tuple(dict.fromkeys(warning_code(w) or w for w in report.warnings))
    return Figures(report.registers, report.spill_stores + report.spill_loads,
                   report.shared_bytes + built.dynamic_smem, loops, per_unit, codes)


# --- the table ---------------------------------------------------------------------------

def _spec(shape: tuple[int, ...], dtype: object) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(shape, dtype)


def _row_entries() -> list[Entry]:
    """rms_norm, layer_norm, softmax forward and backward: x [ROWS, HIDDEN] bf16; smalti's
    blocks of 64 rows walk 128-column tiles (smalti/ops/rows.py), Triton's too, 4 warps, one
    stage (loads not software-pipelined, as smalti's are not)."""
    from smalti.ops import norms, row_softmax

    x, w, stat = _spec((ROWS, HIDDEN), BF16), _spec((HIDDEN,), BF16), _spec((ROWS,), F32)
    shape = f"x {ROWS}x{HIDDEN} bf16"
    tile = "column tile (64x128)"
    rows = {"N": HIDDEN, "ROWS": 64, "COLS": 128}
    bf16, f32 = "*bf16", "*fp32"

    def triton(kernel: str, pointers: dict[str, str], **constexprs: object) -> TritonSide:
        return TritonSide(f"rows.{kernel}", pointers, {**rows, **constexprs}, num_stages=1)

    return [
        Entry("rms_norm fwd", shape, tile, SmaltiSide(lambda: norms._rms_forward(1e-6), (x, w)),
              triton("rms_norm_fwd", {"x_ptr": bf16, "w_ptr": bf16, "out_ptr": bf16,
                                      "rstd_ptr": f32}, EPS=1e-6)),
        Entry("rms_norm bwd", shape, tile,
              SmaltiSide(lambda: norms._rms_backward, (x, w, stat, x)),
              triton("rms_norm_bwd", {"x_ptr": bf16, "w_ptr": bf16, "rstd_ptr": f32,
                                      "dy_ptr": bf16, "dx_ptr": bf16, "dw_ptr": f32})),
        Entry("layer_norm fwd", shape, tile,
              SmaltiSide(lambda: norms._layer_forward(1e-5), (x, w, w)),
              triton("layer_norm_fwd", {"x_ptr": bf16, "w_ptr": bf16, "b_ptr": bf16,
                                        "out_ptr": bf16, "mean_ptr": f32, "rstd_ptr": f32},
                     EPS=1e-5)),
        Entry("layer_norm bwd", shape, tile,
              SmaltiSide(lambda: norms._layer_backward, (x, w, stat, stat, x)),
              triton("layer_norm_bwd", {"x_ptr": bf16, "w_ptr": bf16, "mean_ptr": f32,
                                        "rstd_ptr": f32, "dy_ptr": bf16, "dx_ptr": bf16,
                                        "dw_ptr": f32, "db_ptr": f32})),
        Entry("softmax fwd", shape, tile,
              SmaltiSide(lambda: row_softmax._softmax_forward, (x,)),
              triton("softmax_fwd", {"x_ptr": bf16, "out_ptr": bf16})),
        Entry("softmax bwd", shape, tile,
              SmaltiSide(lambda: row_softmax._softmax_backward, (x, x)),
              triton("softmax_bwd", {"y_ptr": bf16, "dy_ptr": bf16, "dx_ptr": bf16})),
    ]


def _matmul_entries() -> list[Entry]:
    """matmul (persistent, warp-specialised: a TMA producer and two 64-row consumers of a
    128x128x64 tile, 4 stages) against a persistent grouped-order Triton matmul with the same
    tile, 8 warps, 4 stages, loading by pointers (cp.async) or by tensor descriptors (TMA);
    quantized_matmul (int8 weights, one warpgroup per 128x128 tile, 64-wide K steps, 2
    stages) against Triton's with the same tile, 4 warps, 2 stages."""
    # The modules, not the functions smalti.ops exports under the same names.
    matmul = importlib.import_module("smalti.ops.matmul")
    quantized_matmul = importlib.import_module("smalti.ops.quantized_matmul")

    square = _spec((MATMUL, MATMUL), BF16)
    shape = f"{MATMUL}^3 bf16"
    def matmul_peer(kernel: str) -> TritonSide:
        return TritonSide(
            f"matmul.{kernel}", {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16"},
            {"M": MATMUL, "N": MATMUL, "K": MATMUL, "BLOCK_M": 128, "BLOCK_N": 128,
             "BLOCK_K": 64, "GROUP_ROWS": 8, "PROGRAMS": SMS}, num_warps=8, num_stages=4)

    def smalti_matmul() -> Any:
        return matmul.matmul_kernel(jnp.dtype(BF16), None, False)

    weights, scales = _spec((MATMUL, MATMUL), I8), _spec((MATMUL // GROUP * MATMUL,), F32)
    quantized_peer = TritonSide(
        "matmul.quantized_matmul",
        {"x_ptr": "*bf16", "w_ptr": "*i8", "s_ptr": "*fp32", "out_ptr": "*bf16"},
        {"M": MATMUL, "N": MATMUL, "K": MATMUL, "GROUP": GROUP, "BLOCK_M": 128,
         "BLOCK_N": 128, "BLOCK_K": 64}, num_warps=4, num_stages=2)
    return [
        Entry("matmul", shape, "64-wide K tile", SmaltiSide(smalti_matmul, (square, square)),
              matmul_peer("matmul"), unit_macs=64 * 128 * 64),
        Entry("matmul (Triton peer with TMA)", shape, "64-wide K tile",
              SmaltiSide(smalti_matmul, (square, square)), matmul_peer("matmul_tma"),
              unit_macs=64 * 128 * 64),
        Entry("quantized_matmul int8", f"{shape}, w int8, group {GROUP}", "64-wide K tile",
              SmaltiSide(lambda: quantized_matmul.quantized_matmul_kernel(
                  jnp.dtype(BF16), jnp.dtype(BF16), GROUP, MATMUL),
                  (square, weights, scales)),
              quantized_peer, unit_macs=128 * 128 * 64),
    ]


def _attention_entries() -> list[Entry]:
    """dot_product_attention forward and its backward kernels (dK/dV, dQ), causal and not:
    one warpgroup per 64-row block, 64-row K/V (or Q) tiles; Triton's the same, 4 warps, and
    the stages smalti's pipeline model picks at this shape (4 forward, 3 backward: the
    SMEM column shows them)."""
    from smalti.ops import attention, attention_backward

    q = _spec((BATCH, SEQ, HEADS, HEAD_DIM), BF16)
    flat = _spec((BATCH * HEADS * SEQ,), F32)
    shape = f"b={BATCH} s={SEQ} h={HEADS} d={HEAD_DIM} bf16"
    common = {"SEQ": SEQ, "HEADS": HEADS, "KV_HEADS": HEADS, "D": HEAD_DIM, "SCALE": SCALE,
              "BLOCK": 64}
    bf16, f32 = "*bf16", "*fp32"
    tile_macs = 64 * 64 * HEAD_DIM  # one 64x64 block of scores, or of O per 64 keys
    entries = []
    for causal in (False, True):
        suffix = " causal" if causal else ""
        constexprs = {**common, "CAUSAL": causal}
        backward_pointers = {"q_ptr": bf16, "do_ptr": bf16, "k_ptr": bf16, "v_ptr": bf16,
                             "lse_ptr": f32, "delta_ptr": f32}
        entries += [
            Entry(f"dot_product_attention fwd{suffix}", shape, "K/V tile (64 keys)",
                  SmaltiSide(lambda c=causal: attention._forward(SCALE, c, SEQ), (q, q, q)),
                  TritonSide("attention.attention_fwd",
                             {"q_ptr": bf16, "k_ptr": bf16, "v_ptr": bf16, "o_ptr": bf16,
                              "lse_ptr": f32}, constexprs, num_stages=4),
                  unit_macs=2 * tile_macs),
            Entry(f"dot_product_attention bwd dK/dV{suffix}", shape, "Q tile (64 queries)",
                  SmaltiSide(lambda c=causal: attention_backward._dkdv(SCALE, c),
                             (q, q, q, q, flat, flat)),
                  TritonSide("attention.attention_bwd_dkdv",
                             {**backward_pointers, "dk_ptr": f32, "dv_ptr": f32}, constexprs,
                             num_stages=3),
                  unit_macs=4 * tile_macs),
            Entry(f"dot_product_attention bwd dQ{suffix}", shape, "K/V tile (64 keys)",
                  SmaltiSide(lambda c=causal: attention_backward._dq(SCALE, c, SEQ),
                             (q, q, q, q, flat, flat)),
                  TritonSide("attention.attention_bwd_dq", {**backward_pointers, "dq_ptr": f32},
                             constexprs, num_stages=3),
                  unit_macs=3 * tile_macs),
        ]
    return entries


def _ragged_dot_entry() -> Entry:
    """ragged_dot (one warpgroup per (work item, 128 columns): a 128x128 tile, 64-wide K
    steps, 4 stages) against Triton's over the same work-item table, 4 warps, 4 stages."""
    ragged = importlib.import_module("smalti.ops.ragged_dot")
    lhs, rhs = _spec((MATMUL, MATMUL), BF16), _spec((RAGGED_GROUPS, MATMUL, MATMUL), BF16)
    items = _spec((ragged.max_items(MATMUL, RAGGED_GROUPS), 3), jnp.int32)
    return Entry(
        "ragged_dot", f"{MATMUL}^3 bf16, {RAGGED_GROUPS} groups", "64-wide K tile",
        SmaltiSide(lambda: ragged.ragged_dot_kernel(jnp.dtype(BF16)), (lhs, rhs, items)),
        TritonSide("matmul.ragged_dot",
                   {"lhs_ptr": "*bf16", "rhs_ptr": "*bf16", "items_ptr": "*i32",
                    "out_ptr": "*bf16"},
                   {"M": MATMUL, "N": MATMUL, "K": MATMUL, "BLOCK_M": 128, "BLOCK_N": 128,
                    "BLOCK_K": 64}, num_warps=4, num_stages=4),
        unit_macs=128 * 128 * 64)


def _paged_attention_entry() -> Entry:
    """paged_attention (one warpgroup per (K/V head, sequence): the head's query rows padded
    to 64, K/V blocks of 64 tokens in a 3-stage ring) against Triton's with the same blocks,
    4 warps, 3 stages."""
    paged = importlib.import_module("smalti.ops.paged_attention")
    group, total = DECODE_HEADS // KV_HEADS, DECODE_BATCH * PAGES
    q = _spec((DECODE_BATCH, KV_HEADS, group, HEAD_DIM), BF16)
    pages = _spec((KV_HEADS, total, PAGE, HEAD_DIM), BF16)
    lengths, table = _spec((DECODE_BATCH,), jnp.int32), _spec((DECODE_BATCH, PAGES), jnp.int32)
    splits = paged.splits_for(DECODE_BATCH, KV_HEADS, group, PAGES * PAGE)  # the op's choice
    return Entry(
        "paged_attention", f"b={DECODE_BATCH} h={DECODE_HEADS} kv_h={KV_HEADS} d={HEAD_DIM} "
        f"page {PAGE} x {PAGES} bf16", "K/V block (64 tokens)",
        SmaltiSide(lambda: paged._kernel(SCALE, splits), (q, pages, pages, lengths, table)),
        TritonSide("attention.paged_attention",
                   {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "lengths_ptr": "*i32",
                    "table_ptr": "*i32", "o_ptr": "*bf16"},
                   {"KV_HEADS": KV_HEADS, "GROUP": group, "D": HEAD_DIM, "TOTAL_PAGES": total,
                    "PAGES": PAGES, "SCALE": SCALE, "BLOCK": PAGE}, num_warps=4, num_stages=3),
        unit_macs=2 * 64 * 64 * HEAD_DIM)


def ops() -> list[Entry]:
    """Every entry of the table, in the order printed."""
    return [*_row_entries(), *_matmul_entries(), _ragged_dot_entry(), *_attention_entries(),
            _paged_attention_entry()]


# --- output ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    """One entry's figures and the ratios smalti / Triton (None without a peer)."""

    entry: Entry
    smalti: Figures
    triton: Figures | None

    def ratio(self, attribute: str) -> float | None:
        """smalti's figure over Triton's (None without a peer or a figure)."""
        ours = getattr(self.smalti, attribute)
        theirs = None if self.triton is None else getattr(self.triton, attribute)
        return None if ours is None or not theirs else ours / theirs

    def as_json(self) -> dict[str, object]:
        """The row for --json: the entry's names, both sides' figures, the ratios."""
        return {"name": self.entry.name, "op": self.entry.op, "shape": self.entry.shape,
                "unit": self.entry.unit,
                "smalti": asdict(self.smalti),
                "triton": None if self.triton is None else asdict(self.triton),
                "ratio": {"per_unit": self.ratio("per_unit"),
                          "registers": self.ratio("registers")}}


def measure_entry(entry: Entry, peer: bool = True) -> Row:
    """Build and measure both halves of `entry` (smalti only when `peer` is False)."""
    ours = measure(entry.smalti.build(), entry.unit_macs)
    theirs = None
    if peer and entry.triton is not None:
        theirs = measure(entry.triton.build(), entry.unit_macs)
    return Row(entry, ours, theirs)


HEADER = ("| op | shape | unit | registers | spills (B) | SMEM (KiB) | main loop (SASS) | "
          "SASS per unit | per unit smalti / Triton | ptxas warnings |\n"
          "|---|---|---|---:|---:|---:|---:|---:|---:|---|")


def _pair(row: Row, show: Callable[[Figures], str]) -> str:
    """A cell: `show` of smalti's figures, then of Triton's when there is a peer."""
    return show(row.smalti) if row.triton is None else f"{show(row.smalti)} / {show(row.triton)}"


def markdown(row: Row) -> str:
    """The row's line of the table: each cell `smalti / Triton`."""
    def loops(f: Figures) -> str:
        return " + ".join(map(str, f.loops)) or "-"

    def per_unit(f: Figures) -> str:
        return "-" if f.per_unit is None else f"{f.per_unit:.0f}"

    def warnings(f: Figures) -> str:
        return ", ".join(f.warnings) or "none"

    ratio = row.ratio("per_unit")
    cells = [row.entry.name, row.entry.shape, row.entry.unit,
             _pair(row, lambda f: str(f.registers)), _pair(row, lambda f: str(f.spill_bytes)),
             _pair(row, lambda f: f"{f.smem_bytes / 1024:.1f}"), _pair(row, loops),
             _pair(row, per_unit), "-" if ratio is None else f"{ratio:.2f}",
             _pair(row, warnings)]
    return "| " + " | ".join(cells) + " |"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON, not markdown")
    parser.add_argument("--no-peer", action="store_true", help="skip Triton")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="entries whose name "
                        "starts with one of these")
    args = parser.parse_args(argv)
    entries = [e for e in ops() if not args.only or e.name.startswith(tuple(args.only))]
    if not args.json:
        print(HEADER, flush=True)
    rows = []
    for entry in entries:
        rows.append(measure_entry(entry, peer=not args.no_peer))
        if not args.json:
            print(markdown(rows[-1]), flush=True)
    if args.json:
        print(json.dumps([row.as_json() for row in rows], indent=1))


if __name__ == "__main__":
    main()
