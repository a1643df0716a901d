"""Shape-aware kernel choice: which kernel gemm() runs for an M x N x K problem.

    python bench.py --tune                      search, write the winners
    python bench.py --tune --precision int8     one precision's

`--tune` times a bounded set of candidates per precision at shapes spread
over the classes of M (1, 16, 64, 256, >= 1024) and N = K from 512 to 8192:
the registered tilings gemm() may run on this GPU (block tiles, small-M
tiles, TMA twins, wgmma), each with split-K factors where its tiles leave
SMs idle; then the winner's neighbours (one stage more or less, another
rasterization). Every candidate is checked exactly before it is timed. The
fastest of each shape is written to a JSON file per GPU architecture
(sm_90.json) in the kernel cache's folder, tuned/.

numgemm ships the winners measured on an H200 (numgemm/tuned/sm_90.json);
a user's own file in the cache folder takes precedence over it, class by
class (precision, B layout, class of M). For a
problem, gemm() takes the entry of its precision and B layout in the same
class of M whose N and K are nearest (in log2), and registry.default where
no file or entry fits. plan_gemm(...).cfg names the kernel; the logger
"numgemm" says at DEBUG level which entry chose it.
"""

import functools
import json
import logging
import math
import warnings
from pathlib import Path

from . import cache, registry
from .config import KernelConfig
from .toolchain import target_name

log = logging.getLogger("numgemm")

M_CLASSES = (1, 16, 64, 256, 1024)      # the last: M >= 1024 (any M past 256)
#: The shapes --tune measures: M of every class against N = K of 4096 and 8192, and squares.
SHAPES = tuple((m, n, n) for n in (4096, 8192) for m in (1, 16, 64, 256)) + \
    tuple((n, n, n) for n in (512, 1024, 2048, 4096, 8192))
SPLITS = (2, 4, 8)
SHIPPED = Path(__file__).resolve().parent / "tuned"


def m_class(M):
    """The class of M a winner stands for: the first of M_CLASSES at least M."""
    return next((c for c in M_CLASSES[:-1] if M <= c), M_CLASSES[-1])


def winners_files(arch):
    """The files gemm() reads for arch ('sm_90'), the one that counts first:
    the user's (the cache folder's tuned/), then the package's."""
    return [cache.folder() / "tuned" / f"{arch}.json", SHIPPED / f"{arch}.json"]


@functools.cache
def _entries(arch, user_file):
    """{(precision, b_layout, m class): (path, [(n, k, config, name)])} from the
    winners files of arch: the user's entries of a class replace the package's
    of that class. Entries that no longer make a config (fields renamed,
    values refused) are left out with a warning, a file that cannot be read
    as a whole too."""
    table = {}
    for path in reversed(winners_files(arch)):          # the package's first, then the user's over them
        if not path.is_file():
            continue
        try:
            entries = json.loads(path.read_text())["entries"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            warnings.warn(f"numgemm: tuned winners {path} unreadable ({e}); left out", stacklevel=3)
            continue
        mine = {}
        for e in entries:
            try:
                cfg = KernelConfig(**e["config"])
                key = (e["precision"], cfg.b_layout, m_class(int(e["m"])))
                mine.setdefault(key, (path, []))[1].append((int(e["n"]), int(e["k"]), cfg, e.get("kernel", cfg.name)))
            except (KeyError, TypeError, ValueError) as err:
                warnings.warn(f"numgemm: tuned winner {e.get('kernel')} in {path} left out: {err}", stacklevel=3)
        table.update(mine)
    return table


def winners(arch):
    """{config: name} of every winner in the file gemm() reads for arch ({} where none)."""
    table = _entries(arch, str(winners_files(arch)[0]))
    return {c: name for _, entries in table.values() for _, _, c, name in entries}


@functools.lru_cache(maxsize=4096)
def choose(precision, b_layout, M, N, K, cc, preset="tuned"):
    """The kernel gemm() runs for an M x N x K problem of this precision and B
    layout on a GPU of compute capability cc: the nearest tuned winner
    (tuned preset only), else registry.default."""
    cfg, why = None, "registry.default"
    if preset == "tuned":
        arch = target_name(cc)
        path, entries = _entries(arch, str(winners_files(arch)[0])).get((precision, b_layout, m_class(M)), (None, ()))
        near = sorted(entries, key=lambda e: (math.log2(N / e[0])) ** 2 + (math.log2(K / e[1])) ** 2)
        for n, k, c, name in near:
            c = _exact_for(c, K)
            if c.unsupported(cc) is None:
                cfg, why = c, f"{path}: {name}, tuned at {m_class(M)}x{n}x{k}"
                break
    if cfg is None:
        cfg = registry.default(precision, b_layout, preset, cc, M, K)
    log.debug("numgemm: %s %dx%dx%d, B %s -> %s (%s)", precision, M, N, K, b_layout, cfg.name, why)
    return cfg


def _exact_for(cfg, K):
    """cfg, or its exactly widening twin where K is past a scaled widening's reach."""
    if cfg.max_k is not None and K > cfg.max_k:
        return cfg.replace(unpack={"scaled": "register", "tile_scaled": "tile"}[cfg.unpack])
    return cfg


# --- the search (bench.py --tune) ---------------------------------------------------

def candidates(precision, cc, shape, sms):
    """{label: config}: the first round of the search at one shape. The
    registered kernels gemm() may choose on this GPU; where a block-tile
    kernel's tiles fill fewer than two waves of the SMs, the same kernel in
    smaller block tiles; and each mma one of those split over K where it
    still leaves SMs idle, by factors that give every block at least two
    k-tiles."""
    M, N, K = shape
    pool = {}
    for name in registry.choices(precision, cc):
        base = registry.REGISTRY["tuned"][name]
        if base.bm == 16 and M > 64:         # small-M tiles: for small M only
            continue
        pool[name] = base
        if base.widens_tile:
            continue
        tilings = {"": base}
        if -(-M // base.bm) * -(-N // base.bn) < 2 * sms:
            tilings.update(_smaller_tiles(base))
        for tag, cfg in tilings.items():
            pool[name + tag] = cfg
            tiles, ktiles = cfg.grid_blocks(M, N, sms), -(-cfg.prec.kbytes(K) // cfg.bk_bytes)
            for split in SPLITS if cfg.op == "mma" else ():
                if tiles < 2 * sms and tiles * split <= 4 * sms and ktiles >= 2 * split:
                    pool[f"{name}{tag}_split{split}"] = cfg.replace(split_k=split)
    return pool


def _smaller_tiles(cfg):
    """{tag: config}: cfg in smaller block tiles, where valid: mma in 128 x 128
    and 64 x 64 tiles of four warps (FP16's K x N swizzled B: warps 64
    columns wide), small-M tiles 32 columns wide; wgmma with N = 128, in two
    consumer warpgroups or one."""
    if cfg.op == "wgmma":
        shapes = {"_128x128": dict(bn=128), "_64x128": dict(bm=64, warps_m=4, bn=128)}
    elif cfg.bm == 16:              # small-M: half as wide, the same warps sharing more of K
        shapes = {"_16x32": dict(bn=32, warps_n=max(1, cfg.warps_n // 2), warps_k=cfg.warps_k * 2)}
    else:
        shapes = {}
        for bm, bn in ((128, 128), (64, 64)):
            wn = 64 if cfg.b_layout == "kn" and cfg.swizzle else bn // 2
            shapes[f"_{bm}x{bn}"] = dict(bm=bm, bn=bn, warps_m=4 * wn // bn if bn // wn == 1 else 2, warps_n=bn // wn)
    out = {}
    for tag, change in shapes.items():
        try:
            out[tag] = cfg.replace(**change)
        except ValueError:
            continue
    return out


def neighbours(cfg):
    """{label suffix: config}: the second round, the winner one field away:
    a stage more or fewer, another rasterization (block-tile kernels); those
    that make a valid config."""
    changes = {f"s{s}": dict(stages=s) for s in (cfg.stages - 1, cfg.stages + 1)}
    if cfg.bm > 16 and not cfg.persistent:
        changes.update({f"r{r}": dict(raster=r) for r in (1, 4, 16) if r != cfg.raster})
    out = {}
    for label, change in changes.items():
        try:
            out[label] = cfg.replace(**change)
        except ValueError:          # e.g. a stage more than shared memory holds
            continue
    return out


def write(path, doc):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    _entries.cache_clear()
    choose.cache_clear()
    return path


def tune(args):
    """bench.py --tune: per precision and shape, the first round's candidates
    and then the winner's neighbours, each checked exactly (bench's check)
    and timed (bench's timing, the same operands for all); the fastest of
    each shape written as an entry. Returns the path written."""
    import time

    import numpy as np
    from numba import cuda

    from .bench import log, shapes_of

    dev = cuda.get_current_device()
    cc, sms = tuple(dev.compute_capability), dev.MULTIPROCESSOR_COUNT
    rng = np.random.default_rng(args.seed)
    shapes = shapes_of(args) if args.shapes else list(SHAPES)
    name = dev.name.decode() if isinstance(dev.name, bytes) else dev.name
    doc = {"arch": target_name(cc), "device": name, "date": time.strftime("%Y-%m-%d"),
           "command": " ".join(["python bench.py", *getattr(args, "argv", ["--tune"])]),
           "repeats": args.repeats, "entries": []}
    path = Path(args.tune_out or winners_files(target_name(cc))[0])
    for precision in args.precision:
        search = _Search(precision, cc, args, rng)
        first = {shape: candidates(precision, cc, shape, sms) for shape in shapes}
        # Two rounds, each built at once (jobs at a time): every shape's candidates, then
        # every shape's winner's neighbours.
        search.ready({label: c for pool in first.values() for label, c in pool.items()})
        times = {shape: search.measure(shape, first[shape], {}) for shape in shapes}
        second = {}
        for shape, t in times.items():
            best = min(t, key=lambda c: t[c][0])
            second[shape] = {f"{t[best][1]}_{tag}": c for tag, c in neighbours(best).items()}
        search.ready({label: c for pool in second.values() for label, c in pool.items()})
        for shape in shapes:
            t = search.measure(shape, second[shape], times[shape])
            doc["entries"].append(_entry(precision, shape, t, cc))
            e = doc["entries"][-1]
            log(f"[tune {precision} {'x'.join(map(str, shape))}] {e['kernel']} {e['ms']:.4f} ms "
                f"(registry default {e['registry_default_ms']} ms), {len(t)} timed")
        write(path, doc)            # each precision as it is done: a run cut short keeps them
    log(f"wrote {len(doc['entries'])} winners to {path}")
    return path


class _Search:
    """What --tune has built and checked so far for one precision."""

    def __init__(self, precision, cc, args, rng):
        self.precision, self.cc, self.args, self.rng = precision, cc, args, rng
        self.checked = {}

    def ready(self, pool):
        """The configs of pool that build and pass the exact check (each checked once)."""
        from .bench import _check, _prebuild

        todo = [c for c in dict.fromkeys(pool.values()) if ("tuned", c) not in self.checked]
        if todo:
            _prebuild(todo, self.cc, self.args.jobs)
            self.checked.update(_check(self.precision, [("tuned", c.name, c) for c in todo], self.cc, self.rng))
        return {label: c for label, c in pool.items() if self.checked["tuned", c][0] == "ok"}

    def measure(self, shape, pool, times):
        """times ({config: (ms, label)}) with pool's checked configs timed at shape."""
        from . import operands
        from .bench import log, operand_sets, timed

        host_sets = operand_sets(self.precision, 1, shape, self.rng)
        dev_sets = {}
        times = dict(times)
        for label, cfg in self.ready(pool).items():
            if cfg in times:
                continue
            if cfg.b_layout not in dev_sets:
                dev_sets[cfg.b_layout] = [operands.to_device(self.precision, cfg.b_layout, *hs) for hs in host_sets]
            ms, ok, _, _ = timed(self.precision, cfg, shape, dev_sets[cfg.b_layout], host_sets, self.args, self.rng)
            if ok:
                times[cfg] = (ms, label)
            else:
                log(f"  {label}: FAIL at {shape} (sampled check); left out")
        return times


def _entry(precision, shape, times, cc):
    """The winners file's entry of one shape: the fastest, the runner-up, and the
    registry default's time (timed in the same round where it was a candidate)."""
    ranked = sorted(times, key=lambda c: times[c][0])
    win = ranked[0]
    M, N, K = shape
    fallback = registry.default(precision, win.b_layout, "tuned", cc, M, K)
    default_ms = times.get(fallback, (None,))[0]
    return {"precision": precision, "m": M, "n": N, "k": K, "kernel": times[win][1], "config": win.describe(),
            "ms": round(times[win][0], 5),
            "runner_up": [times[ranked[1]][1], round(times[ranked[1]][0], 5)] if len(ranked) > 1 else None,
            "registry_default_ms": None if default_ms is None else round(default_ms, 5)}
