"""Fixtures the launcher tests share: the launcher library and the recording stand-in for
libcuda (each built once per session), and examples/collectives.py's kernels compiled for a
device count."""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterator
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from smalti.runtime import launcher
from smalti.runtime.cache import CompiledKernel
from tests.dsl_helpers import load_example
from tests.launcher import fake_driver

# kernel name -> its per-device input spec for a device count (examples/collectives.py)
COLLECTIVE_EXAMPLES = {
    "all_gather": lambda devices: jax.ShapeDtypeStruct((16, 128), jnp.float32),
    "all_reduce": lambda devices: jax.ShapeDtypeStruct((devices * 8, 128), jnp.float32),
}


@pytest.fixture(scope="session")
def library(tmp_path_factory) -> ctypes.CDLL:
    """smalti's launcher library, built once."""
    return launcher.load(tmp_path_factory.mktemp("launcher"))


@pytest.fixture(scope="session")
def libcuda(tmp_path_factory) -> Path:
    """The recording stand-in for libcuda.so.1, built once."""
    return fake_driver.build(tmp_path_factory.mktemp("libcuda"))


@pytest.fixture(scope="module")
def collective_example(tmp_path_factory) -> Iterator[Callable[[str, int], CompiledKernel]]:
    """(kernel, devices) -> that examples/collectives.py kernel compiled for that many devices
    (with its cubin), into a private cache."""
    kernels: dict[tuple[str, int], CompiledKernel] = {}
    collectives = load_example("collectives")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SMALTI_CACHE_DIR", str(tmp_path_factory.mktemp("smalti-cache")))

        def get(name: str, devices: int) -> CompiledKernel:
            if (name, devices) not in kernels:
                _, kernels[name, devices] = getattr(collectives, name).compile(
                    COLLECTIVE_EXAMPLES[name](devices), devices=devices)
                assert kernels[name, devices].cubin is not None
            return kernels[name, devices]

        yield get
