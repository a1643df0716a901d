"""W4A16 against cuBLAS FP16 on the dequantised weight, by M, in one run.

    python scripts/w4a16.py --n 8192 --k 8192 --ms 1 16 64 256 [--precision bf16] [--zeros] [--burst]
    python scripts/w4a16.py --ms 1 16 --variants n8s=4 'n8s=8,min_blocks=1' ahead=False
    python scripts/w4a16.py --ms 64 256 --variants rows=100000 'bn=256,wgs=1,stages=4'

For each M: numgemm.gemm(x, prepack_w4(weight, scales)) (C in x's format)
and torch.nn.functional.linear(x, W) with W the dequantised weight in x's
format (cuBLAS: the dense baseline), each first checked against the float64
product, then timed over operand sets rotated past L2 (the weight's device
copies) in the bench's steady state (numgemm.timing.time_steady; --burst: a
burst of 20 after 3 warm-up launches). Prints µs, the speedup over cuBLAS,
and W4A16's GB/s on its bytes (the packed weight, its scales, x and C) as a
share of the device-to-device copy bandwidth measured in the same run.
--variants: gemm()'s kernel (numgemm.weight_only.choose: w4a16's or
w4a16_wgmma's) with fields changed, each a row of its own after it; rows=R
sets numgemm.weight_only.WGMMA_ROWS for the row (the rows from which
wgmma runs: 1 for wgmma at every M, 100000 for mma.sync).
"""

import argparse
import dataclasses

import numpy as np
import torch
from numba import cuda as numba_cuda

import numgemm
from numgemm import microbench, operands
from numgemm import weight_only
from numgemm.measure import rotations
from numgemm.quant import GROUP, dequantize_w4, prepack_w4
from numgemm.timing import time_gpu, time_steady
from variants import changes_of


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--k", type=int, default=8192)
    ap.add_argument("--ms", type=int, nargs="+", default=[1, 16, 64, 256])
    ap.add_argument("--precision", choices=["fp16", "bf16"], default="fp16")
    ap.add_argument("--zeros", action="store_true")
    ap.add_argument("--burst", action="store_true")
    ap.add_argument("--variants", nargs="*", default=[], metavar="FIELD=VALUE,...")
    args = ap.parse_args()
    rng = np.random.default_rng()
    N, K = args.n, args.k
    tdtype = torch.float16 if args.precision == "fp16" else torch.bfloat16
    w = rng.integers(0, 16, (N, K), dtype=np.int8) if args.zeros else rng.integers(-8, 8, (N, K), dtype=np.int8)
    z = rng.integers(0, 16, (N, K // GROUP)) if args.zeros else None
    packed = prepack_w4(w, rng.uniform(0.005, 0.02, (N, K // GROUP)).astype(np.float32), z,
                        precision=args.precision)
    scales = packed.scales.T if args.precision == "bf16" else packed.scales.T.view(np.float16)
    dense = dequantize_w4(w, scales, z)                             # float64, the reference's
    w_bytes = packed.words.nbytes + packed.scales.nbytes + (0 if z is None else packed.zeros.nbytes)
    sets = rotations(w_bytes)
    layers = [packed] + [dataclasses.replace(packed, _on={}, _wgmma_on={}) for _ in range(sets - 1)]  # copies each
    W = torch.from_numpy(dense.astype(np.float32)).to(tdtype).cuda()
    Ws = [W] + [W.clone() for _ in range(rotations(W.numel() * W.element_size()) - 1)]
    copy_gbs = microbench.measure_copy_bandwidth()
    mode = "burst (3 warm-up, median of 20)" if args.burst else "steady state (numgemm.timing.Steady)"
    print(f"# {torch.cuda.get_device_name()}; W4A16 {args.precision}"
          f"{' with zero points' if args.zeros else ''}, N = {N}, K = {K}, group {GROUP}; {mode}; "
          f"copy bandwidth {copy_gbs:.0f} GB/s; {sets} weight copies, {len(Ws)} dense")
    print(f"{'M':>5} {'W4A16 us':>9} {'cuBLAS us':>9} {'speedup':>8} {'GB/s':>7} {'% copy':>7}  kernel")
    dev = numba_cuda.get_current_device()
    for M, changes in ((M, v) for M in args.ms for v in ["", *args.variants]):
        with weight_only.variant(**changes_of(changes)):
            c16 = numba_cuda.device_array((M, N), np.uint16)
            try:
                spec = weight_only.choose(M, N, packed, "f16" if args.precision == "fp16" else "bf16", dev, c16)
            except (ValueError, TypeError) as e:
                print(f"{M:>5} {changes}: {e}")
                continue
            x = torch.from_numpy(rng.standard_normal((M, K)).astype(np.float32)).to(tdtype).cuda()
            want = x.double().cpu().numpy() @ dense.T
            outs = [torch.full((M, N), float("nan"), dtype=tdtype, device="cuda") for _ in layers]
            for p, c in zip(layers, outs):
                numgemm.gemm(x, p, out=c)
            ok = all(operands.mismatch(_host(c, args.precision), want, args.precision) is None for c in outs)
            lib = torch.nn.functional.linear(x, W)
            lib_ok = operands.mismatch(_host(lib, args.precision), want, args.precision) is None

            def ours(i):
                numgemm.gemm(x, layers[i % len(layers)], out=outs[i % len(outs)])

            def cublas(i):
                torch.nn.functional.linear(x, Ws[i % len(Ws)])
            ms_ours, ms_lib = (_time(run, args.burst) for run in (ours, cublas))
            nbytes = w_bytes + x.numel() * x.element_size() + M * N * x.element_size()
            gbs = nbytes / (ms_ours * 1e-3) / 1e9
            print(f"{M:>5} {ms_ours * 1e3:>9.1f} {ms_lib * 1e3:>9.1f} {ms_lib / ms_ours:>7.2f}x {gbs:>7.0f} "
                  f"{100 * gbs / copy_gbs:>6.1f}%  {spec.name}{'' if ok else ' FAIL'}"
                  f"{'' if lib_ok else ' (cuBLAS FAIL)'}", flush=True)


def _host(c, precision):
    c = c.cpu()
    return c.view(torch.int16).numpy().view(np.uint16) if precision == "bf16" else c.numpy()


def _time(run, burst):
    if burst:
        return time_gpu(run, warmup=3, repeats=20)[0]
    return time_steady(run).ms


if __name__ == "__main__":
    main()
