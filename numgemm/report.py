"""The bench's rows and tables: a Row per kernel and shape, the flags a
reader should distrust, the results table and the instruction ladder."""

import math
from dataclasses import dataclass

from . import microbench, selection
from .measure import from_l2


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
    joules: float = math.nan         # energy a GEMM takes (steady state: NVML's counter over 1 s after the warm-up)
    tops_per_w: float = math.nan     # T(FL)OPS per watt: work / joules
    flags: str = ""                  # "above the mma.sync ceiling", "grows faster than work", "L2"
    from_l2: bool = False            # its operand sets too small to overflow L2 three times (measure.from_l2)

    def measured(self, measured, work):
        """The clock, power and energy of a timing.Measured of `work` ops."""
        self.sm_mhz, self.power_w, self.joules = measured.sm_mhz, measured.power_w, measured.joules
        self.tops_per_w = work / measured.joules / 1e12 if measured.joules > 0 else math.nan


def flag(rows):
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
           "x WMMA", "x fp16_wmma", "x library", "compile s", "host us", "launch us", "SM MHz", "W", "J/GEMM",
           "T(FL)OPS/W", "flags"]


def op_of(config_name):
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
    for precision in selection.PRECISION_ORDER:
        for n in dict.fromkeys(r.n for r in ok if r.precision == precision):
            here = [r for r in ok if r.precision == precision and r.n == n]
            ops = {r.kernel: op_of(r.config) for r in here if r.preset == "tuned" and r.kernel != "default"}
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
            library = microbench.fastest_ceiling(precision, ceilings)
            for level, r in picked:
                if r is not None:
                    pct = 100 * r.tops / library if level == "library" else r.ceiling_pct
                    body.append([precision, n, level, r.kernel, f"{r.ms:.3f}", f"{r.tops:.1f}", _num(pct, ".1f"),
                                 f"{wmma.ms / r.ms:.2f}" if wmma else "", _num(r.sm_mhz, ".0f"),
                                 _num(r.power_w, ".0f"), _num(r.joules, ".3g"), _num(r.tops_per_w, ".2f")])
    if not body:
        return ""
    headers = ["precision", "N", "instruction", "kernel", "time ms", "T(FL)OPS", "% ceil", "x WMMA", "MHz", "W",
               "J/GEMM", "T(FL)OPS/W"]
    if not any(line[-2] for line in body):      # a burst: no energies, and no power over a window
        headers, body = headers[:-3], [line[:-3] for line in body]
    return tabulate(body, headers=headers, tablefmt="github", disable_numparse=True)


def _num(x, fmt):
    """x in fmt, "" where it is missing or NaN."""
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def table(rows):
    from tabulate import tabulate

    family = any(not math.isnan(r.vs_base) for r in rows)
    headers = HEADERS[:10] + (["x base"] if family else []) + HEADERS[10:]
    body = [[r.precision, r.n, r.preset, r.kernel, r.status, _num(r.ms, ".3f"), _num(r.tops, ".1f"),
             _num(r.ceiling_pct, ".1f"), _num(r.gbs, ".0f"), _num(r.copy_pct, ".1f")] +
            ([_num(r.vs_base, ".2f")] if family else []) +
            [_num(r.vs_wmma, ".2f"), _num(r.vs_fp16_wmma, ".2f"),
             _num(r.vs_library, ".2f"), _num(r.compile_s, ".1f"), _num(r.host_us, ".0f"), _num(r.launch_us, ".0f"),
             _num(r.sm_mhz, ".0f"),
             _num(r.power_w, ".0f"), _num(r.joules, ".3g"), _num(r.tops_per_w, ".2f"), r.flags] for r in rows]
    # Numbers stay as formatted here (tabulate would re-parse "1.50" as 1.5).
    align = ["left"] * 5 + ["right"] * (len(headers) - 6) + ["left"]
    return tabulate(body, headers=headers, tablefmt="github", disable_numparse=True, colalign=align)
