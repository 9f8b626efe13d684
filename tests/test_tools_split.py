"""--split-input-file: chunks keep the original line numbers; outputs join with the marker."""

from smalti.tools.split import Chunk, join_outputs, split_input


def test_no_marker_is_one_chunk_from_line_one():
    assert split_input("a\nb\n") == [Chunk("a\nb\n", 1)]


def test_chunks_start_after_their_marker_line():
    text = "a\n// -----\nb\nc\n  // ----- trailing words\nd"
    chunks = split_input(text)
    assert [c.text for c in chunks] == ["a\n", "b\nc\n", "d"]
    assert [c.first_line for c in chunks] == [1, 3, 6]


def test_padded_text_puts_each_line_where_it_was():
    text = "x\n// -----\ny\nz\n"
    for chunk in split_input(text):
        padded = chunk.padded_text.splitlines()
        for offset, line in enumerate(chunk.text.splitlines()):
            assert padded[chunk.first_line - 1 + offset] == line
            assert text.splitlines()[chunk.first_line - 1 + offset] == line


def test_marker_must_start_the_line():
    assert len(split_input("a // ----- b\n")) == 1
    assert len(split_input("//----\n")) == 1


def test_empty_trailing_chunk_is_kept():
    assert [c.text for c in split_input("a\n// -----\n")] == ["a\n", ""]


def test_join_outputs():
    assert join_outputs(["m1\n", "", "m3\n"]) == "m1\n// -----\n// -----\nm3\n"
