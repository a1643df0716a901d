"""A soak of mixed calls, as a model makes them, every result checked.

Kept plans launched again, gemm(..., out=) repeated on the same arrays (its
prepared-launch path), fresh calls into new outputs and calls that return a
new C, in every precision at small to mid shapes, through named kernels
(every path that keeps device state of its own: TMA maps, split-K and
stream-K workspaces and flags, the INT4 widening workspace, C's map) and
gemm()'s own choice, on Numba arrays and, where installed, torch tensors;
the float precisions' and INT8's calls with or without an epilogue (EPILOGUES: its
vectors are arrays of the call's too); W4A16 calls (gemm(x, a PackedW4)) on
layers kept and called again, as a model's forward does. Each call gets fresh values written
into its arrays and a poisoned output; integers must equal the exact
product, the floats within Precision.tolerance.

The sequence is drawn from one seed: a failure names it and the call's
index, and `--seed S --calls N` replays the same N calls.

    python -m numgemm.soak --seconds 120 [--seed S] [--calls N] [--json F]
"""

import argparse
import json
import sys
import time
from dataclasses import dataclass

import numpy as np

from . import operands
from .precision import ENCODINGS, PRECISIONS

#: M, N, K drawn for each call: small to mid, no multiple of a tile needed,
#: K's that leave rows to pad (INT8 K % 16, FP16 K % 8) among them.
DIMS = {"M": (1, 7, 16, 64, 130, 256, 384), "N": (8, 33, 96, 200, 384), "K": (16, 40, 96, 130, 256, 512)}
KINDS = ("plan", "repeat", "fresh", "new_c", "w4a16")
#: A W4A16 layer's N and K drawn (multiples of 8 and of the group); its calls' M are DIMS's.
W4_DIMS = {"N": (8, 96, 200, 384), "K": (128, 256, 512)}
POOL = 12                   # kept plans, and arrays repeated, alive at once (the oldest dropped)
#: The epilogue a float precision's call has, when it has one (gemm()'s
#: scale_a, scale_b, bias, activation): FP8's per-tensor scales; the others'
#: every vector, and an activation.
EPILOGUES = {"e4m3": dict(scale_a="tensor", scale_b="tensor"), "e5m2": dict(scale_a="tensor", scale_b="tensor"),
             "fp16": dict(scale_a="row", scale_b="col", bias=True, act="silu"),
             "bf16": dict(scale_a="row", scale_b="col", bias=True, act="gelu"),
             "int8": dict(scale_a="row", scale_b="col", bias=True)}         # W8A8


def with_epilogue(cfg, epilogue, chosen=False):
    """cfg (a KernelConfig, or None: gemm()'s choice) with the epilogue's
    fields, or None where it cannot take them (split-K summed in its last
    blocks, stream-K)."""
    from .checks import with_epilogue as with_fields
    from .kernel.epilogue import NONE

    fields = dict(NONE, **(epilogue or {}))
    try:
        return with_fields(cfg, fields, chosen)
    except ValueError:
        return None


def kernels(precision, cc):
    """The kernels the soak names for precision on a GPU of compute capability
    cc (None: gemm()'s choice): each path that keeps device state of its own,
    where this GPU runs it, and FP16's with B as an N x K weight."""
    from . import registry

    get = registry.get
    named = {
        "fp16": [get("fp16_ptx_tma"), get("fp16_wgmma"), get("fp16_wgmma_c16"),
                 get("fp16_wgmma_c16").replace(c_tma=True), get("fp16_ptx_mma_m16").replace(split_k=2),
                 registry.layout_twin(get("fp16_wgmma"), "nk"), registry.layout_twin(get("fp16_ptx_tma"), "nk")],
        "int8": [get("int8_ptx_tma"), get("int8_wgmma"), get("int8_wgmma_swap"),
                 get("int8_wgmma").replace(stream_k=True), get("int8_ptx_mma_k32_m16").replace(split_k=4),
                 get("int8_ptx_mma_k32_m16").replace(split_k=4, split_sum="last")],
        "bf16": [get("bf16_ptx_tma"), get("bf16_wgmma"), get("bf16_wgmma").replace(out="bf16", c_tma=True),
                 registry.layout_twin(get("bf16_wgmma"), "nk")],
        **{p: [get(f"{p}_ptx_tma"), get(f"{p}_wgmma"), get(f"{p}_wgmma").replace(out="bf16"), get(f"{p}_wgmma_swap")]
           for p in registry.FLOAT8},
        "int4": [get("int4_ptx_unpack_s8_tma"), get("int4_wgmma_unpack_s8"), get("int4_wgmma_unpack_s8_swap")],
    }[precision]
    return [None] + [c for c in named if c.unsupported(cc) is None]


@dataclass
class Call:
    """One GEMM as a caller keeps it: its arrays on the device (Numba or torch,
    in the layout its kernel takes), the values last written into them, and
    its plan where it is kept. Call.new() makes the arrays from fresh values;
    write() puts fresh values where they lie; run() makes the call and
    check() says how C differs from the exact product."""

    precision: str
    kernel: object          # a KernelConfig, or None: gemm()'s choice
    shape: tuple            # batch, M, N, K
    lib: str = "numba"
    a: object = None        # device arrays as gemm() takes them (2-D for one batch)
    b: object = None
    out: object = None
    plan: object = None
    values: tuple = ()      # the last values written: a (batch, M, K), b as operands.values() draws it
    epilogue: dict = None   # KernelConfig's epilogue fields (EPILOGUES), or None
    vectors: tuple = ()     # its scale_a, scale_b, bias on the device (or None), and the values last written
    vector_values: tuple = ()

    @classmethod
    def new(cls, precision, kernel, shape, rng, lib="numba", out=True, plan=False, epilogue=None):
        """A call of new arrays holding fresh values; a poisoned output unless
        out is False; its plan, if plan; with the epilogue's fields, if any."""
        call = cls(precision, kernel, shape, lib, epilogue=epilogue)
        if epilogue:
            call.vectors = tuple(None if v is None else _to_device(lib, v) for v in call._draw_vectors(rng))
        a, rows = call._draw(rng)
        encoding = PRECISIONS[precision].encoding_of
        call.a, b_rows = _to_device(lib, a, encoding(a.dtype)), _to_device(lib, rows, encoding(rows.dtype))
        call.b = _transposed(lib, b_rows) if call.nk else b_rows
        if out:
            poison = call._poison()
            call.out = _to_device(lib, poison, encoding(poison.dtype))
        if plan:
            from .api import plan_gemm

            call.plan = plan_gemm(call.a, call.b, precision=precision, kernel=kernel, out=call.out, k=shape[3],
                                  **call._epilogue_args())
        return call

    @property
    def nk(self):
        from . import registry

        layout = self.kernel.b_layout if self.kernel is not None else registry.choice_layout(self.precision)
        return layout == "nk"

    def write(self, rng):
        """Fresh values into the call's arrays, where they lie, and poison into its output."""
        a, rows = self._draw(rng)
        _copy_in(self.lib, self.a, a)
        _copy_in(self.lib, _transposed(self.lib, self.b) if self.nk else self.b, rows)
        if self.out is not None:
            _copy_in(self.lib, self.out, self._poison())
        for dst, src in zip(self.vectors, self._draw_vectors(rng) if self.epilogue else ()):
            if dst is not None:
                _copy_in(self.lib, dst, src)

    def run(self, kind="repeat"):
        """The GEMM as kind makes it ("plan": the plan launched; else gemm()
        into out, or into a new C where there is none), synchronized: C on
        the host, (batch, M, N)."""
        from numba import cuda

        import numgemm

        batch, M, N, K = self.shape
        if kind == "plan":
            self.plan.launch()
            c = self.out
        else:
            c = numgemm.gemm(self.a, self.b, precision=self.precision, kernel=self.kernel, out=self.out, k=K,
                             **self._epilogue_args())
        cuda.synchronize()
        return _host(c).reshape(batch, M, N)

    def check(self, got):
        """Why got differs from the product of the values last written, or None."""
        a, b = self.values
        if PRECISIONS[self.precision].exact:
            # float64 sums of integer products are exact below 2**53: |C| <= 2**14 K here.
            assert 2**14 * a.shape[-1] < 2**53
            ref = (a.astype(np.float64) @ np.swapaxes(b, -1, -2).astype(np.float64)).astype(np.int64)
        else:
            ref = operands.expected(self.precision, a, b)
        if self.epilogue:
            ref = operands.through_epilogue(ref, *self.vector_values, self.epilogue.get("act"))
        return operands.mismatch(got, ref, self.precision, self.kernel.acc if self.kernel is not None else "")

    def describe(self):
        name = self.kernel.name if self.kernel is not None else "gemm()'s choice"
        with_ep = f" with {self.epilogue}" if self.epilogue else ""
        return f"{self.precision} {'x'.join(map(str, self.shape))} {name}{with_ep} on {self.lib}"

    def _draw_vectors(self, rng):
        """Fresh scale_a, scale_b and bias (kept as self.vector_values)."""
        self.vector_values = operands.epilogue_vectors(self.epilogue, self.shape[1], self.shape[2], rng)
        return self.vector_values

    def _epilogue_args(self):
        if not self.epilogue:
            return {}
        return dict(zip(("scale_a", "scale_b", "bias"), self.vectors), activation=self.epilogue.get("act"))

    def _draw(self, rng):
        """Fresh values (kept as self.values) as the arrays hold them: A, and
        B's rows (N x K for "nk", K x N for "kn"); 2-D for one batch."""
        batch, M, N, K = self.shape
        self.values = operands.values(self.precision, batch, M, N, K, rng)
        a, b = operands.in_layout(self.precision, "nk" if self.nk else "kn", *self.values)
        rows = np.swapaxes(b, -1, -2) if self.nk else b
        return (np.ascontiguousarray(x[0] if batch == 1 else x) for x in (a, rows))

    def _poison(self):
        batch, M, N, _ = self.shape
        prec = PRECISIONS[self.precision]
        if self.kernel is not None:
            dtype = with_epilogue(self.kernel, self.epilogue).c_dtype
        else:                           # an integer precision's sums through an epilogue: float32
            dtype = np.float32 if self.epilogue and prec.exact else prec.out_dtype
        return np.full((batch, M, N) if batch > 1 else (M, N), operands.poison(self.precision, dtype), dtype)


class W4Call:
    """A W4A16 layer: its weight packed once and kept (the PackedW4 holds its
    device copy from the first call on); each call fresh activations of M
    rows, C into a poisoned float32 out or a new C in their format."""

    def __init__(self, precision, rng, lib):
        from .quant import GROUP, dequantize_w4, prepack_w4

        n, k = (int(rng.choice(W4_DIMS[d])) for d in "NK")
        zeros = bool(rng.integers(2))
        w = rng.integers(0, 16, (n, k)) if zeros else rng.integers(-8, 8, (n, k))
        z = rng.integers(0, 16, (n, k // GROUP)) if zeros else None
        self.packed = prepack_w4(w, rng.uniform(0.005, 0.02, (n, k // GROUP)).astype(np.float32), z,
                                 precision=precision)
        bits = self.packed.scales.T                         # as rounded: bfloat16's bits, or float16's
        bits = bits if PRECISIONS[precision].encoding else bits.view(np.float16)
        # the float64 weight, and each weight rounded to the activations' format (the wgmma kernel's)
        self.dense = {r: dequantize_w4(w, bits, z, r) for r in (None, precision)}
        self.precision, self.lib, self.shape = precision, lib, (n, k)

    def run_and_check(self, rng, new_c):
        """One call of M rows from DIMS: why C differs from the float64 product, or None."""
        from numba import cuda

        import numgemm
        from numgemm import weight_only

        (n, k), prec = self.shape, PRECISIONS[self.precision]
        self.m = int(rng.choice(DIMS["M"]))
        x = prec.encode(rng.standard_normal((self.m, k)).astype(np.float32))
        out = None if new_c else _to_device(self.lib, np.full((self.m, n), operands.poison(self.precision, np.float32),
                                                               np.float32))
        c = numgemm.gemm(_to_device(self.lib, x, prec.encoding_of(x.dtype)), self.packed, out=out)
        cuda.synchronize()
        dense = self.dense[weight_only.rounds(self.m, self.packed)]
        return operands.mismatch(_host(c), prec.decode(x) @ dense.T, self.precision)

    def describe(self):
        return f"W4A16 {self.precision} {self.m}x{self.shape[0]}x{self.shape[1]}" \
               f"{' with zero points' if self.packed.zeros is not None else ''} on {self.lib}"


class Soak:
    """The seeded mix: step(i) draws call i's kind and arguments, makes it and
    checks it."""

    def __init__(self, seed, cc, libs):
        self.seed, self.rng, self.libs = seed, np.random.default_rng(seed), libs
        self.kernels = {p: kernels(p, cc) for p in PRECISIONS}
        self.pools = {"plan": [], "repeat": [], "w4a16": []}
        self.counts = dict.fromkeys(KINDS, 0)

    def step(self, i):
        rng = self.rng
        kind = KINDS[rng.integers(len(KINDS))]
        pool = self.pools.get(kind)
        again = bool(pool) and rng.random() < 0.7
        if again:                                       # an earlier call again, new values in its arrays
            call = pool[rng.integers(len(pool))]
            if kind != "w4a16":
                call.write(rng)
        elif kind == "w4a16":
            from .kernel.w4a16 import ACTIVATIONS

            call = W4Call(ACTIVATIONS[rng.integers(len(ACTIVATIONS))], rng, self.libs[rng.integers(len(self.libs))])
        else:
            precision = list(PRECISIONS)[rng.integers(len(PRECISIONS))]
            ks = self.kernels[precision]
            shape = (2 if rng.random() < 0.15 else 1, *(int(rng.choice(DIMS[d])) for d in "MNK"))
            kernel = ks[rng.integers(len(ks))]
            epilogue = EPILOGUES.get(precision) if rng.random() < 0.5 else None
            if kernel is not None and with_epilogue(kernel, epilogue) is None:
                epilogue = None
            call = Call.new(precision, kernel, shape, rng,
                            self.libs[rng.integers(len(self.libs))], out=kind != "new_c", plan=kind == "plan",
                            epilogue=epilogue)
        if pool is not None and not again:
            pool.append(call)
            if len(pool) > POOL:
                pool.pop(int(rng.integers(len(pool))))
        why = call.run_and_check(rng, rng.random() < 0.3) if kind == "w4a16" else call.check(call.run(kind))
        self.counts[kind] += 1
        if why:
            raise AssertionError(f"soak seed {self.seed}, call {i} ({kind}: {call.describe()}): {why}; "
                                 f"replay: python -m numgemm.soak --seed {self.seed} --calls {i + 1}")


# --- the two array libraries -------------------------------------------------------

def _to_device(lib, x, encoding=""):
    """x on the device; torch: an encoding's bit patterns (BF16's uint16) as a tensor of that name."""
    x = np.ascontiguousarray(x)
    if lib == "torch":
        import torch

        if encoding and x.dtype.kind == "u":    # int16: torch has no uint16 arithmetic to speak of
            return torch.from_numpy(x.view(np.int16) if x.itemsize == 2 else x).cuda().view(getattr(torch, encoding))
        return torch.from_numpy(x).cuda()
    from numba import cuda

    return cuda.to_device(x)


def _transposed(lib, x):
    if lib == "torch":
        return x.transpose(-1, -2)
    from .api import transposed

    return transposed(x)


def _copy_in(lib, dst, src):
    if lib == "torch":
        import torch

        if str(dst.dtype).removeprefix("torch.") in ENCODINGS:     # its bit patterns, not its values converted
            bits = (torch.int16, np.int16) if src.itemsize == 2 else (torch.uint8, np.uint8)
            dst, src = dst.view(bits[0]), src.view(bits[1])
        dst.copy_(torch.from_numpy(src))
    else:
        dst.copy_to_device(src)


def _host(c):
    if hasattr(c, "cpu"):                   # a torch tensor (bfloat16: its bit patterns)
        import torch

        if c.dtype == torch.bfloat16:
            return c.view(torch.int16).cpu().numpy().view(np.uint16)
        return c.cpu().numpy()
    return c.copy_to_host() if hasattr(c, "copy_to_host") else np.asarray(c)


def libraries():
    """The array libraries the soak uses: Numba, and torch where it sees a GPU."""
    libs = ["numba"]
    try:
        import torch

        if torch.cuda.is_available():
            libs.append("torch")
    except ImportError:
        pass
    return libs


def prebuild(cc, jobs):
    """Build every kernel the soak can call, before its clock starts."""
    from . import kernel, registry, tuning
    from .checks import with_c_dtype

    cfgs = []
    for p in PRECISIONS:
        chosen, named = [], kernels(p, cc)[1:]
        for k in kernels(p, cc):
            if k is not None:
                chosen.append(k)
                continue
            layout = registry.choice_layout(p)
            for M in DIMS["M"]:
                for N in DIMS["N"]:
                    for K in DIMS["K"]:
                        cfg = tuning.choose(p, layout, M, N, K, cc)
                        chosen.append(with_c_dtype(cfg, np.dtype(PRECISIONS[p].out_dtype), chosen=True))
        cfgs += chosen
        if p in EPILOGUES:
            cfgs += [c for c in (with_epilogue(c, EPILOGUES[p], c not in named) for c in chosen) if c is not None]
    needed, hits, built, secs = kernel.prebuild(list(dict.fromkeys(cfgs)), cc, jobs)
    w4 = kernel.prebuild_helpers(_w4a16_specs(), cc, jobs)
    return needed + w4[0], hits + w4[1], built + w4[2], secs + w4[3]


def _w4a16_specs():
    """The W4A16 kernels gemm() chooses for the soak's layers and rows."""
    from numba import cuda

    from .kernel.w4a16 import ACTIVATIONS, choose

    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    return {choose(M, N, sms, act, out, zeros) for act in ACTIVATIONS for out in (PRECISIONS[act].narrow, "f32")
            for zeros in (False, True) for M in DIMS["M"] for N in W4_DIMS["N"]}


def run(seconds, seed=None, calls=None, jobs=4, log=print):
    """Soak for `seconds` (or `calls` calls); {seed, calls, seconds, kinds,
    libs} on success, AssertionError naming the seed and call on a mismatch."""
    from numba import cuda

    seed = int(np.random.SeedSequence().entropy % 2**32) if seed is None else seed
    cc = tuple(cuda.get_current_device().compute_capability)
    needed, hits, built, secs = prebuild(cc, jobs)
    log(f"soak seed {seed}: {needed} kernels ({hits} from the cache, {built} built in {secs:.0f} s)")
    soak = Soak(seed, cc, libraries())
    start, i = time.perf_counter(), 0
    while (calls is None or i < calls) and (calls is not None or time.perf_counter() - start < seconds):
        soak.step(i)
        i += 1
    took = time.perf_counter() - start
    return {"seed": seed, "calls": i, "seconds": round(took, 1), "kinds": soak.counts, "libs": soak.libs,
            "device": _device_name(), "result": "all exact (integers) or within tolerance (FP16)"}


def _device_name():
    from numba import cuda

    from .timing import device_name

    return device_name(cuda.get_current_device())


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m numgemm.soak", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=120.0, help="how long to run (default 120)")
    ap.add_argument("--seed", type=int, help="the sequence's seed (default: a fresh one, printed)")
    ap.add_argument("--calls", type=int, help="stop after this many calls instead (a replay)")
    ap.add_argument("--jobs", type=int, default=4, help="kernels built at once before the clock starts")
    ap.add_argument("--json", help="write the summary here")
    args = ap.parse_args(argv)
    summary = run(args.seconds, args.seed, args.calls, args.jobs, log=lambda m: print(m, file=sys.stderr))
    print(json.dumps(summary))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
