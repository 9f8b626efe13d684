"""The README's Python snippets run as a new user would paste them: in order, in one
interpreter, from the repository root (each checks its own result)."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def python_snippets() -> list[str]:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"^( *)```python\n(.*?)^\1```", text, flags=re.M | re.S)
    return ["\n".join(line[len(indent):] for line in body.splitlines())
            for indent, body in blocks]


def test_the_readme_has_its_snippets():
    snippets = python_snippets()
    assert len(snippets) >= 3
    assert any("sd.export(" in s for s in snippets)


def test_the_readme_snippets_run_in_order(tmp_path):
    script = "\n\n".join(python_snippets())
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=900,
                          env={**os.environ,
                               "SMALTI_CACHE_DIR": str(tmp_path / "cache"),
                               # as the README's collective kernels section says to
                               "XLA_FLAGS": "--xla_force_host_platform_device_count=8"})
    assert done.returncode == 0, done.stderr[-4000:]
