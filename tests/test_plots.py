"""numgemm.plots on a stored bench run (no GPU)."""

import json
from pathlib import Path

import pytest

from numgemm import plots

STORED = json.loads((Path(__file__).resolve().parent.parent / "results" / "2026-12-01-h200-builds"
                     / "bench_all.json").read_text())


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


def test_intensity_counts_each_operand_once():
    # int8 N=1024: 2 N^3 operations over N^2 (A) + N^2 (B) bytes + 4 N^2 (C)
    assert plots.intensity("int8", 1024) == pytest.approx(2 * 1024 / 6)
