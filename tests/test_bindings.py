"""smalti/dialect/bindings.py: enum attributes, types and locations read through the bindings'
typed classes (the same answers under every supported jaxlib, whatever it prints), and a
missing private binding reported with the installed jaxlib's version."""

from __future__ import annotations

import jaxlib
import pytest
from jaxlib.mlir import ir

from smalti.dialect import bindings
from smalti.dialect.context import make_context, parse_module

KERNEL = """func.func @k(%s: memref<8xi64, #gpu.address_space<workgroup>>, %g: memref<8xf32>,
                 %v: vector<4x8xf32>, %acc: vector<8xf32>) {
  %x = gpu.block_id x
  %y = gpu.block_id y
  %z = gpu.cluster_id z
  %r = vector.multi_reduction <maximumf>, %v, %acc [0] : vector<4x8xf32> to vector<8xf32>
  %a = vector.multi_reduction <add>, %v, %acc [0] : vector<4x8xf32> to vector<8xf32>
  return
}
"""


@pytest.fixture
def body():
    context = make_context()
    module = parse_module(KERNEL, "k.mlir", context)
    with context:
        func = module.regions[0].blocks[0].operations[0]
        yield func, list(func.regions[0].blocks[0].operations)


def test_gpu_dimensions_are_decoded_from_parsed_text(body):
    _, ops = body
    assert [bindings.gpu_dimension(op.attributes["dimension"]) for op in ops[:3]] == [0, 1, 2]


def test_gpu_dimension_attributes_round_trip(body):
    for axis in (0, 1, 2):
        assert bindings.gpu_dimension(bindings.gpu_dimension_attr(axis)) == axis
    assert bindings.gpu_dimension_attr(1) == body[1][1].attributes["dimension"]


def test_combining_kinds_are_decoded_and_built(body):
    _, ops = body
    assert bindings.combining_kind(ops[3].attributes["kind"]) == "maximumf"
    assert bindings.combining_kind(ops[4].attributes["kind"]) == "add"
    for kind in ("add", "mul", "maxsi", "minui", "and", "or", "xor", "maximumf", "minnumf"):
        assert bindings.combining_kind(bindings.combining_kind_attr(kind)) == kind
    with pytest.raises(ValueError, match="unknown vector combining kind 'plus'"):
        bindings.combining_kind_attr("plus")


def test_an_attribute_of_another_enum_is_refused(body):
    _, ops = body
    with pytest.raises(ValueError, match="not a gpu dimension attribute"):
        bindings.gpu_dimension(ops[3].attributes["kind"])


def test_workgroup_address_space(body):
    func, _ = body
    smem, gmem = (ir.MemRefType(a.type) for a in list(func.regions[0].blocks[0].arguments)[:2])
    assert bindings.is_workgroup_address_space(smem.memory_space)
    assert not bindings.is_workgroup_address_space(gmem.memory_space)
    assert bindings.workgroup_address_space() == smem.memory_space


@pytest.mark.parametrize("name", ["f16", "bf16", "f32", "f64", "f8E4M3FN", "f8E5M2", "i1",
                                  "i8", "i16", "i32", "i64", "index"])
def test_scalar_type_names_round_trip(name):
    with make_context():
        t = bindings.scalar_type(name)
        assert bindings.type_name(t) == name
        assert t == ir.Type.parse(name)


def test_types_without_a_scalar_name():
    with make_context():
        for text in ("ui32", "vector<4xf32>", "memref<4xf32>", "f8E4M3FNUZ"):
            assert bindings.type_name(ir.Type.parse(text)) is None, text
        with pytest.raises(ValueError, match="unknown scalar type 'q7'"):
            bindings.scalar_type("q7")


def test_file_positions_through_every_kind_of_location():
    with make_context():
        here = ir.Location.file("a.mlir", 3, 4)
        there = ir.Location.file("b.py", 7, 1)
        assert bindings.file_line_col(here) == ("a.mlir", 3, 4)
        assert bindings.file_line_col(ir.Location.name("x", here)) == ("a.mlir", 3, 4)
        assert bindings.file_line_col(ir.Location.callsite(here, [there])) == ("a.mlir", 3, 4)
        fused = ir.Location.fused([ir.Location.unknown(), there, here])
        assert bindings.file_line_col(fused) == ("b.py", 7, 1)
        assert bindings.file_line_col(ir.Location.unknown()) is None


def test_a_missing_private_binding_names_the_installed_jaxlib():
    with pytest.raises(bindings.BindingsError) as caught:
        bindings._private("jaxlib.mlir._mlir_libs._no_such_extension", "register_dialects")
    message = str(caught.value)
    assert f"jaxlib {jaxlib.__version__} lacks" in message
    assert "jaxlib.mlir._mlir_libs._no_such_extension.register_dialects" in message
    assert bindings.SUPPORTED_JAXLIB in message
    with pytest.raises(bindings.BindingsError, match="lacks"):
        bindings._private("jaxlib.mlir.dialects._ods_common", "no_such_name")
