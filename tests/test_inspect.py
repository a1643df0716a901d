"""numgemm.inspect: offline builds and their report, library and command line."""

import subprocess
import sys

from numgemm import registry
from numgemm.inspect import Build, build, main, s4_note
from numgemm.kernels import argtypes, kernel_function


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


def test_s4_note_is_a_fact_about_the_target():
    assert "native" in s4_note("sm_89") and "no native" in s4_note("sm_90")


def test_command_line(capsys, tmp_path):
    assert main(["int8_ptx_mma_k32", "--preset", "paper", "--target", "sm_90", "--hist", "--loop",
                 "--save", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "IMMA.16832.S8.S8" in out and "registers" in out and "no native s4" in out
    assert "main loop:" in out and "longest stretch without an mma" in out
    assert any(p.suffix == ".sass" for p in tmp_path.iterdir())
    assert main(["--list"]) == 0
    assert "int4_ptx_mma_k64" in capsys.readouterr().out


def test_module_entry_point():
    proc = subprocess.run([sys.executable, "-m", "numgemm.inspect", "--list"], capture_output=True, text=True)
    assert proc.returncode == 0 and "int8_wmma" in proc.stdout
