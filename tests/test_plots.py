"""numgemm.plots on a stored bench run (no GPU)."""

import json
from pathlib import Path

import pytest

from numgemm import plots

RESULTS = Path(__file__).resolve().parent.parent / "results"
STORED = json.loads((RESULTS / "2026-12-01-h200-builds" / "bench_all.json").read_text())


def test_without_matplotlib_it_says_so_in_one_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(plots, "_pyplot", lambda: None)
    assert plots.write(STORED, tmp_path) == []
    assert capsys.readouterr().out.strip() == plots.MISSING


def test_roofline_and_family_charts_from_stored_rows(tmp_path):
    pytest.importorskip("matplotlib")
    paths = plots.write(STORED, tmp_path)
    names = {p.name for p in paths}
    assert "roofline.png" in names and "family_tuned_int8.png" in names
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_shapes_and_energy_charts_where_a_run_has_them(tmp_path):
    """A run over M x N x K shapes gets the chart against the library, shape
    by shape; a steady-state run with energies gets the energy chart; a run
    of square sizes without energies neither."""
    pytest.importorskip("matplotlib")
    llm = json.loads((RESULTS / "2026-12-03-h200-nk-narrow" / "llm_nk.json").read_text())
    steady = json.loads((RESULTS / "2026-12-03-h200-steady" / "steady_8192.json").read_text())
    assert {p.name for p in plots.write(llm, tmp_path / "llm")} == {"roofline.png", "shapes.png"}
    assert {p.name for p in plots.write(steady, tmp_path / "steady")} == {"roofline.png", "energy.png"}
    assert not {"shapes.png", "energy.png"} & {p.name for p in plots.write(STORED, tmp_path / "all")}


def test_a_precisions_roofs_are_its_instructions():
    """INT4's panel has its own s4 mma.sync roof and the s8 ones its widening
    kernels run on; FP16's only its own."""
    ceilings = {"mma_m16n8k16_f16_f32": 645.0, "wgmma_m64n256k16_f32_f16_f16": 899.0, "mma_m16n8k32_s8_s32": 1296.0,
                "mma_m16n8k64_s4_s32": 48.0, "wgmma_m64n256k32_s32_s8_s8": 1945.0}
    assert set(plots._roofs("fp16", ceilings)) == {"mma_m16n8k16_f16_f32", "wgmma_m64n256k16_f32_f16_f16"}
    assert set(plots._roofs("int4", ceilings)) == {"mma_m16n8k64_s4_s32", "mma_m16n8k32_s8_s32",
                                                   "wgmma_m64n256k32_s32_s8_s8"}


def test_intensity_counts_each_operand_once():
    # int8 N=1024: 2 N^3 operations over N^2 (A) + N^2 (B) bytes + 4 N^2 (C)
    assert plots.intensity("int8", 1024) == pytest.approx(2 * 1024 / 6)
