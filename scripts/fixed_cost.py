"""What a memory-bound kernel pays besides its bytes: time against K at a fixed M x N.

    python scripts/fixed_cost.py 1x8192 1024,2048,4096,8192,16384 int4_ptx_unpack_s8_m16: \
        int8_ptx_mma_k32_m16:bn=32,warps_n=2,warps_k=4

For each kernel (NAME:FIELD=VALUE,... as in variants.py), the CUDA-event
median of 20 launches at M x N x K for every K, the inputs rotated over as
many sets as overflow L2 three times (as bench.py times them), each output
sampled against the exact product; then the least-squares line
t = t0 + bytes / BW through those points: BW is what each further byte
costs, t0 what the launch costs besides. Beside them: an empty kernel
(the events' floor; torch's smallest kernel too, where torch is
installed), a device-to-device copy of the first kernel's bytes (which
moves them twice), and torch.matmul in fp16 at the same M x N x K
(cuBLAS).
"""

import sys
from types import SimpleNamespace

import numpy as np
from numba import cuda
from variants import variant

from numgemm import operands
from numgemm.measure import bytes_moved, operand_sets, timed
from numgemm.timing import time_gpu


@cuda.jit
def _empty(x):
    if cuda.grid(1) == -1:
        x[0] = 0


def _fit(points):
    """(t0 us, GB/s) of the least-squares line through (bytes, us) points."""
    x, y = np.array([p[0] for p in points], float), np.array([p[1] for p in points], float)
    slope, t0 = np.polyfit(x, y, 1)
    return t0, 1e-3 / slope


def _report(label, points):
    for nbytes, us in points:
        print(f"  {label:58s} {nbytes / 2**20:8.1f} MiB {us:8.2f} us {nbytes / us / 1e3:7.0f} GB/s", flush=True)
    t0, bw = _fit(points)
    print(f"  {label:58s} fit: t0 {t0:5.2f} us + bytes / {bw:5.0f} GB/s", flush=True)


def main(argv):
    M, N = map(int, argv[0].split("x"))
    ks = [int(k) for k in argv[1].split(",")]
    rng = np.random.default_rng()
    specs = [variant(spec) for spec in argv[2:]]
    empty = cuda.device_array(1, np.int32)
    us, _ = time_gpu(lambda i: _empty[N // 32, 256](empty), repeats=20)
    print(f"empty kernel, {N // 32} blocks of 256: {us * 1e3:.2f} us")
    for name, fields, cfg in specs:
        p = cfg.precision
        points = []
        for K in ks:
            host = operand_sets(p, 1, (M, N, K), rng)
            dev = [operands.to_device(p, cfg.b_layout, a, b) for a, b in host]
            ms, ok, _, _ = timed(p, cfg, (M, N, K), dev, host, SimpleNamespace(batch=1, repeats=20), rng)
            if not ok:
                raise SystemExit(f"{name}:{fields} at {M}x{N}x{K}: wrong result")
            points.append((bytes_moved(p, 1, M, N, K), ms * 1e3))
        _report(f"{name}:{fields}", points)
    # The same bytes as the first kernel's B, copied (read and written once each).
    p0 = specs[0][2].precision if specs else "int8"
    points = []
    for K in ks:
        nbytes = int(bytes_moved(p0, 1, M, N, K))
        src, dst = cuda.device_array(nbytes, np.uint8), cuda.device_array(nbytes, np.uint8)
        ms, _ = time_gpu(lambda i: dst.copy_to_device(src), repeats=20)
        points.append((2 * nbytes, ms * 1e3))
    _report(f"device copy of {p0}'s bytes (counted twice)", points)
    try:
        import torch
    except ImportError:
        return 0
    tiny = torch.zeros(256, device="cuda")
    ms, _ = time_gpu(lambda i: tiny.fill_(i), repeats=20)
    print(f"torch's fill_ of 256 floats: {ms * 1e3:.2f} us")
    points = []
    for K in ks:
        sets = [(torch.randn(M, K, device="cuda", dtype=torch.float16),
                 torch.randn(K, N, device="cuda", dtype=torch.float16)) for _ in range(4)]
        out = torch.empty(M, N, device="cuda", dtype=torch.float16)
        ms, _ = time_gpu(lambda i: torch.matmul(*sets[i % 4], out=out), repeats=20)
        points.append((bytes_moved("fp16", 1, M, N, K), ms * 1e3))
    _report("torch.matmul fp16 (cuBLAS)", points)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
