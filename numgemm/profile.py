"""Nsight Compute counters of the bench's timed launches (bench.py --profile).

The bench runs itself under `ncu --profile-from-start off`: after a kernel is
timed and its output checked, one more launch of the same plan, on the same
operands, is bracketed by cuProfilerStart/Stop, so ncu sees the timed launch
and never a verification launch or a peer. The counters are read back from
the report with `ncu --import --csv --page raw` (ncu's machine-readable
page) and reduced to the COLUMNS below. Metrics this GPU's ncu does not
know are left out and their columns show n/a.
"""

import csv
import io
import math
import os
import shutil
import subprocess
from pathlib import Path

_STALLS = ("barrier", "branch_resolving", "dispatch_stall", "drain", "gmma", "imc_miss", "lg_throttle",
           "long_scoreboard", "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction",
           "not_selected", "selected", "short_scoreboard", "sleeping", "tex_throttle", "wait")
_STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
_LIMITS = ("registers", "shared_mem", "blocks", "warps")
_LD = "global_op_ld"


def _get(v, *names):
    """The sum of the named metrics, or None where one is missing."""
    vals = [v.get(n) for n in names]
    return None if any(x is None for x in vals) else sum(vals)


def _ratio(num, den):
    return None if num is None or not den else num / den


def _limiter(v):
    """Which resources cap the blocks an SM holds (the smallest limits)."""
    lim = {r: v.get(f"launch__occupancy_limit_{r}") for r in _LIMITS}
    lim = {r: x for r, x in lim.items() if x is not None}
    if not lim:
        return None
    low = min(lim.values())
    return "+".join(r.replace("_mem", "") for r, x in lim.items() if x == low) + f" ({low:g} blocks)"


def _stalls(v, top=3):
    found = [(s, v.get(_STALL.format(s))) for s in _STALLS]
    found = sorted(((s, x) for s, x in found if x), key=lambda sx: -sx[1])
    return ", ".join(f"{s} {x:.2f}" for s, x in found[:top]) if found else None


_SECTORS = ("smsp__sass_l1tex_t_sectors_pipe_lsu_mem_global_op_ld.sum",
            "smsp__sass_l1tex_t_sectors_pipe_lsu_mem_global_op_ldgsts.sum")
_BYTES = ("sm__sass_data_bytes_mem_global_op_ld.sum", "sm__sass_data_bytes_mem_global_op_ldgsts.sum")


def _excess(v):
    """Sectors moved beyond what the requested bytes need (% over the ideal),
    global loads and cp.async together: what uncoalesced loads cost."""
    sectors, need = _get(v, *_SECTORS), _get(v, *_BYTES)
    return None if not need or sectors is None else 100 * (32 * sectors / need - 1)


#: (column, metrics it reads, value from {metric: number}). Throughputs are % of peak.
COLUMNS = (
    ("duration us", ("gpu__time_duration.sum",), lambda v: _ratio(v.get("gpu__time_duration.sum"), 1e3)),  # ns
    ("cycles", ("sm__cycles_elapsed.max",), lambda v: v.get("sm__cycles_elapsed.max")),
    ("DRAM %", ("dram__throughput.avg.pct_of_peak_sustained_elapsed",),
     lambda v: v.get("dram__throughput.avg.pct_of_peak_sustained_elapsed")),
    ("L2 %", ("lts__throughput.avg.pct_of_peak_sustained_elapsed",),
     lambda v: v.get("lts__throughput.avg.pct_of_peak_sustained_elapsed")),
    ("L1 %", ("l1tex__throughput.avg.pct_of_peak_sustained_active",),
     lambda v: v.get("l1tex__throughput.avg.pct_of_peak_sustained_active")),
    ("L1 hit %", ("l1tex__t_sector_hit_rate.pct",), lambda v: v.get("l1tex__t_sector_hit_rate.pct")),
    ("L2 hit %", ("lts__t_sector_hit_rate.pct",), lambda v: v.get("lts__t_sector_hit_rate.pct")),
    ("occupancy %", ("sm__warps_active.avg.pct_of_peak_sustained_active",),
     lambda v: v.get("sm__warps_active.avg.pct_of_peak_sustained_active")),
    ("theoretical occ. %", ("sm__maximum_warps_per_active_cycle_pct",),
     lambda v: v.get("sm__maximum_warps_per_active_cycle_pct")),
    ("occupancy limiter", tuple(f"launch__occupancy_limit_{r}" for r in _LIMITS), _limiter),
    ("warp instructions", ("smsp__inst_executed.sum",), lambda v: v.get("smsp__inst_executed.sum")),
    ("IPC", ("sm__inst_executed.avg.per_cycle_active",), lambda v: v.get("sm__inst_executed.avg.per_cycle_active")),
    ("tensor pipe %", ("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
                       "sm__pipe_tensor_op_imma_cycles_active.avg.pct_of_peak_sustained_active"),
     lambda v: max((x for x in (v.get("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"),
                                v.get("sm__pipe_tensor_op_imma_cycles_active.avg.pct_of_peak_sustained_active"))
                    if x is not None), default=None)),
    ("tensor instructions", ("sm__inst_executed_pipe_tensor_op_hmma.sum", "sm__inst_executed_pipe_tensor_op_imma.sum"),
     lambda v: _get(v, "sm__inst_executed_pipe_tensor_op_hmma.sum", "sm__inst_executed_pipe_tensor_op_imma.sum")),
    ("eligible warps/scheduler", ("smsp__warps_eligible.avg.per_cycle_active",),
     lambda v: v.get("smsp__warps_eligible.avg.per_cycle_active")),
    ("top stalls (warps per issue)", tuple(_STALL.format(s) for s in _STALLS), _stalls),
    ("sectors/request ld", (f"l1tex__average_t_sectors_per_request_pipe_lsu_mem_{_LD}.ratio",),
     lambda v: v.get(f"l1tex__average_t_sectors_per_request_pipe_lsu_mem_{_LD}.ratio")),
    ("sectors/request cp.async", ("smsp__sass_l1tex_average_t_sectors_per_request_pipe_lsu_mem_global_op_ldgsts.ratio",),
     lambda v: v.get("smsp__sass_l1tex_average_t_sectors_per_request_pipe_lsu_mem_global_op_ldgsts.ratio")),
    ("excess sectors %", (*_SECTORS, *_BYTES), _excess),
    ("shared bank conflicts", ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",),
     lambda v: v.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum")),
    ("divergent branches %", ("smsp__sass_branch_targets_threads_divergent.sum", "smsp__sass_branch_targets.sum"),
     lambda v: _ratio(None if v.get("smsp__sass_branch_targets_threads_divergent.sum") is None
                      else 100 * v["smsp__sass_branch_targets_threads_divergent.sum"],
                      v.get("smsp__sass_branch_targets.sum"))),
)


def metrics():
    """Every metric the columns read, each once."""
    return list(dict.fromkeys(m for _, ms, _ in COLUMNS for m in ms))


def find_ncu():
    """The ncu executable, or None."""
    found = shutil.which("ncu")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (Path(root) / "bin" / "ncu").is_file():
            return str(Path(root) / "bin" / "ncu")
    return None


def known_metrics(ncu):
    """Base names of the metrics ncu knows on this machine's GPU (None: it could not say)."""
    done = subprocess.run([ncu, "--query-metrics", "--csv"], capture_output=True, text=True)
    if done.returncode != 0:
        return None
    rows = list(csv.reader(io.StringIO(done.stdout)))
    return {r[0] for r in rows[1:] if r}


def usable(wanted, known):
    """The metrics of wanted whose base name ncu knows (all of them when known is None)."""
    return [m for m in wanted if known is None or m.split(".")[0] in known]


def command(ncu, metric_names, clocks, report, argv):
    """ncu's command line profiling the bracketed launches of argv into report."""
    return [ncu, "--profile-from-start", "off", "--clock-control", clocks, "--metrics", ",".join(metric_names),
            "--export", str(report), "--force-overwrite", *argv]


def permission_problem(output):
    """ncu's one-line reason why it cannot read counters, or None."""
    for line in output.splitlines():
        if "ERR_NVGPUCTRPERM" in line or "permission to access NVIDIA GPU Performance Counters" in line:
            return ("ncu has no permission to read this GPU's performance counters (ERR_NVGPUCTRPERM): run as "
                    "root or allow non-admin profiling (NVreg_RestrictProfilingToAdminUsers=0)")
    return None


def _number(text):
    text = text.strip().replace(",", "")
    try:
        return float(text)
    except ValueError:
        return None


def parse_raw_csv(text):
    """[{metric: number}] of ncu's `--page raw --csv --print-units base`, one
    per profiled launch, in launch order (its first row names the metrics, its
    second their units: base units, so durations are in ns)."""
    rows = [r for r in csv.reader(io.StringIO(text)) if r]
    start = next((i for i, r in enumerate(rows) if r and r[0] == "ID"), None)
    if start is None:
        raise ValueError("not ncu --page raw --csv output: no header row starting with ID")
    header, body = rows[start], rows[start + 2:]
    out = []
    for r in body:
        launch = {name: _number(value) for name, value in zip(header, r)}
        launch["Kernel Name"] = r[header.index("Kernel Name")] if "Kernel Name" in header else ""
        out.append(launch)
    return out


def read_report(ncu, report):
    """parse_raw_csv of a report file."""
    done = subprocess.run([ncu, "--import", str(report), "--csv", "--page", "raw", "--print-units", "base"],
                          capture_output=True, text=True, check=True)
    return parse_raw_csv(done.stdout)


def summarize(launch):
    """{column: value} of one launch's metrics."""
    return {name: fn(launch) for name, _, fn in COLUMNS}


def ratio(row, base):
    """{column: row's value / base's} for the numeric columns both have."""
    return {k: v / base[k] for k, v in row.items()
            if isinstance(v, float) and isinstance(base.get(k), float) and base[k]}


def fmt(value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, str):
        return value
    if abs(value) >= 1e5:
        return f"{value:.3g}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


# --- bench.py --profile --------------------------------------------------------------

_WITH_VALUE = ("--clocks", "--csv", "--json", "--plot", "--profile-launches")


def child_argv(argv):
    """The bench's arguments for the run under ncu: the same selection,
    without --profile, its clock control and the output files."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--profile":
            continue
        elif a in _WITH_VALUE:
            skip = True
        elif not a.startswith(tuple(f"{w}=" for w in _WITH_VALUE)):
            out.append(a)
    return out


def profile_rows(args, bench_args):
    """(rows, note): the counters of every launch the bench run with
    bench_args times, each row {precision, N, preset, kernel, config,
    column: value}; rows is None where ncu cannot run, and note says why."""
    import json
    import sys
    import tempfile

    ncu = find_ncu()
    if ncu is None:
        return None, "bench.py --profile needs Nsight Compute's ncu (not found on PATH or in /usr/local/cuda/bin)"
    wanted = usable(metrics(), known_metrics(ncu))
    with tempfile.TemporaryDirectory() as tmp:
        report, launches = Path(tmp) / "counters.ncu-rep", Path(tmp) / "launches.json"
        argv = [sys.executable, "-m", "numgemm.bench", *bench_args, "--no-peers", "--profile-launches", str(launches)]
        done = subprocess.run(command(ncu, wanted, args.clocks, report, argv), capture_output=True, text=True)
        problem = permission_problem(done.stdout + done.stderr)
        if problem:
            return None, problem
        if done.returncode not in (0, 2) or not launches.is_file():
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            return None, f"the bench under ncu failed (exit {done.returncode}, no launches recorded):\n{tail}"
        meta = json.loads(launches.read_text())
        counted = read_report(ncu, report) if meta else []
    if len(counted) != len(meta):
        return None, f"ncu recorded {len(counted)} launches where the bench bracketed {len(meta)}"
    return [{**m, **summarize(c)} for m, c in zip(meta, counted)], None


def with_ratios(rows, family_base):
    """Each row's ratio to the row of family_base (a kernel name) at its N."""
    base = {(r["preset"], r["N"]): r for r in rows if r["kernel"] == family_base}
    for r in rows:
        b = base.get((r["preset"], r["N"]))
        r["ratio"] = ratio(r, b) if b is not None else {}
    return rows


def profile_table(rows):
    """One block per problem size: a column per kernel, a row per counter;
    with --family, each value followed by its ratio to the family's base."""
    from tabulate import tabulate

    blocks = []
    for n in dict.fromkeys(r["N"] for r in rows):
        here = [r for r in rows if r["N"] == n]
        body = []
        for name, _, _ in COLUMNS:
            cells = []
            for r in here:
                q = r.get("ratio", {}).get(name)
                cells.append(fmt(r[name]) + (f" ({q:.2f}x)" if q is not None else ""))
            body.append([name, *cells])
        heads = ["N = " + str(n), *(f"{r['preset']}/{r['kernel']}" for r in here)]
        blocks.append(tabulate(body, headers=heads, tablefmt="github", disable_numparse=True))
    return "\n\n".join(blocks)


def profile_run(args, argv):
    """bench.py --profile: counters of the timed launches, printed and written."""
    import json
    import time

    rows, note = profile_rows(args, child_argv(argv))
    if rows is None:
        print(note)
        return 1
    if args.family:
        from . import registry

        with_ratios(rows, registry.family_base(args.family))
    print(f"numgemm bench --profile: Nsight Compute, clock control {args.clocks}, cache control all (caches "
          f"flushed before each replay pass), one timed launch per kernel and size, {time.strftime('%Y-%m-%d')}")
    print(profile_table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "clocks": args.clocks,
                                               "rows": rows}, indent=1))
    if args.csv:
        with open(args.csv, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=["precision", "N", "preset", "kernel", "config",
                                               *(name for name, _, _ in COLUMNS)], extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)
    return 0
