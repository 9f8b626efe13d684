"""The README's path for the examples: smalti-translate to PTX, smalti-sim on .npy inputs,
and the numbers equal numpy's exactly, for f32 and bf16."""

import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@pytest.mark.parametrize(("name", "dtype", "grid"), [("pointwise_f32", np.float32, "2"),
                                                     ("pointwise_bf16", ml_dtypes.bfloat16,
                                                      "2,2")])
def test_translate_then_simulate(tmp_path, name, dtype, grid):
    ptx = tmp_path / "k.ptx"
    subprocess.run([BIN / "smalti-translate", ROOT / "examples" / f"{name}.mlir", "-o", ptx],
                   check=True)
    shape = (128, 256) if dtype == np.float32 else (256, 256)
    rng = np.random.default_rng(2)
    inputs = {n: rng.standard_normal(shape).astype(dtype) for n in "abc"}
    inputs["out"] = np.zeros(shape, dtype)
    for n, array in inputs.items():
        np.save(tmp_path / f"{n}.npy", array)
    dtype_flags = ["--dtype", "bfloat16"] if dtype != np.float32 else []
    subprocess.run([BIN / "smalti-sim", ptx, "--kernel", name, "--grid", grid, "--block", "128",
                    *(tmp_path / f"{n}.npy" for n in ("a", "b", "c", "out")), *dtype_flags,
                    "--out-dir", tmp_path / "res"], check=True)
    out = np.load(tmp_path / "res" / "out.npy").view(dtype)
    a, b, c = inputs["a"], inputs["b"], inputs["c"]
    np.testing.assert_array_equal(out.astype(np.float32), (a * b + c).astype(np.float32))
