"""Pictures of a bench run (bench.py --plot DIR), when matplotlib is installed.

    python bench.py --precision int8 --plot plots/
    python -m numgemm.plots results/2026-12-01-h200-builds/bench_all.json plots/    # stored rows

roofline.png: every kernel at every size, T(FL)OPS against arithmetic
intensity (operations per byte of A, B and C moved once), under this GPU's
measured copy bandwidth and mma.sync ceilings; the largest size of each
kernel is labelled. family_<name>.png: per family, each variant's time at
each size, with its ratio to the family's base.
"""

import math
import sys
from pathlib import Path

import numpy as np

from .precision import PRECISIONS

MISSING = "plots need matplotlib (pip install matplotlib); none written"


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _square(n):
    """(M, N, K) of a row's N: a size, or "MxNxK"."""
    if isinstance(n, str):
        return tuple(int(x) for x in n.lower().split("x"))
    return n, n, n


def intensity(precision, n, batch=1):
    """Operations per byte when A, B and C each cross memory once."""
    M, N, K = _square(n)
    prec = PRECISIONS[precision]
    bits = prec.bits
    out_bytes = np.dtype(prec.narrow_out if prec.narrow_out is not None else prec.out_dtype).itemsize
    return 2.0 * M * N * K / (bits / 8 * (M * K + K * N) + out_bytes * M * N)


def roofline(data, path, plt):
    rows = [r for r in data["rows"] if r["status"] == "ok" and r["tops"] == r["tops"]]
    fig, ax = plt.subplots(figsize=(10, 7))
    xs = [intensity(r["precision"], r["n"]) for r in rows]
    lo, hi = min(xs, default=1) / 2, max(xs, default=1e4) * 2
    bw = data.get("copy_gbs")
    if bw:
        ax.plot([lo, hi], [lo * bw / 1e3, hi * bw / 1e3], "k--", lw=1, label=f"copy bandwidth {bw:.0f} GB/s")
    for name, tops in data.get("ceilings", {}).items():
        ax.axhline(tops, lw=1, ls=":", color="gray")
        ax.text(hi, tops, f" {name} {tops:.0f}", va="center", fontsize=7)
    marks = dict(zip(PRECISIONS, "os^Dv<>"))
    kernels = list(dict.fromkeys((r["preset"], r["kernel"]) for r in rows))
    colors = plt.cm.tab20.colors
    for i, key in enumerate(kernels):
        mine = [r for r in rows if (r["preset"], r["kernel"]) == key]
        x = [intensity(r["precision"], r["n"]) for r in mine]
        y = [r["tops"] for r in mine]
        ax.plot(x, y, marks.get(mine[0]["precision"], "o"), color=colors[i % len(colors)], ms=4,
                ls="-" if key[0] != "library" else "--", lw=0.6)
        ax.annotate(f"{key[0]}/{key[1]}" if key[0] != "library" else key[1], (x[-1], y[-1]), fontsize=6,
                    xytext=(3, 2), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (operations per byte of A, B and C)")
    ax.set_ylabel("T(FL)OPS")
    legend = ", ".join(f"{m} {p}" for p, m in marks.items())
    ax.set_title(f"numgemm on {data.get('device', '?')}, {data.get('date', '')}: markers {legend}")
    if bw:
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def family_bars(data, family, members, path, plt):
    """Bars of each member's time per size, annotated with the base's time over its."""
    rows = [r for r in data["rows"] if r["kernel"] in members and r["status"] == "ok" and r["ms"] == r["ms"]]
    if not rows:
        return False
    sizes = list(dict.fromkeys(r["n"] for r in rows))
    names = [m for m in members if any(r["kernel"] == m for r in rows)]
    fig, axes = plt.subplots(1, len(sizes), figsize=(3.2 * len(sizes), 4.5), squeeze=False)
    for ax, n in zip(axes[0], sizes):
        at = {r["kernel"]: r["ms"] for r in rows if r["n"] == n}
        base = at.get(members[0])
        ys = [at.get(m, math.nan) for m in names]
        ax.bar(range(len(names)), ys, color="tab:blue")
        for i, y in enumerate(ys):
            if base and y == y:
                ax.text(i, y, f"{base / y:.2f}x", ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(names)), [m.replace(family + "_", "") for m in names], rotation=70, fontsize=7)
        ax.set_title(f"N = {n}", fontsize=9)
        ax.set_yscale("log")                # a family spans 100x (dp4a, manual packing)
        ax.set_ylabel("ms" if ax is axes[0][0] else "")
    fig.suptitle(f"{family}: time, and {members[0]}'s time over each ({data.get('device', '?')}, "
                 f"{data.get('date', '')})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return True


def write(data, folder):
    """The pictures of a bench JSON (dict) into folder: the paths written, or
    [] with MISSING printed when matplotlib is absent."""
    from . import registry

    plt = _pyplot()
    if plt is None:
        print(MISSING)
        return []
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = [folder / "roofline.png"]
    roofline(data, out[0], plt)
    for preset in ("tuned", "paper"):
        for family, members in registry.FAMILIES[preset].items():
            path = folder / f"family_{preset}_{family}.png"
            if family_bars({**data, "rows": [r for r in data["rows"] if r["preset"] == preset]}, family,
                           list(members), path, plt):
                out.append(path)
    return out


def main(argv=None):
    import json

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m numgemm.plots BENCH.json DIR")
        return 2
    for p in write(json.loads(Path(argv[0]).read_text()), argv[1]):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
