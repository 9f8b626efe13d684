"""Compiling modules and running their kernels (on the CPU through the simulator for now)."""

from smalti.runtime.cache import CompiledKernel, compile_kernel
from smalti.runtime.compiler import CompiledModule, compile_mlir
from smalti.runtime.simulate import NUMPY_DTYPES, check_arguments, run_simulated

__all__ = ["NUMPY_DTYPES", "CompiledKernel", "CompiledModule", "check_arguments",
           "compile_kernel", "compile_mlir", "run_simulated"]
