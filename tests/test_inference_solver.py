"""The equation solver on its own: exact answers, explained failures, random systems."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from smalti.layout_inference import (
    AllowedKinds,
    Equal,
    EquationSystem,
    Hint,
    IsLayout,
    Origin,
    Unsatisfiable,
    solve,
)
from smalti.layout_inference.solver import fits
from smalti.tiling import WGMMA_LAYOUT, TiledLayout, WGSplatLayout, WGStridedLayout

HERE = Origin("test.op")
DISTRIBUTED = frozenset({TiledLayout, WGStridedLayout})


def test_equal_variables_share_the_hinted_layout():
    s = EquationSystem()
    a, b, c = (s.new_variable((128, 128)) for _ in range(3))
    s.add(Equal(a, b, HERE))
    s.add(Equal(c, b, HERE))
    s.add(Hint(a, WGStridedLayout(2), 1, HERE))
    solution = solve(s)
    assert {solution[v.id] for v in (a, b, c)} == {WGStridedLayout(2)}


def test_fixed_layout_beats_hints_and_splat_only_when_alone():
    s = EquationSystem()
    a, b = s.new_variable((128, 64)), s.new_variable((128, 64))
    lone = s.new_variable((4, 4))
    s.add(Equal(a, b, HERE))
    s.add(Hint(a, WGStridedLayout(4), 1, HERE))
    s.add(IsLayout(b, WGMMA_LAYOUT, HERE))
    s.add(Hint(lone, WGSplatLayout(), 0, HERE))
    solution = solve(s)
    assert solution[a.id] == WGMMA_LAYOUT
    assert solution[lone.id] == WGSplatLayout()


def test_default_is_the_widest_strided_layout():
    s = EquationSystem()
    v = s.new_variable((128, 128), bitwidth=16)
    s.add(AllowedKinds(v, DISTRIBUTED, HERE))
    assert solve(s)[v.id] == WGStridedLayout(8)


def test_conflict_names_the_shortest_chain():
    s = EquationSystem()
    vs = [s.new_variable((128, 128)) for _ in range(5)]
    for x, y in itertools.pairwise(vs):
        s.add(Equal(x, y, Origin("chain")))
    s.add(Equal(vs[0], vs[4], Origin("shortcut")))
    s.add(IsLayout(vs[0], WGStridedLayout(4), Origin("first")))
    s.add(IsLayout(vs[4], WGMMA_LAYOUT, Origin("second")))
    with pytest.raises(Unsatisfiable) as failure:
        solve(s)
    names = [c.origin.op_name for c in failure.value.conflict.chain]
    assert names == ["first", "shortcut", "second"]


def test_splat_where_a_distributed_layout_is_required_is_reported():
    s = EquationSystem()
    a, b = s.new_variable((128, 128)), s.new_variable((128, 128))
    s.add(Equal(a, b, HERE))
    s.add(IsLayout(a, WGSplatLayout(), Origin("cast")))
    s.add(AllowedKinds(b, DISTRIBUTED, Origin("store")))
    with pytest.raises(Unsatisfiable, match="splat layout is not allowed"):
        solve(s)


def test_shape_that_no_layout_fits_is_reported():
    s = EquationSystem()
    v = s.new_variable((3, 5))
    s.add(AllowedKinds(v, DISTRIBUTED, HERE))
    with pytest.raises(Unsatisfiable, match="no layout fits"):
        solve(s)


# Random systems: every answer satisfies every constraint; every refusal is justified by an
# exhaustive search over all layouts the constraints and hints mention.
UNIVERSE = [WGSplatLayout(), WGStridedLayout(1), WGStridedLayout(2), WGStridedLayout(4),
            WGStridedLayout(8), WGMMA_LAYOUT]
SHAPES = [(128, 128), (64, 8), (4, 4), (128, 256)]


@st.composite
def systems(draw):
    s = EquationSystem()
    n = draw(st.integers(1, 8))
    vars_ = [s.new_variable(draw(st.sampled_from(SHAPES)), draw(st.sampled_from([16, 32])))
             for _ in range(n)]
    for _ in range(draw(st.integers(0, 8))):
        a, b = draw(st.sampled_from(vars_)), draw(st.sampled_from(vars_))
        if a.shape == b.shape:
            s.add(Equal(a, b, HERE))
    for _ in range(draw(st.integers(0, 3))):
        s.add(IsLayout(draw(st.sampled_from(vars_)), draw(st.sampled_from(UNIVERSE)), HERE))
    for _ in range(draw(st.integers(0, 3))):
        s.add(AllowedKinds(draw(st.sampled_from(vars_)), DISTRIBUTED, HERE))
    for _ in range(draw(st.integers(0, 3))):
        s.add(Hint(draw(st.sampled_from(vars_)), draw(st.sampled_from(UNIVERSE)),
                   draw(st.integers(0, 2)), HERE))
    return s


def _satisfies(layout, var, system) -> bool:
    return fits(layout, var.shape) and all(
        (not isinstance(c, IsLayout) or c.var != var or c.layout == layout)
        and (not isinstance(c, AllowedKinds) or c.var != var or isinstance(layout, tuple(c.kinds)))
        for c in system.constraints)


def _classes(system):
    neighbours = {v.id: set() for v in system.variables}
    for c in system.constraints:
        if isinstance(c, Equal):
            neighbours[c.a.id].add(c.b.id)
            neighbours[c.b.id].add(c.a.id)
    seen, classes = set(), []
    for v in system.variables:
        if v.id in seen:
            continue
        stack, members = [v.id], []
        seen.add(v.id)
        while stack:
            x = stack.pop()
            members.append(system.variables[x])
            for y in neighbours[x] - seen:
                seen.add(y)
                stack.append(y)
        classes.append(members)
    return classes


@settings(max_examples=150, deadline=None)
@given(systems())
def test_random_systems_are_solved_exactly(system):
    try:
        solution = solve(system)
    except Unsatisfiable:
        unsolvable = [members for members in _classes(system)
                      if not any(all(_satisfies(layout, v, system) for v in members)
                                 for layout in UNIVERSE)]
        assert unsolvable, "the solver refused a satisfiable system"
        return
    for c in system.constraints:
        if isinstance(c, Equal):
            assert solution[c.a.id] == solution[c.b.id]
    for v in system.variables:
        assert _satisfies(solution[v.id], v, system)


# Shared-memory refs: the same solver assigns transforms.
def test_smem_transforms_follow_hints_and_requirements():
    from smalti.layout_inference.equations import SMEM, Requires
    from smalti.tiling.smem import SwizzleTransform, TileTransform

    s = EquationSystem()
    ref = s.new_variable((128, 64), bitwidth=16, domain=SMEM)
    view = s.new_variable((64, 64), bitwidth=16, domain=SMEM)
    s.add(Equal(ref, view, HERE))
    swizzled = (TileTransform((8, 64)), SwizzleTransform(128))
    narrow = (TileTransform((8, 32)), SwizzleTransform(64))
    s.add(Hint(ref, narrow, 1, HERE))
    s.add(Hint(view, swizzled, 0, HERE))

    def wants_128(transforms):
        return None if SwizzleTransform(128) in transforms else "needs a 128-byte swizzle"

    s.add(Requires(view, wants_128, Origin("wgmma")))
    solution = solve(s)
    assert solution[ref.id] == solution[view.id] == swizzled


def test_smem_requirement_failure_is_explained():
    from smalti.layout_inference.equations import SMEM, Requires
    from smalti.tiling.smem import SwizzleTransform, TileTransform

    s = EquationSystem()
    ref = s.new_variable((128, 64), bitwidth=16, domain=SMEM)
    s.add(IsLayout(ref, (TileTransform((8, 32)), SwizzleTransform(64)), Origin("with_transforms")))
    s.add(Requires(ref, lambda t: "TMA cannot write this", Origin("async_load")))
    with pytest.raises(Unsatisfiable, match="TMA cannot write this") as failure:
        solve(s)
    assert [c.origin.op_name for c in failure.value.conflict.chain] == ["with_transforms",
                                                                         "async_load"]


def test_smem_transforms_that_do_not_fit_are_never_chosen():
    from smalti.layout_inference.equations import SMEM
    from smalti.tiling.smem import SwizzleTransform, TileTransform

    s = EquationSystem()
    ref = s.new_variable((4, 48), bitwidth=16, domain=SMEM)
    s.add(Hint(ref, (TileTransform((8, 64)), SwizzleTransform(128)), 1, HERE))
    assert solve(s)[ref.id] == ()
