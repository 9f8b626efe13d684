"""Instruction semantics; importing this package registers every decoder."""

from smalti.sim.ops import (  # noqa: F401
    compare,
    control,
    convert,
    data,
    floating,
    half,
    integer,
    logic,
    memory,
)
