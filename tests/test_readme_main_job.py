"""The README's run command works as written: every example assembles and matches numpy."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_run_examples_reports_every_example_matching_numpy():
    done = subprocess.run([sys.executable, "examples/run_examples.py"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == len(sorted(ROOT.glob("examples/*.mlir"))) == 5
    assert all("0 bytes spilled" in line and line.endswith("matches numpy") for line in lines)
