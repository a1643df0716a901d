"""How many clusters of a kernel the GPU holds at once (cuOccupancyMaxActiveClusters).

    python results/2026-12-03-h200-even-waves/resident.py fp16_wgmma_c16 int8_wgmma

For each registered kernel, the same with cluster 1, 2 and 4: the clusters
resident at once and the persistent grid numgemm launches at 8192^3 (in
clusters), so that a grid larger than what fits is seen as such.
"""

import sys

import numpy as np
from cuda.bindings import driver as drv
from numba import cuda

from numgemm import operands, registry
from numgemm.api import plan_gemm


def main(names):
    rng = np.random.default_rng(0)
    for name in names:
        base = registry.get(name)
        a, b = operands.values(base.precision, 1, 256, 512, 256, rng)
        da, db = operands.to_device(base.precision, base.b_layout, a, b)
        for cl in (1, 2, 4):
            cfg = base.replace(cluster=cl)
            plan = plan_gemm(da, db, precision=cfg.precision, kernel=cfg,
                             out=operands.poisoned(cfg.precision, (1, 256, 512), cfg.c_dtype), k=256)
            launch = plan.prepared
            while launch.then is not None and launch.name != cfg.name:      # past a widening pass
                launch = launch.then
            config, func = launch._call[0], launch._call[1]
            err, n = drv.cuOccupancyMaxActiveClusters(func, config)
            sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
            print(f"{cfg.name:70s} cluster {cl}: {n if err == drv.CUresult.CUDA_SUCCESS else err.name} resident, "
                  f"persistent grid at 8192^3 {cfg.grid_blocks(8192, 8192, sms) // cl} clusters", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
