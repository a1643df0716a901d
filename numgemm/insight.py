"""Why a kernel is fast, read offline from its SASS: no GPU needed.

    python bench.py --sass --kernels int8_ptx_mma_k32 int8_ptx_pad --preset tuned
    python bench.py --diff int8_ptx_mma_k32 int8_ptx_manual_pack --preset tuned

--sass tabulates, for every chosen kernel and target, its instruction mix by
class (numgemm.sass.CLASSES), its main loop (length, mmas, instructions per
mma, the longest stretch without an mma), registers, shared and local
memory and calls; then each main loop's shape, one letter per instruction.
--diff says what changes between two kernels: the config fields, then the
same figures side by side with their difference. Builds come from the kernel
cache where it has them.
"""

import math

from .sass import CLASSES

#: The figures of one build, in table order.
FIGURES = ("registers", "shared B", "local B", "calls", "instructions", *CLASSES, "other",
           "loop", "loop mmas", "loop per mma", "loop gap")


def figures(cfg, build):
    """{figure: value} of one build of cfg (see FIGURES)."""
    classes = build.classes()
    loop = build.main_loop()
    out = {"registers": build.registers, "shared B": cfg.smem_bytes + build.shared_bytes,
           "local B": build.local_bytes, "calls": build.calls, "instructions": len(build.instructions)}
    out.update({c: classes.get(c, 0) for c in (*CLASSES, "other")})
    out.update({"loop": len(loop.ops) if loop else 0, "loop mmas": loop.mmas if loop else 0,
                "loop per mma": round(loop.per_mma, 2) if loop else math.nan,
                "loop gap": loop.longest_gap if loop else 0})
    return out


def _builds(cfg, targets):
    from .kernel import build_config

    return [(t, build_config(cfg, t)) for t in targets if not cfg.unsupported(t, launch=False)]


def sass_table(chosen, targets):
    """The --sass report: one row per (kernel, target), then the loops' shapes."""
    from tabulate import tabulate

    rows, shapes = [], []
    for preset, name, cfg in chosen:
        for target, b in _builds(cfg, targets):
            f = figures(cfg, b)
            rows.append([preset, name, target, *(f[k] for k in FIGURES)])
            loop = b.main_loop()
            shapes.append(f"{preset}/{name} [{target}]: " + (loop.shape if loop else "no loop with an mma"))
    headers = ["preset", "kernel", "target", *FIGURES]
    return (tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)
            + "\n\nMain loops (M mma, L ldmatrix, G global load or copy, B barrier, . anything else):\n"
            + "\n".join(shapes))


def diff_table(a, b, targets):
    """The --diff report of two (preset, name, cfg): fields that differ, then
    the figures of both on each target both build for, and B - A."""
    from tabulate import tabulate

    (pa, na, ca), (pb, nb, cb) = a, b
    da, db = ca.describe(), cb.describe()
    fields = [[k, da[k], db[k]] for k in da if da[k] != db[k]]
    out = [f"A = {pa}/{na} ({ca.name})", f"B = {pb}/{nb} ({cb.name})", ""]
    out.append(tabulate(fields, headers=["field", "A", "B"], tablefmt="github", disable_numparse=True)
               if fields else "the configs are equal")
    builds_b = dict(_builds(cb, targets))
    for target, ba in _builds(ca, targets):
        if target not in builds_b:
            out.append(f"\n{target}: B does not build for it")
            continue
        fa, fb = figures(ca, ba), figures(cb, builds_b[target])
        rows = [[k, fa[k], fb[k], _delta(fa[k], fb[k])] for k in FIGURES if fa[k] != fb[k] or k in ("instructions", "loop")]
        out.append(f"\n{target}:\n" + tabulate(rows, headers=["", "A", "B", "B - A"], tablefmt="github",
                                               disable_numparse=True))
    return "\n".join(out)


def counter_diff(rows, a, b):
    """The counters of kernels a and b ((preset, name)) per size, those that
    moved most (by |log(B / A)|) first; rows as numgemm.profile.profile_rows."""
    from tabulate import tabulate

    from .profile import COLUMNS, fmt

    out = []
    for n in dict.fromkeys(r["N"] for r in rows):
        ra = next((r for r in rows if r["N"] == n and (r["preset"], r["kernel"]) == tuple(a)), None)
        rb = next((r for r in rows if r["N"] == n and (r["preset"], r["kernel"]) == tuple(b)), None)
        if ra is None or rb is None:
            continue
        body = []
        for name, _, _ in COLUMNS:
            x, y = ra[name], rb[name]
            moved = abs(math.log(y / x)) if isinstance(x, float) and isinstance(y, float) and x > 0 and y > 0 \
                else -1.0
            body.append((moved, [name, fmt(x), fmt(y), f"{y / x:.2f}x" if moved >= 0 else ""]))
        body.sort(key=lambda m: -m[0])
        out.append(f"counters at N = {n} (the timed launch, Nsight Compute):\n"
                   + tabulate([row for _, row in body], headers=["", "A", "B", "B / A"], tablefmt="github",
                              disable_numparse=True))
    return "\n\n".join(out) if out else "no counters for both kernels"


def _delta(x, y):
    if isinstance(x, float) or isinstance(y, float):
        return "" if math.isnan(x) or math.isnan(y) else f"{y - x:+.2f}"
    return f"{y - x:+d}"
