"""numgemm.peers: the libraries timed beside numgemm's kernels."""

import pytest

from numgemm.peers import peer_runs


@pytest.mark.gpu
@pytest.mark.parametrize("precision,M", [("fp16", 16), ("int8", 64)])
def test_peers_rotate_over_operand_sets(precision, M, rng):
    """run(i) multiplies operand set i % sets, as numgemm's kernels are timed
    (inputs that overflow L2 come from DRAM); each result is checked against
    the exact products of the set it ran on."""
    torch = pytest.importorskip("torch")
    runs = peer_runs(precision, M, 96, 192, 1, rng, sets=3)
    assert runs
    for name, run, check in runs:
        for i in (0, 1, 2, 4):
            run(i)
            torch.cuda.synchronize()
            assert check(), (name, i)


@pytest.mark.gpu
@pytest.mark.parametrize("precision,b_layout", [("int8", None), ("bf16", None), ("bf16", "nk"), ("e4m3", None),
                                               ("e5m2", None)])
def test_triton_peers_beside_the_libraries(precision, b_layout, rng):
    """Triton's GEMM for INT8, BF16 (B as K x N, or an N x K weight) and FP8
    runs beside the library on the same operand sets, at a shape that is no
    multiple of its tile, each result checked."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    if precision[0] == "e" and torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("FP8 tl.dot needs sm_89")
    runs = [r for r in peer_runs(precision, 80, 200, 320, 2, rng, sets=2, b_layout=b_layout)
            if r[0].startswith("triton")]
    assert len(runs) == 1
    for i in (0, 1, 3):
        runs[0][1](i)
        torch.cuda.synchronize()
        assert runs[0][2](), (runs[0][0], i)


@pytest.mark.gpu
@pytest.mark.parametrize("out_dtype,first", [("float32", "float32"), ("bfloat16", "bfloat16")])
def test_fp8s_peer_is_scaled_mm_with_c_as_asked_first(out_dtype, first, rng):
    """FP8 beside cuBLASLt's FP8 GEMM (torch._scaled_mm), C in bfloat16 and
    float32, the bench's --out-dtype first (its 'x library' ratio), on
    sm_89 and later (torch refuses FP8 GEMMs before)."""
    torch = pytest.importorskip("torch")
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("torch._scaled_mm needs sm_89")
    runs = [r for r in peer_runs("e4m3", 64, 96, 192, 2, rng, sets=2, out_dtype=out_dtype)
            if not r[0].startswith("triton")]
    assert [name.split()[1] for name, _, _ in runs] == [first, {"float32": "bfloat16"}.get(first, "float32")]
    for name, run, check in runs:
        for i in (0, 1):
            run(i)
            torch.cuda.synchronize()
            assert check(), (name, i)


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp16", "int8", "e4m3"])
def test_peers_apply_the_epilogue_after_their_gemm(precision, rng):
    """W8A8 and FP8 row-wise peers: the library's GEMM, then the scales, bias
    and activation in torch (torch._scaled_mm takes the scales itself);
    checked against the product through the epilogue."""
    torch = pytest.importorskip("torch")
    if precision == "e4m3" and torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("torch._scaled_mm needs sm_89")
    fields = dict(scale_a="row", scale_b="col", bias=True, act="silu")
    runs = peer_runs(precision, 64, 96, 192, 1, rng, sets=2, out_dtype="bfloat16", epilogue=fields)
    assert len(runs) == 1 and "unfused" in runs[0][0]
    name, run, check = runs[0]
    for i in (0, 1):
        run(i)
        torch.cuda.synchronize()
        assert check(), (name, i)
