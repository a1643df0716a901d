"""numgemm.kernel.epilogue: scales, bias and activation on the f32 sums,
around every store path; its fields as config fields, its refusals, its
builds (in registers), and on a GPU each path against the float64 reference."""

import numpy as np
import pytest

from numgemm import operands, registry
from numgemm.kernel import build_config, epilogue
from numgemm.tiles import WGMMA_PARTS

FULL = dict(scale_a="row", scale_b="col", bias=True, act="gelu")
#: The epilogues the GPU tests run: FP8's per-tensor scales; every vector and
#: an activation; a bias and an activation alone.
CASES = (dict(scale_a="tensor", scale_b="tensor"), dict(scale_a="row", scale_b="col", bias=True, act="silu"),
         dict(bias=True, act="relu"), dict(scale_b="col", act="gelu"))


@pytest.mark.parametrize("name", ["fp16_ptx_mma", "fp16_ptx_tma", "fp16_wgmma", "e4m3_wgmma"])
def test_cells_are_each_accumulator_once_inside_the_warps_tile(name):
    """The fragment map the epilogue applies by: every accumulator of a
    thread once, at distinct places inside the warp's rows and columns."""
    cfg = registry.get(name)
    cells = epilogue._cells(cfg)
    if cfg.op == "wgmma":
        n_acc, (rows, cols) = cfg.bm * cfg.bn // (cfg.threads - cfg.producer_threads), (16, cfg.bn)
    else:
        (rows, cols) = cfg.warp_tile
        n_acc = rows * cols // 32
    assert len(cells) == n_acc == len({acc for acc, _, _ in cells})
    assert len({(dr, dc) for _, dr, dc in cells}) == n_acc
    assert all(0 <= dr <= rows - 8 and 0 <= dc <= cols - 7 for _, dr, dc in cells)


def test_pingpong_halves_have_an_array_each():
    """pingpong: a warp's 16 rows in each 64-row half of the tile, an array a
    half; their row factors staged one after the other."""
    cfg = registry.get("fp16_wgmma").replace(bn=128, pingpong=True, **FULL)
    cells = epilogue._cells(cfg)
    assert len(cells) == 128 == len({(dr, dc) for _, dr, dc in cells})
    assert cells[0] == ("acc[0][0]", 0, 0) and cells[-1] == ("acc[1][63]", 72, 121)
    assert {dr for _, dr, _ in cells} == {0, 8, 64, 72} and epilogue.staged(cfg)


def test_two_instructions_side_by_side_have_an_array_each():
    cfg = registry.get("fp16_wgmma").replace(bn=320, stages=3)
    assert WGMMA_PARTS[320] == (256, 64)
    cells = epilogue._cells(cfg)
    assert cells[0][0] == "acc[0][0]" and cells[-1] == ("acc[1][31]", 8, 256 + 8 * 7 + 1)


def test_the_fields_name_the_kernel():
    cfg = registry.get("fp16_ptx_mma").replace(**FULL)
    assert cfg.epilogue and cfg.name.endswith("_sarow_sbcol_bias_gelu" + cfg.name.split("_gelu")[1])
    assert not registry.get("fp16_ptx_mma").epilogue


@pytest.mark.parametrize("name,fields,message", [
    ("int4_ptx_unpack_s8", dict(bias=True), "not a scaled widening's"),
    ("fp16_wmma", dict(act="relu"), "not op=wmma's"),
    ("fp16_ptx_fp16acc", dict(scale_a="tensor"), "exact s32 sums, not f16 ones"),
    ("int8_ptx_mma_k32_m16", dict(split_k=2, split_sum="last", bias=True), "split_sum=last"),
    ("int8_wgmma", dict(out="bf16"), "int8 rounds C to no narrower format .its exact sums; through an epilogue"),
    ("fp16_ptx_mma", dict(split_k=2, split_sum="last", bias=True), "split_sum=last"),
    ("fp16_wgmma", dict(persistent=True, stream_k=True, act="silu"), "stream_k"),
])
def test_the_epilogue_is_refused_where_it_cannot_run(name, fields, message):
    with pytest.raises(ValueError, match=message):
        registry.get(name).replace(**fields)


def test_the_sum_kernel_carries_the_epilogue():
    from numgemm.kernel.split_k import SplitSum

    spec = SplitSum.of(registry.get("fp16_ptx_mma").replace(split_k=3, out="f16", **FULL))
    assert spec.epilogue and spec.name == "split_sum_f32_sarow_sbcol_bias_gelu_cf16"
    assert spec.describe()["act"] == "gelu" and not SplitSum("f32").epilogue


@pytest.mark.builds
@pytest.mark.parametrize("name,fields,target", [
    ("fp16_ptx_mma", dict(FULL, out="f16"), "sm_89"),
    ("e4m3_ptx_mma", dict(scale_a="tensor", scale_b="tensor"), "sm_89"),
    ("bf16_wgmma", dict(FULL, out="bf16"), "sm_90"),
    ("fp16_wgmma", dict(scale_a="tensor", scale_b="col", bias=True, act="silu", out="f16", c_tma=True), "sm_90"),
    ("fp16_wgmma", dict(FULL, bn=128, pingpong=True, out="f16"), "sm_90"),
])
def test_the_epilogue_keeps_the_sums_in_registers(name, fields, target):
    """The epilogue written out over the fragment: the k loop as without it
    (no local memory there; the wgmma consumers' 232 registers may spill a
    pointer or two across it, read back once a tile), and the factors loaded
    once a row or column the thread stores (per-tensor: once); where they
    are staged, by cp.async as the tile starts and then from shared memory,
    once a row and column pair, none from global memory in the epilogue."""
    cfg = registry.get(name).replace(**fields)
    plain = build_config(cfg.replace(scale_a="", scale_b="", bias=False, act=""), target, together=())
    build = build_config(cfg, target, together=())
    loop, plain_loop = build.main_loop(), plain.main_loop()
    assert loop.mmas == plain_loop.mmas and abs(len(loop.ops) - len(plain_loop.ops)) <= len(plain_loop.ops) // 10
    assert not any(op.startswith(("LDL", "STL")) for lp in build.k_loops for op in lp.ops)
    assert build.local_bytes <= 32 and plain.local_bytes == 0, (build.local_bytes, plain.local_bytes)
    loads = sum(op in ("LD.E", "LDG.E") for op in build.instructions) - sum(
        op in ("LD.E", "LDG.E") for op in plain.instructions)
    rows, cols = epilogue._cells(cfg)[-1][1] + 1, epilogue._cells(cfg)[-1][2] + 1     # the thread's extent
    if epilogue.staged(cfg):
        shared = sum(op.startswith("LDS") for op in build.instructions) - sum(
            op.startswith("LDS") for op in plain.instructions)
        wanted = (cfg.scale_a == "row") * len({dr for _, dr, _ in epilogue._cells(cfg)}) + \
            len({dc >> 1 for _, _, dc in epilogue._cells(cfg)}) * ((cfg.scale_b == "col") + cfg.bias)
        assert any(op.startswith("LDGSTS") for op in build.instructions) and shared >= wanted, (shared, wanted)
        assert loads == (cfg.scale_a == "tensor") + (cfg.scale_b == "tensor"), loads
        return
    wanted = {"row": len({dr for _, dr, _ in epilogue._cells(cfg)}), "tensor": 1, "": 0}[cfg.scale_a] + \
        len({dc for _, _, dc in epilogue._cells(cfg)}) * ((cfg.scale_b == "col") + cfg.bias) + (cfg.scale_b == "tensor")
    assert rows and cols and loads >= wanted, (loads, wanted)
    if cfg.act == "gelu":           # tanh's exponentials, on the special-function unit
        assert "MUFU.EX2" in build.instructions


@pytest.mark.builds
def test_the_sum_kernel_with_an_epilogue_builds_for_every_target():
    from numgemm.kernel import helper_cubin
    from numgemm.kernel.split_k import SplitSum
    from numgemm.toolchain import TARGETS, parse_target

    spec = SplitSum("f32", "bf16", "row", "col", True, "silu")
    for target in TARGETS:
        cubin, entry = helper_cubin(spec, parse_target(target))
        assert cubin[:4] == b"\x7fELF" and "split_sum" in entry


# --- on the GPU ------------------------------------------------------------------------

#: Named kernels, one a store path: mma from registers (cp.async, TMA), its
#: split-K sum kernel, wgmma staged, by TMA, rounding to BF16, FP8's both and its C^T tiles;
#: W8A8 (INT8's s32 sums converted): mma, wgmma, its C^T tiles, split-K; INT4.
KERNELS = [("fp16_ptx_mma", {}), ("fp16_ptx_tma", dict(out="f16")), ("fp16_ptx_mma_m16", dict(split_k=3)),
           ("fp16_wgmma", {}), ("fp16_wgmma_c16", dict(c_tma=True)), ("bf16_wgmma", dict(out="bf16")),
           ("e4m3_ptx_mma", dict(out="f16")), ("e4m3_wgmma", dict(out="bf16")), ("e5m2_wgmma_cl1", {}),
           ("e4m3_wgmma_swap", dict(out="bf16")),
           ("int8_ptx_tma", {}), ("int8_wgmma", dict(out="bf16")), ("int8_wgmma_swap", dict(out="bf16")),
           ("int8_ptx_mma_k32_m16", dict(split_k=3)), ("int4_wgmma_unpack_s8", {})]


@pytest.mark.gpu
@pytest.mark.parametrize("fields", CASES, ids=lambda f: "_".join(f"{k}={v}" for k, v in f.items()))
@pytest.mark.parametrize("name,kernel_fields", KERNELS)
def test_the_epilogue_matches_the_reference(name, kernel_fields, fields, rng):
    """C = act(scale_a * scale_b * (A @ B) + bias) at a shape that is no
    multiple of a tile (edges, and a block tile inside C), into a poisoned C,
    against float64; on Numba device arrays."""
    from numba import cuda

    import numgemm

    cfg = registry.get(name).replace(**kernel_fields, **fields)       # the kernel the call names, epilogue and all
    why = cfg.unsupported(tuple(cuda.get_current_device().compute_capability))
    if why:
        pytest.skip(why)
    M, N, K = 300, 520, 200
    a, b = operands.values(cfg.precision, 1, M, N, K, rng)
    ref = operands.expected(cfg.precision, a, b)
    sa, sb, bias = operands.epilogue_vectors(fields, M, N, rng)
    out = operands.poisoned(cfg.precision, (1, M, N), cfg.c_dtype)
    da, db = operands.to_device(cfg.precision, cfg.b_layout, a, b)       # batched: B transposed stays a view
    vec = [cuda.to_device(v) if v is not None else None for v in (sa, sb, bias)]
    numgemm.gemm(da, db, kernel=cfg, out=out, scale_a=vec[0], scale_b=vec[1], bias=vec[2],
                 activation=fields.get("act"), k=K)
    want = operands.through_epilogue(ref, sa, sb, bias, fields.get("act"))
    why = operands.mismatch(out.copy_to_host(), want, cfg.precision)
    assert why is None, f"{cfg.name} with {fields}: {why}"


@pytest.mark.gpu
@pytest.mark.parametrize("name,fields", [("fp16_wgmma", dict(out="f16")), ("int8_wgmma_cl1", dict(out="bf16")),
                                         ("fp16_wgmma_c16", dict(c_tma=True))])
def test_pingpong_epilogue_in_both_warpgroups(name, fields, rng):
    """pingpong: the epilogue of each half of a tile, with its staged row
    factors, in a persistent grid of more tiles than blocks (both
    warpgroups' turns), against float64."""
    from numba import cuda

    import numgemm

    cfg = registry.get(name).replace(bn=128, pingpong=True, **fields, **FULL)
    why = cfg.unsupported(tuple(cuda.get_current_device().compute_capability))
    if why:
        pytest.skip(why)
    M, N, K = 1100, 2600, 136
    a, b = operands.values(cfg.precision, 1, M, N, K, rng)
    sa, sb, bias = operands.epilogue_vectors(FULL, M, N, rng)
    out = operands.poisoned(cfg.precision, (1, M, N), cfg.c_dtype)
    da, db = operands.to_device(cfg.precision, cfg.b_layout, a, b)
    numgemm.gemm(da, db, kernel=cfg, out=out, scale_a=cuda.to_device(sa), scale_b=cuda.to_device(sb),
                 bias=cuda.to_device(bias), activation=FULL["act"], k=K)
    want = operands.through_epilogue(operands.expected(cfg.precision, a, b), sa, sb, bias, FULL["act"])
    why = operands.mismatch(out.copy_to_host(), want, cfg.precision)
    assert why is None, f"{cfg.name}: {why}"


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp16", "bf16", "e4m3", "int8"])
def test_gemms_choice_with_an_epilogue_on_torch(precision, rng):
    """gemm()'s own kernel with torch tensors: scales as torch._scaled_mm takes
    them (one element, or (M, 1) and (1, N)), a Python number, a bias; C in
    bfloat16 where the precision has it, else float32 (INT8: W8A8). Then the same call again with new
    vectors (the prepared call moves their addresses) and new values in them."""
    torch = pytest.importorskip("torch")
    import numgemm
    from numgemm.precision import PRECISIONS

    prec = PRECISIONS[precision]
    M, N, K = 130, 200, 96
    x, w = operands.values(precision, 1, M, N, K, rng)
    ref = operands.expected(precision, x, w)[0]
    dt = getattr(torch, prec.encoding or np.dtype(prec.host_dtype).name)
    a = torch.from_numpy(x[0].view(np.int16) if x.itemsize == 2 and prec.encoding else x[0]).cuda().view(dt)
    b_rows = np.ascontiguousarray(w[0] if prec.exact else np.swapaxes(w[0], 0, 1))     # N x K, as a weight
    b = torch.from_numpy(b_rows.view(np.int16) if b_rows.itemsize == 2 and prec.encoding else b_rows).cuda()
    b = b.view(dt).t()
    out_dtype = getattr(torch, prec.encoding) if prec.encoding == "bfloat16" else None
    for _ in range(2):
        sa = rng.uniform(0.5, 2.0, (M, 1)).astype(np.float32)
        sb = rng.uniform(0.5, 2.0, (1, N)).astype(np.float32)
        bias = rng.standard_normal(N, dtype=np.float32)
        tensors = [torch.from_numpy(v).cuda() for v in (sa, sb, bias)]
        c = numgemm.gemm(a, b, scale_a=tensors[0], scale_b=tensors[1], bias=tensors[2], activation="silu",
                         out_dtype=out_dtype)
        got = c.view(torch.int16).cpu().numpy().view(np.uint16) if c.dtype == torch.bfloat16 else c.cpu().numpy()
        why = operands.mismatch(got, operands.through_epilogue(ref, sa, sb, bias, "silu"), precision)
        assert why is None, why
    c = numgemm.gemm(a, b, scale_a=0.25, scale_b=torch.tensor([3.0], device="cuda"))
    why = operands.mismatch(c.cpu().numpy(), operands.through_epilogue(ref, 0.25, 3.0), precision)
    assert why is None, why


@pytest.mark.gpu
@pytest.mark.parametrize("activation", [None, "gelu"])
def test_linear_fuses_the_bias_and_activation(activation, rng):
    """numgemm.torch.linear with nn.Linear's float16 bias: F.linear's result
    (then torch's activation), within half's rounding."""
    torch = pytest.importorskip("torch")
    import numgemm.torch  # noqa: F401 - registers the operators

    x = torch.from_numpy(rng.standard_normal((3, 17, 256), dtype=np.float32)).cuda().half()
    layer = torch.nn.Linear(256, 192, dtype=torch.float16, device="cuda")
    with torch.no_grad():
        got = torch.ops.numgemm.linear(x, layer.weight, layer.bias, activation)
        want = torch.nn.functional.linear(x.float(), layer.weight.float(), layer.bias.float())
        if activation:
            want = torch.nn.functional.gelu(want, approximate="tanh")
    assert got.dtype == torch.float16 and got.shape == want.shape
    err = (got.float() - want).norm() / want.norm()
    assert err < 2.0**-10, float(err)
