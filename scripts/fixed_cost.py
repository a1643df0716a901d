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
moves them twice; one pair of buffers, so that the smaller copies run in
L2), a kernel that only reads them (16-byte loads, four in flight a
thread, the best of six launch shapes, rotated over as many buffers as the
kernels' operands: what those bytes cost a GEMM, which must read them),
each with its share of the copy bandwidth bench.py measures, and
torch.matmul in fp16 at the same M x N x K (cuBLAS). With no kernel named,
the bytes are those of $PRECISION (default int8).
"""

import os
import sys
from types import SimpleNamespace

import numpy as np
from llvmlite import ir
from numba import cuda, types
from numba.cuda.extending import intrinsic
from variants import variant

from numgemm import operands
from numgemm.microbench import measure_copy_bandwidth
from numgemm.measure import bytes_moved, operand_sets, rotations, timed
from numgemm.timing import time_gpu


@cuda.jit
def _empty(x):
    if cuda.grid(1) == -1:
        x[0] = 0


@intrinsic
def _ld16_xor(typingctx, words, i):
    """The xor of the four words at words[4 i : 4 i + 4], one 16-byte load
    that bypasses L1 (as the kernels' streamed operands do)."""
    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        idx = builder.mul(context.cast(builder, args[1], sig.args[1], types.int64), ir.Constant(ir.IntType(64), 4))
        addr = builder.ptrtoint(builder.gep(ary.data, [idx]), ir.IntType(64))
        i32 = ir.IntType(32)
        fn = ir.InlineAsm(ir.FunctionType(ir.LiteralStructType([i32] * 4), [ir.IntType(64)]),
                          "ld.global.nc.L1::no_allocate.v4.u32 {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,l",
                          side_effect=True)
        v = builder.call(fn, [addr])
        x = builder.xor(builder.extract_value(v, 0), builder.extract_value(v, 1))
        return builder.xor(x, builder.xor(builder.extract_value(v, 2), builder.extract_value(v, 3)))
    return types.uint32(words, i), codegen


@cuda.jit
def _read(words, out):
    n16 = words.size // 4
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    acc = np.uint32(0)
    while i + 3 * stride < n16:
        acc ^= (_ld16_xor(words, i) ^ _ld16_xor(words, i + stride) ^ _ld16_xor(words, i + 2 * stride)
                ^ _ld16_xor(words, i + 3 * stride))
        i += 4 * stride
    while i < n16:
        acc ^= _ld16_xor(words, i)
        i += stride
    if acc == np.uint32(0x9E3779B9):    # almost never: keeps the loads live
        out[0] = acc


def _read_points(nbytes_list, sms):
    """(bytes, us) of _read over each size, the best of a few launch shapes,
    rotated over buffers that overflow L2 three times."""
    out = cuda.device_array(1, np.uint32)
    points = []
    for nbytes in nbytes_list:
        n = -(-nbytes // 16) * 4
        bufs = [cuda.to_device(np.random.default_rng(j).integers(0, 2**32, n, dtype=np.uint32))
                for j in range(rotations(4 * n))]
        best = min(time_gpu(lambda i: _read[sms * per_sm, threads](bufs[i % len(bufs)], out), repeats=20)[0]
                   for per_sm in (2, 4, 8) for threads in (256, 512))
        points.append((4 * n, best * 1e3))
    return points


def _fit(points):
    """(t0 us, GB/s) of the least-squares line through (bytes, us) points."""
    x, y = np.array([p[0] for p in points], float), np.array([p[1] for p in points], float)
    slope, t0 = np.polyfit(x, y, 1)
    return t0, 1e-3 / slope


def _report(label, points, copy_gbs=None):
    for nbytes, us in points:
        share = f" {100 * nbytes / us / 1e3 / copy_gbs:5.1f}% of copy" if copy_gbs else ""
        print(f"  {label:58s} {nbytes / 2**20:8.1f} MiB {us:8.2f} us {nbytes / us / 1e3:7.0f} GB/s{share}", flush=True)
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
    copy_gbs = measure_copy_bandwidth()
    print(f"device-to-device copy of 1 GiB (bench.py's copy bandwidth): {copy_gbs:.0f} GB/s")
    for name, fields, cfg in specs:
        p = cfg.precision
        points = []
        for K in ks:
            host = operand_sets(p, 1, (M, N, K), rng)
            dev = [operands.to_device(p, cfg.b_layout, a, b) for a, b in host]
            ms, ok, _, _ = timed(p, cfg, (M, N, K), dev, host, SimpleNamespace(batch=1, repeats=20), rng)
            ms = ms.ms
            if not ok:
                raise SystemExit(f"{name}:{fields} at {M}x{N}x{K}: wrong result")
            points.append((bytes_moved(p, 1, M, N, K), ms * 1e3))
        _report(f"{name}:{fields}", points, copy_gbs)
    # The same bytes as the first kernel's B, copied (read and written once each).
    p0 = specs[0][2].precision if specs else os.environ.get("PRECISION", "int8")
    sizes = [int(bytes_moved(p0, 1, M, N, K)) for K in ks]
    points = []
    for nbytes in sizes:
        src, dst = cuda.device_array(nbytes, np.uint8), cuda.device_array(nbytes, np.uint8)
        ms, _ = time_gpu(lambda i: dst.copy_to_device(src), repeats=20)
        points.append((2 * nbytes, ms * 1e3))
    _report(f"device copy of {p0}'s bytes (counted twice)", points, copy_gbs)
    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    _report(f"a read of {p0}'s bytes, nothing else", _read_points(sizes, sms), copy_gbs)
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
