"""Kernel signatures as JSON text: how the compile cache stores them and how the CPU target's
custom call carries them (so an exported CPU function runs in another process)."""

from __future__ import annotations

import dataclasses
import json

from smalti.dialect.attributes import layout_to_text, text_to_layout
from smalti.dialect.kernel import (
    DEFAULT_ARCH,
    CollectiveSpec,
    KernelArg,
    KernelSignature,
    TensorMapRecord,
)
from smalti.dialect.ops_debug import DebugPrintRecord


def signature_to_data(signature: KernelSignature) -> dict:
    """The signature as JSON data; layouts travel as their attribute text."""
    data = dataclasses.asdict(signature)
    data["debug_prints"] = [
        {**dataclasses.asdict(record),
         "layout": None if record.layout is None else layout_to_text(record.layout)}
        for record in signature.debug_prints]
    return data


def signature_from_data(data: dict) -> KernelSignature:
    """The signature `signature_to_data` gave `data` for; KeyError/TypeError if malformed."""
    return KernelSignature(
        name=data["name"], grid=tuple(data["grid"]), warpgroups=data["warpgroups"],
        args=tuple(KernelArg(a["name"], a["dtype"], None if a["shape"] is None
                             else tuple(a["shape"])) for a in data["args"]),
        smem_bytes=data["smem_bytes"],
        tensor_maps=tuple(TensorMapRecord(**{**t, "shape": tuple(t["shape"]),
                                             "box": tuple(t["box"])})
                          for t in data["tensor_maps"]),
        debug_prints=tuple(DebugPrintRecord(**{
            **d, "shape": tuple(d["shape"]),
            "layout": None if d["layout"] is None else text_to_layout(d["layout"])})
            for d in data.get("debug_prints", ())),
        cluster=tuple(data.get("cluster", (1, 1, 1))),
        collective=None if data.get("collective") is None
        else CollectiveSpec(**data["collective"]),
        arch=data.get("arch", DEFAULT_ARCH))


def signature_to_json(signature: KernelSignature) -> str:
    return json.dumps(signature_to_data(signature), sort_keys=True)


def signature_from_json(text: str) -> KernelSignature:
    return signature_from_data(json.loads(text))
