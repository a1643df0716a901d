"""numgemm.sass: offline builds, their resources, instructions and loops."""

from numgemm import registry
from numgemm.kernel import argtypes, kernel_function
from numgemm.sass import Build, build


def test_build_reports_resources():
    cfg = registry.get("int8_ptx_mma_k32", "paper")
    b = build(kernel_function(cfg), argtypes(cfg), "sm_90", launch_bounds=(cfg.threads, 1))
    assert b.target == "sm_90" and b.registers > 0 and b.local_bytes == 0
    assert b.histogram()["IMMA.16832.S8.S8"] == b.count("IMMA.16832.S8.S8") > 0
    assert b.histogram(depth=1)["IMMA"] >= b.count("IMMA.16832")
    assert "registers" in b.summary()


def test_loops_come_from_backward_branches():
    sass = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
.L_x_0:
        /*0010*/                   LDSM.16.M88.4 R4, [R2] ;
        /*0020*/                   HMMA.16816.F32 R8, R4, R6, R8 ;
        /*0030*/                   LDGSTS.E.BYPASS.LTC128B.128 [R5], desc[UR4][R6.64] ;
        /*0040*/                   LDGDEPBAR ;
        /*0050*/                   IADD3 R2, R2, 0x10, RZ ;
        /*0060*/              @P0 BRA `(.L_x_0) ;
        /*0070*/                   BRA `(.L_x_1) ;
.L_x_1:
        /*0080*/                   EXIT ;
"""
    b = Build(name="k", target="sm_90", cubin=b"", seconds=0.0, sass=sass, registers=1, shared_bytes=0,
              local_bytes=0)
    assert len(b.loops) == 1                     # a forward branch is no loop
    loop = b.main_loop()
    assert loop.shape == "LMG..." and loop.mmas == 1 and loop.longest_gap == 4
    assert "mma 1, ldmatrix 1, global loads 1" in loop.summary()
