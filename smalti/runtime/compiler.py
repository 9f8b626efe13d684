"""From `.mlir` text to PTX: parse, run the default pipeline, lower, print."""

from __future__ import annotations

from dataclasses import dataclass

from smalti.dialect.context import make_context, parse_module
from smalti.dialect.kernel import KernelSignature, kernel_functions, kernel_signature
from smalti.lowering import lower_module
from smalti.passes import DEFAULT_PIPELINE, run_pipeline
from smalti.ptx import print_module


@dataclass(frozen=True)
class CompiledModule:
    """The PTX of a module's kernels and their launch signatures."""

    ptx: str
    kernels: dict[str, KernelSignature]

    def signature(self, kernel: str | None = None) -> KernelSignature:
        if kernel is None:
            if len(self.kernels) != 1:
                raise ValueError(f"name a kernel: the module has {sorted(self.kernels)}")
            return next(iter(self.kernels.values()))
        if kernel not in self.kernels:
            raise ValueError(f"no kernel @{kernel}; the module has {sorted(self.kernels)}")
        return self.kernels[kernel]


def compile_mlir(text: str, source_name: str = "<string>",
                 pipeline: str = DEFAULT_PIPELINE) -> CompiledModule:
    """Compile `.mlir` text; DiagnosticError (located) or ir.MLIRError on bad input."""
    context = make_context()
    module = parse_module(text, source_name, context)
    with context:
        run_pipeline(module, pipeline)
        ptx = lower_module(module)
        signatures = {s.name: s for s in map(kernel_signature, kernel_functions(module))}
    return CompiledModule(print_module(ptx), signatures)
