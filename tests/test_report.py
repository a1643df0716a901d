"""numgemm.report: the bench's rows, flags and tables."""

from numgemm import report


def test_table_has_the_columns():
    row = report.Row("int8", 512, "tuned", "int8_ptx_mma_k32", "cfg", ms=1.0, tops=2.0, vs_wmma=1.5)
    text = report.table([row])
    for header in ("x WMMA", "x fp16_wmma", "x library", "% ceil", "GB/s", "% copy", "compile s", "host us",
                   "launch us"):
        assert header in text
    assert "1.50" in text


def test_a_row_has_the_energy_of_its_timing():
    from numgemm.timing import Measured

    row = report.Row("fp16", 8192, "tuned", "k", "cfg", ms=1.7)
    row.measured(Measured(1.7, [1.7], sm_mhz=1605.0, power_w=690.0, joules=1.2), 2.0 * 8192 ** 3)
    assert (row.sm_mhz, row.power_w, row.joules) == (1605.0, 690.0, 1.2)
    assert abs(row.tops_per_w - 2.0 * 8192 ** 3 / 1.2 / 1e12) < 1e-9
    text = report.table([row])
    assert "J/GEMM" in text and "T(FL)OPS/W" in text and " 1.2 | " in text
    burst = report.Row("fp16", 8192, "tuned", "k", "cfg", ms=1.5)
    burst.measured(Measured(1.5, [1.5], sm_mhz=1980.0, power_w=700.0), 1.0)     # no energy: left empty
    assert burst.joules != burst.joules and burst.tops_per_w != burst.tops_per_w


def test_rows_to_distrust_are_flagged():
    rows = [report.Row("int8", 1024, "tuned", "k", "cfg", ms=1.0, ceiling_pct=50.0),
            report.Row("int8", 2048, "tuned", "k", "cfg", ms=20.0, ceiling_pct=50.0),      # 20x for 8x the work
            report.Row("int8", 4096, "tuned", "k", "cfg", ms=160.0, ceiling_pct=101.0)]
    report.flag(rows)
    assert rows[0].flags == ""
    assert rows[1].flags.startswith("grows faster than work")
    assert rows[2].flags == "above its instruction's ceiling"


def test_the_ladder_shows_energy_where_the_run_has_it():
    """A steady run's ladder carries clock, power, J/GEMM and T(FL)OPS/W per
    row; a burst's, which has no energy, leaves the energy columns out."""
    import json
    from pathlib import Path

    folder = Path(__file__).resolve().parent.parent / "results" / "2026-12-03-h200-steady-ladder"
    texts = {}
    for name in ("ladder", "ladder_burst"):
        data = json.loads((folder / f"{name}.json").read_text())
        texts[name] = report.ladder([report.Row(**r) for r in data["rows"]], data["ceilings"])
    steady = [line for line in texts["ladder"].splitlines() if "int8_wgmma " in line and "| 8192 |" in line]
    assert "J/GEMM" in texts["ladder"] and len(steady) == 1
    cells = [c.strip() for c in steady[0].strip().strip("|").split("|")]
    assert 0 < float(cells[-3]) < 1000 and float(cells[-2]) > 0 and float(cells[-1]) > 0     # W, J, T/W
    assert "J/GEMM" not in texts["ladder_burst"] and "int8_wgmma " in texts["ladder_burst"]
