"""numgemm.report: the bench's rows, flags and tables."""

from numgemm import report


def test_table_has_the_columns():
    row = report.Row("int8", 512, "tuned", "int8_ptx_mma_k32", "cfg", ms=1.0, tops=2.0, vs_wmma=1.5)
    text = report.table([row])
    for header in ("x WMMA", "x fp16_wmma", "x library", "% ceil", "GB/s", "% copy", "compile s", "host us",
                   "launch us"):
        assert header in text
    assert "1.50" in text


def test_rows_to_distrust_are_flagged():
    rows = [report.Row("int8", 1024, "tuned", "k", "cfg", ms=1.0, ceiling_pct=50.0),
            report.Row("int8", 2048, "tuned", "k", "cfg", ms=20.0, ceiling_pct=50.0),      # 20x for 8x the work
            report.Row("int8", 4096, "tuned", "k", "cfg", ms=160.0, ceiling_pct=101.0)]
    report.flag(rows)
    assert rows[0].flags == ""
    assert rows[1].flags.startswith("grows faster than work")
    assert rows[2].flags == "above its instruction's ceiling"
