"""docs/dsl.md, the reference of smalti.dsl, runs as written: every ```python block of the
page executes (the first one, the prelude, seeds each `##` section's namespace; a section's
blocks run in order in it), blocks marked `# raises: ErrorType: text` raise that error at the
marked line, `# stderr: text` blocks print that text; and the page covers every name of
smalti.dsl.__all__ and links only to headings it has. The conventions are stated in an HTML
comment at the top of the page."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import smalti.dsl
from tests.dsl_helpers import isolated_cache  # noqa: F401

DOC = Path(__file__).resolve().parents[1] / "docs" / "dsl.md"
FENCE = re.compile(r"^```(\S*)\s*$")
RAISES = re.compile(r"#\s*raises:\s*(\w+):\s*(.+?)\s*$")
STDERR = re.compile(r"#\s*stderr:\s*(.+?)\s*$")


@dataclass(frozen=True)
class Block:
    section: str
    first_line: int  # 1-based line of the block's first code line in the page
    code: str

    def markers(self, pattern: re.Pattern[str]) -> list[tuple[int, re.Match[str]]]:
        """(line in the page, match) of every line of the block matching `pattern`."""
        return [(self.first_line + k, m) for k, line in enumerate(self.code.splitlines())
                if (m := pattern.search(line))]


def python_blocks(text: str) -> list[Block]:
    """The page's ```python blocks, each with its `##` section and first line."""
    blocks: list[Block] = []
    section, fence, start, body = "", None, 0, []
    for number, line in enumerate(text.splitlines(), start=1):
        if fence is None:
            match = FENCE.match(line)
            if match:
                fence, start, body = match.group(1), number + 1, []
            elif line.startswith("## "):
                section = line[3:].strip()
        elif FENCE.match(line) and line.strip() == "```":
            if fence == "python":
                blocks.append(Block(section, start, "\n".join(body) + "\n"))
            fence = None
        else:
            body.append(line)
    assert fence is None, "an unclosed ``` fence in docs/dsl.md"
    return blocks


BLOCKS = python_blocks(DOC.read_text())
PRELUDE = BLOCKS[0]
SECTIONS = list(dict.fromkeys(b.section for b in BLOCKS[1:]))


def run_block(block: Block, namespace: dict) -> None:
    """Execute `block` with the page's file name and line numbers."""
    code = compile("\n" * (block.first_line - 1) + block.code, str(DOC), "exec")
    exec(code, namespace)  # the documentation's own examples


def check_raises(block: Block, namespace: dict, line: int, expected: re.Match[str]) -> None:
    kind, text = expected.group(1), expected.group(2)
    with pytest.raises(Exception) as caught:  # the type is checked by name below
        run_block(block, namespace)
    error = caught.value
    names = [cls.__name__ for cls in type(error).__mro__]
    message = str(error)
    where = f"docs/dsl.md:{line}"
    assert kind in names, f"{where}: expected {kind}, got {type(error).__name__}: {message}"
    assert text in message, f"{where}: {text!r} is not in the message:\n{message}"
    located = re.match(rf"{re.escape(str(DOC))}:(\d+):\d+: ", message)
    if located:
        assert int(located.group(1)) == line, (
            f"{where}: the error names line {located.group(1)}, not the marked line:\n{message}")


@pytest.mark.parametrize("section", SECTIONS)
def test_the_sections_examples_run_as_written(section, capfd):
    namespace: dict = {"__name__": f"docs_dsl_{section}"}
    run_block(PRELUDE, namespace)
    for block in (b for b in BLOCKS[1:] if b.section == section):
        raises = block.markers(RAISES)
        assert len(raises) <= 1, f"docs/dsl.md:{block.first_line}: one `# raises:` per block"
        capfd.readouterr()
        if raises:
            check_raises(block, namespace, *raises[0])
        else:
            run_block(block, namespace)
        err = capfd.readouterr().err
        for line, expected in block.markers(STDERR):
            # debug_print's lines start with the user's file:line, here the marked line
            printed = f"{DOC}:{line}: " + expected.group(1)
            assert printed in err.splitlines(), (
                f"docs/dsl.md:{line}: {printed!r} was not printed; stderr:\n{err}")


def test_every_public_name_has_a_heading():
    headings = "\n".join(line for line in DOC.read_text().splitlines()
                         if line.startswith("### "))
    missing = [name for name in smalti.dsl.__all__ if f"`sd.{name}`" not in headings]
    assert not missing, f"names of smalti.dsl.__all__ without a ### heading: {missing}"
    index = DOC.read_text().split("## Index of names", 1)[1]
    listed = re.findall(r"^\| `sd\.(\w+)` \|", index, re.MULTILINE)
    assert sorted(listed) == sorted(smalti.dsl.__all__)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_within_the_page_name_its_headings():
    text = DOC.read_text()
    anchors: set[str] = set()
    in_fence = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        elif not in_fence and line.startswith("#"):
            base = slug(line.lstrip("#"))
            anchor, n = base, 0
            while anchor in anchors:
                n += 1
                anchor = f"{base}-{n}"
            anchors.add(anchor)
    links = set(re.findall(r"\]\(#([^)]+)\)", text))
    assert links - anchors == set()


def test_the_page_has_examples_of_errors_and_of_numbers():
    raising = [b for b in BLOCKS if b.markers(RAISES)]
    checking = [b for b in BLOCKS if "np.testing.assert_" in b.code]
    assert len(raising) >= 30 and len(checking) >= 30
    assert all(b.section for b in BLOCKS)
