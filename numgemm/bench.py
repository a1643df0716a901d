"""The benchmark: check every kernel against the reference, then time it.

    python bench.py --all
    python bench.py --precision int8 --sizes 4096 8192 --preset tuned

For each precision and size: every selected kernel is checked once against
the exact reference (an irregular, batched shape, every entry), then timed
at each size (CUDA events, warm-up, median; inputs rotated when they fit in
L2), its output sampled against the reference again. A kernel that fails
shows FAIL and is not timed; one that numgemm will not launch on this GPU
shows n/a. One table: time, T(FL)OPS, share of the ceiling of the
instruction the kernel issues (mma.sync, or wgmma on sm_90; a library's:
the fastest of them), measured here by a microbenchmark, speedup over the
same-precision WMMA baseline, over fp16_wmma, and over the library
peer (cuBLAS fp16, cuBLASLt int8) timed in the same run; the kernel's
compile time and the host time of one gemm() call.
"""

import argparse
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np

from . import operands
from .cli import UsageError, entry, kernel_names
from .measure import bytes_moved, check, from_l2, log, operand_sets, prebuild, timed
from .precision import PRECISIONS
from .timing import device_name
from .toolchain import TARGETS

PRECISION_ORDER = ("fp16", "int8", "int4")
SIZES = (512, 1024, 2048, 4096, 8192)
PROFILED = []                              # under --profile's ncu: the bracketed launches, in order


@dataclass
class Row:
    precision: str
    n: object                        # N of a square problem, or "MxNxK"
    preset: str
    kernel: str
    config: str
    status: str = "ok"
    ms: float = math.nan
    tops: float = math.nan
    ceiling_pct: float = math.nan
    gbs: float = math.nan            # bytes_moved / time
    copy_pct: float = math.nan       # of the device-to-device copy's GB/s, measured in the same run
    vs_wmma: float = math.nan
    vs_fp16_wmma: float = math.nan
    vs_library: float = math.nan
    vs_base: float = math.nan        # over the family's base (--family)
    compile_s: float = math.nan
    host_us: float = math.nan         # gemm(..., out=) on device arrays, repeated: the host's part
    launch_us: float = math.nan       # plan.launch() alone
    sm_mhz: float = math.nan         # SM clock and board power while the timed launches run
    power_w: float = math.nan
    flags: str = ""                  # "above the mma.sync ceiling", "grows faster than work", "L2"
    from_l2: bool = False            # its operand sets too small to overflow L2 three times (measure.from_l2)


# --- the mma.sync ceiling ----------------------------------------------------------

def measure_ceilings():
    """T(FL)OPS of register-only mma.sync loops (8 independent chains a warp),
    per instruction: the ceiling of each precision's mma.sync."""
    from numba import cuda

    from . import primitives as P
    from .kernel.regs import getter, setter

    dev = cuda.get_current_device()
    blocks = dev.MULTIPROCESSOR_COUNT * 4
    out = {}
    for prec in PRECISIONS.values():
        name, k = prec.ceiling, prec.ceiling_k
        r = P.ROUTINES[name]
        na, nb, nc = (len(op.regs) for op in r.inputs)
        acc_t = {"f32": np.float32, "s32": np.int32}[r.output.ptxtype]
        get_a, get_b, get_c, put_c = getter(na), getter(nb), getter(nc), setter(nc)
        mma = getattr(P, name)

        @cuda.jit
        def kernel(res, iters):
            tid = cuda.threadIdx.x
            fa = cuda.local.array(4, np.uint32)
            fb = cuda.local.array(2, np.uint32)
            for i in range(4):
                fa[i] = np.uint32(tid * 2654435761 + i)
            for i in range(2):
                fb[i] = np.uint32(tid * 40503 + i)
            acc = cuda.local.array(32, acc_t)
            for i in range(32):
                acc[i] = 0
            for _ in range(iters):
                for c in range(8):
                    put_c(acc, c * 4, mma(get_a(fa, 0), get_b(fb, 0), get_c(acc, c * 4)))
            s = acc[0]
            for i in range(1, 32):
                s += acc[i]
            res[cuda.grid(1)] = s

        res = cuda.device_array(blocks * 256, acc_t)
        ms, iters = _timed_loop(lambda n: kernel[blocks, 256](res, n))
        out[name] = 2 * 16 * 8 * k * 8 * iters * blocks * 8 / (ms * 1e-3) / 1e12
    if tuple(dev.compute_capability) >= (9, 0):
        out.update(measure_wgmma_ceilings())
    return out


def _timed_loop(launch):
    """(ms, iterations) of a ceiling loop: launch(16) compiles and warms up, then
    launch(n) is timed with CUDA events, n growing 4x from 256 until a launch
    takes over 20 ms."""
    from numba import cuda

    launch(16)
    iters = 256
    while True:
        start, end = cuda.event(), cuda.event()
        start.record()
        launch(iters)
        end.record()
        end.synchronize()
        ms = cuda.event_elapsed_time(start, end)
        if ms > 20 or iters > 1 << 20:
            return ms, iters
        iters *= 4


def measure_wgmma_ceilings():
    """T(FL)OPS of wgmma with its operands in shared memory (sm_90a): per
    precision, three warpgroups a block, one block a SM, each issuing the
    wgmma kernels' own k-tile (their warp routine's compute: fence, four
    chained m64n256 wgmmas, commit), then waiting for all but the newest
    group, as their k loop does. No copies: the instruction's ceiling."""
    from numba import cuda

    from . import primitives as P
    from . import registry
    from .kernel import warp_wgmma

    dev = cuda.get_current_device()
    blocks, threads = dev.MULTIPROCESSOR_COUNT, 384
    out = {}
    for prec in PRECISIONS.values():
        if not prec.wgmma:
            continue
        cfg = next(c for c in registry.REGISTRY["tuned"].values() if c.op == "wgmma" and c.precision == prec.name)
        init, _, _, compute, _ = warp_wgmma.routine(cfg)
        wait_1, wait_0 = warp_wgmma.wait_1, warp_wgmma.wait_0
        acc_t = np.float32 if prec.acc == "f32" else np.int32
        n_acc = len(P.ROUTINES[prec.wgmma].output.regs)

        @cuda.jit
        def kernel(res, iters):
            sm = cuda.shared.array(48 * 1024, np.uint8)    # A and B tiles; their values do not matter
            base = (P.shared_addr(sm, 0) + np.uint32(1023)) & np.uint32(0xFFFFFC00)
            acc = init()
            for _ in range(iters):
                compute(acc, base, base + np.uint32(8192))
                wait_1()
            wait_0()
            s = acc[0]
            for i in range(1, n_acc):
                s += acc[i]
            res[cuda.grid(1)] = s

        res = cuda.device_array(blocks * threads, acc_t)
        ms, iters = _timed_loop(lambda n: kernel[blocks, threads](res, n))
        m, n, k = cfg.op_shape
        out[prec.wgmma] = 2 * m * n * k * cfg.ksteps * iters * blocks * (threads // 128) / (ms * 1e-3) / 1e12
    return out


def linkage_cost(chains=4, iters=4096):
    """What a call boundary costs: one warp loop of mma.sync (m16n8k16, f32
    accumulate, `chains` independent accumulators) with the routine inline
    and linked as an external .func. {linkage: (ms, local bytes/thread, registers)}."""
    from numba import cuda

    from . import primitives as P

    blocks = cuda.get_current_device().MULTIPROCESSOR_COUNT * 4
    result = {}
    for linkage in P.LINKAGES:
        mma = P.routines(linkage).mma_m16n8k16_f16_f32

        @cuda.jit
        def kernel(res, n):
            t = np.uint32(cuda.threadIdx.x)
            a = (t, t + np.uint32(1), t + np.uint32(2), t + np.uint32(3))
            b = (t * np.uint32(3), t * np.uint32(5))
            acc = cuda.local.array((chains, 4), np.float32)
            for c in range(chains):
                for r in range(4):
                    acc[c, r] = 0
            for _ in range(n):
                for c in range(chains):
                    d = mma(a, b, (acc[c, 0], acc[c, 1], acc[c, 2], acc[c, 3]))
                    acc[c, 0], acc[c, 1], acc[c, 2], acc[c, 3] = d
            s = np.float32(0)
            for c in range(chains):
                s += acc[c, 0] + acc[c, 3]
            res[cuda.grid(1)] = s

        res = cuda.device_array(blocks * 128, np.float32)
        kernel[blocks, 128](res, 4)
        start, end = cuda.event(), cuda.event()
        start.record()
        kernel[blocks, 128](res, iters)
        end.record()
        end.synchronize()
        result[linkage] = (cuda.event_elapsed_time(start, end),
                           kernel.get_local_mem_per_thread(), kernel.get_regs_per_thread())
    return result


def measure_copy_bandwidth(nbytes=1 << 30):
    """GB/s of a device-to-device copy, counting the bytes read and written:
    the roofline's memory ceiling."""
    from numba import cuda

    from .timing import time_gpu

    src = cuda.device_array(nbytes, np.uint8)
    dst = cuda.device_array(nbytes, np.uint8)
    ms, _ = time_gpu(lambda i: dst.copy_to_device(src), repeats=5)
    return 2 * nbytes / (ms * 1e-3) / 1e9


def ceiling_for(cfg_or_precision, ceilings):
    """The ceiling of the instruction a kernel issues: its precision's
    mma.sync, or (op="wgmma") its wgmma; an INT4 kernel that widens to s8
    (unpack) is measured against s8, the instruction it runs on."""
    cfg = cfg_or_precision
    precision = getattr(cfg, "precision", cfg)
    if precision == "int4" and getattr(cfg, "unpack", "none") != "none":
        precision = "int8"
    prec = PRECISIONS[precision]
    if getattr(cfg, "op", "") == "wgmma":
        return ceilings.get(prec.wgmma, math.nan)
    return ceilings[prec.ceiling]


def fastest_ceiling(precision, ceilings):
    """A library's ceiling: the fastest of its precision's instructions
    measured here (mma.sync, or wgmma on sm_90), since it may issue either;
    INT4's library is an INT8 GEMM."""
    prec = PRECISIONS["int8" if precision == "int4" else precision]
    return max(ceilings[prec.ceiling], ceilings.get(prec.wgmma, 0.0))


# --- the run -------------------------------------------------------------------------

def select(args):
    """[(preset, name, config)]: the kernels to run, each distinct config once
    (a preset may register one config under two names: its base and, say, a
    3-stage variant when the base already has 3 stages)."""
    from . import registry

    presets = registry.PRESETS if args.preset == "all" else (args.preset,)
    chosen, seen = [], set()
    for preset in presets:
        pool = registry.FAMILIES[preset][args.family] if args.family else registry.REGISTRY[preset]
        for name, cfg in pool.items():
            if cfg.precision not in args.precision:
                continue
            if args.kernels and name not in args.kernels and cfg.name not in args.kernels:
                continue            # "default" is not in the pool: run() adds gemm()'s choice per shape
            if args.linkage and cfg.op == "mma":
                cfg = cfg.replace(linkage=args.linkage)
            cfg = c_as_asked(in_layout_asked(cfg, args), args)
            if cfg is None or (preset, cfg) in seen:
                continue
            seen.add((preset, cfg))
            chosen.append((preset, name, cfg))
    return chosen


def run(args):
    """(device name, ceilings, rows): every chosen kernel checked, then timed
    at every size, beside the library peers, with the ratios filled in."""
    from numba import cuda

    from . import registry

    dev = cuda.get_current_device()
    name = device_name(dev)
    cc = tuple(dev.compute_capability)
    log(f"numgemm bench on {name} (sm_{cc[0]}{cc[1]}), batch {args.batch}, sizes {args.sizes}")
    log("measuring the instructions' ceilings (mma.sync; wgmma on sm_90) ...")
    ceilings = measure_ceilings()
    for op, value in ceilings.items():
        log(f"  {op}: {value:.0f} T(FL)OPS")
    args.copy_gbs = measure_copy_bandwidth()
    log(f"  device-to-device copy: {args.copy_gbs:.0f} GB/s (bytes read + written)")
    rng = np.random.default_rng(args.seed)
    rows, times = [], {}
    if "int4" in args.precision:
        log(registry.describe_default("int4", cc))
    shapes = shapes_of(args)
    selected = select(args)
    prebuild([c for _, _, c in selected if not c.unsupported(cc)], cc, args.jobs)
    for precision in PRECISION_ORDER:
        chosen = [c for c in selected if c[2].precision == precision]
        picks = {shape: default_picks(precision, shape, cc, args) for shape in shapes} if wants_default(args) else {}
        if precision not in args.precision or not (chosen or picks):
            continue
        checked = check(precision, chosen + list(dict.fromkeys(p for ps in picks.values() for p in ps)), cc, rng)
        for M, N, K in shapes:
            label = f"{M}x{N}x{K}" if args.shapes else M
            here = chosen + picks.get((M, N, K), [])
            rows += _time_shape(precision, here, checked, (M, N, K), label, args, ceilings, times, rng)
    _ratios(rows, times, args.family)
    return name, ceilings, rows


def wants_default(args):
    """Whether --kernels names "default": gemm()'s own choice at each shape."""
    return bool(args.kernels) and "default" in args.kernels


def default_pick(precision, shape, cc, args=None):
    """("tuned", "default", config): the kernel gemm() picks for this shape
    (numgemm.tuning.choose) with B as --b-layout asks, else in its
    precision's layout, and C as --out-dtype asks."""
    from . import registry

    layout = getattr(args, "b_layout", None) or registry.choice_layout(precision)
    return _pick(precision, shape, cc, args, layout, "default")


def default_picks(precision, shape, cc, args):
    """default_pick, and where --b-layout names a layout other than the
    precision's own, gemm()'s pick in its own layout too ("default KN"), so
    that the two layouts compare in one run."""
    from . import registry

    picks = [default_pick(precision, shape, cc, args)]
    own = registry.choice_layout(precision)
    if getattr(args, "b_layout", None) not in (None, own):
        picks.append(_pick(precision, shape, cc, args, own, f"default {own.upper()}"))
    return picks


def _pick(precision, shape, cc, args, layout, name):
    from . import tuning

    cfg = tuning.choose(precision, layout, *shape, cc)
    return "tuned", name, c_as_asked(cfg, args, chosen=True) if args is not None else cfg


def in_layout_asked(cfg, args):
    """cfg reading B as --b-layout asks (registry.layout_twin), cfg itself
    without the option, or None where it has no such twin (left out)."""
    from . import registry

    want = getattr(args, "b_layout", None)
    if cfg is None or want is None or cfg.b_layout == want:
        return cfg
    return registry.layout_twin(cfg, want)


def c_as_asked(cfg, args, chosen=False):
    """cfg storing FP16's C as --out-dtype asks (as gemm(out_dtype=) has it),
    or None for a kernel that cannot (WMMA), which the run leaves out."""
    from .api import with_c_dtype

    if getattr(args, "out_dtype", "float32") == "float32" or cfg.precision != "fp16":
        return cfg
    try:
        return with_c_dtype(cfg, np.dtype(args.out_dtype), chosen)
    except ValueError as e:
        log(f"left out: {e}")
        return None


#: --shapes llm: quantized-inference shapes (M tokens, N = K a model's width) and small squares.
LLM_SHAPES = tuple(f"{m}x{n}x{n}" for n in (4096, 8192) for m in (1, 16, 64, 256)) + \
    tuple(f"{n}x{n}x{n}" for n in (512, 1024, 2048))


def shapes_of(args):
    """The run's problems (M, N, K): --shapes (llm: LLM_SHAPES), else the squares of --sizes."""
    if args.shapes:
        names = LLM_SHAPES if args.shapes == ["llm"] else args.shapes
        return [tuple(map(int, x.lower().split("x"))) for x in names]
    return [(n, n, n) for n in args.sizes]


def _time_shape(precision, chosen, checked, shape, label, args, ceilings, times, rng):
    """The rows of one problem shape: each checked kernel timed (inputs rotated
    when they fit in L2) and its output sampled, then the library peers."""
    from numba import cuda

    from .api import gemm
    from .peers import peer_runs
    from .timing import gpu_state, l2_flusher, time_gpu, time_host

    (M, N, K), batch, rows = shape, args.batch, []
    between = l2_flusher() if args.cold_l2 else None
    work = 2.0 * batch * M * N * K
    ws = bytes_moved(precision, batch, M, N, K)
    host_sets = operand_sets(precision, batch, shape, rng)
    in_l2 = not args.cold_l2 and from_l2(ws)     # too small to rotate past L2: flagged
    dev_sets = {}
    for preset, kname, cfg in chosen:
        status, compile_s = checked[preset, cfg]
        row = Row(precision, label, preset, kname, cfg.name, status, compile_s=compile_s, from_l2=in_l2)
        rows.append(row)
        if row.status != "ok":
            continue
        log(f"[{precision} {label}] time {preset}/{kname}")
        if cfg.b_layout not in dev_sets:
            dev_sets[cfg.b_layout] = [operands.to_device(precision, cfg.b_layout, *hs) for hs in host_sets]
        state = {}
        ms, ok, plans, outs = timed(precision, cfg, shape, dev_sets[cfg.b_layout], host_sets, args, rng,
                                    between=between,
                                    during=lambda: state.update(gpu_state(cuda.get_current_device().id)))
        # What a call costs the host: gemm() again on the same arrays (the default: as a user calls
        # it, with no kernel named), and the launch alone.
        x0, y0 = dev_sets[cfg.b_layout][0]
        named = None if kname == "default" else cfg
        row.host_us = time_host(lambda: gemm(x0, y0, precision=precision, kernel=named, out=outs[0], k=K))
        row.launch_us = time_host(plans[0].launch)
        if not ok:
            row.status = "FAIL"
            log(f"  {kname}: FAIL at {label} (sampled check)")
            continue
        if args.profile_launches is not None:       # under ncu: the timed launch once more, bracketed
            if between is not None:
                between()
            cuda.profile_start()
            plans[0].launch()
            cuda.synchronize()
            cuda.profile_stop()
            PROFILED.append({"precision": precision, "N": label, "preset": preset, "kernel": kname,
                             "config": cfg.name})
        row.ms, row.tops = ms, work / (ms * 1e-3) / 1e12
        _bandwidth(row, ws, args)
        row.sm_mhz, row.power_w = state.get("sm_mhz", math.nan), state.get("power_w", math.nan)
        row.ceiling_pct = 100 * row.tops / ceiling_for(cfg, ceilings)
        times[preset, kname, label] = ms
        # Each result as it comes: a run cut short keeps what it measured.
        log(f"  {kname}: {ms:.3f} ms, {row.tops:.1f} T(FL)OPS")
    del dev_sets
    peers = [] if args.no_peers else peer_runs(precision, M, N, K, batch, rng, len(host_sets),
                                               getattr(args, "b_layout", None))
    for pname, prun, pcheck in peers:
        log(f"[{precision} {label}] time {pname}")
        state = {}
        ms, _ = time_gpu(prun, repeats=args.repeats, between=between,
                         during=lambda: state.update(gpu_state(cuda.get_current_device().id)))
        row = Row(precision, label, "library", pname, pname, "ok" if pcheck() else "FAIL", from_l2=in_l2)
        if row.status == "ok":
            row.ms, row.tops = ms, work / (ms * 1e-3) / 1e12
            _bandwidth(row, ws, args)
            row.sm_mhz, row.power_w = state.get("sm_mhz", math.nan), state.get("power_w", math.nan)
            row.ceiling_pct = 100 * row.tops / fastest_ceiling(precision, ceilings)
            times.setdefault(("library", precision, label), ms)     # x library: the vendor's, listed first
        rows.append(row)
    return rows


def _bandwidth(row, nbytes, args):
    """The row's GB/s, and its share of the copy bandwidth measured in the run."""
    row.gbs = nbytes / (row.ms * 1e-3) / 1e9
    row.copy_pct = 100 * row.gbs / args.copy_gbs if getattr(args, "copy_gbs", None) else math.nan


def _ratios(rows, times, family):
    """Each row's ratios: another kernel's time over this one's, from this run."""
    from . import registry

    family_base = registry.family_base(family) if family else None
    for row in rows:
        if row.status != "ok" or math.isnan(row.ms):
            continue
        base = times.get((row.preset, registry.BASELINE[row.precision], row.n))
        fp16 = times.get((row.preset, "fp16_wmma", row.n))
        lib = times.get(("library", "int8" if row.precision == "int4" else row.precision, row.n))
        if row.preset != "library":
            row.vs_wmma = base / row.ms if base else math.nan
            row.vs_fp16_wmma = fp16 / row.ms if fp16 else math.nan
            fam = times.get((row.preset, family_base, row.n))
            row.vs_base = fam / row.ms if fam else math.nan
        row.vs_library = lib / row.ms if lib else math.nan
    _flag(rows)


def _flag(rows):
    """Rows to distrust: faster than the measured ceiling allows, or slower
    than the work grows from the previous size (a cache or clock effect)."""
    last = {}
    for row in rows:
        if row.status != "ok" or math.isnan(row.ms):
            continue
        flags = ["L2"] if row.from_l2 else []
        if row.ceiling_pct > 100:
            flags.append("above its instruction's ceiling")
        key = (row.preset, row.kernel)
        if key in last and isinstance(row.n, int) and isinstance(last[key].n, int) and row.n > last[key].n:
            prev = last[key]
            if row.ms / prev.ms > 1.15 * (row.n / prev.n) ** 3:
                flags.append(f"grows faster than work ({row.ms / prev.ms:.1f}x for {(row.n / prev.n) ** 3:.0f}x)")
        last[key] = row
        row.flags = "; ".join(flags)


HEADERS = ["precision", "N", "preset", "kernel", "status", "time ms", "T(FL)OPS", "% ceil", "GB/s", "% copy",
           "x WMMA", "x fp16_wmma", "x library", "compile s", "host us", "launch us", "SM MHz", "W", "flags"]


def _op_of(config_name):
    """The instruction of a kernel from its config's name (KernelConfig.name:
    precision_op_...), so that a stored run reads the same after the
    registry's names change."""
    op = config_name.split("_")[1]
    return "mma" if op.startswith("mma") else op


def ladder(rows, ceilings):
    """Per precision and size, the study's question at every instruction
    level, read from one run's rows: the fastest tuned WMMA, mma.sync and
    wgmma kernels, and the library; each with its share of its
    own instruction's ceiling (the library's: of the fastest instruction's
    measured here, since it may issue either) and its speed against WMMA.
    "" where the run has no wgmma row."""
    from tabulate import tabulate

    ok = [r for r in rows if r.status == "ok" and not math.isnan(r.ms) and r.preset in ("tuned", "library")]
    body = []
    for precision in PRECISION_ORDER:
        for n in dict.fromkeys(r.n for r in ok if r.precision == precision):
            here = [r for r in ok if r.precision == precision and r.n == n]
            ops = {r.kernel: _op_of(r.config) for r in here if r.preset == "tuned" and r.kernel != "default"}
            fastest = {op: min((r for r in here if ops.get(r.kernel) == op), key=lambda r: r.ms, default=None)
                       for op in ("wmma", "mma", "wgmma")}
            wgmma = fastest["wgmma"]
            if wgmma is None:
                continue
            picked = [("WMMA", fastest["wmma"]), ("mma.sync", fastest["mma"]), ("wgmma", wgmma),
                      ("library", next((r for r in here if r.preset == "library"), None))]
            wmma = picked[0][1]
            # A library's share from the run's ceilings, not its row: rows stored
            # before 2026-12-02 hold it of mma.sync's ceiling.
            library = fastest_ceiling(precision, ceilings)
            for level, r in picked:
                if r is not None:
                    pct = 100 * r.tops / library if level == "library" else r.ceiling_pct
                    body.append([precision, n, level, r.kernel, f"{r.ms:.3f}", f"{r.tops:.1f}",
                                 "" if math.isnan(pct) else f"{pct:.1f}", f"{wmma.ms / r.ms:.2f}" if wmma else ""])
    if not body:
        return ""
    return tabulate(body, headers=["precision", "N", "instruction", "kernel", "time ms", "T(FL)OPS", "% ceil",
                                   "x WMMA"], tablefmt="github", disable_numparse=True)


def table(rows):
    from tabulate import tabulate

    def f(x, fmt):
        return "" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)

    family = any(not math.isnan(r.vs_base) for r in rows)
    headers = HEADERS[:10] + (["x base"] if family else []) + HEADERS[10:]
    body = [[r.precision, r.n, r.preset, r.kernel, r.status, f(r.ms, ".3f"), f(r.tops, ".1f"),
             f(r.ceiling_pct, ".1f"), f(r.gbs, ".0f"), f(r.copy_pct, ".1f")] +
            ([f(r.vs_base, ".2f")] if family else []) +
            [f(r.vs_wmma, ".2f"), f(r.vs_fp16_wmma, ".2f"),
             f(r.vs_library, ".2f"), f(r.compile_s, ".1f"), f(r.host_us, ".0f"), f(r.launch_us, ".0f"),
             f(r.sm_mhz, ".0f"),
             f(r.power_w, ".0f"), r.flags] for r in rows]
    # Numbers stay as formatted here (tabulate would re-parse "1.50" as 1.5).
    align = ["left"] * 5 + ["right"] * (len(headers) - 6) + ["left"]
    return tabulate(body, headers=headers, tablefmt="github", disable_numparse=True, colalign=align)


def _offline(args, argv):
    from . import insight, registry
    from .kernel import prebuild_offline

    if args.sass:
        chosen = select(args)
        prebuild_offline([c for _, _, c in chosen], args.targets, args.jobs)
        print(insight.sass_table(chosen, args.targets))
        return 0
    presets = registry.PRESETS[::-1] if args.preset == "all" else (args.preset,)   # tuned first

    def find(name):
        for preset in presets:
            try:
                return preset, name, registry.get(name, preset)
            except KeyError:
                continue
        raise SystemExit(f"bench.py --diff: no kernel {name!r} in preset {args.preset!r}")
    a, b = find(args.diff[0]), find(args.diff[1])
    print(insight.diff_table(a, b, args.targets))
    if args.profile:                    # on a GPU: the counters of both, those that moved most first
        from .profile import profile_rows

        sizes = args.sizes if "--sizes" in argv else [4096]
        rows, note = profile_rows(args, ["--preset", a[0] if a[0] == b[0] else "all", "--kernels", a[1], b[1],
                                         "--precision",
                                         *dict.fromkeys((a[2].precision, b[2].precision)),
                                         "--sizes", *map(str, sizes)])
        print(note if rows is None else insight.counter_diff(rows, a[:2], b[:2]))
    return 0


def parse(argv):
    ap = argparse.ArgumentParser(prog="python bench.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--all", action="store_true", help="every precision, size and preset")
    ap.add_argument("--precision", nargs="+", choices=PRECISION_ORDER, default=list(PRECISION_ORDER))
    ap.add_argument("--kernels", nargs="+",
                    help="registered names or config names; default: the kernel gemm() picks at each shape")
    ap.add_argument("--sizes", nargs="+", type=int, default=list(SIZES))
    ap.add_argument("--shapes", nargs="+", metavar="MxNxK",
                    help="non-square problems instead of --sizes, e.g. 16x8192x8192 (memory-bound); "
                         "llm: M = 1, 16, 64, 256 with N = K = 4096, 8192, and 512, 1024, 2048 squared")
    ap.add_argument("--family", choices=("fp16", "int8", "int4", "int4_k64_ablation"),
                    help="one family's kernels, with each one's ratio to the family's base")
    ap.add_argument("--out-dtype", choices=("float32", "float16"), default="float32",
                    help="FP16's C: float16 rounds each f32 sum to half as it is stored (gemm()'s out_dtype); "
                         "kernels that cannot (WMMA) are left out")
    ap.add_argument("--b-layout", choices=("kn", "nk"),
                    help="B as K x N or as N x K (an nn.Linear weight): each kernel in that layout where it has "
                         "a twin (FP16 has both; INT8 and INT4 N x K), gemm()'s choice for it; default: each kernel's "
                         "own; with --tune, the layout searched")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--preset", choices=("paper", "tuned", "all"), default="all")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--seed", type=int, default=None, help="default: fresh random data")
    ap.add_argument("--no-peers", action="store_true", help="skip the library GEMMs")
    ap.add_argument("--linkage", choices=("inline", "link"),
                    help="time the mma kernels with the PTX routines in this linkage")
    ap.add_argument("--linkage-cost", action="store_true",
                    help="only measure what the link linkage costs in an mma loop")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="processes that build the kernels before timing (default: all cores)")
    ap.add_argument("--sass", action="store_true",
                    help="no GPU needed: each chosen kernel's SASS by instruction class, main loop, resources")
    ap.add_argument("--diff", nargs=2, metavar=("A", "B"),
                    help="no GPU needed: what changes between two kernels (fields, SASS, resources)")
    ap.add_argument("--targets", nargs="+", default=list(TARGETS), choices=TARGETS,
                    help="targets of --sass and --diff (default: all)")
    ap.add_argument("--profile", action="store_true",
                    help="Nsight Compute counters of each chosen kernel's timed launch (needs ncu)")
    ap.add_argument("--clocks", choices=("none", "base"), default="none",
                    help="--profile's clock control: none (as the timings run) or base (reproducible counters)")
    ap.add_argument("--cold-l2", action="store_true", help="flush L2 before each timed launch")
    ap.add_argument("--profile-launches", metavar="FILE", help=argparse.SUPPRESS)   # the run under ncu
    ap.add_argument("--claims", action="store_true",
                    help="re-test the study's eight claims on this GPU (times, counters, sm_89 SASS)")
    ap.add_argument("--plot", metavar="DIR", help="also draw a roofline and one bar chart per family (matplotlib)")
    ap.add_argument("--tune", action="store_true",
                    help="search each precision's kernels, tilings and split-K factors over shape classes "
                         "and write the winners gemm() reads (numgemm.tune)")
    ap.add_argument("--tune-out", metavar="FILE",
                    help="where --tune writes (default: the kernel cache folder's tuned/<arch>.json)")
    ap.add_argument("--csv", help="also write the rows as CSV")
    ap.add_argument("--json", help="also write the rows (and the ceilings) as JSON")
    return ap.parse_args(argv)


def input_distribution():
    """How the operands are drawn (numgemm.operands.values), for the header."""
    parts = []
    for p in PRECISIONS.values():
        parts.append(f"{p.name} uniform integers in [{p.values[0]}, {p.values[1] - 1}]" if p.exact
                     else f"{p.name} standard normal")
    return "; ".join(parts)


def header(device, ceilings, args):
    from .timing import gpu_facts

    facts = gpu_facts()
    lines = [f"numgemm bench: {device}, driver {facts.get('driver', '?')}, max SM clock "
             f"{facts.get('max_sm_mhz', '?')} MHz, power limit {facts.get('power_limit_w', '?')} W, "
             f"batch {args.batch}, {time.strftime('%Y-%m-%d')}",
             f"inputs: {input_distribution()}; fresh each run" + ("" if args.seed is None else f" (seed {args.seed})")
             + ("; L2 flushed before each timed launch" if args.cold_l2 else "")
             + ("; FP16's kernels store C as float16" if getattr(args, "out_dtype", "") == "float16" else ""),
             "instruction ceilings (T(FL)OPS; % ceil is each kernel's share of its own instruction's): "
             + ", ".join(f"{k} {v:.0f}" for k, v in ceilings.items())]
    return "\n".join(lines), facts


def _claims(args):
    """bench.py --claims: time the study's kernels, read their counters, print
    numgemm.claims' verdicts."""
    from numba import cuda

    from . import claims, profile

    if not cuda.is_available():
        print("bench.py --claims needs an NVIDIA GPU (the SASS facts alone: numgemm.claims.sass_facts())")
        return 1
    dev = cuda.get_current_device()
    name = device_name(dev)
    sizes = sorted(args.sizes)
    picked = ["--preset", "paper", "--kernels", *claims.KERNELS, "--jobs", str(args.jobs)]
    _, _, rows = run(parse([*picked, "--sizes", *map(str, sizes), "--no-peers", "--batch", str(args.batch)]))
    times = {(r.kernel, r.n): r.ms for r in rows if r.status == "ok" and not math.isnan(r.ms)}
    counted, note = profile.profile_rows(args, [*picked, "--sizes", str(sizes[-1])])
    counters = {r["kernel"]: r for r in counted or []}
    facts = claims.sass_facts()
    verdicts = claims.evaluate(times, counters, facts, {"name": name, "cc": dev.compute_capability})
    print(f"numgemm bench --claims: {name}, {time.strftime('%Y-%m-%d')}, paper preset, batch {args.batch}, "
          f"N = {', '.join(map(str, sizes))}; counters at N={sizes[-1]}" + (f" ({note})" if note else "")
          + f"; SASS facts for {facts['target']}")
    print(claims.table(verdicts))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"device": name, "cc": list(dev.compute_capability), "date": time.strftime("%Y-%m-%d"),
                       "times": [[k, n, ms] for (k, n), ms in times.items()], "counters": counters,
                       "sass": facts, "claims": [c.__dict__ for c in verdicts]}, fh, indent=1)
    return 0


def _check_selection(args):
    """Refuse, before any GPU work, kernel names no chosen preset has, a
    selection that leaves nothing to run, and shapes that are not MxNxK."""
    from . import registry

    presets = registry.PRESETS if args.preset == "all" else (args.preset,)
    if args.diff or args.claims or args.linkage_cost:
        return
    try:
        bad = any(len(s) != 3 or min(s) < 1 for s in shapes_of(args))
    except ValueError:                  # a size that is not an integer
        bad = True
    if bad and args.shapes:
        raise UsageError(f"--shapes takes MxNxK with positive sizes (e.g. 16x8192x8192) or llm; "
                         f"got {' '.join(args.shapes)}")
    if bad:
        raise UsageError(f"--sizes takes positive integers; got {' '.join(map(str, args.sizes))}")
    kernel_names([k for k in args.kernels or () if k != "default"], presets)
    if not select(args) and not wants_default(args):
        raise UsageError(f"the selection (--preset {args.preset}, --precision {' '.join(args.precision)}"
                         + (f", --family {args.family}" if args.family else "")
                         + (f", --kernels {' '.join(args.kernels)}" if args.kernels else "") + ") names no kernel")


def _record(device, ceilings, rows, facts, args):
    """The run as --json writes it (and --plot reads it)."""
    return {"device": device, "date": time.strftime("%Y-%m-%d"), "batch": args.batch, "gpu": facts,
            "inputs": input_distribution(), "cold_l2": args.cold_l2, "copy_gbs": getattr(args, "copy_gbs", None),
            "ceilings": ceilings, "rows": [asdict(r) for r in rows]}


@entry("bench.py")
def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse(argv)
    _check_selection(args)
    if args.claims:
        return _claims(args)
    if args.profile and args.profile_launches is None and not args.diff:
        from .profile import profile_run

        return profile_run(args, argv)
    if args.sass or args.diff:           # offline: no GPU needed
        return _offline(args, argv)
    from numba import cuda

    if not cuda.is_available():
        print("numgemm bench needs an NVIDIA GPU with its driver; none is available on this machine.")
        return 1
    if args.linkage_cost:
        from tabulate import tabulate

        cost = linkage_cost()
        print(f"mma.sync m16n8k16 loop, {time.strftime('%Y-%m-%d')}:")
        print(tabulate([[k, f"{ms:.3f}", f"{ms / cost['inline'][0]:.1f}x", local, regs]
                        for k, (ms, local, regs) in cost.items()],
                       headers=["linkage", "ms", "vs inline", "local B/thread", "registers"],
                       tablefmt="github", disable_numparse=True))
        return 0
    if args.tune:
        from .tune import tune

        args.argv = argv
        tune(args, shapes_of(args) if args.shapes else None)
        return 0
    device, ceilings, rows = run(args)
    if args.profile_launches is not None:
        with open(args.profile_launches, "w") as fh:
            json.dump(PROFILED, fh)
    text, facts = header(device, ceilings, args)
    print(text)
    print(table(rows))
    steps = ladder(rows, ceilings)
    if steps:
        print("\nThe instruction ladder (same run): WMMA -> mma.sync -> wgmma -> library")
        print(steps)
    if args.csv:
        import csv

        with open(args.csv, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(asdict(rows[0])))
            w.writeheader()
            w.writerows(asdict(r) for r in rows)
    record = _record(device, ceilings, rows, facts, args)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(record, fh, indent=1)
    if args.plot:
        from .plots import write

        for path in write(record, args.plot):
            print(f"wrote {path}")
    return 0 if all(r.status in ("ok", "n/a") for r in rows) else 2


if __name__ == "__main__":      # python -m numgemm.bench: how --profile runs the bench under ncu
    sys.exit(main())
