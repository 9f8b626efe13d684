"""The package's import structure (DESIGN.md, "Rooms"): smalti modules import each other at
the top of the file, never inside functions, with no import circles; and each package
imports only the packages its room may."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SMALTI = Path(__file__).resolve().parents[1] / "smalti"

# The rooms of DESIGN.md: which smalti packages each package may import (besides itself).
ALLOWED = {
    "dialect": {"tiling"},
    "tiling": {"dialect"},  # the tile pass only (tiling/pass_.py)
    "layout_inference": {"dialect", "tiling"},
    "warpgroup": {"dialect", "tiling"},
    "passes": {"dialect", "layout_inference", "tiling", "warpgroup"},
    "ptx": set(),
    "lowering": {"dialect", "tiling", "ptx"},
    "sim": {"ptx"},
    "runtime": {"dialect", "tiling", "passes", "lowering", "ptx", "sim"},
    "dsl": {"dialect", "tiling", "runtime", "schedule"},
    "ops": {"dsl"},
    "schedule": set(),
    "tools": {"dialect", "tiling", "layout_inference", "warpgroup", "passes", "ptx",
              "lowering", "sim", "runtime", "dsl", "schedule"},
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SMALTI.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(SMALTI.rglob("*.py"))}


def _targets(node: ast.Import | ast.ImportFrom, module: str) -> list[str]:
    """The smalti modules an import statement loads (a submodule named in `from X import
    a` counts as X.a)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.startswith("smalti")]
    base = node.module or ""
    if node.level:  # relative imports: resolve against the importing package
        package = module.split(".")[:-node.level] if not MODULES[module].name.startswith(
            "__init__") else module.split(".")[:len(module.split(".")) - node.level + 1]
        base = ".".join([*package, base] if base else package)
    if not base.startswith("smalti"):
        return []
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]


def _imports() -> dict[str, tuple[set[str], list[tuple[int, str]]]]:
    """Per module: the smalti modules it imports at the top, and (line, module) of each
    smalti import inside a function or class body."""
    found = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        top: set[str] = set()
        inner: list[tuple[int, str]] = []
        top_nodes = set()
        for node in tree.body:
            if isinstance(node, ast.If | ast.Try):  # `if TYPE_CHECKING:` and the like
                top_nodes.update(id(n) for n in ast.walk(node))
            top_nodes.add(id(node))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                targets = _targets(node, module)
                if id(node) in top_nodes:
                    if not _type_checking_only(tree, node):
                        top.update(targets)
                else:
                    inner.extend((node.lineno, t) for t in targets)
        found[module] = (top, inner)
    return found


def _type_checking_only(tree: ast.Module, node: ast.AST) -> bool:
    """Whether `node` sits under `if TYPE_CHECKING:` (no import at run time)."""
    return any(isinstance(branch, ast.If) and isinstance(branch.test, ast.Name)
               and branch.test.id == "TYPE_CHECKING"
               and any(n is node for n in ast.walk(branch)) for branch in tree.body)


IMPORTS = _imports()


def test_smalti_modules_are_imported_at_the_top():
    inner = [f"{MODULES[m].relative_to(SMALTI.parent)}:{line} imports {target}"
             for m, (_, imports) in IMPORTS.items() for line, target in imports]
    assert not inner, "imports inside functions:\n" + "\n".join(inner)


def _cycle() -> list[str] | None:
    """One import circle among smalti modules (top-level imports), or None."""
    graph = {m: {t for t in top if t in MODULES and t != m} for m, (top, _) in IMPORTS.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        stack.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                return [*stack[stack.index(target):], target]
            if target not in state and (found := visit(target)) is not None:
                return found
        stack.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)) is not None:
            return found
    return None


def test_no_import_circles():
    cycle = _cycle()
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_each_room_imports_only_the_rooms_it_may(package):
    broken = []
    for module, (top, inner) in IMPORTS.items():
        if module.split(".")[1:2] != [package]:
            continue
        for target in top | {t for _, t in inner}:
            room = target.split(".")[1] if target.count(".") else None
            if room is None or room == package or room == "__init__":
                continue
            if room not in ALLOWED[package] and not (package == "tiling" and room == "dialect"
                                                     and module.endswith("pass_")):
                broken.append(f"{module} imports {target}")
    assert not broken, "\n".join(broken)
