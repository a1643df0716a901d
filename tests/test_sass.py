"""numgemm.sass: offline builds, their resources, instructions and loops."""

import pytest

from numgemm import registry
from numgemm.kernel import argtypes, kernel_function
from numgemm.sass import Build, build


@pytest.mark.builds
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


def test_the_main_loop_is_the_innermost_with_mmas_and_a_wait_stub_is_no_loop():
    """A persistent wgmma kernel: its tile loop holds the k loop and the
    first k-tile peeled (more wgmmas than the k loop); an mbarrier wait's
    retry stub after the function's end jumps back into the k loop
    unconditionally."""
    sass = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
.L_x_0:
        /*0010*/                   HGMMA.64x256x16.F32 R24, gdesc[UR4], R24 ;
.L_x_1:
        /*0020*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R19+UR16], R7 ;
        /*0030*/              @!P0 BRA `(.L_x_9) ;
.L_x_2:
        /*0040*/                   HGMMA.64x256x16.F32 R24, gdesc[UR4], R24 ;
        /*0050*/                   UTMALDG.3D [UR8], [UR10] ;
        /*0060*/              @P1 BRA `(.L_x_1) ;
        /*0070*/                   HGMMA.64x256x16.F32 R24, gdesc[UR4], R24 ;
        /*0080*/              @P2 BRA `(.L_x_0) ;
        /*0090*/                   EXIT ;
.L_x_9:
        /*00a0*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R19+UR16], R7 ;
        /*00b0*/              @!P0 BRA `(.L_x_9) ;
        /*00c0*/                   BRA `(.L_x_2) ;
"""
    b = Build(name="k", target="sm_90a", cubin=b"", seconds=0.0, sass=sass, registers=1, shared_bytes=0,
              local_bytes=0)
    assert sorted(len(lp.ops) for lp in b.loops) == [2, 5, 8]    # the stub's spin, the k loop, the tile loop
    assert b.main_loop().shape == "W.MG." and "mbarrier waits 1" in b.main_loop().summary()


@pytest.mark.builds
def test_ptxas_losses_are_read_from_the_link_that_made_the_cubin():
    """A wgmma kernel whose routines are linked as calls (warp_wgmma.rules
    refuse it for this reason; built around them here): ptxas serialises its
    wgmmas and ignores setmaxnreg, and says so in the cubin link's report,
    which refuse_ptxas_losses turns into a build error."""
    import copy

    from numgemm.sass import front_end, library_cubin, ptxas_losses, refuse_ptxas_losses

    cfg = copy.copy(registry.get("fp16_wgmma", "tuned"))
    object.__setattr__(cfg, "linkage", "link")
    lib, _ = front_end(kernel_function(cfg), argtypes(cfg), (9, 0), launch_bounds=(cfg.threads, cfg.min_blocks))
    assert library_cubin(lib, "sm_90a")
    losses = ptxas_losses(lib, "sm_90a")
    assert any("C7509" in line and "serialized" in line for line in losses), losses
    assert any("C7504" in line and "setmaxnreg" in line for line in losses), losses
    with pytest.raises(RuntimeError, match="ptxas made the code worse"):
        refuse_ptxas_losses(lib, "sm_90a", cfg.name)
