"""smalti-translate through main(argv): PTX, cubin and SASS output, and its errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from smalti.tools.translate import main

KERNEL = """\
func.func @scale(%a: memref<128x128xf32>, %out: memref<128x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0)
      : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  %w = arith.addf %v, %v : vector<128x128xf32>
  "smalti.vector_store"(%w, %out, %c0, %c0)
      : (vector<128x128xf32>, memref<128x128xf32>, index, index) -> ()
  return
}
"""


@pytest.fixture
def kernel_file(tmp_path: Path) -> str:
    path = tmp_path / "scale.mlir"
    path.write_text(KERNEL)
    return str(path)


def test_ptx_to_stdout_and_file(kernel_file, tmp_path, capsys):
    assert main([kernel_file]) == 0
    ptx = capsys.readouterr().out
    assert ".target sm_90a" in ptx and ".entry scale(" in ptx
    out = tmp_path / "scale.ptx"
    assert main([kernel_file, "--to=ptx", "-o", str(out)]) == 0
    assert out.read_text() == ptx


def test_kernel_selection(kernel_file, capsys):
    assert main([kernel_file, "--kernel", "scale"]) == 0
    assert ".entry scale(" in capsys.readouterr().out
    assert main([kernel_file, "--kernel", "other"]) == 1
    assert capsys.readouterr().err == (
        "smalti-translate: error: no kernel named 'other' in the PTX module (kernels: scale)\n")


def test_parse_error_is_located(tmp_path, capsys):
    path = tmp_path / "bad.mlir"
    path.write_text(KERNEL.replace("%w = arith.addf %v, %v", "%w = arith.addf %v, %nope"))
    out = tmp_path / "bad.ptx"
    assert main([str(path), "-o", str(out)]) == 1
    assert capsys.readouterr().err.startswith(f"{path}:6:")
    assert not out.exists()


def test_cubin_needs_an_output_file(kernel_file, capsys):
    assert main([kernel_file, "--to=cubin"]) == 1
    assert "-o OUT" in capsys.readouterr().err


def test_cubin_and_sass(kernel_file, tmp_path, capsys):
    cubin = tmp_path / "scale.cubin"
    assert main([kernel_file, "--to=cubin", "-o", str(cubin), "-v"]) == 0
    assert cubin.read_bytes()[:4] == b"\x7fELF"
    assert "Used" in capsys.readouterr().err  # the ptxas -v report
    assert main([kernel_file, "--to=sass"]) == 0
    assert "EXIT" in capsys.readouterr().out


def test_console_script_end_to_end(kernel_file):
    script = Path(sys.executable).parent / "smalti-translate"
    result = subprocess.run([str(script), kernel_file, "--to=ptx"], capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert ".entry scale(" in result.stdout
