"""SMEM transforms: physical shapes, byte-address maps (every address of each swizzle
pattern), WGMMA operand forms, TMA compatibility, and their attribute codecs."""

import itertools

import numpy as np
import pytest

from smalti.dialect import LayoutAttrError, make_context
from smalti.dialect.attributes import (
    attr_to_transforms,
    text_to_transform,
    transform_to_text,
    transforms_to_attr,
)
from smalti.tiling import (
    LayoutError,
    SwizzleTransform,
    TileTransform,
    TransposeTransform,
    physical_address,
    physical_shape,
    tma_compatible,
    tma_incompatibility,
    wgmma_operand_transforms,
)

SPANS = [32, 64, 128]


@pytest.mark.parametrize("element_bytes", [1, 2, 4])
@pytest.mark.parametrize("span", SPANS)
def test_every_swizzled_address_of_a_pattern_follows_the_formula(span, element_bytes):
    cols = span // element_bytes
    rows = 2 * 1024 // span  # two whole repeats of the pattern
    addresses = physical_address([SwizzleTransform(span)], (rows, cols), element_bytes)
    mask = {128: 7, 64: 3, 32: 1}[span]
    for r, c in itertools.product(range(rows), range(cols)):
        a = (r * cols + c) * element_bytes
        assert addresses[r, c] == a ^ (((a >> 7) & mask) << 4)


@pytest.mark.parametrize("span", SPANS)
def test_swizzle_permutes_16_byte_chunks_by_row(span):
    # The H100-recorded fact for 128 B (physical chunk = logical chunk ^ row % 8), and its
    # narrower forms: rows of `span` bytes share a 128-byte line in groups of 128 // span.
    rows, chunks = 16, span // 16
    addresses = physical_address([SwizzleTransform(span)], (rows, span), 1)
    per_line = 128 // span
    for r, c in itertools.product(range(rows), range(span)):
        chunk = (c // 16) ^ ((r // per_line) % chunks)
        assert addresses[r, c] == r * span + chunk * 16 + c % 16


TRANSFORM_CASES = [
    ([], (8, 24), 4),
    ([TileTransform((8, 64)), SwizzleTransform(128)], (64, 128), 2),
    ([TileTransform((8, 32)), SwizzleTransform(64)], (32, 64), 2),
    ([TileTransform((4, 32)), SwizzleTransform(32)], (8, 64), 1),
    ([TransposeTransform((1, 0)), TileTransform((8, 64)), SwizzleTransform(128)], (128, 16), 2),
    ([TileTransform((64, 64)), TransposeTransform((1, 0, 2, 3))], (128, 192), 4),
    ([TileTransform((2, 16)), TransposeTransform((0, 2, 1, 3, 4))], (3, 4, 32), 8),
]


@pytest.mark.parametrize(("transforms", "shape", "element_bytes"), TRANSFORM_CASES)
def test_address_map_is_a_bijection_onto_the_buffer(transforms, shape, element_bytes):
    addresses = physical_address(transforms, shape, element_bytes)
    assert addresses.shape == shape
    total = int(np.prod(shape)) * element_bytes
    assert sorted((addresses // element_bytes).ravel().tolist()) == list(
        range(total // element_bytes))
    assert np.all(addresses % element_bytes == 0)


def test_tiles_are_stored_whole_and_row_major():
    shape, tile = (16, 24), (8, 8)
    assert physical_shape([TileTransform(tile)], shape, 2) == (2, 3, 8, 8)
    addresses = physical_address([TileTransform(tile)], shape, 2)
    for r, c in itertools.product(range(16), range(24)):
        tile_index = (r // 8) * 3 + c // 8
        assert addresses[r, c] == 2 * (tile_index * 64 + (r % 8) * 8 + c % 8)


def test_transpose_swaps_strides():
    addresses = physical_address([TransposeTransform((1, 0))], (3, 5), 4)
    assert physical_shape([TransposeTransform((1, 0))], (3, 5), 4) == (5, 3)
    np.testing.assert_array_equal(addresses, 4 * (np.arange(5)[None, :] * 3
                                                  + np.arange(3)[:, None]))


@pytest.mark.parametrize(("transforms", "shape", "element_bytes", "message"), [
    ([SwizzleTransform(128)], (8, 32), 2, "span exactly 128 bytes"),
    ([TileTransform((8, 32)), SwizzleTransform(128)], (16, 64), 2, "spans 64"),
    ([SwizzleTransform(64), TileTransform((8, 32))], (16, 64), 2, "last"),
    ([TileTransform((8, 48))], (16, 64), 2, "does not divide"),
    ([TransposeTransform((1, 0))], (2, 3, 4), 2, "rank"),
])
def test_invalid_transform_sequences_are_reported(transforms, shape, element_bytes, message):
    with pytest.raises(LayoutError, match=message):
        physical_address(transforms, shape, element_bytes)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: SwizzleTransform(16), "32, 64 or 128"),
    (lambda: TileTransform(()), "non-empty"),
    (lambda: TransposeTransform((0, 0)), "not a permutation"),
])
def test_malformed_transforms_are_rejected(make, message):
    with pytest.raises(LayoutError, match=message):
        make()


@pytest.mark.parametrize(("element_bytes", "swizzle", "tile"), [
    (2, 128, (8, 64)), (2, 64, (8, 32)), (2, 32, (8, 16)), (1, 128, (8, 128)), (4, 128, (8, 32)),
])
def test_wgmma_operand_transforms(element_bytes, swizzle, tile):
    shape = (128, 256)
    transforms = wgmma_operand_transforms(shape, element_bytes, swizzle, transposed=False)
    assert transforms == (TileTransform(tile), SwizzleTransform(swizzle))
    assert physical_shape(transforms, shape, element_bytes) == (
        16, 256 // tile[1], 8, tile[1])
    transposed = wgmma_operand_transforms(shape, element_bytes, swizzle, transposed=True)
    assert transposed[0] == TransposeTransform((1, 0))
    assert physical_shape(transposed, shape, element_bytes) == (32, 128 // tile[1], 8, tile[1])
    assert tma_compatible(transforms, element_bytes, shape)


def test_wgmma_operand_transforms_reject_shapes_that_do_not_tile():
    with pytest.raises(LayoutError, match="does not divide"):
        wgmma_operand_transforms((64, 32), 2, 128, transposed=False)
    with pytest.raises(LayoutError, match="2-D"):
        wgmma_operand_transforms((2, 64, 64), 2, 128, transposed=False)


@pytest.mark.parametrize(("transforms", "element_bytes", "shape", "reason"), [
    ([TileTransform((64, 64)), SwizzleTransform(128)], 2, None, None),
    ([TileTransform((64, 64))], 2, None, None),
    ([], 4, (64, 64), None),
    ([], 4, None, "box is unknown"),
    ([TileTransform((64, 32)), SwizzleTransform(128)], 2, None, "equal the 128-byte"),
    ([TileTransform((64, 4))], 2, None, "multiple of 16"),
    ([TileTransform((512, 64))], 2, None, "at most 256"),
    ([TransposeTransform((1, 0)), TileTransform((8, 64)), SwizzleTransform(128)], 2, None,
     "innermost dim"),
    ([TileTransform((64, 64)), TransposeTransform((1, 0, 2, 3))], 2, (128, 128), None),
    ([TileTransform((64, 64)), TileTransform((8, 64))], 2, None, "one level"),
    ([TileTransform((64, 64))], 2, (100, 64), "does not divide"),
])
def test_tma_compatibility(transforms, element_bytes, shape, reason):
    found = tma_incompatibility(transforms, element_bytes, shape)
    if reason is None:
        assert found is None
    else:
        assert reason in found
    assert tma_compatible(transforms, element_bytes, shape) == (reason is None)


TRANSFORMS = [TileTransform((64, 64)), TileTransform((8,)), SwizzleTransform(32),
              SwizzleTransform(128), TransposeTransform((1, 0)), TransposeTransform((0, 2, 1))]


def test_transform_texts():
    assert transform_to_text(TileTransform((64, 64))) == "tile<[64, 64]>"
    assert transform_to_text(SwizzleTransform(128)) == "swizzle<128>"
    assert transform_to_text(TransposeTransform((1, 0))) == "transpose<[1, 0]>"


def test_transforms_round_trip_through_mlir():
    with make_context():
        attr = transforms_to_attr(TRANSFORMS)
        assert str(attr).startswith("[#smalti.tile<[64, 64]>, #smalti.tile<[8]>")
        assert attr_to_transforms(attr) == TRANSFORMS


@pytest.mark.parametrize(("text", "message"), [
    ("swizzle<48>", "32, 64 or 128"),
    ("swizzle<x>", "span in bytes"),
    ("tile<64, 64>", "list of integers"),
    ("tile<[a]>", "list of integers"),
    ("transpose<[1, 1]>", "not a permutation"),
    ("stripe<[1]>", "unknown SMEM transform"),
])
def test_malformed_transform_texts_are_reported(text, message):
    with pytest.raises(LayoutAttrError, match=message):
        text_to_transform(text)
