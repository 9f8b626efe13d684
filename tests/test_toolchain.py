"""ptxas / nvdisasm wrappers: reports, rejections quoting the bad line, crashes, SASS."""

from __future__ import annotations

import os
import stat
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from smalti.ptx.parser import parse_module
from smalti.ptx.printer import print_module
from smalti.ptx.ptxas_log import PtxasReport, parse_ptxas_log
from smalti.ptx.toolchain import (
    PtxasCrash,
    PtxasError,
    ToolchainError,
    compile_ptx,
    disassemble,
    find_tool,
    sass_opcode_counts,
)

FIXTURES = Path(__file__).parent / "fixtures" / "cuda"

VECTOR_ADD = """\
.version 8.0
.target sm_90a
.address_size 64

.visible .entry vadd(
\t.param .u64 vadd_param_0,
\t.param .u64 vadd_param_1
)
.reqntid 128, 1, 1
{
\t.reg .b32 %r<2>;
\t.reg .f32 %f<8>;
\t.reg .b64 %rd<6>;

\tld.param.u64 %rd1, [vadd_param_0];
\tld.param.u64 %rd2, [vadd_param_1];
\tcvta.to.global.u64 %rd1, %rd1;
\tcvta.to.global.u64 %rd2, %rd2;
\tmov.u32 %r1, %tid.x;
\tmul.wide.u32 %rd3, %r1, 16;
\tadd.s64 %rd4, %rd1, %rd3;
\tadd.s64 %rd5, %rd2, %rd3;
\tld.global.v4.f32 {%f0, %f1, %f2, %f3}, [%rd4];
\tld.global.v4.f32 {%f4, %f5, %f6, %f7}, [%rd5];
\tadd.f32 %f0, %f0, %f4;
\tadd.f32 %f1, %f1, %f5;
\tadd.f32 %f2, %f2, %f6;
\tadd.f32 %f3, %f3, %f7;
\tst.global.v4.f32 [%rd4], {%f0, %f1, %f2, %f3};
\tret;
}
"""

# TMA load into shared memory, an mbarrier wait, one wgmma from shared-memory descriptors.
WGMMA_TMA = """\
.version 8.0
.target sm_90a
.address_size 64

.visible .entry wgmma_tma(
\t.param .align 64 .b8 wgmma_tma_param_0[128],
\t.param .u64 .ptr .global .align 16 wgmma_tma_param_1
)
.reqntid 128, 1, 1
{
\t.reg .pred %p<4>;
\t.reg .b32 %r<8>;
\t.reg .b64 %rd<8>;
\t.reg .f32 %f<4>;
\t.shared .align 1024 .b8 smem[2048];
\t.shared .align 8 .b64 bar[1];

\tmov.u32 %r1, %tid.x;
\tsetp.eq.u32 %p1, %r1, 0;
\tmov.u32 %r2, bar;
\tmov.u32 %r3, smem;
\t@%p1 mbarrier.init.shared::cta.b64 [%r2], 1;
\tfence.mbarrier_init.release.cluster;
\tbar.sync 0;
\tmov.b32 %r4, 0;
\t@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 %rd2, [%r2], 2048;
\tmov.u64 %rd1, wgmma_tma_param_0;
\tcvta.param.u64 %rd1, %rd1;
\t@%p1 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes \
[%r3], [%rd1, {%r4, %r4}], [%r2];
$L__wait:
\tmbarrier.try_wait.parity.shared::cta.b64 %p2, [%r2], 0;
\t@!%p2 bra $L__wait;
\tcvt.u64.u32 %rd2, %r3;
\tshr.u64 %rd2, %rd2, 4;
\tand.b64 %rd2, %rd2, 16383;
\tor.b64 %rd3, %rd2, 0x0000004000010000;
\tadd.s64 %rd4, %rd3, 64;
\tsetp.ne.b32 %p3, %r4, 0;
\tmov.f32 %f0, 0f00000000;
\tmov.f32 %f1, 0f00000000;
\tmov.f32 %f2, 0f00000000;
\tmov.f32 %f3, 0f00000000;
\twgmma.fence.sync.aligned;
\twgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%f0, %f1, %f2, %f3}, %rd3, %rd4, %p3, \
1, 1, 0, 0;
\twgmma.commit_group.sync.aligned;
\twgmma.wait_group.sync.aligned 0;
\tld.param.u64 %rd5, [wgmma_tma_param_1];
\tcvta.to.global.u64 %rd5, %rd5;
\tmul.wide.u32 %rd6, %r1, 16;
\tadd.s64 %rd7, %rd5, %rd6;
\tst.global.v4.f32 [%rd7], {%f0, %f1, %f2, %f3};
\tret;
}
"""

SETMAXNREG_WITHOUT_MAXNTID = """\
.version 8.0
.target sm_90a
.address_size 64
.visible .entry producer_consumer()
{
\t.reg .b32 %r<2>;
\t.reg .pred %p<2>;
\tmov.u32 %r1, %tid.x;
\tsetp.lt.u32 %p1, %r1, 128;
\t@%p1 bra $L__consumer;
\tsetmaxnreg.dec.sync.aligned.u32 40;
\tret;
$L__consumer:
\tsetmaxnreg.inc.sync.aligned.u32 232;
\tret;
}
"""


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp root of our own, to check the wrappers leave nothing behind."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_tools_are_found_in_the_wheels() -> None:
    for name in ("ptxas", "nvdisasm", "cuobjdump"):
        path = find_tool(name)
        assert path.name == name and os.access(path, os.X_OK)
        assert "nvidia" in path.parts


def test_environment_overrides_the_tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _script(tmp_path / "myptxas", "exit 0")
    monkeypatch.setenv("SMALTI_PTXAS", str(fake))
    assert find_tool("ptxas") == fake
    monkeypatch.setenv("SMALTI_NVDISASM", str(tmp_path / "missing"))
    with pytest.raises(ToolchainError, match="SMALTI_NVDISASM"):
        find_tool("nvdisasm")


def test_vector_kernel_compiles_with_a_clean_report(private_tmp: Path) -> None:
    result = compile_ptx(VECTOR_ADD)
    assert result.cubin[:4] == b"\x7fELF"
    report = result.reports["vadd"]
    assert report.registers > 0
    assert (report.spill_stores, report.spill_loads, report.stack_frame) == (0, 0, 0)
    assert report.warnings == () and report.performance_failures == ()
    assert "Used" in result.log
    assert list(private_tmp.iterdir()) == []


def test_disassembly_shows_the_expected_opcodes(private_tmp: Path) -> None:
    sass = disassemble(compile_ptx(VECTOR_ADD).cubin)
    counts = sass_opcode_counts(sass)
    assert counts["LDG"] == 2 and counts["STG"] == 1 and counts["FADD"] == 4
    assert counts["EXIT"] >= 1
    assert list(private_tmp.iterdir()) == []


def test_wgmma_and_tma_reach_sass() -> None:
    result = compile_ptx(WGMMA_TMA)
    report = result.reports["wgmma_tma"]
    assert report.shared_bytes >= 2048 + 8
    assert report.barriers == 1
    counts = sass_opcode_counts(disassemble(result.cubin))
    assert counts["HGMMA"] == 1 and counts["UTMALDG"] == 1


def test_parsed_and_reprinted_ptx_assembles_to_the_same_sass() -> None:
    for text in (WGMMA_TMA, (FIXTURES / "pointwise.ptx").read_text()):
        original = sass_opcode_counts(disassemble(compile_ptx(text).cubin))
        reprinted = print_module(parse_module(text))
        assert sass_opcode_counts(disassemble(compile_ptx(reprinted).cubin)) == original


def test_rejection_quotes_the_offending_line(private_tmp: Path) -> None:
    bad = VECTOR_ADD.replace("add.f32 %f2, %f2, %f6;", "add.f32 %f2, %f2, %q6;")
    with pytest.raises(PtxasError) as info:
        compile_ptx(bad)
    message = str(info.value)
    assert "kernel 'vadd'" in message
    assert "Unknown symbol '%q6'" in message
    assert "line 27: add.f32 %f2, %f2, %q6;" in message
    assert not isinstance(info.value, PtxasCrash)
    assert list(private_tmp.iterdir()) == []


def test_setmaxnreg_without_maxntid_is_a_performance_failure() -> None:
    report = compile_ptx(SETMAXNREG_WITHOUT_MAXNTID).reports["producer_consumer"]
    assert len(report.performance_failures) == 1
    assert "(C7508)" in report.performance_failures[0]


def test_spills_are_reported() -> None:
    loads = "\n".join(
        f"\tld.global.v4.f32 {{%f{4 * i}, %f{4 * i + 1}, %f{4 * i + 2}, %f{4 * i + 3}}}, "
        f"[%rd1+{16 * i}];" for i in range(8))
    stores = "\n".join(
        f"\tst.global.v4.f32 [%rd1+{512 + 16 * i}], {{%f{4 * i + 3}, %f{4 * i + 2}, "
        f"%f{4 * i + 1}, %f{4 * i}}};" for i in range(8))
    ptx = (".version 8.0\n.target sm_90a\n.address_size 64\n"
           ".visible .entry spilly(.param .u64 p)\n.maxnreg 24\n{\n"
           "\t.reg .f32 %f<32>;\n\t.reg .b64 %rd<2>;\n\tld.param.u64 %rd1, [p];\n"
           f"\tcvta.to.global.u64 %rd1, %rd1;\n{loads}\n\tmembar.gl;\n{stores}\n\tret;\n}}\n")
    report = compile_ptx(ptx).reports["spilly"]
    assert report.spill_stores > 0 and report.spill_loads > 0
    assert any("spilled" in w for w in report.warnings)
    assert report.performance_failures == ()


def test_a_crashing_ptxas_is_its_own_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           private_tmp: Path) -> None:
    monkeypatch.setenv("SMALTI_PTXAS", str(_script(tmp_path / "ptxas", "kill -SEGV $$")))
    with pytest.raises(PtxasCrash, match=r"crashed \(killed by SIGSEGV\) compiling kernel 'k'"):
        compile_ptx(VECTOR_ADD, kernel_hint="k")
    assert list(private_tmp.iterdir()) == []


def test_a_hanging_ptxas_times_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SMALTI_PTXAS", str(_script(tmp_path / "ptxas", "exec sleep 30")))
    with pytest.raises(PtxasError, match=r"timed out after 0\.5 s compiling kernel 'vadd'"):
        compile_ptx(VECTOR_ADD, timeout_s=0.5)


LOG = """\
ptxas warning : For entry b adjusting per thread register count of 16 to lower bound of 24
ptxas warning : Registers are spilled to local memory in function 'b', 8 bytes spill stores, \
4 bytes spill loads
ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; unable to determine \
register count at entry.
ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized \
due to the presence of Extern calls in the function 'a'.
ptxas info    : 0 bytes gmem, 24 bytes cmem[4]
ptxas info    : Compiling entry function 'a' for 'sm_90a'
ptxas info    : Function properties for a
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 1032 bytes smem, 400 bytes cmem[0], \
8 bytes cmem[2]
ptxas info    : Compiling entry function 'b' for 'sm_90a'
ptxas info    : Function properties for b
    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 24 registers, used 0 barriers
"""


def test_log_reports_per_kernel() -> None:
    reports = parse_ptxas_log(LOG)
    a, b = reports["a"], reports["b"]
    c7508 = ("(C7508) Potential Performance Loss: 'setmaxnreg' ignored; unable to determine "
             "register count at entry.")
    assert (a.registers, a.barriers, a.shared_bytes, a.constant_bytes) == (168, 1, 1032, 408)
    assert (b.registers, b.stack_frame, b.spill_stores, b.spill_loads) == (24, 16, 8, 4)
    c7515 = ("(C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized "
             "due to the presence of Extern calls in the function 'a'.")
    assert a.warnings == a.performance_failures == (c7508, c7515)
    assert b.performance_failures == (c7508,)
    assert len(b.warnings) == 3
    hinted = parse_ptxas_log(LOG, kernel_hint="b")
    assert hinted["a"].performance_failures == (c7515,)
    assert hinted["b"].performance_failures == (c7508,)


def test_report_without_warnings_has_no_failures() -> None:
    assert PtxasReport("k", registers=10).performance_failures == ()


def test_opcode_counts_read_guards_and_modifiers() -> None:
    sass = """
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0070*/               @P0 EXIT ;
        /*00e0*/                   LDG.E.CONSTANT R3, desc[UR4][R2.64] ;
        /*00f0*/              @!P1 LDG.E R4, desc[UR4][R2.64] ;
        /*0100*/                   HGMMA.64x8x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT ;
        /*0110*/               @UP0 UTMALDG.2D [UR8], [UR4] ;
        /*0120*/                   FFMA R5, R4, R3, R2 ;
    """
    assert sass_opcode_counts(sass) == Counter(
        {"LDG": 2, "LDC": 1, "EXIT": 1, "HGMMA": 1, "UTMALDG": 1, "FFMA": 1})
