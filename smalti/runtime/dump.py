"""SMALTI_DUMP_TO=DIR: the IR after every pass, the PTX, the ptxas log, the cubin and the
SASS, per kernel (and, for kernels compiled through the cache, per kernel and signature)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from jaxlib.mlir import ir

DUMP_VARIABLE = "SMALTI_DUMP_TO"


def dumping_enabled() -> bool:
    return bool(os.environ.get(DUMP_VARIABLE))


@dataclass(frozen=True)
class Dumper:
    """Writes the artefacts of compiling one module as DIR/STEM.*; STEM names its kernel."""

    directory: Path
    stem: str

    @staticmethod
    def from_environment(stem: str) -> Dumper | None:
        directory = os.environ.get(DUMP_VARIABLE)
        if not directory:
            return None
        Path(directory).mkdir(parents=True, exist_ok=True)
        return Dumper(Path(directory), re.sub(r"[^\w.-]", "_", stem))

    def write(self, suffix: str, content: str | bytes) -> Path:
        path = self.directory / f"{self.stem}.{suffix}"
        temporary = path.with_name(path.name + ".tmp")
        if isinstance(content, bytes):
            temporary.write_bytes(content)
        else:
            temporary.write_text(content)
        temporary.replace(path)
        return path

    def after_pass(self, index: int, element: str, module: ir.Operation) -> None:
        name = re.sub(r"[^\w-]", "_", element)[:60]
        self.write(f"{index:02d}.{name}.mlir", str(module))
