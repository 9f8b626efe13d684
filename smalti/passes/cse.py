"""smalti-cse: merge identical pure smalti ops and drop unused ones.

MLIR's `cse` and `canonicalize` leave every smalti op in place: the dialect is unregistered,
so MLIR assumes each may have any effect. smalti ops that declare themselves pure
(`SmaltiOp.is_pure`: Trait.PURE, or an inline_ptx without `has_side_effects`) get the same
treatment upstream ops get: of two with one name, operands, attributes and result types in
one block, the later is replaced by the earlier; one whose results are unused is erased.
Ops that may have effects are never touched, however alike.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect.definition import SmaltiOp


def _pure(op: ir.Operation) -> bool:
    view = op.opview
    return isinstance(view, SmaltiOp) and view.is_pure() and not len(op.regions)


def _key(op: ir.Operation) -> tuple:
    """What makes two pure ops compute the same values."""
    named = (op.attributes[i] for i in range(len(op.attributes)))
    attributes = frozenset((a.name, a.attr) for a in named)  # attributes hash by identity
    return (op.name, tuple(op.operands), attributes, tuple(r.type for r in op.results))


def _eliminate(block: ir.Block) -> None:
    seen: dict[tuple, ir.Operation] = {}
    for op in list(block.operations):
        op = op.operation
        for region in op.regions:
            for inner in region.blocks:
                _eliminate(inner)
        if not _pure(op):
            continue
        first = seen.setdefault(_key(op), op)
        if first is not op:
            for old, new in zip(op.results, first.results, strict=True):
                old.replace_all_uses_with(new)
            op.erase()
    for op in reversed(list(block.operations)):
        op = op.operation
        if _pure(op) and not any(len(list(r.uses)) for r in op.results):
            op.erase()


def eliminate_pure_ops(module: ir.Operation) -> None:
    """Merge identical pure smalti ops (per block) and erase unused ones, in place."""
    for region in module.regions:
        for block in region.blocks:
            _eliminate(block)
