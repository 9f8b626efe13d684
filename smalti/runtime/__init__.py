"""Compiling modules and running their kernels: on the CPU through the simulator, on CUDA
through the launcher, both as JAX operations; exporting functions that call them."""

from smalti.ptx.toolchain import PtxasCrash, PtxasError  # what compiling may raise
from smalti.runtime.cache import CompiledKernel, compile_kernel
from smalti.runtime.compiler import CompiledModule, compile_mlir
from smalti.runtime.dtypes import NUMPY_DTYPES
from smalti.runtime.exports import deserialize, export
from smalti.runtime.jax_integration import register_targets
from smalti.runtime.simulate import check_arguments, run_simulated

__all__ = ["NUMPY_DTYPES", "CompiledKernel", "CompiledModule", "PtxasCrash", "PtxasError",
           "check_arguments", "compile_kernel", "compile_mlir", "deserialize", "export",
           "register_targets", "run_simulated"]
