"""smalti.layout_cast across warps, through shared memory (smalti.lowering.relayout_smem,
planned by smalti.tiling.smem_relayout).

The pairs are generated from the layout algebra: for each shape and element type, every
ordered pair of a set of layouts that fit the shape and whose relayout needs shared memory
(relayout_kind "smem"). One kernel per source layout casts a loaded value to every such
target and stores each; the simulator must give back the input in every output (distinct
element values, so a misplaced element shows), and ptxas must take the PTX. Then: bank
conflicts (the plan's static figures against the addresses the simulator computes), loops
and branches (the simulator reports a race where a barrier is missing), two relayouts live
at once, warp-specialised kernels, register use of the 64x64 f32 transpose.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import smalti.sim.ops.memory as sim_memory
from smalti.dialect.attributes import layout_to_text
from smalti.ptx.toolchain import compile_ptx
from smalti.runtime import compile_mlir, run_simulated
from smalti.tiling import (
    WGMMA_COL_LAYOUT,
    WGMMA_LAYOUT,
    WGMMA_LAYOUT_8BIT,
    WGMMA_LAYOUT_TF32_A,
    WGMMA_LAYOUT_UPCAST_2X,
    WGMMA_LAYOUT_UPCAST_4X,
    WGMMA_ROW_LAYOUT,
    WGMMA_TRANSPOSED_LAYOUT,
    Layout,
    LayoutError,
    Replicated,
    TiledLayout,
    Tiling,
    WGStridedLayout,
    check_layout_fits,
    relayout_cost,
)
from smalti.tiling.cost import replication_problem
from smalti.tiling.relayout import relayout_kind
from smalti.tiling.smem_relayout import (
    ROUND_BYTES,
    bank_conflicts,
    conflict_degree,
    plan_smem_relayout,
    side_conflicts,
)
from tests.test_lowering_relayout import BITS, DTYPES, distinct_inputs

# Rows split over the warps and the lane quads, a thread's columns in its registers (the
# quad's four lanes hold copies): a replicated layout that is neither canonical nor strided.
ROWS_IN_REGISTERS = TiledLayout(Tiling(((64, 64), (16, 64), (8, 64), (1,))), (-7,),
                                (-3, Replicated(4)), -1)
# Columns split over the lanes, rows over the warps and registers.
COLUMNS_OVER_LANES = TiledLayout(Tiling(((32, 32), (1,))), (-4,), (-3,), -1)
LAYOUTS: tuple[Layout, ...] = (
    *(WGStridedLayout(v) for v in (1, 2, 4, 8, 16)),
    WGMMA_LAYOUT, WGMMA_TRANSPOSED_LAYOUT, WGMMA_LAYOUT_8BIT, WGMMA_LAYOUT_TF32_A,
    WGMMA_LAYOUT_UPCAST_2X, WGMMA_LAYOUT_UPCAST_4X, WGMMA_ROW_LAYOUT, WGMMA_COL_LAYOUT,
    ROWS_IN_REGISTERS, COLUMNS_OVER_LANES,
)
NAMES = {WGMMA_LAYOUT: "wgmma", WGMMA_TRANSPOSED_LAYOUT: "wgmma-t", WGMMA_LAYOUT_8BIT: "8bit",
         WGMMA_LAYOUT_TF32_A: "tf32a", WGMMA_LAYOUT_UPCAST_2X: "up2x",
         WGMMA_LAYOUT_UPCAST_4X: "up4x", WGMMA_ROW_LAYOUT: "row", WGMMA_COL_LAYOUT: "col",
         ROWS_IN_REGISTERS: "rows-in-regs", COLUMNS_OVER_LANES: "cols-over-lanes",
         **{WGStridedLayout(v): f"strided{v}" for v in (1, 2, 4, 8, 16)}}
# (shape, element types): 2-D tiles of the canonical sizes, one that takes two rounds in
# f32 (32 KiB), ragged ones (row-major placement), 1-D and 3-D values.
SHAPES = [
    ((64, 64), ("f32", "bf16", "f8E4M3FN")),
    ((64, 128), ("f32",)),
    ((64, 24), ("f32", "bf16")),
    ((64, 48), ("f8E4M3FN",)),
    ((256,), ("f32", "bf16")),
    ((2, 64, 32), ("f32",)),
]
BITWIDTH = {"f32": 32, "bf16": 16, "f8E4M3FN": 8}


def fits(layout: Layout, shape: tuple[int, ...], element: str = "f32") -> bool:
    """The layout applies to the shape and is not too dear (replicated past the limit)."""
    try:
        check_layout_fits(layout, shape)
    except LayoutError:
        return False
    return replication_problem(layout, shape, BITWIDTH[element]) is None


def smem_targets(src: Layout, shape: tuple[int, ...], element: str) -> list[Layout]:
    """The layouts of LAYOUTS that `src` reaches only through shared memory."""
    return [dst for dst in LAYOUTS if dst != src and fits(dst, shape, element)
            and relayout_kind(src, dst, shape, BITWIDTH[element]) == "smem"]


GROUPS = [(src, shape, element) for shape, elements in SHAPES for element in elements
          for src in LAYOUTS if fits(src, shape, element) and smem_targets(src, shape, element)]
GROUP_IDS = [f"{NAMES[s]}-{'x'.join(map(str, shape))}-{e}" for s, shape, e in GROUPS]


def fan_out_kernel(src: Layout, targets: list[Layout], shape: tuple[int, ...], element: str
                   ) -> str:
    """Loads `in` in `src`, casts it to each target and stores each cast to its own output."""
    v = f"vector<{'x'.join(map(str, shape))}x{element}>"
    ref = f"memref<{'x'.join(map(str, shape))}x{element}>"
    zeros = ", ".join(["%c0"] * len(shape))
    index = ", ".join(["index"] * len(shape))
    outs = ", ".join(f"%o{i}: {ref}" for i in range(len(targets)))
    lines = [f'  %x = "smalti.vector_load"(%a, {zeros}) {{out_layouts = '
             f'[#smalti.{layout_to_text(src)}]}} : ({ref}, {index}) -> {v}']
    for i, dst in enumerate(targets):
        lines.append(f'  %y{i} = "smalti.layout_cast"(%x) {{new_layout = '
                     f'#smalti.{layout_to_text(dst)}}} : ({v}) -> {v}')
        lines.append(f'  "smalti.vector_store"(%y{i}, %o{i}, {zeros}) : ({v}, {ref}, {index})'
                     " -> ()")
    body = "\n".join(lines)
    return f"""
func.func @fan_out(%a: {ref}, {outs}) attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
{body}
  return
}}
"""


@cache
def fan_out(src: Layout, shape: tuple[int, ...], element: str):
    targets = smem_targets(src, shape, element)
    return targets, compile_mlir(fan_out_kernel(src, targets, shape, element), "fan_out.mlir")


@pytest.mark.parametrize("group", GROUPS, ids=GROUP_IDS)
def test_every_element_lands_where_the_target_layout_says(group):
    src, shape, element = group
    targets, compiled = fan_out(src, shape, element)
    assert compiled.ptx.count("st.shared") and compiled.ptx.count("ld.shared")
    for data in distinct_inputs(shape, element):
        outs = run_simulated(compiled, data, *[np.zeros_like(data) for _ in targets])[1:]
        bits = BITS[data.dtype.itemsize * 8]
        for dst, got in zip(targets, outs, strict=True):
            assert np.array_equal(got.view(bits), data.view(bits)), (
                f"{NAMES[src]} -> {NAMES[dst]}: "
                f"{int((got.view(bits) != data.view(bits)).sum())} elements wrong")
    result = compile_ptx(compiled.ptx, arch="sm_90a")
    assert not re.search(r"C75\d\d", result.log), result.log


def test_the_pairs_cover_the_cases_that_matter():
    """The generated pairs include the transposes, strided widths and strided <-> wgmma in
    f32 and 16 bits, rounds, row-major placements and replicated layouts on either side."""
    pairs = {(NAMES[s], NAMES[d], shape, e) for s, shape, e in GROUPS
             for d in smem_targets(s, shape, e)}
    for element in ("f32", "bf16"):
        assert ("wgmma", "wgmma-t", (64, 64), element) in pairs
        assert ("wgmma-t", "wgmma", (64, 64), element) in pairs
        assert ("strided1", "strided4", (64, 64), element) in pairs
        assert ("strided4", "strided1", (64, 64), element) in pairs
        assert ("wgmma", "strided4", (64, 64), element) in pairs
        assert ("strided8", "wgmma", (64, 64), element) in pairs
    assert ("rows-in-regs", "strided1", (64, 64), "f32") in pairs
    assert ("strided1", "rows-in-regs", (64, 64), "f8E4M3FN") in pairs
    assert len(pairs) > 300
    assert plan_smem_relayout(WGMMA_LAYOUT, WGStridedLayout(1), (64, 24), 32
                              ).placement == "row-major"
    assert len(plan_smem_relayout(WGMMA_LAYOUT, WGStridedLayout(1), (64, 128), 32
                                  ).rounds) == 2


def _layout(name: str) -> Layout:
    return next(layout for layout, n in NAMES.items() if n == name)


# Bank conflicts. The plan's figure is static (addresses from its thread functions); the
# simulator's are recorded from every ld/st.shared it executes.
COMMON = [
    (WGMMA_LAYOUT, WGMMA_TRANSPOSED_LAYOUT, (64, 64), "f32"),
    (WGMMA_TRANSPOSED_LAYOUT, WGMMA_LAYOUT, (64, 64), "f32"),
    (WGStridedLayout(1), WGStridedLayout(4), (64, 64), "f32"),
    (WGStridedLayout(4), WGStridedLayout(1), (64, 64), "f32"),
    (WGMMA_LAYOUT, WGStridedLayout(4), (64, 64), "f32"),
    (WGStridedLayout(4), WGMMA_LAYOUT, (64, 64), "f32"),
    (WGStridedLayout(1), WGMMA_LAYOUT, (64, 64), "f32"),
    (WGMMA_LAYOUT_TF32_A, WGMMA_TRANSPOSED_LAYOUT, (64, 64), "f32"),
    (WGMMA_LAYOUT, WGMMA_TRANSPOSED_LAYOUT, (64, 64), "bf16"),
    (WGMMA_TRANSPOSED_LAYOUT, WGMMA_LAYOUT, (64, 64), "bf16"),
    (WGStridedLayout(1), WGStridedLayout(8), (64, 64), "bf16"),
    (WGStridedLayout(8), WGStridedLayout(1), (64, 64), "bf16"),
    (WGMMA_LAYOUT, WGStridedLayout(8), (64, 64), "bf16"),
    (WGStridedLayout(8), WGMMA_LAYOUT, (64, 64), "bf16"),
    (WGMMA_LAYOUT, WGStridedLayout(1), (64, 128), "f32"),
    (WGMMA_LAYOUT_8BIT, WGStridedLayout(16), (64, 64), "f8E4M3FN"),
]
COMMON_IDS = [f"{NAMES[s]}-to-{NAMES[d]}-{'x'.join(map(str, shape))}-{e}"
              for s, d, shape, e in COMMON]


def cast_kernel(src: Layout, dst: Layout, shape: tuple[int, ...], element: str) -> str:
    return fan_out_kernel(src, [dst], shape, element)


def simulated_degrees(compiled, data: np.ndarray, outs: int) -> list[tuple[str, int, int]]:
    """(space, bytes, conflict degree) of every shared access the simulator executes, per
    warp: the addresses are recorded from its load and store routines."""
    seen: list[tuple[str, np.ndarray, int, np.ndarray]] = []
    load, store = sim_memory._load, sim_memory._store

    def record(kind, addresses, nbytes, lanes):
        ids = np.arange(lanes.mask.size) if lanes.index is None else lanes.index
        full = np.zeros(lanes.mask.size, dtype=np.int64)
        full[ids] = np.broadcast_to(np.asarray(addresses, dtype=np.int64), ids.shape)
        seen.append((kind, full, nbytes, lanes.mask.copy()))

    def _load(m, space, addresses, elem, count, lanes, *rest):
        if space == "shared":
            record("ld", addresses, elem * count, lanes)
        return load(m, space, addresses, elem, count, lanes, *rest)

    def _store(m, space, addresses, values, elem, lanes, *rest):
        if space == "shared":
            record("st", addresses, elem * values.shape[1], lanes)
        return store(m, space, addresses, values, elem, lanes, *rest)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sim_memory, "_load", _load)
        patch.setattr(sim_memory, "_store", _store)
        run_simulated(compiled, data, *[np.zeros_like(data) for _ in range(outs)])
    return [(kind, nbytes, conflict_degree(addresses, nbytes, active))
            for kind, addresses, nbytes, active in seen]


@pytest.mark.parametrize("case", COMMON, ids=COMMON_IDS)
def test_common_relayouts_have_no_bank_conflicts(case):
    """Every shared access of the plan serves each phase of a warp without conflicts: in
    the plan's own figures and in the addresses the simulator computes."""
    src, dst, shape, element = case
    plan = plan_smem_relayout(src, dst, shape, BITWIDTH[element])
    for round_ in plan.rounds:
        for side in (round_.store, round_.load):
            assert max(bank_conflicts(side, a, plan.element_bytes)
                       for a in side.accesses) == 1
    compiled = compile_mlir(cast_kernel(*case), "cast.mlir")
    data = distinct_inputs(shape, element)[0]
    degrees = simulated_degrees(compiled, data, 1)
    assert len(degrees) == plan.accesses
    assert {d for _, _, d in degrees} == {1}, degrees


def test_the_analysis_sees_conflicts_where_there_are_some():
    """The conflict figure is not always 1: a column of a row-major f32 tile read by the 32
    lanes of a warp hits one bank 32 times; 16-byte accesses of 8 consecutive lanes at a
    128-byte stride, 8 times; lanes reading one word share it."""
    lanes = np.arange(128)
    assert conflict_degree(lanes * 64 * 4, 4) == 32
    assert conflict_degree(lanes * 128, 16) == 8
    assert conflict_degree(lanes * 16, 16) == 1
    assert conflict_degree(lanes // 4 * 4, 4) == 1
    assert conflict_degree(lanes * 8 % 256, 8) == 1
    # the row-major placement (24 columns: no swizzle) of the tf32 A layout: a thread's
    # 16-byte store of 4 rows, the 8 lanes of a phase 4 apart in one row, 2 ways apart
    case = (WGMMA_LAYOUT_TF32_A, WGStridedLayout(1), (64, 24), "f32")
    plan = plan_smem_relayout(*case[:3], 32)
    assert plan.placement == "row-major"
    assert side_conflicts(plan.rounds[0].store, 4) == [2] * len(plan.rounds[0].store.accesses)
    assert side_conflicts(plan.rounds[0].load, 4) == [1] * len(plan.rounds[0].load.accesses)
    compiled = compile_mlir(cast_kernel(*case), "cast.mlir")
    degrees = simulated_degrees(compiled, distinct_inputs((64, 24), "f32")[0], 1)
    assert sorted({(kind, d) for kind, _, d in degrees}) == [("ld", 1), ("st", 2)]


def test_the_64x64_f32_transpose_is_eight_16_byte_stores_and_loads_without_spills():
    case = (WGMMA_LAYOUT, WGMMA_TRANSPOSED_LAYOUT, (64, 64), "f32")
    ptx = compile_mlir(cast_kernel(*case), "cast.mlir").ptx
    assert ptx.count("st.shared.v4.b32") == 8 and ptx.count("ld.shared.v4.b32") == 8
    assert ptx.count("st.shared") == 8 and ptx.count("ld.shared") == 8
    assert ptx.count("bar.sync") == 1
    assert "prmt" not in ptx
    cost = relayout_cost(*case[:3], 32)
    assert (cost.kind, cost.smem_bytes, cost.smem_accesses, cost.smem_rounds) == (
        "smem", 16384, 16, 1)
    result = compile_ptx(ptx, arch="sm_90a")
    assert re.search(r"\b0 bytes spill stores, 0 bytes spill loads", result.log), result.log
    registers = int(re.search(r"Used (\d+) registers", result.log).group(1))
    assert registers <= 96, result.log
    assert "16384 bytes smem" in result.log


def test_large_values_go_in_rounds_of_at_most_16_kib():
    plan = plan_smem_relayout(WGMMA_LAYOUT, WGStridedLayout(1), (128, 128), 32)
    assert len(plan.rounds) == 4 and plan.scratch_bytes == ROUND_BYTES == 16384
    ptx = compile_mlir(cast_kernel(WGMMA_LAYOUT, WGStridedLayout(1), (128, 128), "f32"),
                       "cast.mlir").ptx
    # store, meet, load per round; each later round meets first (the last loads pending)
    assert ptx.count("bar.sync") == 7
    data = distinct_inputs((128, 128), "f32")[0]
    compiled = compile_mlir(cast_kernel(WGMMA_LAYOUT, WGStridedLayout(1), (128, 128), "f32"),
                            "cast.mlir")
    np.testing.assert_array_equal(run_simulated(compiled, data, np.zeros_like(data))[-1], data)


# Control flow and warpgroups. The simulator reports a shared-memory race where two
# threads' accesses to a byte are not ordered by a barrier, so a scratch store that could
# overwrite what another thread has not loaded yet fails these tests.
WGMMA = f"#smalti.{layout_to_text(WGMMA_LAYOUT)}"
TRANSPOSED = f"#smalti.{layout_to_text(WGMMA_TRANSPOSED_LAYOUT)}"
STRIDED4 = "#smalti.strided<vec = 4>"
STRIDED1 = "#smalti.strided<vec = 1>"
V = "vector<64x64xf32>"

LOOP = f"""
func.func @loop(%a: memref<256x64xf32>, %b: memref<256x64xf32>, %o1: memref<256x64xf32>,
                %o2: memref<256x64xf32>, %sum: memref<64x64xf32>)
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant dense<0.0> : {V}
  %acc = scf.for %i = %c0 to %c4 step %c1 iter_args(%s = %zero) -> ({V}) {{
    %row = arith.muli %i, %c64 : index
    %x = "smalti.vector_load"(%a, %row, %c0) {{out_layouts = [{WGMMA}]}} : (memref<256x64xf32>, index, index) -> {V}
    %w = "smalti.vector_load"(%b, %row, %c0) {{out_layouts = [{STRIDED4}]}} : (memref<256x64xf32>, index, index) -> {V}
    %y = "smalti.layout_cast"(%x) {{new_layout = {TRANSPOSED}}} : ({V}) -> {V}
    %z = "smalti.layout_cast"(%w) {{new_layout = {TRANSPOSED}}} : ({V}) -> {V}
    %t = arith.addf %y, %z : {V}
    "smalti.vector_store"(%y, %o1, %row, %c0) : ({V}, memref<256x64xf32>, index, index) -> ()
    "smalti.vector_store"(%z, %o2, %row, %c0) : ({V}, memref<256x64xf32>, index, index) -> ()
    %n = arith.addf %s, %t : {V}
    scf.yield %n : {V}
  }}
  %back = "smalti.layout_cast"(%acc) {{new_layout = {STRIDED1}}} : ({V}) -> {V}
  "smalti.vector_store"(%back, %sum, %c0, %c0) : ({V}, memref<64x64xf32>, index, index) -> ()
  return
}}
"""


def _loop_inputs():
    rng = np.random.default_rng(5)
    return (rng.integers(-64, 64, (256, 64)).astype(np.float32),
            rng.integers(-64, 64, (256, 64)).astype(np.float32))


def test_relayouts_in_a_loop_with_new_data_each_trip():
    """Two relayouts per trip, both results live until their sum; the sum of all trips is
    relayouted again after the loop. Each trip's first stores to the scratch wait for the
    previous trip's loads (a barrier at the top of the body), each relayout meets between
    its stores and loads, and the second relayout of a trip waits for the first's loads."""
    a, b = _loop_inputs()
    compiled = compile_mlir(LOOP, "loop.mlir")
    zeros = np.zeros_like(a)
    _, _, o1, o2, total = run_simulated(compiled, a, b, zeros, zeros, np.zeros((64, 64),
                                                                               np.float32))
    np.testing.assert_array_equal(o1, a)
    np.testing.assert_array_equal(o2, b)
    np.testing.assert_array_equal(total, (a + b).reshape(4, 64, 64).sum(0))
    ptx = compiled.ptx
    body = ptx[ptx.index("$loop_0:"):ptx.index("$loop_end_0:")]
    assert body.count("bar.sync") == 4  # per relayout: wait for the loads before, meet
    assert ptx.count("bar.sync") == 6  # and two for the relayout after the loop
    assert ptx.count(".shared .align 128 .b8") == 1  # one scratch for all three


def test_without_the_loop_carried_wait_the_simulator_reports_the_race(monkeypatch):
    """The test above can fail: a lowering that forgets the previous trip's loads (no
    barrier before the first stores of a trip) races."""
    import smalti.lowering.control as control

    real = control.loop_carried
    monkeypatch.setattr(control, "loop_carried", lambda ctx, body: tuple(
        access for access in real(ctx, body) if access.start >= 0))
    a, b = _loop_inputs()
    compiled = compile_mlir(LOOP, "loop.mlir")
    zeros = np.zeros_like(a)
    with pytest.raises(Exception, match="shared-memory race"):
        run_simulated(compiled, a, b, zeros, zeros, np.zeros((64, 64), np.float32))


BRANCH = f"""
func.func @branch(%a: memref<64x64xf32>, %b: memref<64x64xf32>, %o: memref<64x64xf32>,
                  %o2: memref<64x64xf32>, %flag: i32)
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %c0i = arith.constant 0 : i32
  %x = "smalti.vector_load"(%a, %c0, %c0) {{out_layouts = [{WGMMA}]}} : (memref<64x64xf32>, index, index) -> {V}
  %w = "smalti.vector_load"(%b, %c0, %c0) {{out_layouts = [{STRIDED4}]}} : (memref<64x64xf32>, index, index) -> {V}
  %p = arith.cmpi ne, %flag, %c0i : i32
  %r = scf.if %p -> ({V}) {{
    %y = "smalti.layout_cast"(%x) {{new_layout = {TRANSPOSED}}} : ({V}) -> {V}
    scf.yield %y : {V}
  }} else {{
    %z = "smalti.layout_cast"(%w) {{new_layout = {TRANSPOSED}}} : ({V}) -> {V}
    scf.yield %z : {V}
  }}
  "smalti.vector_store"(%r, %o, %c0, %c0) : ({V}, memref<64x64xf32>, index, index) -> ()
  %again = "smalti.layout_cast"(%w) {{new_layout = {TRANSPOSED}}} : ({V}) -> {V}
  "smalti.vector_store"(%again, %o2, %c0, %c0) : ({V}, memref<64x64xf32>, index, index) -> ()
  return
}}
"""


@pytest.mark.parametrize("flag", [0, 1])
def test_relayouts_in_branches(flag):
    """A relayout in either branch of an scf.if, then one after it: its stores wait for
    whichever branch's loads ran."""
    a, b = _loop_inputs()
    a, b = a[:64], b[:64]
    compiled = compile_mlir(BRANCH, "branch.mlir")
    out = run_simulated(compiled, a, b, np.zeros_like(a), np.zeros_like(a), np.int32(flag))
    np.testing.assert_array_equal(out[2], a if flag else b)
    np.testing.assert_array_equal(out[3], b)
    ptx = compiled.ptx
    after = ptx[ptx.index("$if_end_0:"):]
    assert after.count("bar.sync") == 2


def _roles(regions: str, warpgroups: int) -> str:
    return f"""
func.func @roles(%a: memref<64x64xf32>, %b: memref<64x64xf32>, %oa: memref<64x64xf32>,
                 %ob: memref<64x64xf32>)
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>, smalti.warpgroups = {warpgroups} : i64}} {{
  %c0 = arith.constant 0 : index
{regions}
  return
}}
"""


def _role(source: str, out: str, which: str) -> str:
    return f"""  "smalti.warpgroup_region"() ({{
    %x = "smalti.vector_load"(%{source}, %c0, %c0) {{out_layouts = [{WGMMA}]}} : (memref<64x64xf32>, index, index) -> {V}
    %y = "smalti.layout_cast"(%x) {{new_layout = {TRANSPOSED}}} : ({V}) -> {V}
    "smalti.vector_store"(%y, %{out}, %c0, %c0) : ({V}, memref<64x64xf32>, index, index) -> ()
  }}) {{warpgroup = {which}}} : () -> ()"""


def test_warp_specialised_roles_relayout_at_once_in_their_own_scratch():
    """Two roles (warpgroups 1 and 2 of 3) relayout at the same time: each has its own copy
    of the scratch (warpgroup 0 runs none, so it has none) and meets at its own named
    barrier."""
    text = _roles(_role("a", "oa", "1 : i64") + "\n" + _role("b", "ob", "2 : i64"), 3)
    compiled = compile_mlir(text, "roles.mlir")
    a, b = _loop_inputs()
    a, b = a[:64], b[:64]
    _, _, oa, ob = run_simulated(compiled, a, b, np.zeros_like(a), np.zeros_like(b))
    np.testing.assert_array_equal(oa, a)
    np.testing.assert_array_equal(ob, b)
    ptx = compiled.ptx
    assert "__smalti_relayout_0[32768];" in ptx
    assert re.search(r"add\.u32 %r\d+, %r\d+, 16384;", ptx)  # warpgroup 2's copy
    assert {"bar.sync 2, 128;", "bar.sync 3, 128;"} <= set(ptx.replace("\t", "").split("\n"))
    assert "bar.sync 0" not in ptx
    compile_ptx(ptx)


def test_every_warpgroup_runs_the_relayout_in_its_own_copy():
    """Without roles every warpgroup runs the kernel's body: the copy is picked by the
    warpgroup index at run time."""
    text = _roles(_role("a", "oa", "array<i64: 0, 1>"), 2)
    compiled = compile_mlir(text, "roles.mlir")
    a = _loop_inputs()[0][:64]
    _, _, oa, _ = run_simulated(compiled, a, a, np.zeros_like(a), np.zeros_like(a))
    np.testing.assert_array_equal(oa, a)
    ptx = compiled.ptx
    assert "__smalti_relayout_0[32768];" in ptx
    assert re.search(r"mad\.lo\.u32 %r\d+, %r\d+, 16384, %r\d+;", ptx)


# Issue 14's programs that used to get a replicated layout (lit_tests/inference/
# replication.mlir, from /work/shared/repros): casts across warps now compile.
def _replication_case(number: int) -> str:
    path = Path(__file__).parent.parent / "lit_tests" / "inference" / "replication.mlir"
    return path.read_text().split("// -----\n")[number]


def _spilled(ptx: str) -> int:
    """The bytes ptxas spills assembling the PTX (it must take it)."""
    result = compile_ptx(ptx, arch="sm_90a")
    assert not re.search(r"C75\d\d|C7600", result.log), result.log
    return int(re.search(r"\b(\d+) bytes spill stores", result.log).group(1))


def _assembles_without_spills(ptx: str, limit: int = 0) -> None:
    """ptxas takes the PTX, spilling at most `limit` bytes."""
    assert _spilled(ptx) <= limit


def test_replicated_layout_blowup_compiles_to_a_small_kernel():
    """One 64x128 f32 value cast to strided<vec = 1> and strided<vec = 4>: 26,564 lines of
    PTX and a 14 KB stack frame when it got wgmma-col; now strided<vec = 4>, a relayout
    through shared memory in two rounds, about 200 lines."""
    compiled = compile_mlir(_replication_case(0), "replicated_layout_blowup.mlir")
    a = np.random.default_rng(0).standard_normal((64, 128)).astype(np.float32)
    _, o1, o2 = run_simulated(compiled, a, np.zeros_like(a), np.zeros_like(a))
    np.testing.assert_array_equal(o1, a)
    np.testing.assert_array_equal(o2, a)
    lines = len(compiled.ptx.splitlines())
    assert lines < 400, lines
    assert compiled.ptx.count("bar.sync") == 3  # two rounds
    _assembles_without_spills(compiled.ptx)


def test_replicated_layout_ptxas_timeout_compiles():
    """2x64x128 bf16 values: 79,752 lines of PTX that ptxas gave up on; now strided<vec = 8>
    and one cast to strided<vec = 1> (32 KiB, two rounds)."""
    compiled = compile_mlir(_replication_case(2), "replicated_layout_ptxas_timeout.mlir")
    rng = np.random.default_rng(1)
    exponents = 2 * rng.integers(-4, 5, (2, 64, 128))  # exact logs and square roots
    signs = rng.choice([-1.0, 1.0], (2, 64, 128))
    in0 = (signs * 2.0 ** exponents).astype(DTYPES["bf16"])
    in1 = rng.integers(-3, 4, (2, 64, 128)).astype(DTYPES["bf16"])
    zeros = np.zeros_like(in0)
    *_, out0, out1, out2 = run_simulated(compiled, in0, in1, zeros, zeros, zeros)
    logs = exponents.astype(np.float32)
    np.testing.assert_array_equal(out0.astype(np.float32), logs)
    np.testing.assert_array_equal(out1.astype(np.float32), np.maximum(
        in1.astype(np.float32) * logs, 2.0 ** exponents))
    np.testing.assert_array_equal(out2.astype(np.float32), 2.0 ** (exponents // 2))
    assert len(compiled.ptx.splitlines()) < 2000
    # Several 64-register values are live at once: the program spills a little with or
    # without the cast (348 bytes without it), ptxas no longer gives up.
    _assembles_without_spills(compiled.ptx, limit=400)


def test_replicated_layout_ptxas_c7600_compiles():
    """Two warpgroups, two blocks; warpgroup 0 transposes a 128x256 f32 value and, in one
    branch, casts it to strided<vec = 8> (128 KiB through shared memory in 8 rounds)."""
    compiled = compile_mlir(_replication_case(3), "replicated_layout_ptxas_c7600.mlir")
    rng = np.random.default_rng(2)
    in0 = rng.integers(-8, 9, (257, 256)).astype(np.float32)
    in1 = rng.integers(-8, 9, (256, 512)).astype(np.float32)
    in2 = rng.integers(-8, 9, (128, 512)).astype(np.int32)
    outs = [np.zeros((256, 256), np.float32), np.zeros((256, 256), np.float32),
            np.zeros(65536, np.int32), np.zeros((256, 256), np.int32),
            np.zeros((128, 512), np.float32)]
    result = run_simulated(compiled, in0, in1, in2, *outs, np.int32(0))
    out0, out1, out2, out3, out4 = result[3:8]
    v12 = np.abs(np.concatenate([in0[1:129], in0[129:257]]))  # per block bx: rows 128 bx + 1..
    np.testing.assert_array_equal(out1, v12)
    np.testing.assert_array_equal(out0, v12.reshape(2, 128, 256).transpose(2, 0, 1)
                                  .reshape(256, 256))
    np.testing.assert_array_equal(out2, np.tile(np.arange(256, dtype=np.int32), 256))
    np.testing.assert_array_equal(out3, np.concatenate([in2[:, :256], in2[:, 256:]]))
    np.testing.assert_array_equal(out4, np.maximum(
        np.concatenate([in1[:128, :256], in1[128:, :256]], axis=1), in1[:128]))
    assert len(plan_smem_relayout(WGMMA_LAYOUT, WGStridedLayout(8), (128, 256), 32
                                  ).rounds) == 8
    # Its values take 256 registers per thread: ptxas spills (it failed with C7600), about
    # as much as without the cast.
    cast = ('%v4 = "smalti.layout_cast"(%v1) {new_layout = #smalti.strided<vec = 8>} : '
            "(vector<128x256xf32>) -> vector<128x256xf32>")
    assert cast in _replication_case(3)
    without = compile_mlir(_replication_case(3).replace(
        cast, "%v4 = math.absf %v1 : vector<128x256xf32>"), "without_cast.mlir")
    assert _spilled(compiled.ptx) <= 1.1 * _spilled(without.ptx)
