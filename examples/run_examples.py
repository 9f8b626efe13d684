"""Compile the `.mlir` examples to PTX and cubins, then check their numbers on the CPU.

    python examples/run_examples.py

For each example: ptxas's registers and spills for sm_90a, SASS highlights, and the PTX run
in smalti's simulator against numpy (exact for the pointwise kernels; for the bf16 matmuls,
within one bf16 ulp of numpy's f32 product plus f32 summation-order slack).
"""

from __future__ import annotations

import time
from pathlib import Path

import ml_dtypes
import numpy as np

from smalti.ptx.toolchain import disassemble, sass_opcode_counts
from smalti.runtime import compile_mlir, run_simulated

HERE = Path(__file__).resolve().parent
BF16 = ml_dtypes.bfloat16


def pointwise_inputs(shape, dtype, rng):
    a, b, c = (rng.standard_normal(shape).astype(dtype) for _ in range(3))
    return (a, b, c, np.zeros(shape, dtype)), lambda out: bool(
        np.array_equal(out[-1].astype(np.float32), (a * b + c).astype(np.float32)))


def matmul_inputs(shape, dtype, rng):
    a = rng.standard_normal(shape).astype(BF16)
    b = rng.standard_normal(shape).astype(BF16)
    wide_a, wide_b = a.astype(np.float64), b.astype(np.float64)
    expected = (wide_a @ wide_b).astype(np.float32)

    def check(out) -> bool:
        got = out[-1].astype(np.float32)
        ulp = np.abs(expected.astype(BF16).astype(np.float32)) * 2.0**-7
        slack = 2.0**-20 * (np.abs(wide_a) @ np.abs(wide_b))
        return bool((np.abs(got - expected) <= ulp + slack).all())

    return (a, b, np.zeros(shape, BF16)), check


EXAMPLES = {
    "pointwise_f32": (np.float32, pointwise_inputs),
    "pointwise_bf16": (BF16, pointwise_inputs),
    "matmul_128x128x64": (BF16, matmul_inputs),
    "matmul_128x256x64_ws": (BF16, matmul_inputs),
    "matmul_256x128x64_multicast": (BF16, matmul_inputs),
}


def main() -> None:
    failed = False
    for name, (dtype, make_inputs) in EXAMPLES.items():
        compiled = compile_mlir((HERE / f"{name}.mlir").read_text(), f"{name}.mlir")
        assembled = compiled.assemble()
        report = assembled.reports[name]
        counts = sass_opcode_counts(disassemble(assembled.cubin))
        highlights = ", ".join(f"{counts[op]} {op}" for op in ("HGMMA", "UTMALDG", "UTMASTG",
                                                                "LDG", "STG") if counts[op])
        shape = compiled.signature().args[0].shape
        args, check = make_inputs(shape, dtype, np.random.default_rng(0))
        start = time.perf_counter()
        ok = check(run_simulated(compiled, *args))
        seconds = time.perf_counter() - start
        print(f"{name}: {report.registers} registers, {report.spill_stores} bytes spilled, "
              f"{highlights}; simulator {seconds:.1f} s, "
              f"{'matches numpy' if ok else 'DIFFERS FROM numpy'}")
        failed |= not ok
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
