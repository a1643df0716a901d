"""numgemm.profile: reading ncu's raw CSV and the counter tables (no GPU, no ncu)."""

import json
from pathlib import Path

from numgemm import insight, profile

ROOT = Path(__file__).resolve().parent.parent
RAW = (Path(__file__).parent / "data" / "ncu_raw.csv").read_text()      # ncu 2025.3, H200, two launches
STORED = json.loads((ROOT / "results" / "2026-12-01-h200-why" / "profile_int8.json").read_text())


def test_raw_csv_gives_one_dict_per_launch_in_order():
    launches = profile.parse_raw_csv(RAW)
    assert len(launches) == 2
    assert launches[0]["sm__inst_executed_pipe_tensor_op_imma.sum"] == 2097152      # the INT8 kernel
    assert launches[1]["sm__inst_executed_pipe_tensor_op_hmma.sum"] == 4194304      # then the FP16 one
    assert launches[0]["launch__occupancy_per_register_count"] == 2056              # "2,056" in the file
    assert "Array<int" in launches[0]["Kernel Name"]


def test_columns_from_a_stored_launch():
    s = profile.summarize(profile.parse_raw_csv(RAW)[0])
    assert abs(s["tensor pipe %"] - 59.45887) < 1e-4
    assert s["occupancy limiter"] == "registers+shared (1 blocks)"
    assert s["top stalls (warps per issue)"].startswith("math_pipe_throttle 1.67")
    assert s["divergent branches %"] == 0
    assert s["excess sectors %"] is None          # its metrics were not collected in that run: n/a, not 0


def test_not_a_raw_page_is_refused():
    try:
        profile.parse_raw_csv('"Metric name","Metric type"\n"a","b"\n')
    except ValueError as e:
        assert "ID" in str(e)
    else:
        raise AssertionError("parse_raw_csv accepted a file without ncu's header")


def test_child_runs_the_same_selection_without_profile_or_outputs():
    argv = ["--profile", "--kernels", "a", "b", "--clocks", "base", "--json=x.json", "--csv", "y.csv", "--sizes", "8192"]
    assert profile.child_argv(argv) == ["--kernels", "a", "b", "--sizes", "8192"]


def test_ncu_command_profiles_only_the_bracketed_launches():
    cmd = profile.command("ncu", ["a.sum", "b.ratio"], "base", "/tmp/r", ["python", "-m", "numgemm.bench"])
    assert cmd[:5] == ["ncu", "--profile-from-start", "off", "--clock-control", "base"]
    assert "a.sum,b.ratio" in cmd and cmd[-3:] == ["python", "-m", "numgemm.bench"]


def test_unknown_metrics_are_left_out():
    assert profile.usable(["x__a.sum", "y__b.avg.pct"], {"x__a"}) == ["x__a.sum"]
    assert profile.usable(["x__a.sum"], None) == ["x__a.sum"]        # ncu could not list them: ask for all


def test_permission_error_is_one_line():
    msg = profile.permission_problem("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission")
    assert msg and "\n" not in msg
    assert profile.permission_problem("==PROF== Report: x.ncu-rep") is None


def test_family_ratios_and_table_of_stored_rows():
    rows = profile.with_ratios([dict(r) for r in STORED["rows"]], "int8_wmma")
    base = next(r for r in rows if r["kernel"] == "int8_wmma")
    assert base["ratio"]["warp instructions"] == 1.0
    text = profile.profile_table(rows)
    assert "tuned/int8_ptx_mma_k32" in text and "(1.00x)" in text
    for name, _, _ in profile.COLUMNS:
        assert f"| {name}" in text


def test_counter_diff_puts_what_moved_most_first():
    import math

    rows = [dict(r) for r in STORED["rows"]]
    text = insight.counter_diff(rows, ("tuned", "int8_wmma"), ("tuned", "int8_dp4a"))
    ratios = [float(cell.rstrip("x")) for cell in
              (line.split("|")[4].strip() for line in text.splitlines()[3:] if line.startswith("| "))
              if cell and cell != "B / A"]
    assert len(ratios) > 10
    moved = [abs(math.log(r)) for r in ratios if r > 0]
    assert moved == sorted(moved, reverse=True)
