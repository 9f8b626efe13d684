"""docs/ops.md's Python examples run as written."""

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "ops.md"


def test_the_ops_doc_examples_run():
    blocks = re.findall(r"^```python\n(.*?)^```", DOC.read_text(), flags=re.M | re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), {})
