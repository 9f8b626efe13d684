"""Instructions and directives that only give the hardware or ptxas a hint: no effect on
what a kernel computes, so the simulator checks their operands and does nothing.

- `prefetch{.space}.level [a]`, `prefetchu.L1 [a]` (PTX ISA, "prefetch, prefetchu"): bring a
  line into a cache; `prefetch{.const,.param,...}.tensormap [a]` does so for a tensor map.
- `.pragma "..."` in a body (PTX ISA, "Descriptions of .pragma Strings": "nounroll",
  "used_bytes_mask"): advice to the optimizer.
"""

from __future__ import annotations

from smalti.ptx.module import Instruction
from smalti.sim.errors import Unsupported
from smalti.sim.operands import DecodeEnv, Modifiers, address_parts, expect
from smalti.sim.registry import Compute, Step, semantics

PREFETCH_SPACES = ("global", "local", "const", "param", "shared")
LEVELS = ("L1", "L2", "tensormap", "L2::evict_last", "L2::evict_normal")


def _nothing(m, lanes) -> None:
    return None


@semantics("prefetch")
@semantics("prefetchu")
def decode_prefetch(inst: Instruction, env: DecodeEnv) -> Step:
    mods = Modifiers(inst)
    mods.one_of(PREFETCH_SPACES)
    if mods.one_of(LEVELS) is None:
        raise Unsupported("prefetch needs a level (.L1, .L2, .tensormap)")
    mods.done()
    (address,) = expect(inst.operands, 1)
    address_parts(address)
    return Compute(_nothing)


@semantics(".pragma")
def decode_pragma(inst: Instruction, env: DecodeEnv) -> Step:
    return Compute(_nothing)
