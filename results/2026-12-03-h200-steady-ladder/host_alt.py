import statistics, time, ctypes, sys
import torch, numgemm
from numgemm import api, driver, frameworks

def host_us(call, n=3000):
    for _ in range(100): call()
    s = []
    for _ in range(n):
        t0 = time.perf_counter_ns(); call(); s.append(time.perf_counter_ns() - t0)
    torch.cuda.synchronize()
    return statistics.median(s) / 1e3

M = N = K = 512
a = torch.randn(M, K, device="cuda", dtype=torch.float16)
b = torch.randn(N, K, device="cuda", dtype=torch.float16).t()
out = numgemm.gemm(a, b)
key, addresses, handle, _, _ = api._call(a, b, None, None, (None, None, "tuned", None, "None"))
rep = api._REPEATS[key]
L = rep.launch
dev = torch.device("cuda", 0)
f32 = torch.float32
cfg, fn, params, _ = L._args
k = driver.calls.cuLaunchKernelEx
k2 = driver.lib().cuLaunchKernelEx
c = L._config
pieces = {
 "torch.empty(shape, dtype, device=int)": lambda: torch.empty((M, N), dtype=f32, device=0),
 "torch.empty(shape, dtype, device=obj)": lambda: torch.empty((M, N), dtype=f32, device=dev),
 "torch.empty(M, N, dtype, device=obj)": lambda: torch.empty(M, N, dtype=f32, device=dev),
 "a.new_empty(shape, dtype)": lambda: a.new_empty((M, N), dtype=f32),
 "torch.empty_like(out)": lambda: torch.empty_like(out),
 "out.new_empty(shape)": lambda: out.new_empty((M, N)),
 "torch.ops.aten.empty.memory_format": lambda: torch.ops.aten.empty.memory_format([M, N], dtype=f32, device=dev),
 "torch.cuda.is_current_stream_capturing": torch.cuda.is_current_stream_capturing,
 "driver.capturing": lambda: driver.capturing(handle),
 "driver.current_context": driver.current_context,
 "torch.cuda.current_device": torch.cuda.current_device,
 "Launch()": lambda: L(handle),
 "cuLaunchKernelEx(*args) direct": lambda: k(*L._args),
 "byref each call": lambda: k(ctypes.byref(c), fn, params, None),
 "torch.matmul": lambda: torch.matmul(a, b),
 "torch.mm(a,b)": lambda: torch.mm(a, b),
 "gemm(a,b)": lambda: numgemm.gemm(a, b),
 "gemm(a,b,out=)": lambda: numgemm.gemm(a, b, out=out),
}
print(f"# {torch.cuda.get_device_name()} host us, median of 3000, torch {torch.__version__}")
for name, call in pieces.items():
    print(f"{name:>42} {host_us(call):8.2f}", flush=True)
