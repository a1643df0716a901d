"""numgemm.selection: the kernels and shapes a bench run covers, from its arguments."""

import numpy as np
import pytest

from numgemm import bench, selection


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


def test_each_16_bit_float_takes_its_own_narrow_c():
    """--out-dtype narrow: FP16's C in float16, BF16's in bfloat16 (as F.linear
    returns each); --out-dtype bfloat16 leaves FP16's kernels out, and float16
    BF16's; the integers keep int32."""
    kernels = ["--kernels", "fp16_wgmma", "bf16_wgmma", "bf16_ptx_mma", "int8_wgmma"]
    narrow = {n: c for _, n, c in selection.select(bench.parse(["--precision", "fp16", "bf16", "int8", "--preset",
                                                               "tuned", "--out-dtype", "narrow", *kernels]))}
    assert (narrow["fp16_wgmma"].out, narrow["bf16_wgmma"].out, narrow["int8_wgmma"].out) == ("f16", "bf16", "")
    assert narrow["bf16_ptx_mma"].c_dtype == np.uint16
    bf = {n for _, n, _ in selection.select(bench.parse(["--precision", "fp16", "bf16", "--preset", "tuned",
                                                        "--out-dtype", "bfloat16", *kernels[:4]]))}
    assert bf == {"bf16_wgmma", "bf16_ptx_mma"}
    assert selection.default_pick("bf16", (64, 4096, 4096), (9, 0),
                                  bench.parse(["--out-dtype", "narrow"]))[2].out == "bf16"


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


def test_family_selection_has_the_base_first():
    chosen = selection.select(bench.parse(["--family", "int4_k64_ablation", "--preset", "tuned"]))
    names = [n for _, n, _ in chosen]
    assert names[0] == "int4_ptx_mma_k64" and len(names) >= 8
    assert {"int4_ptx_mma_k64_ldA1", "int4_ptx_mma_k64_ca", "int4_ptx_mma_k64_kn"} <= set(names)


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


def test_the_benchs_epilogue_is_read_into_fields():
    from numgemm.cli import UsageError
    from numgemm.selection import epilogue_fields

    assert epilogue_fields("scale_a=row,scale_b=col,bias,act=silu") == dict(scale_a="row", scale_b="col", bias=True,
                                                                         act="silu")
    assert epilogue_fields(None) == {}
    for bad, message in (("scale=row", "takes scale_a, scale_b, bias, act"), ("scale_a=col", "scale_a must be")):
        with pytest.raises(UsageError, match=message):
            epilogue_fields(bad)
