"""A collective schedule as flat fields (ints, strings, int tuples): what a kernel records in
its `smalti.schedule` attribute, and how the recorded choice is evaluated again."""

from __future__ import annotations

from collections.abc import Mapping

from smalti.schedule.collective import CollectiveSchedule, plan_collective_matmul
from smalti.schedule.hardware import H100_SXM, Hardware
from smalti.schedule.problem import OFFSETS, CollectiveMatmulProblem

Field = int | str | tuple[int, ...]

_PROBLEM_INTS = ("m", "n", "k", "devices", "ctas")
_REQUIRED = ("kind", "m", "n", "k", "devices", "dtype", "chunk_rows")
_KNOWN = (*_REQUIRED, "ctas", "order", "source_offsets")


def schedule_fields(schedule: CollectiveSchedule) -> dict[str, Field]:
    """The problem and the choice of `schedule` as flat fields."""
    p, choice = schedule.problem, schedule.choice
    fields: dict[str, Field] = {"kind": p.kind, "m": p.m, "n": p.n, "k": p.k,
                                "devices": p.devices, "dtype": p.dtype, "ctas": p.ctas,
                                "chunk_rows": choice.chunk_rows, "order": choice.order}
    if choice.source_offsets is not None:
        fields["source_offsets"] = choice.source_offsets
    return fields


def problem_from_fields(fields: Mapping[str, Field]) -> CollectiveMatmulProblem:
    """The recorded problem; ValueError naming a missing, unknown or mistyped field."""
    unknown = sorted(set(fields) - set(_KNOWN))
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)} (known: {', '.join(_KNOWN)})")
    missing = [name for name in _REQUIRED if name not in fields]
    if missing:
        raise ValueError(f"missing field(s) {', '.join(missing)}")
    for name in (*_PROBLEM_INTS, "chunk_rows"):
        if name in fields and not isinstance(fields[name], int):
            raise ValueError(f"field '{name}' must be an integer, got {fields[name]!r}")
    for name in ("kind", "dtype", "order"):
        if name in fields and not isinstance(fields[name], str):
            raise ValueError(f"field '{name}' must be a string, got {fields[name]!r}")
    if "source_offsets" in fields and not isinstance(fields["source_offsets"], tuple):
        raise ValueError(f"field 'source_offsets' must be an array of integers, got "
                         f"{fields['source_offsets']!r}")
    return CollectiveMatmulProblem(
        kind=str(fields["kind"]), m=int(fields["m"]), n=int(fields["n"]), k=int(fields["k"]),
        devices=int(fields["devices"]), dtype=str(fields["dtype"]),
        ctas=int(fields.get("ctas", 1)))


def schedule_from_fields(fields: Mapping[str, Field], hardware: Hardware = H100_SXM
                         ) -> CollectiveSchedule:
    """The recorded choice evaluated again (never replaced); ValueError when malformed."""
    problem = problem_from_fields(fields)
    offsets = fields.get("source_offsets")
    order = fields.get("order")
    if offsets is None and (order is None or order == OFFSETS):
        raise ValueError("needs 'source_offsets' or a named 'order'")
    return plan_collective_matmul(
        problem, hardware, chunk_rows=int(fields["chunk_rows"]),
        source_offsets=tuple(offsets) if isinstance(offsets, tuple) else None,
        order=None if order in (None, OFFSETS) else str(order))
