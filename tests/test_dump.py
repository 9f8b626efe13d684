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


def test_dsl_kernels_dump_per_signature_with_cubin_and_sass(tmp_path, monkeypatch):
    """Two shapes of one DSL kernel: two sets of artefacts (kernel name and cache key),
    neither overwriting the other, each with the cubin and SASS when ptxas is there."""
    import jax
    import jax.numpy as jnp

    import smalti.dsl as sd
    from smalti.runtime.cache import ptxas_available

    monkeypatch.setenv("SMALTI_DUMP_TO", str(tmp_path / "dump"))
    monkeypatch.setenv("SMALTI_CACHE_DIR", str(tmp_path / "cache"))

    @sd.kernel(out_shape=lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype))
    def double(x_ref, out_ref):
        out_ref[...] = x_ref[...] * 2.0

    keys = [double.compile(jax.ShapeDtypeStruct(shape, jnp.float32))[1].key
            for shape in ((128,), (256,))]
    files = {p.name for p in (tmp_path / "dump").iterdir()}
    for key in keys:
        stem = f"double.{key[:12]}"
        assert f"{stem}.ptx" in files and f"{stem}.00.smalti-verify.mlir" in files
        if ptxas_available():
            assert {f"{stem}.cubin", f"{stem}.sass", f"{stem}.ptxas.log"} <= files
