"""How long a fresh process takes to its first gemm(), import numgemm included.

    python scripts/first_call.py            # run it twice: the first builds, the second reads the cache

512 x 512 x 512 INT8 NumPy operands, the default kernel for this GPU,
checked exactly; the time counts from the interpreter's start of this script.
"""

import time

t0 = time.perf_counter()
import numpy as np  # noqa: E402 - the import is part of what is timed

import numgemm  # noqa: E402
from numgemm import cache  # noqa: E402

t_import = time.perf_counter() - t0
rng = np.random.default_rng()
a = rng.integers(-128, 128, (512, 512), dtype=np.int8)
bt = rng.integers(-128, 128, (512, 512), dtype=np.int8)
from numba import cuda  # noqa: E402

t1 = time.perf_counter()
cuda.current_context()          # the driver's context: part of any first call, numgemm's or not
t_context = time.perf_counter() - t1
c = numgemm.gemm(a, bt.T)
total = time.perf_counter() - t0
ok = np.array_equal(c, a.astype(np.int64) @ bt.T.astype(np.int64))
print(f"first gemm() {total:.2f} s after interpreter start (imports {t_import:.2f} s, CUDA context "
      f"{t_context:.2f} s, gemm() {total - t_import - t_context:.2f} s), exact={ok}, cache {cache.STATS}")
