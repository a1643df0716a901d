"""Pictures of a bench run (bench.py --plot DIR), when matplotlib is installed.

    python bench.py --precision int8 --plot plots/
    python -m numgemm.plots results/2026-12-01-h200-builds/bench_all.json plots/    # stored rows

roofline.png: a panel per precision, its tuned kernels and the libraries
at every size, T(FL)OPS against arithmetic intensity (operations per byte
of A, B and C moved once), under each of its instructions' roofs: the
run's copy bandwidth times intensity, up to the instruction's measured
ceiling. family_<preset>_<name>.png: per family and size, each variant's
T(FL)OPS from zero with its ratio to the family's base. shapes.png (M x N x
K shapes): each kernel against the library, shape by shape. energy.png
(steady-state runs): T(FL)OPS per watt and J a GEMM.
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
    out_bytes = np.dtype(prec.narrow_out or prec.out_dtype).itemsize
    return 2.0 * M * N * K / (bits / 8 * (M * K + K * N) + out_bytes * M * N)


def _ok(rows):
    return [r for r in rows if r["status"] == "ok" and r["tops"] == r["tops"]]


def _label(r):
    return r["kernel"] if r["preset"] in ("library", "tuned") else f"{r['preset']}/{r['kernel']}"


def _roofs(precision, ceilings):
    """{instruction: T(FL)OPS} of the instructions a precision's kernels can
    run on (a widening precision's: its wide one's too)."""
    prec = PRECISIONS[precision]
    names = [prec.ceiling, prec.wgmma, prec.wide.ceiling, prec.wide.wgmma]
    return {n: ceilings[n] for n in dict.fromkeys(names) if n in ceilings}


def roofline(data, path, plt, presets=("tuned", "library")):
    """A panel per precision: its instructions' roofs, min(copy bandwidth x
    intensity, ceiling), and each kernel's points over the run's sizes,
    named in the legend."""
    rows = [r for r in _ok(data["rows"]) if r["preset"] in presets] or _ok(data["rows"])
    precisions = [p for p in PRECISIONS if any(r["precision"] == p for r in rows)]
    if not precisions:
        return False
    bw = data.get("copy_gbs")
    fig, axes = plt.subplots(1, len(precisions), figsize=(7.5 * len(precisions), 6.5), squeeze=False)
    colors = plt.cm.tab10.colors
    for ax, precision in zip(axes[0], precisions):
        mine = [r for r in rows if r["precision"] == precision]
        roofs = _roofs(precision, data.get("ceilings", {}))
        xs = [intensity(precision, r["n"]) for r in mine]
        ridges = [tops / bw * 1e3 for tops in roofs.values()] if bw else []    # where each roof bends
        x = np.geomspace(min(xs + ridges) / 3, max(xs + ridges) * 3, 200)
        for i, (name, tops) in enumerate(roofs.items()):
            roof = np.minimum(x * bw / 1e3, tops) if bw else np.full_like(x, tops)
            ax.plot(x, roof, color="0.4", lw=1.2, ls=("-", "--", "-.", ":")[i % 4], label=f"roof: {name} {tops:.0f}")
        for i, key in enumerate(dict.fromkeys(_label(r) for r in mine)):
            pts = sorted((intensity(precision, r["n"]), r["tops"]) for r in mine if _label(r) == key)
            library = key in {r["kernel"] for r in mine if r["preset"] == "library"}
            ax.plot(*zip(*pts), marker="os^Dv<>P*X"[i // len(colors) % 9], color=colors[i % len(colors)], ms=5,
                    lw=1, ls="--" if library else "-", label=key)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity (operations per byte of A, B and C moved once)")
        ax.set_ylabel("T(FL)OPS")
        ax.set_title(f"{precision}" + (f": roofs at {bw:.0f} GB/s (copy)" if bw else ""), fontsize=10)
        ax.grid(True, which="major", lw=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0, -0.12), ncol=2, frameon=False)
    fig.suptitle(f"numgemm on {data.get('device', '?')}, {data.get('date', '')}: roofline", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=130, bbox_inches="tight")
    plt.close(fig)
    return True


def _bars(ax, labels, values, texts, color="tab:blue"):
    """Bars from zero with a text on each (no text where the value is NaN)."""
    ax.bar(range(len(labels)), values, color=color)
    top = max((v for v in values if v == v), default=1)
    for i, (v, t) in enumerate(zip(values, texts)):
        if v == v and t:
            ax.text(i, v + 0.01 * top, t, ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(labels)), labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylim(0, top * 1.12)


def family_bars(data, family, members, path, plt):
    """A panel per size: each member's T(FL)OPS on a linear axis from zero,
    its ratio to the family's base (the base's time over its) on its bar."""
    rows = [r for r in _ok(data["rows"]) if r["kernel"] in members]
    if not rows:
        return False
    sizes = list(dict.fromkeys(r["n"] for r in rows))
    names = [m for m in members if any(r["kernel"] == m for r in rows)]
    fig, axes = plt.subplots(1, len(sizes), figsize=(max(6.5, 3.4 * len(sizes)), 4.8), squeeze=False)
    for ax, n in zip(axes[0], sizes):
        at = {r["kernel"]: r for r in rows if r["n"] == n}
        base = at.get(members[0])
        tops = [at[m]["tops"] if m in at else math.nan for m in names]
        texts = [f"{base['ms'] / at[m]['ms']:.2f}x" if base and m in at else "" for m in names]
        _bars(ax, [m.replace(family + "_", "") or m for m in names], tops, texts)
        ax.set_title(f"N = {n}", fontsize=9)
        ax.set_ylabel("T(FL)OPS" if ax is axes[0][0] else "")
    fig.suptitle(f"{family}: T(FL)OPS, and {members[0]}'s time over each's ({data.get('device', '?')}, "
                 f"{data.get('date', '')})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return True


def shapes_chart(data, path, plt):
    """The run's M x N x K shapes (--shapes llm): a panel per precision, each
    numgemm kernel's speed against the run's first library row of the same
    shape (its time over ours: above 1, numgemm is faster), shape by shape."""
    rows = [r for r in _ok(data["rows"]) if isinstance(r["n"], str)]
    precisions = [p for p in PRECISIONS if any(r["precision"] == p and r["preset"] != "library" for r in rows)]
    if not precisions:
        return False
    fig, axes = plt.subplots(len(precisions), 1, figsize=(11, 4.2 * len(precisions)), squeeze=False)
    for ax, precision in zip(axes[:, 0], precisions):
        mine = [r for r in rows if r["precision"] == precision]
        shapes = list(dict.fromkeys(r["n"] for r in mine))
        kernels = list(dict.fromkeys(_label(r) for r in mine if r["preset"] != "library"))
        width = 0.8 / max(1, len(kernels))
        for j, key in enumerate(kernels):
            ratios = []
            for n in shapes:
                lib = next((r for r in mine if r["n"] == n and r["preset"] == "library"), None)
                ours = next((r for r in mine if r["n"] == n and _label(r) == key), None)
                ratios.append(lib["ms"] / ours["ms"] if lib and ours else math.nan)
            xs = [i + (j - (len(kernels) - 1) / 2) * width for i in range(len(shapes))]
            ax.bar(xs, ratios, width, label=key)
            for x, v in zip(xs, ratios):
                if v == v:
                    ax.text(x, v, f"{v:.2f}", ha="center", va="bottom", fontsize=6)
        lib_names = list(dict.fromkeys(r["kernel"] for r in mine if r["preset"] == "library"))
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xticks(range(len(shapes)), shapes, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(f"{lib_names[0] if lib_names else 'library'} time / ours")
        ax.set_title(f"{precision}: against the library, shape by shape", fontsize=10)
        ax.legend(fontsize=7)
    fig.suptitle(f"{data.get('device', '?')}, {data.get('date', '')}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return True


def energy_chart(data, path, plt):
    """T(FL)OPS per watt of every row with an energy (steady-state runs), a
    panel per precision and size, its J/GEMM on its bar."""
    rows = [r for r in _ok(data["rows"]) if r.get("tops_per_w", math.nan) == r.get("tops_per_w", math.nan)
            and "tops_per_w" in r]
    groups = list(dict.fromkeys((r["precision"], r["n"]) for r in rows))
    if not groups:
        return False
    fig, axes = plt.subplots(1, len(groups), figsize=(max(6.5, 3.6 * len(groups)), 4.8), squeeze=False)
    for ax, (precision, n) in zip(axes[0], groups):
        mine = [r for r in rows if (r["precision"], r["n"]) == (precision, n)]
        colors = ["tab:gray" if r["preset"] == "library" else "tab:green" for r in mine]
        ax.bar(range(len(mine)), [r["tops_per_w"] for r in mine], color=colors)
        top = max(r["tops_per_w"] for r in mine)
        for i, r in enumerate(mine):
            ax.text(i, r["tops_per_w"] + 0.01 * top, f"{r['joules']:.3g} J", ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(mine)), [_label(r) for r in mine], rotation=60, ha="right", fontsize=7)
        ax.set_ylim(0, top * 1.12)
        ax.set_title(f"{precision} {n}", fontsize=9)
        ax.set_ylabel("T(FL)OPS per watt" if ax is axes[0][0] else "")
    fig.suptitle(f"Work per joule, steady state ({data.get('device', '?')}, {data.get('date', '')}); "
                 "numgemm green, libraries gray", fontsize=9)
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
    out = []
    for name, draw in (("roofline.png", roofline), ("shapes.png", shapes_chart), ("energy.png", energy_chart)):
        if draw(data, folder / name, plt):
            out.append(folder / name)
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
