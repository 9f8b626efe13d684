"""Shared by the DSL and JAX tests: an isolated compile cache, example loading, and the
skip for kernels whose ops other engineers have not given a lowering yet."""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load_example(name: str) -> ModuleType:
    """examples/NAME.py as a module."""
    spec = importlib.util.spec_from_file_location(f"smalti_example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def line_of(marker: str, fn) -> int:
    """The line number, in fn's file, of the source line of `fn` containing `marker`."""
    lines, first = inspect.getsourcelines(fn)
    for offset, text in enumerate(lines):
        if marker in text:
            return first + offset
    raise AssertionError(f"{marker!r} not in the source of {fn.__name__}")


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    """Every test compiles into its own cache directory."""
    monkeypatch.setenv("SMALTI_CACHE_DIR", str(tmp_path / "smalti-cache"))
