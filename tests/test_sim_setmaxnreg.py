"""setmaxnreg: a checked no-op (PTX ISA, "setmaxnreg")."""

import numpy as np
import pytest

from smalti.ptx.toolchain import compile_ptx
from smalti.sim import SimError, run_ptx


def kernel(body: str, threads: int = 256, directives: str = ".minnctapersm 1") -> str:
    return f"""
.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 out)
.maxntid {threads}, 1, 1
{directives}
{{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    .reg .pred %p<2>;
    mov.u32 %r0, %tid.x;
    shr.u32 %r1, %r0, 7;
    setp.eq.u32 %p0, %r1, 0;
{body}
    ld.param.u64 %rd0, [out];
    cvta.to.global.u64 %rd1, %rd0;
    mul.wide.u32 %rd2, %r0, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r0;
    ret;
}}
"""


WARP_SPECIALISED = """
    @%p0 bra $producer;
    setmaxnreg.inc.sync.aligned.u32 232;
    bra $done;
$producer:
    setmaxnreg.dec.sync.aligned.u32 40;
$done:
"""


def test_warp_specialised_budgets_run_and_assemble():
    text = kernel(WARP_SPECIALISED)
    out = np.zeros(256, np.uint32)
    run_ptx(text, "k", 1, 256, [out])
    np.testing.assert_array_equal(out, np.arange(256))
    assert compile_ptx(text).reports["k"].performance_failures == ()


def test_ptxas_ignores_setmaxnreg_without_a_known_entry_budget():
    """ptxas needs .maxntid with .minnctapersm (or .maxnreg) to honour setmaxnreg (C7508)."""
    report = compile_ptx(kernel(WARP_SPECIALISED, directives="")).reports["k"]
    assert any("C7508" in w for w in report.performance_failures)


@pytest.mark.parametrize(("body", "message"), [
    ("    setmaxnreg.inc.sync.aligned.u32 20;", "multiple of 8 in \\[24, 256\\]"),
    ("    setmaxnreg.inc.sync.aligned.u32 100;", "multiple of 8"),
    ("    @%p0 setmaxnreg.dec.sync.aligned.u32 40;\n    setp.ne.u32 %p1, %r0, 5;\n"
     "    @%p1 setmaxnreg.dec.sync.aligned.u32 40;", "has not reached it"),
    ("    setmaxnreg.inc.sync.aligned.u32 200;\n    setmaxnreg.inc.sync.aligned.u32 160;",
     ".inc may only raise"),
])
def test_misuse_is_reported(body, message):
    with pytest.raises(SimError, match=message):
        run_ptx(kernel(body), "k", 1, 256, [np.zeros(256, np.uint32)])
