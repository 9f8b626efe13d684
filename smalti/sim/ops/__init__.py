"""Instruction semantics; importing this package registers every decoder."""

from smalti.sim.ops import (  # noqa: F401
    atomic,
    bits,
    carry,
    cluster,
    compare,
    control,
    convert,
    data,
    fence,
    floating,
    half,
    integer,
    logic,
    matrix,
    mbarrier,
    memory,
    setmaxnreg,
    tma,
    warp,
    wgmma,
)
