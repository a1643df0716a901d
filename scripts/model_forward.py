"""A model's forward with its linear layers on numgemm, against the same
forward on torch's (cuBLAS through F.linear): the layer shapes of a 1.1 B
Llama (TinyLlama: hidden 2048, MLP 5632, grouped K/V of 256), FP16 weights
as nn.Linear stores them (N x K), eager and captured in a CUDA graph.

    python scripts/model_forward.py [--layers 8] [--tokens 16 128 512]

Each forward is 7 GEMMs a layer (q, k, v, o, gate, up, down) with RMS norms,
SiLU and residual adds in torch between them; attention itself is left out
(q goes straight to o), so the time is the GEMMs' and the calls' around
them. Three ways to run each linear layer: torch's F.linear; numgemm.gemm on
the weight's transpose (a view) with a float16 C; and the custom operator
torch.ops.numgemm.linear. Each figure is the median of 50 forwards timed by
CUDA events after 10 warm-ups, one run (burst: the forwards are short); the
outputs of numgemm's forwards are compared with torch's (relative error of
the last hidden state).
"""

import argparse
import statistics
import sys

import torch
import torch.nn.functional as F

import numgemm
import numgemm.torch  # noqa: F401 - registers torch.ops.numgemm

HIDDEN, MLP, KV = 2048, 5632, 256


def linears(layers, seed=0):
    """Per layer, the weights of q, k, v, o, gate, up, down (N x K, FP16)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    shapes = [(HIDDEN, HIDDEN), (KV, HIDDEN), (KV, HIDDEN), (HIDDEN, HIDDEN), (MLP, HIDDEN), (MLP, HIDDEN),
              (HIDDEN, MLP)]
    return [[torch.randn(n, k, generator=g, device="cuda", dtype=torch.float16) / k ** 0.5 for n, k in shapes]
            for _ in range(layers)]


def rms(x):
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype)


def forward(x, weights, lin):
    for q, k, v, o, gate, up, down in weights:
        h = rms(x)
        lin(h, k), lin(h, v)                        # the K/V cache's projections
        x = x + lin(lin(h, q), o)
        h = rms(x)
        x = x + lin(F.silu(lin(h, gate)) * lin(h, up), down)
    return x


WAYS = {
    "torch F.linear": F.linear,
    "numgemm.gemm": lambda x, w: numgemm.gemm(x, w.t(), out_dtype=torch.float16),
    "numgemm::linear": torch.ops.numgemm.linear,
}


def time_ms(run, repeats=50, warmup=10):
    for _ in range(warmup):
        run()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(repeats):
        start.record()
        run()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return statistics.median(samples)


def graphed(run):
    """run captured in a CUDA graph (after warm-ups on a side stream, as torch asks), and its replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            run()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = run()
    return g.replay, out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--tokens", type=int, nargs="+", default=[16, 128, 512])
    args = p.parse_args(argv)
    weights = linears(args.layers)
    gemms = 7 * args.layers
    print(f"# {torch.cuda.get_device_name()}, {args.layers} layers ({gemms} GEMMs a forward), FP16, "
          f"burst medians of 50 forwards")
    print(f"{'tokens':>6} {'way':>16} {'eager ms':>9} {'x torch':>8} {'graph ms':>9} {'x torch':>8} "
          f"{'us/GEMM beyond torch':>21} {'rel err':>8}")
    with torch.inference_mode():
        for tokens in args.tokens:
            x = torch.randn(tokens, HIDDEN, device="cuda", dtype=torch.float16)
            ref = forward(x, weights, F.linear).double()
            base = {}
            for way, lin in WAYS.items():
                run = lambda: forward(x, weights, lin)      # noqa: E731
                err = ((run().double() - ref).norm() / ref.norm()).item()
                eager = time_ms(run)
                replay, _ = graphed(run)
                graph = time_ms(replay)
                base.setdefault("eager", eager), base.setdefault("graph", graph)
                beyond = (eager - base["eager"]) * 1e3 / gemms
                print(f"{tokens:6d} {way:>16} {eager:9.3f} {base['eager'] / eager:8.2f} {graph:9.3f} "
                      f"{base['graph'] / graph:8.2f} {beyond:21.1f} {err:8.1e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
