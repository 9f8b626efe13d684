"""smalti.ops is written in the public DSL only: its modules import smalti.dsl (and each
other), nothing else of smalti, and use only the names smalti.dsl exports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import smalti.dsl

OPS = Path(__file__).resolve().parents[1] / "smalti" / "ops"
MODULES = sorted(OPS.rglob("*.py"))
PUBLIC = set(smalti.dsl.__all__)


def private_uses(source: str) -> list[str]:
    """What a module's source uses of smalti beyond smalti.dsl's exports and smalti.ops:
    imports of other smalti modules, names not exported, and attributes of the imported
    smalti.dsl that are not exported (`sd.program_id` is fine, `sd.ops.x` is not)."""
    found, dsl_aliases = [], set()
    for node in ast.walk(ast.parse(source)):
        match node:
            case ast.Import(names=names):
                for alias in names:
                    if alias.name == "smalti.dsl":
                        dsl_aliases.add(alias.asname or "smalti")
                    elif alias.name.startswith("smalti") and \
                            not alias.name.startswith("smalti.ops"):
                        found.append(f"line {node.lineno}: import {alias.name}")
            case ast.ImportFrom(level=level) if level:
                found.append(f"line {node.lineno}: a relative import (name smalti.ops.*)")
            case ast.ImportFrom(module=module, names=names) if module == "smalti.dsl":
                found.extend(f"line {node.lineno}: smalti.dsl.{a.name} is not exported"
                             for a in names if a.name not in PUBLIC)
            case ast.ImportFrom(module=module, names=names) if module == "smalti":
                found.extend(f"line {node.lineno}: from smalti import {a.name}"
                             for a in names if a.name not in ("dsl", "ops"))
            case ast.ImportFrom(module=module) if module and module.startswith("smalti") \
                    and not module.startswith("smalti.ops"):
                found.append(f"line {node.lineno}: from {module} import ...")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in dsl_aliases and node.attr not in PUBLIC:
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr} is not exported")
    return found


def test_the_package_has_modules():
    assert {p.name for p in MODULES} >= {"__init__.py", "norms.py", "row_softmax.py"}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_ops_modules_use_only_the_public_dsl(path):
    assert private_uses(path.read_text()) == []


@pytest.mark.parametrize(("source", "message"), [
    ("from smalti.tiling import WGMMA_LAYOUT", "line 1: from smalti.tiling import ..."),
    ("import smalti.dsl.ops", "line 1: import smalti.dsl.ops"),
    ("from smalti.dsl import user_error", "line 1: smalti.dsl.user_error is not exported"),
    ("from smalti.dsl.array import Array", "line 1: from smalti.dsl.array import ..."),
    ("from smalti import runtime", "line 1: from smalti import runtime"),
    ("from .rows import f32", "line 1: a relative import (name smalti.ops.*)"),
    ("import smalti.dsl as sd\nsd.array.Array", "line 2: sd.array is not exported"),
])
def test_the_check_catches_private_uses(source, message):
    assert private_uses(source) == [message]


def test_the_check_accepts_public_uses():
    source = ("import smalti.dsl as sd\nfrom smalti.dsl import fori\nfrom smalti.ops.rows "
              "import f32\nsd.program_id(0)")
    assert private_uses(source) == []
