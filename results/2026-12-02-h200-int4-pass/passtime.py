"""Time unpack="pass"'s widening launch alone and whole plans, same process (CUDA events, median of 20).

    python passtime.py 4096,8192   (run as .dev/passtime.py from the repository root)
"""
import sys, copy
import numpy as np
from numba import cuda
from numgemm import registry, operands
from numgemm.api import plan_gemm
from numgemm.timing import time_gpu
rng = np.random.default_rng(0)
for n in map(int, sys.argv[1].split(",")):
    cfg = registry.get("int4_wgmma_unpack_s8")  # in the first tree: "int4_wgmma_unpack_s8_pass"
    plans = []
    for s in range(3):
        a, b = operands.in_layout("int4", "nk", *operands.values("int4", 1, n, n, n, rng))
        plans.append(plan_gemm(cuda.to_device(a[0]), cuda.to_device(b[0]), precision="int4", kernel=cfg))
    alone = []
    for p in plans:
        l = copy.copy(p.prepared); l.then = None; alone.append(l)
    ms_pass, _ = time_gpu(lambda i: alone[i % 3](), repeats=20)
    ms_all, _ = time_gpu(lambda i: plans[i % 3].launch(), repeats=20)
    gb = 1.5 * n * n / 1e9
    print(f"N={n}: widen pass {ms_pass*1e3:.1f} us ({gb/ms_pass*1e3:.0f} GB/s read+write), whole {ms_all*1e3:.1f} us, "
          f"{2*n**3/ms_all/1e9:.1f} TOPS")
