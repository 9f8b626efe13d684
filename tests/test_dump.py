"""SMALTI_DUMP_TO writes the IR after every pass, the PTX, the ptxas log, cubin and SASS."""

from pathlib import Path

from smalti.passes import DEFAULT_PIPELINE, split_pipeline
from smalti.runtime import compile_mlir

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pointwise_f32.mlir"


def test_dump_directory_holds_every_stage(tmp_path, monkeypatch):
    monkeypatch.setenv("SMALTI_DUMP_TO", str(tmp_path / "dump"))
    compiled = compile_mlir(EXAMPLE.read_text(), str(EXAMPLE))
    compiled.assemble()
    files = sorted(p.name for p in (tmp_path / "dump").iterdir())
    passes = split_pipeline(DEFAULT_PIPELINE)
    expected_ir = [f"pointwise_f32.{i:02d}.{p}.mlir"
                   for i, p in enumerate(passes)]
    assert [f for f in files if f.endswith(".mlir")] == expected_ir
    assert {"pointwise_f32.ptx", "pointwise_f32.ptxas.log", "pointwise_f32.cubin",
            "pointwise_f32.sass"} <= set(files)
    inferred = (tmp_path / "dump" / expected_ir[-1]).read_text()
    assert "out_layouts = [#smalti.strided<vec = 4>]" in inferred
    assert "out_layouts" not in (tmp_path / "dump" / expected_ir[0]).read_text()
    assert (tmp_path / "dump" / "pointwise_f32.ptx").read_text() == compiled.ptx
    assert "LDG" in (tmp_path / "dump" / "pointwise_f32.sass").read_text()


def test_no_dump_without_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("SMALTI_DUMP_TO", raising=False)
    monkeypatch.chdir(tmp_path)
    compile_mlir(EXAMPLE.read_text(), str(EXAMPLE))
    assert list(tmp_path.iterdir()) == []
