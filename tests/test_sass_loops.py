"""smalti.ptx.sass reading loops out of nvdisasm's SASS: the innermost loops of a kernel and
its main loop, passing over what ptxas lays out like loops but is not one (thread-electing
retry loops, spin waits, a wait's slow path placed after EXIT and branching back)."""

from smalti.ptx.sass import innermost_loops, main_loop

SASS = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
.L_x_0:
        /*0010*/                   IADD3 R2, R2, 0x1, RZ ;
.L_x_1:
        /*0020*/                   FADD R3, R3, R4 ;
        /*0030*/                   FMUL R3, R3, R4 ;
        /*0040*/              @P0 BRA `(.L_x_1) ;
        /*0050*/              @P1 BRA `(.L_x_0) ;
.L_x_2:
        /*0060*/                   ELECT P2, URZ, PT ;
        /*0070*/                   NOP ;
        /*0080*/                   BRA.U.ANY `(.L_x_2) ;
        /*0090*/                   EXIT ;
.L_x_3:
        /*00a0*/                   BRA `(.L_x_3);
"""


def test_innermost_loops_pass_over_outer_retry_and_trap_loops():
    (loop,) = innermost_loops(SASS)
    assert loop.length == 3
    assert "FADD" in loop.instructions[0]


# A K loop whose barrier wait has its slow path out of line, after EXIT, branching back to
# the label after the wait: that branch is no loop, though it spans the HGMMA too.
WAIT_OUT_OF_LINE = """
.L_x_3:
        /*0000*/                   IADD3 R2, R2, 0x1, RZ ;
        /*0004*/                   IMAD R5, R2, 0x80, RZ ;
        /*0008*/                   IMAD R6, R2, 0x40, RZ ;
        /*000c*/                   LOP3.LUT R7, R5, R6, RZ, 0x3c, !PT ;
        /*000e*/                   LEA R8, R7, R9, 0x1 ;
        /*0010*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR6], R18 ;
        /*0020*/              @!P0 BRA `(.L_x_2) ;
.L_x_8:
        /*0030*/                   HGMMA.64x128x16.F32.BF16 R88, gdesc[UR20].tnspB, R88 ;
        /*0040*/                   FADD R3, R3, R4 ;
        /*0050*/              @!P1 BRA `(.L_x_3) ;
        /*0060*/                   EXIT ;
.L_x_2:
        /*0070*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR6], R18 ;
        /*0080*/              @!P0 BRA `(.L_x_2) ;
        /*0090*/                   BRA `(.L_x_8) ;
"""


def test_main_loop_passes_over_out_of_line_code_branching_back():
    loop = main_loop(WAIT_OUT_OF_LINE)  # the wait's span is the shorter one
    assert loop.length == 10
    assert "IADD3" in loop.instructions[0]
    assert loop.macs == 64 * 128 * 16
