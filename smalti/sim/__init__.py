"""A functional PTX simulator: runs a kernel's PTX on the CPU, vectorised over all threads."""

from smalti.sim.errors import SimError
from smalti.sim.launch import run_module, run_ptx
from smalti.sim.tensormap import TensorMap

__all__ = ["SimError", "TensorMap", "run_module", "run_ptx"]
