"""The PTX ISA version a kernel's instructions need beyond the target's own: some opcode
qualifiers arrived after the `.target` that carries them (PTX ISA 12, "Release Notes";
ptxas: "Feature '.kind::mxf4nvf4' requires PTX ISA .version 8.7 or later")."""

from __future__ import annotations

from collections.abc import Iterable

from smalti.ptx.module import Instruction, Kernel

QUALIFIER_VERSIONS = {
    ".kind::mxf4nvf4": "8.7",  # tcgen05.mma, NVFP4 (UE4M3 scales per 16 elements)
    ".scale_vec::4X": "8.7",
}


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def newest(*versions: str) -> str:
    """The newest of PTX ISA versions ("8.0", "8.7", ...)."""
    return max(versions, key=_key)


def required_version(kernels: Iterable[Kernel], base: str) -> str:
    """`base`, or the newest version an instruction of `kernels` needs if that is newer."""
    needed = [version for kernel in kernels for statement in kernel.body
              if isinstance(statement, Instruction)
              for qualifier, version in QUALIFIER_VERSIONS.items()
              if qualifier in statement.opcode]
    return newest(base, *needed)
