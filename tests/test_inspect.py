"""numgemm.inspect: the command line over offline builds."""

import subprocess
import sys

import pytest

from numgemm.inspect import conversion_note, main, s4_note


def test_s4_note_is_a_fact_about_the_target():
    assert "native" in s4_note("sm_89") and "no native" in s4_note("sm_90")
    assert conversion_note("sm_89") == "" and "e4m3 and e5m2 mma.sync to f16 HMMA" in conversion_note("sm_90")


@pytest.mark.builds
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


def test_module_entry_point_is_quiet():
    """Running the module imports no second copy of it (runpy warns when the
    package's own imports loaded numgemm.inspect first)."""
    proc = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-m", "numgemm.inspect", "--list"],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and "RuntimeWarning" not in proc.stderr


def test_an_unknown_name_is_one_line(capsys):
    assert main(["int8_ptx_tma", "--preset", "paper"]) == 2
    err = capsys.readouterr().err.strip()
    assert "it is in preset 'tuned'" in err and "\n" not in err


@pytest.mark.builds
def test_a_closed_pipe_ends_quietly():
    """`--sass | head`: some 300 KB of SASS into a pipe its reader has closed."""
    cmd = f"{sys.executable} -m numgemm.inspect int8_ptx_mma_k32 --target sm_80 --sass | head -1"
    done = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    assert done.stdout.startswith("sm_80")
    assert done.stderr == ""
