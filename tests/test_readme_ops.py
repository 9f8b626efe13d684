"""README's "Elementwise ops" section names exactly the arith and math ops that have a
lowering rule, and, as not lowered yet, exactly those that inference accepts without one."""

from __future__ import annotations

import re
from pathlib import Path

from smalti.layout_inference.rules import ELEMENTWISE_OPS
from smalti.lowering import RULES as LOWERING_RULES

README = Path(__file__).resolve().parents[1] / "README.md"
SCALAR_ONLY = {"arith.index_cast"}  # the README names it with the uniform scalars
NAME = re.compile(r"`((?:arith|math)\.\w+)`")


def _section() -> tuple[set[str], set[str]]:
    """(names in the section's table, names in its "Not lowered yet" paragraph)."""
    text = README.read_text()
    start = text.index("### Elementwise ops")
    section = text[start:text.index("\n## ", start)]
    table = "\n".join(line for line in section.splitlines() if line.startswith("| `"))
    missing = section[section.index("Not lowered yet"):].split("\n\n")[0]
    return set(NAME.findall(table)), set(NAME.findall(missing))


def test_the_table_lists_every_lowered_op_and_nothing_else():
    lowered = {cls.OPERATION_NAME for cls in LOWERING_RULES
               if cls.OPERATION_NAME.split(".")[0] in ("arith", "math")} - SCALAR_ONLY
    listed, _ = _section()
    assert listed == lowered, (f"lowered but not in README: {sorted(lowered - listed)}; "
                               f"in README but not lowered: {sorted(listed - lowered)}")


def test_not_lowered_lists_what_inference_accepts_without_a_lowering():
    unlowered = {cls.OPERATION_NAME for cls in ELEMENTWISE_OPS if cls not in LOWERING_RULES}
    _, listed = _section()
    assert listed == unlowered
