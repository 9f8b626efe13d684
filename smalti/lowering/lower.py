"""Lower laid-out kernels to a PTX module, one op at a time through the rule registry; and
the launch ABI of each kernel, made once, next to the PTX it describes."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from jaxlib.mlir import ir

from smalti.dialect.diagnostics import error_at
from smalti.dialect.kernel import KernelSignature, kernel_signature
from smalti.dialect.launch import kernel_functions
from smalti.lowering import (  # noqa: F401  (defining the rules registers them)
    barriers,
    bitcast,
    collective,
    compare,
    constants,
    control,
    custom_primitive,
    debug,
    dynamic,
    elementwise,
    inline_ptx,
    integer,
    launch_control,
    layout,
    memory,
    reductions,
    role_tiles,
    scalar,
    shape,
    slices,
    smem,
    tcgen05,
    tma,
    tmem,
    tmem_shared,
    warpgroup,
    wgmma,
)
from smalti.lowering.context import LoweringContext
from smalti.lowering.ptx_versions import required_version
from smalti.lowering.values import ELEMENT_TYPES, BufferValue, ScalarValue
from smalti.ptx import Address, KernelBuilder, Module
from smalti.ptx.module import Kernel, SharedDecl

PTX_VERSION = "8.0"
TARGET = "sm_90a"


@dataclass(frozen=True)
class LoweredModule:
    """The PTX of a module's kernels and, per kernel, its launch ABI: the signature whose
    parameters (arguments, tensor maps, debug buffer) the PTX takes, in that order."""

    ptx: Module
    signatures: dict[str, KernelSignature]

    def only(self, kernel: str) -> LoweredModule:
        """The same with only `kernel` (KeyError if there is none)."""
        return LoweredModule(dataclasses.replace(self.ptx, kernels=(self.ptx.kernel(kernel),)),
                             {kernel: self.signatures[kernel]})


def lower_module(module: ir.Operation) -> LoweredModule:
    """PTX and launch ABI for every kernel of `module`; a located DiagnosticError for what
    cannot lower."""
    lowered = [lower_kernel(func) for func in kernel_functions(module)]
    if not lowered:
        raise error_at(module.location, "no kernel to lower: mark a func.func with "
                                        "'smalti.kernel'")
    kernels, module_scope = _hoist_module_scope(tuple(kernel for kernel, _ in lowered))
    multimem = any(s.collective is not None and s.collective.multimem for _, s in lowered)
    version = required_version(kernels, collective.MULTIMEM_PTX_VERSION if multimem
                               else PTX_VERSION)
    ptx = Module(version=version, target=TARGET, kernels=kernels, globals=module_scope)
    return LoweredModule(ptx, {signature.name: signature for _, signature in lowered})


def _at_module_scope(decl: SharedDecl) -> bool:
    """`.extern .shared` (dynamic) buffers and `.global`/`.const` variables (constant
    tables) are declared at module scope; static `.shared` buffers in their kernel."""
    return decl.size is None or decl.state in ("global", "const")


def _hoist_module_scope(kernels: tuple[Kernel, ...]
                        ) -> tuple[tuple[Kernel, ...], tuple[SharedDecl, ...]]:
    """The kernels without their module-scope declarations, and those, once per name."""
    module_scope: dict[str, SharedDecl] = {}
    hoisted = []
    for kernel in kernels:
        for decl in kernel.shared:
            if _at_module_scope(decl):
                module_scope.setdefault(decl.name, decl)
        hoisted.append(dataclasses.replace(
            kernel, shared=tuple(d for d in kernel.shared if not _at_module_scope(d))))
    return tuple(hoisted), tuple(module_scope.values())


def lower_kernel(func: ir.Operation) -> tuple[Kernel, KernelSignature]:
    """The kernel's PTX and its launch signature (with the tensor maps it takes)."""
    signature = kernel_signature(func)
    block = signature.block
    builder = KernelBuilder(signature.name, maxntid=block,
                            directives=(*warpgroup.kernel_directives(func),
                                        *cluster_directives(signature.cluster)))
    ctx = LoweringContext(builder, signature)
    entry = func.regions[0].blocks[0]
    params = [builder.param(arg.name, "u64" if arg.shape is not None else
                            _scalar_param_type(arg.dtype)) for arg in signature.args]
    for value, arg, param in zip(entry.arguments, signature.args, params, strict=True):
        element = ELEMENT_TYPES.get(arg.dtype)
        if element is None:
            raise error_at(func, f"arguments of element type {arg.dtype} are not supported yet")
        if arg.shape is not None:
            generic = builder.compute("ld.param.u64", "u64", Address(param))
            address = builder.compute("cvta.to.global.u64", "u64", generic)
            strides = tuple(ir.MemRefType(value.type).get_strides_and_offset()[0])
            ctx.set(value, BufferValue(address, arg.shape, strides, element))
        elif element.bits == 1:  # a .u8 parameter, tested into a predicate
            byte = builder.compute("ld.param.u8", "u16", Address(param))
            ctx.set(value, ScalarValue(builder.compute("setp.ne.u16", "pred", byte, 0), element))
        else:
            reg = builder.compute(f"ld.param.{element.scalar}", element.scalar, Address(param))
            ctx.set(value, ScalarValue(reg, element, 1))
    tma.declare_tensor_maps(ctx, func)
    debug.declare_debug_buffer(ctx, func)
    collective.declare_collective_params(ctx)
    ctx.lower_block(entry)
    return builder.build(), dataclasses.replace(signature, tensor_maps=ctx.tensor_map_records)


def cluster_directives(cluster: tuple[int, int, int]) -> tuple[str, ...]:
    """`.reqnctapercluster X, Y, Z` for a kernel of clusters larger than one CTA: the launch
    then takes that shape unless it names one, which must be the same (PTX ISA 11.7.1);
    `.explicitcluster` would add nothing to it."""
    if cluster == (1, 1, 1):
        return ()
    return (".reqnctapercluster " + ", ".join(map(str, cluster)),)


def _scalar_param_type(dtype: str) -> str:
    return {"i1": "u8", "bf16": "b16", "f16": "b16"}.get(dtype, ELEMENT_TYPES[dtype].scalar)
