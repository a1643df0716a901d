"""One W4A16 call of gemm()'s kernel, or a variant of it, launched three times: for Nsight Compute.

    ncu --clock-control none -k regex:w4a16 --launch-skip 1 --launch-count 1 --metrics ... \
        python scripts/w4a16_once.py 256 [groups=1 stages=6 ...]

M rows of FP16 activations (fresh normal values) times a random INT4 N x K
weight (--n, --k: 8192), C in float16, through numgemm.gemm(x, prepack_w4(...));
fields after M change the kernel numgemm.weight_only.choose picks, as
scripts/w4a16.py's --variants do. Nothing is checked here: w4a16.py and the
tests check these kernels.
"""

import argparse
import ast
import dataclasses

import numpy as np
import torch

import numgemm
from numgemm import weight_only
from numgemm.quant import GROUP, prepack_w4


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("m", type=int)
    ap.add_argument("fields", nargs="*", metavar="FIELD=VALUE")
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--k", type=int, default=8192)
    args = ap.parse_args()
    fields = {k: ast.literal_eval(v) for k, v in (f.split("=") for f in args.fields)}
    chosen = weight_only.choose
    weight_only.choose = lambda *a, **k: dataclasses.replace(chosen(*a, **k), **fields)
    rng = np.random.default_rng()
    w = rng.integers(-8, 8, (args.n, args.k), dtype=np.int8)
    packed = prepack_w4(w, rng.uniform(0.005, 0.02, (args.n, args.k // GROUP)).astype(np.float32))
    x = torch.randn(args.m, args.k, device="cuda", dtype=torch.float16)
    c = torch.empty(args.m, args.n, device="cuda", dtype=torch.float16)
    for _ in range(3):
        numgemm.gemm(x, packed, out=c)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
