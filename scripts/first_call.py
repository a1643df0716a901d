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

rng = np.random.default_rng()
a = rng.integers(-128, 128, (512, 512), dtype=np.int8)
bt = rng.integers(-128, 128, (512, 512), dtype=np.int8)
c = numgemm.gemm(a, bt.T)
ok = np.array_equal(c, a.astype(np.int64) @ bt.T.astype(np.int64))
print(f"first gemm() {time.perf_counter() - t0:.2f} s after interpreter start, exact={ok}, cache {cache.STATS}")
