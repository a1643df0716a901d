"""numgemm.insight: --sass and --diff, offline (no GPU)."""

import pytest

from numgemm import bench, registry
from numgemm.insight import FIGURES, figures
from numgemm.kernel import build_config
from numgemm.sass import CLASSES, instruction_class


def test_instruction_classes():
    assert instruction_class("IMMA.16832.S8.S8") == instruction_class("HGMMA.64x256x16.F32") == "tensor"
    assert instruction_class("LDGSTS.E.BYPASS.LTC128B.128") == instruction_class("UTMALDG.3D") == "async copy"
    assert instruction_class("UIADD3") == instruction_class("IADD3") == "int ALU"
    assert instruction_class("SYNCS.PHASECHK.TRANS64") == "barrier"
    assert instruction_class("S2R") == instruction_class("MOV") == "other"


@pytest.mark.builds
def test_figures_add_up():
    cfg = registry.get("int8_ptx_mma_k32", "paper")
    b = build_config(cfg, "sm_89")
    f = figures(cfg, b)
    assert sum(f[c] for c in (*CLASSES, "other")) == f["instructions"] == len(b.instructions)
    assert f["tensor"] == b.count("IMMA") and f["ldmatrix"] == b.count("LDSM")
    assert f["loop mmas"] == b.main_loop().mmas and f["loop per mma"] == round(f["loop"] / f["loop mmas"], 2)
    assert f["shared B"] >= cfg.smem_bytes and list(f) == list(FIGURES)


@pytest.mark.builds
def test_sass_report(capsys):
    assert bench.main(["--sass", "--kernels", "int8_ptx_mma_k32", "--preset", "paper", "--targets", "sm_89"]) == 0
    out = capsys.readouterr().out
    assert "| paper    | int8_ptx_mma_k32 | sm_89" in out and "loop per mma" in out
    assert "paper/int8_ptx_mma_k32 [sm_89]: " in out and "M" in out.split("[sm_89]: ")[1]


@pytest.mark.builds
def test_diff_names_the_fields_and_what_moved(capsys):
    assert bench.main(["--diff", "int8_ptx_mma_k32", "int8_ptx_manual_pack", "--preset", "paper",
                       "--targets", "sm_89"]) == 0
    out = capsys.readouterr().out
    assert "| a_ldmatrix | 4   | 0   |" in out and "| b_ldmatrix | 2   | 0   |" in out
    ldsm = next(line for line in out.splitlines() if line.startswith("| ldmatrix"))
    assert ldsm.split("|")[3].strip() == "0" and ldsm.split("|")[4].strip().startswith("-")
