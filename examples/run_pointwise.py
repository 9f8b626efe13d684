"""Compile the pointwise examples to PTX and cubins, then check their numbers on the CPU.

    python examples/run_pointwise.py
"""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np

from smalti.ptx.toolchain import compile_ptx
from smalti.runtime import compile_mlir, run_simulated

HERE = Path(__file__).resolve().parent


def main() -> None:
    for name, dtype in (("pointwise_f32", np.float32), ("pointwise_bf16", ml_dtypes.bfloat16)):
        compiled = compile_mlir((HERE / f"{name}.mlir").read_text(), f"{name}.mlir")
        report = compile_ptx(compiled.ptx, arch="sm_90a").reports[name]
        shape = compiled.signature().args[0].shape
        rng = np.random.default_rng(0)
        a, b, c = (rng.standard_normal(shape).astype(dtype) for _ in range(3))
        out = run_simulated(compiled, a, b, c, np.zeros(shape, dtype))[-1]
        exact = np.array_equal(out.astype(np.float32), (a * b + c).astype(np.float32))
        print(f"{name}: {report.registers} registers, {report.spill_stores} bytes spilled, "
              f"simulator {'matches' if exact else 'DIFFERS FROM'} numpy exactly")
        if not exact:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
