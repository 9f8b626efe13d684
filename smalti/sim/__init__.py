"""A functional PTX simulator: runs a kernel's PTX on the CPU, vectorised over all threads."""

from smalti.sim.errors import SimError
from smalti.sim.launch import run_module, run_ptx

__all__ = ["SimError", "run_module", "run_ptx"]
