"""The `smalti.schedule` kernel attribute: the schedule a cost model chose (or a person wrote)
for a kernel, recorded so that tools can check it (`smalti-opt --smalti-explain-schedule`).

    func.func @ag(...) attributes {smalti.kernel, ..., smalti.schedule = {
        kind = "all_gather_matmul", m = 128 : i64, n = 128 : i64, k = 128 : i64,
        devices = 4 : i64, dtype = "bf16", ctas = 1 : i64, chunk_rows = 64 : i64,
        order = "ring_forward", source_offsets = array<i64: 0, 1, 2, 3>}}

The dialect only stores and reads the fields (ints, strings, int arrays); what they mean is
the cost model's business (smalti/schedule), which the dialect does not import.
"""

from __future__ import annotations

from collections.abc import Mapping

from jaxlib.mlir import ir

from smalti.dialect.diagnostics import error_at
from smalti.dialect.launch import kernel_name

SCHEDULE_ATTR = "smalti.schedule"

ScheduleField = int | str | tuple[int, ...]


def _field_attr(name: str, value: ScheduleField) -> ir.Attribute:
    """One field as an attribute: i64, string, or array<i64>."""
    if isinstance(value, bool):
        raise TypeError(f"schedule field '{name}' must be an int, str or tuple of ints, "
                        f"not bool")
    if isinstance(value, int):
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
    if isinstance(value, str):
        return ir.StringAttr.get(value)
    if isinstance(value, tuple) and all(isinstance(v, int) and not isinstance(v, bool)
                                        for v in value):
        return ir.DenseI64ArrayAttr.get(list(value))
    raise TypeError(f"schedule field '{name}' must be an int, str or tuple of ints, "
                    f"got {value!r}")


def _is_bool(attr: ir.IntegerAttr) -> bool:
    return isinstance(attr.type, ir.IntegerType) and ir.IntegerType(attr.type).width == 1


def set_kernel_schedule(func: ir.Operation | ir.OpView,
                        fields: Mapping[str, ScheduleField]) -> None:
    """Write `fields` as the kernel's `smalti.schedule` dictionary (in the func's context)."""
    op = func.operation
    with op.context:
        op.attributes[SCHEDULE_ATTR] = ir.DictAttr.get(
            {name: _field_attr(name, value) for name, value in sorted(fields.items())})


def kernel_schedule(func: ir.Operation | ir.OpView) -> dict[str, ScheduleField] | None:
    """The kernel's recorded schedule fields (None without one); a located error naming the
    kernel when the attribute is not a dictionary of ints, strings and int arrays."""
    op = func.operation
    if SCHEDULE_ATTR not in op.attributes:
        return None
    attr = op.attributes[SCHEDULE_ATTR]
    if not isinstance(attr, ir.DictAttr):
        raise error_at(op, f"kernel @{kernel_name(op)}: '{SCHEDULE_ATTR}' must be a "
                           f"dictionary of schedule fields, got {attr}")
    fields: dict[str, ScheduleField] = {}
    for named in attr:
        value = named.attr
        if isinstance(value, ir.IntegerAttr) and not _is_bool(value):
            fields[named.name] = ir.IntegerAttr(value).value
        elif isinstance(value, ir.StringAttr):
            fields[named.name] = ir.StringAttr(value).value
        elif isinstance(value, ir.DenseI64ArrayAttr):
            fields[named.name] = tuple(value)
        else:
            raise error_at(op, f"kernel @{kernel_name(op)}: '{SCHEDULE_ATTR}' field "
                               f"'{named.name}' must be an integer, a string or "
                               f"array<i64: ...>, got {value}")
    return fields
