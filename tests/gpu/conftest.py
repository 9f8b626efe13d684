"""GPU tests run only where JAX has a GPU; elsewhere they are skipped with the reason."""

from __future__ import annotations

import jax
import pytest


def gpu_devices() -> list:
    try:
        return jax.devices("gpu")
    except RuntimeError:
        return []


def pytest_collection_modifyitems(config, items):
    if gpu_devices():
        return
    skip = pytest.mark.skip(reason="no GPU: jax.devices('gpu') raises on this machine")
    for item in items:
        if "tests/gpu/" in item.nodeid:
            item.add_marker(skip)
