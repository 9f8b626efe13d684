"""The compile cache: content keys, disk round trips, corrupted entries rebuilt, and several
processes compiling one kernel at once."""

from __future__ import annotations

import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import smalti.dsl as sd
from smalti.runtime import cache as kernel_cache
from smalti.runtime.cache import KernelCache, cache_key, compile_kernel, decode_entry, module_text
from tests.dsl_helpers import isolated_cache  # noqa: F401

SPEC = jax.ShapeDtypeStruct((128, 128), jnp.float32)


def make_kernel() -> sd.Kernel:
    @sd.kernel(out_shape=SPEC)
    def add_one(x_ref, out_ref):
        out_ref[...] = x_ref[...] + 1.0

    return add_one


def traced_module():
    return make_kernel().trace(SPEC).module


def test_disk_entry_round_trips_through_a_fresh_cache(tmp_path):
    first = compile_kernel(traced_module(), cache=KernelCache(tmp_path))
    entries = list(tmp_path.glob("*.json"))
    assert [e.name for e in entries] == [f"{first.key}.json"]
    again = KernelCache(tmp_path).get(first.key)
    assert again == first
    assert again.signature.args[0].shape == (128, 128)
    if kernel_cache.ptxas_available():
        assert again.cubin is not None and again.cubin[:4] == b"\x7fELF"


def test_key_keeps_locations_text_and_arch():
    """The PTX carries the kernel's line info (.loc), so its key does too."""
    text = module_text(traced_module())
    assert "loc(" in text
    assert module_text(traced_module()) == text
    assert cache_key(text, "sm_90a") != cache_key(text, "sm_100a")
    assert cache_key(text, "sm_90a") != cache_key(text.replace("1.000000e+00", "2.0"), "sm_90a")


def test_memory_level_hits_without_touching_the_disk(tmp_path):
    cache = KernelCache(tmp_path)
    first = compile_kernel(traced_module(), cache=cache)
    (tmp_path / f"{first.key}.json").unlink()
    assert compile_kernel(traced_module(), cache=cache) is first
    assert not list(tmp_path.glob("*.json"))


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "other-key"])
def test_corrupted_entry_is_detected_and_rebuilt(tmp_path, damage, caplog):
    first = compile_kernel(traced_module(), cache=KernelCache(tmp_path))
    path = tmp_path / f"{first.key}.json"
    raw = path.read_bytes()
    match damage:
        case "truncate":
            path.write_bytes(raw[:len(raw) // 2])
        case "flip":  # one character of the PTX changes; the checksum no longer matches
            entry = json.loads(raw)
            entry["payload"] = entry["payload"].replace("ld.global", "ld.glabol", 1)
            path.write_text(json.dumps(entry))
        case "garbage":
            path.write_bytes(b"\x00\xff not json")
        case "other-key":
            other = json.loads(raw)
            payload = json.loads(other["payload"])
            path.write_bytes(raw.replace(payload["key"].encode(), b"0" * 64))
    with pytest.raises(ValueError):
        decode_entry(path.read_bytes(), first.key)
    fresh = KernelCache(tmp_path)
    assert fresh.get(first.key) is None
    assert "corrupted cache entry" in caplog.text
    rebuilt = compile_kernel(traced_module(), cache=fresh)
    assert rebuilt == first
    assert decode_entry(path.read_bytes(), first.key) == first


def _compile_in_child(directory: str) -> tuple[str, str]:
    import os

    os.environ["SMALTI_CACHE_DIR"] = directory
    compiled = compile_kernel(traced_module())
    return compiled.key, compiled.ptx


def test_processes_compiling_one_kernel_at_once_agree(tmp_path):
    directory = tmp_path / "shared"
    # An executor, not a Pool: a worker that dies fails the test (BrokenProcessPool) where a
    # Pool would wait for its lost task forever.
    with ProcessPoolExecutor(8, mp_context=multiprocessing.get_context("spawn")) as pool:
        results = list(pool.map(_compile_in_child, [str(directory)] * 8, timeout=600))
    assert len(set(results)) == 1
    key, ptx = results[0]
    files = sorted(p.name for p in Path(directory).iterdir())
    assert files == [f"{key}.json"]  # no temporary files left behind
    assert decode_entry((directory / files[0]).read_bytes(), key).ptx == ptx


def test_default_directory_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SMALTI_CACHE_DIR", str(tmp_path / "here"))
    assert kernel_cache.cache_directory() == tmp_path / "here"
    monkeypatch.delenv("SMALTI_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert kernel_cache.cache_directory() == tmp_path / "xdg" / "smalti"
    monkeypatch.setenv("SMALTI_CACHE_DIR", str(tmp_path / "calls"))
    make_kernel()(jnp.zeros((128, 128), jnp.float32))
    assert len(list((tmp_path / "calls").glob("*.json"))) == 1


def test_debug_print_records_survive_the_disk_cache():
    """A printing kernel's signature round-trips, layouts included (the hidden buffer)."""
    from smalti.runtime import compile_mlir
    from smalti.runtime.cache import CompiledKernel, decode_entry, encode_entry

    text = """
func.func @k(%a: memref<4x128xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128xf32>, index, index) -> vector<4x128xf32>
  "smalti.debug_print"(%v) {format = "v = {}"} : (vector<4x128xf32>) -> ()
  return
}
"""
    signature = compile_mlir(text, "k.mlir").signature()
    assert signature.debug_prints
    entry = CompiledKernel("key", "ptx", signature, None, "sm_90a")
    assert decode_entry(encode_entry(entry), "key").signature == signature


@pytest.mark.parametrize(("script", "error"), [
    ("#!/bin/sh\nkill -SEGV $$\n", "PtxasCrash"),
    ("#!/bin/sh\necho \"ptxas $2, line 3; error   : planted failure\" >&2\nexit 255\n",
     "PtxasError"),
])
def test_ptxas_failures_leave_no_cache_entry(tmp_path, monkeypatch, script, error):
    """A crashing or failing ptxas is an error naming the kernel; nothing is cached."""
    from smalti.ptx import toolchain

    fake = tmp_path / "ptxas"
    fake.write_text(script)
    fake.chmod(0o755)
    monkeypatch.setenv("SMALTI_PTXAS", str(fake))
    cache = KernelCache(tmp_path / "cache")
    with pytest.raises(toolchain.PtxasError) as failure:
        compile_kernel(traced_module(), cache=cache)
    assert type(failure.value).__name__ == error
    assert "add_one" in str(failure.value)
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_key_keeps_locations_of_every_kernel():
    """The PTX carries each op's file:line (.loc; and debug_print's records), so the same
    kernel from another file is another entry (a hit would report the first file's lines)."""
    from smalti.dialect import make_context, parse_module

    text = """func.func @k(%a: memref<128xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  "smalti.debug_print"(%c0) {format = "i = {}"} : (index) -> ()
  return
}
"""
    with make_context() as context:
        keys = {module_text(parse_module(text, name, context)) for name in ("a.mlir", "b.mlir")}
        quiet = {module_text(parse_module(text.replace('  "smalti.debug_print"(%c0) {format = '
                                                       '"i = {}"} : (index) -> ()\n', ""),
                                          name, context)) for name in ("a.mlir", "b.mlir")}
    assert len(keys) == 2 and all("a.mlir" in k or "b.mlir" in k for k in keys)
    assert len(quiet) == 2
