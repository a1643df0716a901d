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
from dataclasses import asdict

import numpy as np

from . import microbench, operands, report, selection
from .selection import epilogue_fields
from .cli import entry
from .measure import bytes_moved, check, epilogue_given, from_l2, log, operand_sets, prebuild, time_run, timed
from .precision import PRECISIONS
from .timing import device_name
from .toolchain import TARGETS


PROFILED = []                              # under --profile's ncu: the bracketed launches, in order


def run(args, ceilings=None):
    """(device name, ceilings, rows): every chosen kernel checked, then timed
    at every size, beside the library peers, with the ratios filled in;
    ceilings: those of an earlier run in the same mode (with its args.copy_gbs),
    not measured again."""
    from numba import cuda

    from . import registry

    dev = cuda.get_current_device()
    name = device_name(dev)
    cc = tuple(dev.compute_capability)
    log(f"numgemm bench on {name} (sm_{cc[0]}{cc[1]}), batch {args.batch}, sizes {args.sizes}")
    if ceilings is None:
        log("measuring the instructions' ceilings (mma.sync; wgmma on sm_90) ...")
        ceilings = microbench.measure_ceilings(steady=getattr(args, "steady", None) is not None)    # as kernels are timed
        for op, value in ceilings.items():
            log(f"  {op}: {value:.0f} T(FL)OPS")
        args.copy_gbs = microbench.measure_copy_bandwidth()
        log(f"  device-to-device copy: {args.copy_gbs:.0f} GB/s (bytes read + written)")
    rng = np.random.default_rng(args.seed)
    rows, times = [], {}
    for precision in args.precision:
        if PRECISIONS[precision].widens_to:     # which of its kernels suits this GPU
            log(registry.describe_default(precision, cc))
    shapes = selection.shapes_of(args)
    selected = selection.select(args)
    prebuild([c for _, _, c in selected if not c.unsupported(cc)], cc, args.jobs)
    for precision in selection.PRECISION_ORDER:
        chosen = [c for c in selected if c[2].precision == precision]
        picks = {shape: selection.default_picks(precision, shape, cc, args) for shape in shapes} if selection.wants_default(args) else {}
        if precision not in args.precision or not (chosen or picks):
            continue
        checked = check(precision, chosen + list(dict.fromkeys(p for ps in picks.values() for p in ps)), cc, rng)
        for M, N, K in shapes:
            label = f"{M}x{N}x{K}" if args.shapes else M
            here = chosen + picks.get((M, N, K), [])
            rows += _time_shape(precision, here, checked, (M, N, K), label, args, ceilings, times, rng)
    _ratios(rows, times, args.family)
    return name, ceilings, rows


def _time_shape(precision, chosen, checked, shape, label, args, ceilings, times, rng):
    """The rows of one problem shape: each checked kernel timed (inputs rotated
    when they fit in L2) and its output sampled, then the library peers."""
    from numba import cuda

    from .api import gemm
    from .peers import peer_runs
    from .timing import l2_flusher, time_host

    (M, N, K), batch, rows = shape, args.batch, []
    between = l2_flusher() if args.cold_l2 else None
    work = 2.0 * batch * M * N * K
    ws = bytes_moved(precision, batch, M, N, K)
    host_sets = operand_sets(precision, batch, shape, rng)
    in_l2 = not args.cold_l2 and from_l2(ws)     # too small to rotate past L2: flagged
    dev_sets = {}
    for preset, kname, cfg in chosen:
        status, compile_s = checked[preset, cfg]
        row = report.Row(precision, label, preset, kname, cfg.name, status, compile_s=compile_s, from_l2=in_l2)
        rows.append(row)
        if row.status != "ok":
            continue
        log(f"[{precision} {label}] time {preset}/{kname}")
        if cfg.b_layout not in dev_sets:
            dev_sets[cfg.b_layout] = [operands.to_device(precision, cfg.b_layout, *hs) for hs in host_sets]
        measured, ok, plans, outs = timed(precision, cfg, shape, dev_sets[cfg.b_layout], host_sets, args, rng,
                                          between=between, steady=getattr(args, "steady", None))
        ms = measured.ms
        # What a call costs the host: gemm() again on the same arrays (the default: as a user calls
        # it, with no kernel named), and the launch alone.
        x0, y0 = dev_sets[cfg.b_layout][0]
        named = None if kname == "default" else cfg
        given = epilogue_given(cfg, M, N, rng)[1]
        row.host_us = time_host(lambda: gemm(x0, y0, precision=precision, kernel=named, out=outs[0], k=K, **given))
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
        row.measured(measured, work)
        row.ceiling_pct = 100 * row.tops / microbench.ceiling_for(cfg, ceilings)
        times[preset, kname, label] = ms
        # Each result as it comes: a run cut short keeps what it measured.
        log(f"  {kname}: {ms:.3f} ms, {row.tops:.1f} T(FL)OPS")
    del dev_sets
    peers = [] if args.no_peers else peer_runs(precision, M, N, K, batch, rng, len(host_sets),
                                               getattr(args, "b_layout", None), getattr(args, "out_dtype", "float32"),
                                               epilogue_fields(getattr(args, "epilogue", None)))
    for pname, prun, pcheck in peers:
        log(f"[{precision} {label}] time {pname}")
        measured = time_run(prun, args.repeats, between, getattr(args, "steady", None))     # as the kernels
        ms = measured.ms
        row = report.Row(precision, label, "library", pname, pname, "ok" if pcheck() else "FAIL", from_l2=in_l2)
        if row.status == "ok":
            row.ms, row.tops = ms, work / (ms * 1e-3) / 1e12
            _bandwidth(row, ws, args)
            row.measured(measured, work)
            row.ceiling_pct = 100 * row.tops / microbench.fastest_ceiling(precision, ceilings)
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
        wmma = registry.BASELINE.get(row.precision)      # FP8 has no WMMA: its column stays empty
        base = times.get((row.preset, wmma, row.n)) if wmma else None
        fp16 = times.get((row.preset, "fp16_wmma", row.n))
        lib = times.get(("library", PRECISIONS[row.precision].wide.name, row.n))
        if row.preset != "library":
            row.vs_wmma = base / row.ms if base else math.nan
            row.vs_fp16_wmma = fp16 / row.ms if fp16 else math.nan
            fam = times.get((row.preset, family_base, row.n))
            row.vs_base = fam / row.ms if fam else math.nan
        row.vs_library = lib / row.ms if lib else math.nan
    report.flag(rows)


def _offline(args, argv):
    from . import insight, registry
    from .kernel import prebuild_offline

    if args.sass:
        chosen = selection.select(args)
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
    from . import registry

    ap = argparse.ArgumentParser(prog="python bench.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--all", action="store_true", help="every precision, size and preset")
    ap.add_argument("--precision", nargs="+", choices=selection.PRECISION_ORDER, default=list(selection.PRECISION_ORDER))
    ap.add_argument("--kernels", nargs="+",
                    help="registered names or config names; default: the kernel gemm() picks at each shape")
    ap.add_argument("--sizes", nargs="+", type=int, default=list(selection.SIZES))
    ap.add_argument("--shapes", nargs="+", metavar="MxNxK",
                    help="non-square problems instead of --sizes, e.g. 16x8192x8192 (memory-bound); "
                         "llm: M = 1, 16, 64, 256 with N = K = 4096, 8192, and 512, 1024, 2048 squared")
    ap.add_argument("--family", choices=tuple(registry.FAMILIES["tuned"]),
                    help="one family's kernels, with each one's ratio to the family's base")
    ap.add_argument("--out-dtype", choices=("float32", "float16", "bfloat16", "narrow"), default="float32",
                    help="the float precisions' C: float16 (FP16, FP8) or bfloat16 (BF16, FP8) rounds each f32 "
                         "sum as it is stored (gemm()'s out_dtype), narrow each its own (FP8: bfloat16), as "
                         "F.linear and torch._scaled_mm return them; kernels that cannot (WMMA, a format the "
                         "precision lacks) are left out")
    ap.add_argument("--epilogue", metavar="FIELD=VALUE,...",
                    help="every kernel through an epilogue: scale_a=tensor|row, scale_b=tensor|col, bias, "
                         "act=relu|gelu|silu (gemm()'s scale_a, scale_b, bias, activation; fresh vectors); the "
                         "peers do the same after their GEMM, in torch (unfused; FP8's torch._scaled_mm takes "
                         "its scales itself); kernels that cannot are left out")
    ap.add_argument("--b-layout", choices=("kn", "nk"),
                    help="B as K x N or as N x K (an nn.Linear weight): each kernel in that layout where it has "
                         "a twin (FP16 has both; INT8 and INT4 N x K), gemm()'s choice for it; default: each kernel's "
                         "own; with --tune, the layout searched")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--preset", choices=("paper", "tuned", "all"), default="all")
    ap.add_argument("--burst", action="store_true",
                    help="time each kernel in a short burst (2 warm-up and --repeats timed launches, at the boost "
                         "clock) instead of in steady state (warmed for 200 ms, then at least 100 ms and --repeats "
                         "launches timed, at the clock the power limit leaves)")
    ap.add_argument("--repeats", type=int, default=None,
                    help="timed launches: a burst's count (default 10); steady state's least (default 30)")
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
                    help="re-test the study's eight claims, and its question asked of FP8, on this GPU "
                         "(times, counters, sm_89 SASS)")
    ap.add_argument("--plot", metavar="DIR", help="also draw a roofline and one bar chart per family (matplotlib)")
    ap.add_argument("--tune", action="store_true",
                    help="search each precision's kernels, tilings and split-K factors over shape classes "
                         "and write the winners gemm() reads (numgemm.tune)")
    ap.add_argument("--tune-out", metavar="FILE",
                    help="where --tune writes (default: the kernel cache folder's tuned/<arch>.json)")
    ap.add_argument("--csv", help="also write the rows as CSV")
    ap.add_argument("--json", help="also write the rows (and the ceilings) as JSON")
    args = ap.parse_args(argv)
    from .timing import Steady

    args.steady = None if args.burst or args.tune else Steady(**({} if args.repeats is None else
                                                               {"min_repeats": args.repeats}))
    if args.repeats is None:
        args.repeats = 10
    return args


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
             + (f"; C rounded to {args.out_dtype} where a kernel can" if getattr(args, "out_dtype", "float32")
                != "float32" else ""),
             "timing: " + _timing(args),
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
    first = parse([*picked, "--sizes", *map(str, sizes), "--no-peers", "--batch", str(args.batch)])
    _, ceilings, rows = run(first)
    times = {(r.kernel, r.n): r.ms for r in rows if r.status == "ok" and not math.isnan(r.ms)}
    counted, note = profile.profile_rows(args, [*picked, "--sizes", str(sizes[-1])])
    # Claim 9: gemm()'s FP8 and INT8 kernels and their peers (cuBLASLt's FP8 GEMM listed first)
    fp8 = parse(["--precision", "e4m3", "int8", "--kernels", "default", "--sizes", *map(str, sizes),
                 "--jobs", str(args.jobs), "--batch", str(args.batch)])
    fp8.copy_gbs = first.copy_gbs
    _, _, rows = run(fp8, ceilings)         # the same mode: the first run's ceilings serve
    for r in rows:
        who = "library" if r.preset == "library" else "numgemm"
        if r.status == "ok" and not math.isnan(r.ms):
            times.setdefault(((r.precision, who), r.n), r.ms)
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
                       "times": [[list(k) if isinstance(k, tuple) else k, n, ms] for (k, n), ms in times.items()],
                       "counters": counters,
                       "sass": facts, "claims": [c.__dict__ for c in verdicts]}, fh, indent=1)
    return 0


def _timing(args):
    """How the run timed its kernels, in words (the header's and the JSON's)."""
    if getattr(args, "steady", None):
        return args.steady.describe()
    return (f"burst: 2 warm-up launches, the median of {args.repeats} behind a spin kernel, at whatever clock "
            "they start at (SM MHz and W read during them; no energy)")


def _record(device, ceilings, rows, facts, args):
    """The run as --json writes it (and --plot reads it)."""
    return {"device": device, "date": time.strftime("%Y-%m-%d"), "batch": args.batch, "gpu": facts,
            "inputs": input_distribution(), "cold_l2": args.cold_l2, "copy_gbs": getattr(args, "copy_gbs", None),
            "timing": _timing(args),
            "ceilings": ceilings, "rows": [asdict(r) for r in rows]}


@entry("bench.py")
def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse(argv)
    selection.check_selection(args)
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

        cost = microbench.linkage_cost()
        print(f"mma.sync m16n8k16 loop, {time.strftime('%Y-%m-%d')}:")
        print(tabulate([[k, f"{ms:.3f}", f"{ms / cost['inline'][0]:.1f}x", local, regs]
                        for k, (ms, local, regs) in cost.items()],
                       headers=["linkage", "ms", "vs inline", "local B/thread", "registers"],
                       tablefmt="github", disable_numparse=True))
        return 0
    if args.tune:
        from .tune import tune

        args.argv = argv
        tune(args, selection.shapes_of(args) if args.shapes else None)
        return 0
    device, ceilings, rows = run(args)
    if args.profile_launches is not None:
        with open(args.profile_launches, "w") as fh:
            json.dump(PROFILED, fh)
    text, facts = header(device, ceilings, args)
    print(text)
    print(report.table(rows))
    steps = report.ladder(rows, ceilings)
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
