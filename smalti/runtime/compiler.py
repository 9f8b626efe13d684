"""From MLIR to PTX and cubins: parse, run the default pipeline, lower, print, assemble.

The arch (`sm_90a`, `sm_100a`: `smalti.dialect.kernel.ARCHES`) is checked first (ops it lacks
are located errors), then names the PTX `.target` (with the PTX ISA version it needs), the
ptxas `-arch`, and every kernel signature."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from jaxlib.mlir import ir

from smalti.dialect.context import make_context, parse_module
from smalti.dialect.kernel import DEFAULT_ARCH, KernelSignature, check_arch, check_ops_for_arch
from smalti.dialect.launch import kernel_functions, kernel_name
from smalti.lowering import lower_module
from smalti.passes import DEFAULT_PIPELINE, run_pipeline
from smalti.ptx import print_module
from smalti.ptx.toolchain import CompileResult, compile_ptx, disassemble
from smalti.runtime.dump import Dumper

__all__ = ["DEFAULT_ARCH", "CompiledModule", "compile_mlir", "compile_module"]


@dataclass(frozen=True)
class CompiledModule:
    """The PTX of a module's kernels and their launch signatures."""

    ptx: str
    kernels: dict[str, KernelSignature]
    arch: str = DEFAULT_ARCH
    dumper: Dumper | None = field(default=None, compare=False)

    def signature(self, kernel: str | None = None) -> KernelSignature:
        if kernel is None:
            if len(self.kernels) != 1:
                raise ValueError(f"name a kernel: the module has {sorted(self.kernels)}")
            return next(iter(self.kernels.values()))
        if kernel not in self.kernels:
            raise ValueError(f"no kernel @{kernel}; the module has {sorted(self.kernels)}")
        return self.kernels[kernel]

    def assemble(self) -> CompileResult:
        """The cubin ptxas makes (PtxasError names the failing PTX line)."""
        hint = next(iter(self.kernels)) if len(self.kernels) == 1 else None
        result = compile_ptx(self.ptx, arch=self.arch, kernel_hint=hint)
        if self.dumper is not None:
            self.dumper.write("ptxas.log", result.log)
            self.dumper.write("cubin", result.cubin)
            self.dumper.write("sass", disassemble(result.cubin))
        return result


def compile_module(module: ir.Operation, *, arch: str = DEFAULT_ARCH,
                   pipeline: str = DEFAULT_PIPELINE, kernel: str | None = None,
                   dump_name: str | None = None) -> CompiledModule:
    """Run `pipeline` on `module` (in place) and lower it for `arch`; DiagnosticError on bad
    input or an op `arch` lacks, ValueError on an unknown arch. `kernel` keeps only that
    kernel's PTX (KeyError if there is none). With SMALTI_DUMP_TO, the artefacts are named
    `dump_name` (default: the kernel's name)."""
    target = check_arch(arch)
    with module.context:
        check_ops_for_arch(module, arch)
    functions = kernel_functions(module)
    dumper = Dumper.from_environment(
        dump_name or kernel or (kernel_name(functions[0]) if functions else "module"))
    with module.context:
        run_pipeline(module, pipeline, after_pass=dumper.after_pass if dumper else None)
        lowered = lower_module(module)
    if kernel is not None:
        lowered = lowered.only(kernel)
    version = max(lowered.ptx.version, target.ptx_version,
                  key=lambda v: tuple(int(p) for p in v.split(".")))
    text = print_module(dataclasses.replace(lowered.ptx, target=arch, version=version))
    if dumper is not None:
        dumper.write("ptx", text)
    signatures = {name: dataclasses.replace(signature, arch=arch)
                  for name, signature in lowered.signatures.items()}
    return CompiledModule(text, signatures, arch, dumper)


def compile_mlir(text: str, source_name: str = "<string>", *, arch: str = DEFAULT_ARCH,
                 pipeline: str = DEFAULT_PIPELINE) -> CompiledModule:
    """Compile `.mlir` text; DiagnosticError (located) or ir.MLIRError on bad input."""
    context = make_context()
    module = parse_module(text, source_name, context)
    return compile_module(module, arch=arch, pipeline=pipeline)
