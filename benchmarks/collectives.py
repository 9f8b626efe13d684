"""The collective examples (examples/collectives.py, examples/collective_matmul.py): kernel
quality from ptxas, and the time one simulated launch over N devices takes on this CPU.

    python benchmarks/collectives.py [--repeats 3]

Per example and device count: ptxas registers, spills and stack (sm_90a, the shapes
examples/collectives.py runs: all-gather of 16x128 f32 shards, reduce-scatter of
(8N)x128 f32, all-reduce of 64x128 f32 and bf16; the collective matmuls as
examples/collective_matmul.py runs them: 128 rows, K 256 and N 256 per device, two CTAs), the
SASS instructions, and the median
wall time of `run_simulated_devices` over N devices. No peer is measured: neither Mosaic
GPU's nor Triton-distributed's collective kernels compile or run on a CPU-only machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples' package
import examples.collective_matmul as matmuls
import examples.collectives as examples
from smalti.ptx.toolchain import disassemble, sass_opcode_counts
from smalti.runtime.compiler import CompiledModule
from smalti.runtime.simulate import run_simulated_devices

S = jax.ShapeDtypeStruct


def cases(devices: int) -> list[tuple[str, object, tuple[S, ...]]]:
    bf16, e4m3, f32 = jnp.bfloat16, jnp.float8_e4m3fn, jnp.float32
    return [("all_gather f32", examples.all_gather, (S((16, 128), f32),)),
            ("reduce_scatter f32", examples.reduce_scatter, (S((devices * 8, 128), f32),)),
            ("all_reduce f32", examples.all_reduce, (S((64, 128), f32),)),
            ("all_reduce bf16", examples.all_reduce, (S((64, 128), bf16),)),
            ("all_gather_matmul bf16", matmuls.all_gather_matmul,
             (S((128, 256), bf16), S((256, 256), bf16))),
            ("matmul_reduce_scatter bf16", matmuls.matmul_reduce_scatter,
             (S((devices * 128, 256), bf16), S((256, 256), bf16))),
            ("fp8_all_gather_matmul e4m3", matmuls.fp8_all_gather_matmul,
             (S((128, 256), e4m3), S((128, 2), f32), S((256, 256), e4m3), S((2, 2), f32)))]


def measure(kernel: object, specs: tuple[S, ...], devices: int, repeats: int
            ) -> dict[str, object]:
    _, compiled = kernel.compile(*specs, devices=devices)
    module = CompiledModule(compiled.ptx, {compiled.name: compiled.signature})
    result = module.assemble()
    report = result.reports[compiled.name]
    sass = sum(sass_opcode_counts(disassemble(result.cubin)).values())
    rng = np.random.default_rng(0)
    traced = kernel.trace(*specs, devices=devices)
    args = [tuple(np.asarray(rng.standard_normal(s.shape), s.dtype)
                  for s in (*specs, *traced.outputs)) for _ in range(devices)]
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run_simulated_devices(module, args)
        times.append(time.perf_counter() - start)
    return {"report": report, "sass": sass, "seconds": statistics.median(times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()
    print("| kernel | devices | registers | spills (st/ld bytes) | stack | SASS | "
          "simulated launch (s) |")
    print("|---|---|---|---|---|---|---|")
    for devices in (2, 4, 8):
        for name, kernel, specs in cases(devices):
            row = measure(kernel, specs, devices, options.repeats)
            report = row["report"]
            print(f"| {name} | {devices} | {report.registers} | {report.spill_stores}/"
                  f"{report.spill_loads} | {report.stack_frame} | {row['sass']} | "
                  f"{row['seconds']:.2f} |")


if __name__ == "__main__":
    main()
