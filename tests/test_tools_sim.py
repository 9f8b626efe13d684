"""smalti-sim: argument parsing (scalars, grids, bf16 buffers) and runs through main(argv)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from smalti.tools.cli_common import ToolError
from smalti.tools.sim import main
from smalti.tools.sim_args import load_buffer, parse_dims, parse_dtype_overrides, parse_scalar

ADD_SCALAR = """\
.version 8.0
.target sm_90a
.address_size 64

.visible .entry add_scalar(
	.param .u64 buf,
	.param .f32 s,
	.param .u32 n
)
{
	.reg .pred %p<1>;
	.reg .b32 %r<2>;
	.reg .f32 %f<3>;
	.reg .b64 %rd<4>;

	ld.param.u64 %rd0, [buf];
	cvta.to.global.u64 %rd1, %rd0;
	ld.param.f32 %f0, [s];
	ld.param.u32 %r0, [n];
	mov.u32 %r1, %tid.x;
	setp.ge.u32 %p0, %r1, %r0;
	@%p0 bra DONE;
	mul.wide.u32 %rd2, %r1, 4;
	add.s64 %rd3, %rd1, %rd2;
	ld.global.f32 %f1, [%rd3];
	add.f32 %f2, %f1, %f0;
	st.global.f32 [%rd3], %f2;
DONE:
	ret;
}
"""


@pytest.mark.parametrize(("text", "value"), [
    ("u32:5", np.uint32(5)), ("s64:-1", np.int64(-1)), ("b32:0xff", np.uint32(255)),
    ("f32:1.5", np.float32(1.5)), ("f32:0f3FC00000", np.float32(1.5)),
    ("f64:0d3FF8000000000000", np.float64(1.5)), ("bf16:2", ml_dtypes.bfloat16(2)),
])
def test_scalars(text, value):
    scalar = parse_scalar(text)
    assert scalar is not None
    assert scalar.value == value and scalar.value.dtype == value.dtype


@pytest.mark.parametrize(("text", "complaint"), [
    ("u32:-1", "out of range"), ("s8:128", "out of range"), ("u32:1.5", "not an integer"),
    ("f32:x", "not a number"), ("f32:1e39", "overflows"), ("f32:0f3FC0", "8 hex digits"),
])
def test_bad_scalars(text, complaint):
    with pytest.raises(ToolError, match=complaint):
        parse_scalar(text)


def test_not_a_scalar_type_is_a_path():
    assert parse_scalar("dir/a.npy") is None
    assert parse_scalar("c:/a.npy") is None


def test_dims():
    assert parse_dims("4", "grid") == (4, 1, 1)
    assert parse_dims("4,2,3", "grid") == (4, 2, 3)
    for bad in ("0", "1,2,3,4", "a", "", "2,,1"):
        with pytest.raises(ToolError, match="--grid"):
            parse_dims(bad, "grid")


def test_bf16_files_need_a_dtype(tmp_path):
    path = tmp_path / "h.npy"
    np.save(path, np.arange(4, dtype=ml_dtypes.bfloat16))
    with pytest.raises(ToolError, match=r"--dtype h.npy=bfloat16"):
        load_buffer(str(path), {})
    loaded = load_buffer(str(path), parse_dtype_overrides(["h.npy=bfloat16"]))
    assert loaded.array.dtype == ml_dtypes.bfloat16
    assert loaded.array.tolist() == [0, 1, 2, 3]
    bits = tmp_path / "bits.npy"
    np.save(bits, np.array([0x3F80], np.uint16))
    assert load_buffer(str(bits), parse_dtype_overrides([f"{bits}=bfloat16"])).array[0] == 1
    with pytest.raises(ToolError, match="needs 4"):
        load_buffer(str(bits), parse_dtype_overrides(["bits.npy=float32"]))
    with pytest.raises(ToolError, match="unknown dtype"):
        parse_dtype_overrides(["bits.npy=bfloat16x"])


def test_bare_dtype_applies_to_raw_buffers_only(tmp_path):
    raw, plain = tmp_path / "raw.npy", tmp_path / "plain.npy"
    np.save(raw, np.ones(2, dtype=ml_dtypes.bfloat16))
    np.save(plain, np.ones(2, dtype=np.uint16))
    overrides = parse_dtype_overrides(["bfloat16"])
    assert load_buffer(str(raw), overrides).array.dtype == ml_dtypes.bfloat16
    assert load_buffer(str(plain), overrides).array.dtype == np.uint16


def test_loaded_buffers_are_c_ordered(tmp_path):
    path = tmp_path / "f.npy"
    np.save(path, np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
    array = load_buffer(str(path), {}).array
    assert array.flags.c_contiguous and array.flags.writeable
    assert array.tolist() == [[0, 1, 2], [3, 4, 5]]


@pytest.fixture
def kernel(tmp_path: Path) -> str:
    path = tmp_path / "add.ptx"
    path.write_text(ADD_SCALAR)
    return str(path)


def test_run_writes_buffers_to_out_dir(kernel, tmp_path, capsys):
    buf = tmp_path / "x.npy"
    np.save(buf, np.arange(8, dtype=np.float32))
    out_dir = tmp_path / "out"
    argv = [kernel, "--kernel", "add_scalar", "--grid", "1", "--block", "8",
            str(buf), "f32:0.5", "u32:6", "--out-dir", str(out_dir)]
    assert main(argv) == 0, capsys.readouterr().err
    assert np.load(out_dir / "x.npy").tolist() == [0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6, 7]
    assert np.load(buf).tolist() == list(range(8))  # the input file is left alone
    assert main(argv[:-2]) == 0  # no --out-dir: a summary, nothing written
    assert capsys.readouterr().out.startswith("x.npy: float32[8] min=0.5 max=7")


def test_errors_are_one_message(kernel, tmp_path, capsys):
    buf = tmp_path / "x.npy"
    np.save(buf, np.zeros(8, np.float32))
    base = [kernel, "--grid", "1", "--block", "8", str(buf), "f32:1", "u32:8"]
    assert main([*base, "--kernel", "missing"]) == 1
    assert capsys.readouterr().err == (
        "smalti-sim: error: no kernel named 'missing' in the PTX module (kernels: add_scalar)\n")
    assert main([*base[:-1], "--kernel", "add_scalar"]) == 1
    assert "3 kernel arguments expected, 2 given" in capsys.readouterr().err
    assert main([*base, "--kernel", "add_scalar", "nothere.npy"]) == 1
    assert "no such file: nothere.npy" in capsys.readouterr().err
    assert main([kernel, "--kernel", "add_scalar", "--block", "8", str(buf)]) == 1
    assert "--grid" in capsys.readouterr().err


def test_malformed_ptx_names_the_line(tmp_path, capsys):
    path = tmp_path / "bad.ptx"
    path.write_text(ADD_SCALAR.replace("add.f32 %f2, %f1, %f0;", "add.f32 %f2, %f1, %f0"))
    assert main([str(path), "--kernel", "add_scalar", "--grid", "1", "--block", "1"]) == 1
    assert capsys.readouterr().err.startswith(f"{path}:")


def test_console_script_end_to_end(kernel, tmp_path):
    buf = tmp_path / "x.npy"
    np.save(buf, np.ones(4, np.float32))
    script = Path(sys.executable).parent / "smalti-sim"
    result = subprocess.run(
        [str(script), kernel, "--kernel", "add_scalar", "--grid", "1", "--block", "4",
         str(buf), "f32:2", "u32:4", "--out-dir", str(tmp_path / "o")],
        capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert np.load(tmp_path / "o" / "x.npy").tolist() == [3, 3, 3, 3]


def _write_map(path: Path, buffer: str, **fields) -> str:
    import json

    path.write_text(json.dumps({"tensor_map": {"buffer": buffer, **fields}}))
    return str(path)


def test_tensor_map_json_with_a_unit_dimension_of_stride_zero(tmp_path):
    from tests.async_kernels import tma_load_kernel

    a = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "out.npy", np.zeros(a.nbytes, np.uint8))
    (tmp_path / "k.ptx").write_text(tma_load_kernel(3, [(0, (0, 0, 0))], a.nbytes, a.nbytes))
    tmap = _write_map(tmp_path / "a_map.json", "a.npy", data_type="FLOAT32",
                      global_dim=[32, 16, 1], global_strides=[128, 0], box_dim=[32, 16, 1],
                      element_strides=[1, 1, 1], swizzle="NONE", l2_promotion="L2_128B")
    out_dir = tmp_path / "out"
    status = main([str(tmp_path / "k.ptx"), "--kernel", "tma_load", "--grid", "1", "--block",
                   "128", tmap, str(tmp_path / "out.npy"), "--out-dir", str(out_dir)])
    assert status == 0
    np.testing.assert_array_equal(np.load(out_dir / "out.npy").view(np.float32).reshape(16, 32),
                                  a)


def test_tensor_maps_from_json_run_tritons_host_descriptor_matmul(tmp_path):
    """Triton's host-descriptor matmul from the command line: each map JSON names the .npy of
    its tensor; C's buffer is written to --out-dir with the TMA store's result."""
    import json

    corpus = Path(__file__).parent / "fixtures" / "foreign_ptx" / "triton"
    launch = json.loads((corpus / "matmul_tma_host.json").read_text())
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 256)).astype(np.float16)
    b = rng.standard_normal((256, 128)).astype(np.float16)
    args = []
    for name, array in (("a", a), ("b", b), ("c", np.zeros((128, 128), np.float16))):
        np.save(tmp_path / f"{name}.npy", array)
        rows, cols = array.shape
        args += [_write_map(tmp_path / f"{name}.json", f"{name}.npy", data_type="FLOAT16",
                            global_dim=[cols, rows], global_strides=[2 * cols],
                            box_dim=[64, 64], swizzle="128B"),
                 f"s32:{rows}", f"s32:{cols}", f"s64:{cols}", "s64:1"]
    status = main([str(corpus / "matmul_tma_host.ptx"), "--kernel", launch["kernel"],
                   "--grid", "2,2", "--block", "128", "--shared-bytes",
                   str(launch["shared_bytes"]), *args, "s32:256", "u64:0", "u64:0",
                   "--out-dir", str(tmp_path / "out")])
    assert status == 0
    c = np.load(tmp_path / "out" / "c.npy")
    np.testing.assert_allclose(c.astype(np.float64), a.astype(np.float64) @ b, rtol=2e-3,
                               atol=2e-2)


def test_bad_tensor_map_json_is_a_diagnostic(tmp_path, capsys):
    np.save(tmp_path / "a.npy", np.zeros((4, 8), np.float32))
    tmap = _write_map(tmp_path / "m.json", "a.npy", data_type="FLOAT32", global_dim=[8, 4],
                      global_strides=[30], box_dim=[8, 4])
    (tmp_path / "k.ptx").write_text(ADD_SCALAR)
    status = main([str(tmp_path / "k.ptx"), "--kernel", "add_scalar", "--grid", "1",
                   "--block", "32", tmap, "f32:1", "u32:1"])
    assert status == 1
    assert "m.json: invalid TensorMap: global strides must be positive multiples of 16" in (
        capsys.readouterr().err)
