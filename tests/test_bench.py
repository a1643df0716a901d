"""numgemm.bench: the CLI, its data and its checks (the timing itself needs a GPU)."""

import subprocess
import sys
from pathlib import Path

import pytest

from numgemm import bench, report, selection
from tests.conftest import HAVE_GPU

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(HAVE_GPU, reason="checks the message given without a GPU")
def test_without_a_gpu_it_says_so_in_one_line():
    proc = subprocess.run([sys.executable, "bench.py", "--all"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stdout.strip().count("\n") == 0 and "needs an NVIDIA GPU" in proc.stdout


def test_llm_shapes_and_their_bandwidth():
    """--shapes llm: M = 1, 16, 64, 256 against N = K = 4096 and 8192, then the
    small squares; a row's GB/s counts A and B read once and C written once,
    beside its share of the run's copy bandwidth."""
    args = bench.parse(["--shapes", "llm"])
    shapes = selection.shapes_of(args)
    assert shapes[:4] == [(1, 4096, 4096), (16, 4096, 4096), (64, 4096, 4096), (256, 4096, 4096)]
    assert (16, 8192, 8192) in shapes and shapes[-1] == (2048, 2048, 2048) and len(shapes) == 11
    assert selection.shapes_of(bench.parse(["--shapes", "16x8192x8192"])) == [(16, 8192, 8192)]
    assert selection.shapes_of(bench.parse(["--sizes", "512", "1024"])) == [(512, 512, 512), (1024, 1024, 1024)]
    nbytes = bench.bytes_moved("int4", 1, 16, 8192, 8192)
    assert nbytes == (16 + 8192) * 8192 / 2 + 4 * 16 * 8192
    row, args.copy_gbs = report.Row("int4", "16x8192x8192", "tuned", "k", "cfg", ms=0.010), 4000.0
    bench._bandwidth(row, nbytes, args)
    assert row.gbs == pytest.approx(nbytes / 1e-5 / 1e9) and row.copy_pct == pytest.approx(100 * row.gbs / 4000)


def test_steady_state_is_the_default_and_burst_the_option():
    """Timings hold under the power limit unless --burst asks for the boost
    clock's; --repeats is a burst's count and steady state's least; the
    search (--tune) ranks by bursts."""
    args = bench.parse(["--sizes", "512"])
    assert args.steady is not None and args.steady.min_repeats == 30 and args.repeats == 10
    assert bench.parse(["--sizes", "512", "--repeats", "50"]).steady.min_repeats == 50
    burst = bench.parse(["--sizes", "512", "--burst", "--repeats", "20"])
    assert burst.steady is None and burst.repeats == 20
    assert bench.parse(["--tune", "--sizes", "512"]).steady is None
    text, _ = bench.header("GPU", {}, args)
    assert "timing: steady state: each kernel warmed for 200 ms" in text
    assert "timing: burst: 2 warm-up launches, the median of 20" in bench.header("GPU", {}, burst)[0]


def test_header_says_how_the_inputs_are_drawn():
    text = bench.input_distribution()
    assert "fp16 standard normal" in text and "[-128, 127]" in text and "[-8, 7]" in text


def test_profile_without_ncu_says_so_in_one_line(monkeypatch, capsys):
    from numgemm import profile

    monkeypatch.setattr(profile, "find_ncu", lambda: None)
    assert bench.main(["--profile", "--kernels", "int8_ptx_mma_k32"]) == 1
    out = capsys.readouterr().out.strip()
    assert "ncu" in out and "\n" not in out


@pytest.mark.parametrize("argv,message", [
    (["--kernels", "int8_ptx_mma_k23"], "did you mean 'int8_ptx_mma_k32'"),
    (["--precision", "fp16", "--kernels", "int8_ptx_mma_k32"], "names no kernel"),
    (["--shapes", "16x8192"], "--shapes takes MxNxK"),
    (["--shapes", "16x8192x0"], "--shapes takes MxNxK"),
    (["--shapes", "axbxc"], "--shapes takes MxNxK"),
    (["--sizes", "512", "0"], "--sizes takes positive integers"),
    (["--tune", "--precision", "fp16", "--out-dtype", "float16"], "--out-dtype float16 is not searched"),
    (["--tune", "--precision", "bf16", "--out-dtype", "narrow"], "--out-dtype narrow is not searched"),
])
def test_a_bad_selection_is_one_line_and_exit_2(argv, message, capsys):
    assert bench.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and err.startswith("bench.py: ")


@pytest.mark.parametrize("precision", ["e4m3", "e5m2", "int8"])
def test_ratios_of_every_precision_from_one_run(precision):
    """FP8 has no WMMA baseline: its 'vs WMMA' stays empty while its family's
    ratio and the library's are still taken (a ladder of e5m2 alone crashed here)."""
    from numgemm import registry

    base = registry.family_base(precision)       # int8_wmma for INT8, mma.sync for FP8
    rows = [report.Row(precision, 4096, "tuned", base, "", ms=2.0),
            report.Row(precision, 4096, "tuned", f"{precision}_next", "", ms=1.0)]
    times = {("tuned", r.kernel, 4096): r.ms for r in rows}
    times[("library", bench.PRECISIONS[precision].wide.name, 4096)] = 1.5
    bench._ratios(rows, times, precision)
    assert rows[1].vs_base == 2.0 and rows[1].vs_library == 1.5
    if precision == "int8":
        assert rows[1].vs_wmma == 2.0
    else:
        assert all(r.vs_wmma != r.vs_wmma for r in rows)   # NaN: no WMMA to compare with


def test_claims_runs_its_measurements_into_the_verdicts(monkeypatch, tmp_path, capsys):
    """bench.py --claims end to end with the GPU's parts faked (the timed runs,
    ncu, the SASS facts): every claim gets a verdict, FP8's from its row pair,
    the ceilings are measured once for both runs, and the JSON keeps the
    times (a lost line once left it a NameError)."""
    import json

    from numba import cuda

    from numgemm import claims, profile

    monkeypatch.setattr(cuda, "is_available", lambda: True)
    monkeypatch.setattr(cuda, "get_current_device", lambda: type("Dev", (), {"compute_capability": (9, 0)})())
    monkeypatch.setattr(bench, "device_name", lambda dev: "GPU")
    monkeypatch.setattr(profile, "profile_rows", lambda args, argv: (None, "no ncu here"))
    stored = json.loads((ROOT / "results" / "2026-12-01-h200-why" / "claims.json").read_text())
    monkeypatch.setattr(claims, "sass_facts", lambda *a: stored["sass"])

    measured = {"mma_m16n8k16_f16_f32": 600.0}

    def run(args, ceilings=None):
        if args.preset == "paper":
            assert ceilings is None
            args.copy_gbs = 3000.0
            return None, measured, [report.Row(k[:4], n, "paper", k, "", ms=1.0) for k in claims.KERNELS
                                    for n in args.sizes]
        assert ceilings is measured and args.copy_gbs == 3000.0     # measured once, by the first run
        rows = [report.Row(p, n, preset, "default", "", ms=ms) for n in args.sizes
                for p, preset, ms in (("e4m3", "tuned", 1.0), ("e4m3", "library", 1.2), ("int8", "tuned", 1.1))]
        return None, ceilings, rows

    monkeypatch.setattr(bench, "run", run)
    out = tmp_path / "claims.json"
    assert bench._claims(bench.parse(["--claims", "--sizes", "512", "8192", "--json", str(out)])) == 0
    text = capsys.readouterr().out
    assert "counters at N=8192 (no ncu here)" in text and text.count("\n|") >= 10
    verdicts = json.loads(out.read_text())["claims"]
    assert len(verdicts) == 9 and verdicts[8]["verdict"] == claims.HOLDS
