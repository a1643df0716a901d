"""numgemm.bench: the CLI, its data and its checks (the timing itself needs a GPU)."""

import subprocess
import sys
from pathlib import Path

import pytest

from numgemm import bench, microbench, registry, report, selection
from tests.conftest import HAVE_GPU

ROOT = Path(__file__).resolve().parent.parent


def test_arguments_narrow_the_run():
    args = bench.parse(["--precision", "int8", "--sizes", "512", "--preset", "tuned",
                        "--kernels", "int8_wmma"])
    chosen = selection.select(args)
    assert [(p, n) for p, n, _ in chosen] == [("tuned", "int8_wmma")]
    everything = selection.select(bench.parse(["--all"]))
    assert len(everything) == sum(len(selection.select(bench.parse(["--preset", p]))) for p in ("paper", "tuned"))


def test_half_c_is_asked_of_the_fp16_kernels():
    """--out-dtype float16: FP16's kernels store C in half; WMMA, which cannot, is left out."""
    args = bench.parse(["--precision", "fp16", "int8", "--preset", "tuned", "--out-dtype", "float16",
                        "--kernels", "fp16_wmma", "fp16_ptx_mma", "fp16_wgmma", "int8_wgmma"])
    chosen = {n: c for _, n, c in selection.select(args)}
    assert set(chosen) == {"fp16_ptx_mma", "fp16_wgmma", "int8_wgmma"}
    assert chosen["fp16_ptx_mma"].out == chosen["fp16_wgmma"].out == "f16" and chosen["int8_wgmma"].out == ""
    assert selection.default_pick("fp16", (64, 4096, 4096), (9, 0), args)[2].out == "f16"


def test_b_as_n_x_k_is_asked_of_every_kernel_with_a_twin():
    """--b-layout nk: FP16's kernels read B as an N x K weight, the integers'
    as they do; --b-layout kn leaves out INT8's (K-major only); gemm()'s
    choice is the one for that layout."""
    from numgemm import tuning

    nk = {n: c for _, n, c in selection.select(bench.parse(["--precision", "fp16", "int8", "--preset", "tuned",
                                                       "--b-layout", "nk"]))}
    assert {c.b_layout for c in nk.values()} == {"nk"} and "fp16_wgmma" in nk and "int8_wgmma" in nk
    kn = {n: c for _, n, c in selection.select(bench.parse(["--precision", "fp16", "int8", "--preset", "tuned",
                                                       "--b-layout", "kn"]))}
    assert "int8_wgmma" not in kn and kn["fp16_wgmma"].b_layout == "kn"
    args = bench.parse(["--kernels", "default", "--b-layout", "nk"])
    assert selection.default_pick("fp16", (512, 512, 512), (9, 0), args)[2] == tuning.choose("fp16", "nk", 512, 512, 512,
                                                                                          (9, 0))


@pytest.mark.skipif(HAVE_GPU, reason="checks the message given without a GPU")
def test_without_a_gpu_it_says_so_in_one_line():
    proc = subprocess.run([sys.executable, "bench.py", "--all"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stdout.strip().count("\n") == 0 and "needs an NVIDIA GPU" in proc.stdout


def test_family_selection_has_the_base_first():
    chosen = selection.select(bench.parse(["--family", "int4_k64_ablation", "--preset", "tuned"]))
    names = [n for _, n, _ in chosen]
    assert names[0] == "int4_ptx_mma_k64" and len(names) >= 8
    assert {"int4_ptx_mma_k64_ldA1", "int4_ptx_mma_k64_ca", "int4_ptx_mma_k64_kn"} <= set(names)


def test_table_has_the_columns():
    row = report.Row("int8", 512, "tuned", "int8_ptx_mma_k32", "cfg", ms=1.0, tops=2.0, vs_wmma=1.5)
    text = report.table([row])
    for header in ("x WMMA", "x fp16_wmma", "x library", "% ceil", "GB/s", "% copy", "compile s", "host us",
                   "launch us"):
        assert header in text
    assert "1.50" in text


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


def test_rows_to_distrust_are_flagged():
    rows = [report.Row("int8", 1024, "tuned", "k", "cfg", ms=1.0, ceiling_pct=50.0),
            report.Row("int8", 2048, "tuned", "k", "cfg", ms=20.0, ceiling_pct=50.0),      # 20x for 8x the work
            report.Row("int8", 4096, "tuned", "k", "cfg", ms=160.0, ceiling_pct=101.0)]
    report.flag(rows)
    assert rows[0].flags == ""
    assert rows[1].flags.startswith("grows faster than work")
    assert rows[2].flags == "above its instruction's ceiling"


def test_a_library_is_measured_against_the_fastest_instruction():
    """cuBLAS on sm_90 issues wgmma: its share is of the wgmma ceiling where
    one was measured, of mma.sync's where not (and INT4's library is INT8's)."""
    hopper = {"mma_m16n8k16_f16_f32": 640.0, "wgmma_m64n256k16_f32_f16_f16": 910.0,
              "mma_m16n8k32_s8_s32": 1290.0, "wgmma_m64n256k32_s32_s8_s8": 1940.0}
    assert microbench.fastest_ceiling("fp16", hopper) == 910.0 and microbench.fastest_ceiling("int8", hopper) == 1940.0
    assert microbench.fastest_ceiling("fp16", {"mma_m16n8k16_f16_f32": 240.0}) == 240.0
    assert microbench.ceiling_for(registry.get("fp16_ptx_mma"), hopper) == 640.0


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
])
def test_a_bad_selection_is_one_line_and_exit_2(argv, message, capsys):
    assert bench.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and err.startswith("bench.py: ")


def test_default_is_gemms_choice_at_each_shape():
    """--kernels default needs no registered name; each shape's pick is what
    gemm() would run there (the tuned winners, else the registry's default)."""
    from numgemm import tuning

    args = bench.parse(["--kernels", "default", "--shapes", "llm"])
    selection.check_selection(args)                 # refuses nothing
    assert selection.wants_default(args) and selection.select(args) == []
    for shape in selection.shapes_of(args):
        preset, name, cfg = selection.default_pick("int8", shape, (9, 0))
        assert (preset, name) == ("tuned", "default")
        assert cfg == tuning.choose("int8", "nk", *shape, (9, 0))
    assert bench.parse(["--tune", "--tune-out", "w.json"]).tune_out == "w.json"


def test_a_layout_other_than_the_precisions_is_timed_beside_its_own():
    """--b-layout nk for FP16 (whose own layout is K x N): gemm()'s pick in
    each layout, so that one run compares them."""
    from numgemm import tuning

    args = bench.parse(["--kernels", "default", "--b-layout", "nk"])
    picks = selection.default_picks("fp16", (16, 4096, 4096), (9, 0), args)
    assert [(name, cfg.b_layout) for _, name, cfg in picks] == [("default", "nk"), ("default KN", "kn")]
    assert picks[1][2] == tuning.choose("fp16", "kn", 16, 4096, 4096, (9, 0))
    assert len(selection.default_picks("int8", (16, 4096, 4096), (9, 0), args)) == 1     # INT8's own layout
