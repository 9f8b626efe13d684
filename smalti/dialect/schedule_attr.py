"""The `smalti.schedule` kernel attribute: the schedule a cost model chose (or a person wrote)
for a kernel, recorded so that tools can check it (`smalti-opt --smalti-explain-schedule`).

    func.func @ag(...) attributes {smalti.kernel, ..., smalti.schedule = {
        kind = "all_gather_matmul", m = 128 : i64, n = 128 : i64, k = 128 : i64,
        devices = 4 : i64, dtype = "bf16", ctas = 1 : i64, chunk_rows = 64 : i64,
        order = "ring_forward", source_offsets = array<i64: 0, 1, 2, 3>}}

A kernel that follows several schedules (a collective schedule and its pipelines, or two
pipelines) records an array of such dictionaries: `smalti.schedule = [{...}, {...}]`
(`add_kernel_schedule` appends; `kernel_schedules` reads either form).

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
        op.attributes[SCHEDULE_ATTR] = _dict_attr(fields)


def add_kernel_schedule(func: ir.Operation | ir.OpView,
                        fields: Mapping[str, ScheduleField]) -> None:
    """Append `fields` to the kernel's schedules (a dictionary while it is the only one)."""
    op = func.operation
    recorded = kernel_schedules(func)
    if not recorded:
        set_kernel_schedule(func, fields)
        return
    with op.context:
        op.attributes[SCHEDULE_ATTR] = ir.ArrayAttr.get(
            [_dict_attr(f) for f in (*recorded, fields)])


def _dict_attr(fields: Mapping[str, ScheduleField]) -> ir.DictAttr:
    return ir.DictAttr.get({name: _field_attr(name, value)
                            for name, value in sorted(fields.items())})


def kernel_schedule(func: ir.Operation | ir.OpView) -> dict[str, ScheduleField] | None:
    """The kernel's recorded schedule fields when it records one dictionary (None without
    one); a located error naming the kernel when the attribute is malformed."""
    op = func.operation
    if SCHEDULE_ATTR not in op.attributes:
        return None
    attr = op.attributes[SCHEDULE_ATTR]
    if not isinstance(attr, ir.DictAttr):
        raise error_at(op, f"kernel @{kernel_name(op)}: '{SCHEDULE_ATTR}' must be a "
                           f"dictionary of schedule fields, got {attr}")
    return _fields(op, attr)


def kernel_schedules(func: ir.Operation | ir.OpView) -> list[dict[str, ScheduleField]]:
    """Every schedule the kernel records (a dictionary or an array of them), in order."""
    op = func.operation
    if SCHEDULE_ATTR not in op.attributes:
        return []
    attr = op.attributes[SCHEDULE_ATTR]
    if isinstance(attr, ir.ArrayAttr) and len(attr) and all(
            isinstance(a, ir.DictAttr) for a in attr):
        return [_fields(op, ir.DictAttr(a)) for a in attr]
    if not isinstance(attr, ir.DictAttr):
        raise error_at(op, f"kernel @{kernel_name(op)}: '{SCHEDULE_ATTR}' must be a "
                           f"dictionary of schedule fields, got {attr}")
    return [_fields(op, attr)]


def _fields(op: ir.Operation, attr: ir.DictAttr) -> dict[str, ScheduleField]:
    """One dictionary's fields; a located error on a field of another kind."""
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


# wgmma operand element types as the schedule models name their tensor-core rates.
_MMA_DTYPES = {"bf16": "bf16", "f16": "f16", "f8E4M3FN": "f8E4M3FN", "f8E5M2": "f8E5M2",
               "f32": "tf32"}


def wgmma_work(op: ir.OpView) -> tuple[int, str]:
    """(flops, operand dtype) of one `smalti.wgmma`: 2 M N K over its accumulator (M x N)
    and A (M x K) operand, for the schedule models' tensor-core time."""
    m, n = ir.ShapedType(op.operation.operands[0].type).shape
    a = ir.ShapedType(op.operation.operands[1].type)
    element = str(a.element_type)
    return 2 * m * n * a.shape[-1], _MMA_DTYPES.get(element, element)
