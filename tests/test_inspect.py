"""numgemm.inspect: offline builds and their report, library and command line."""

import subprocess
import sys

from numgemm import registry
from numgemm.inspect import build, main, s4_note
from numgemm.kernels import argtypes, kernel_function


def test_build_reports_resources():
    cfg = registry.get("int8_ptx_mma_k32", "paper")
    b = build(kernel_function(cfg), argtypes(cfg), "sm_90", launch_bounds=(cfg.threads, 1))
    assert b.target == "sm_90" and b.registers > 0 and b.local_bytes == 0
    assert b.histogram()["IMMA.16832.S8.S8"] == b.count("IMMA.16832.S8.S8") > 0
    assert b.histogram(depth=1)["IMMA"] >= b.count("IMMA.16832")
    assert "registers" in b.summary()


def test_s4_note_is_a_fact_about_the_target():
    assert "native" in s4_note("sm_89") and "no native" in s4_note("sm_90")


def test_command_line(capsys, tmp_path):
    assert main(["int8_ptx_mma_k32", "--preset", "paper", "--target", "sm_90", "--hist",
                 "--save", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "IMMA.16832.S8.S8" in out and "registers" in out and "no native s4" in out
    assert any(p.suffix == ".sass" for p in tmp_path.iterdir())
    assert main(["--list"]) == 0
    assert "int4_ptx_mma_k64" in capsys.readouterr().out


def test_module_entry_point():
    proc = subprocess.run([sys.executable, "-m", "numgemm.inspect", "--list"], capture_output=True, text=True)
    assert proc.returncode == 0 and "int8_wmma" in proc.stdout
