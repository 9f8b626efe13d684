"""A functional PTX simulator: runs a kernel's PTX on the CPU, vectorised over all threads."""

from smalti.sim.devices import Multicast, PeerTable, run_ptx_devices
from smalti.sim.errors import NondeterministicStoreWarning, SimError, SimWarning
from smalti.sim.launch import run_module, run_ptx
from smalti.sim.param_struct import ParamStruct
from smalti.sim.tensormap import TensorMap
from smalti.sim.tensormap_encode import TensorMapEncodeTiled

__all__ = ["Multicast", "NondeterministicStoreWarning", "ParamStruct", "PeerTable", "SimError",
           "SimWarning", "TensorMap", "TensorMapEncodeTiled", "run_module", "run_ptx",
           "run_ptx_devices"]
