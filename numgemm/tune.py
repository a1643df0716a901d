"""The search behind `python bench.py --tune`: the winners gemm() reads (numgemm.tuning).

    python bench.py --tune                      every precision, at SHAPES
    python bench.py --tune --precision int8 --shapes 16x8192x8192

Per precision, a bounded set of candidates at shapes spread over the
classes of M (1, 16, 64, 256, >= 1024) and N = K from 512 to 8192: the
registered tilings gemm() may run on this GPU (registry.CHOICES: block
tiles, small-M tiles, TMA twins, wgmma), the same in smaller block tiles
where theirs leave SMs idle, each of them split over K by the factors
that still leave some; then the winner's neighbours (a stage more or
fewer, another rasterization; small-M tiles in k-tiles twice or half as
long). Every candidate is checked exactly before
it is timed (numgemm.measure). The fastest of each shape is written to
the kernel cache folder's tuned/<arch>.json (or --tune-out), each
precision as it is done.
"""

from pathlib import Path

from . import operands, registry
from .tiles import RING_STAGES
from .measure import check, log, operand_sets, prebuild, timed
from .timing import device_name
from .toolchain import target_name
from .tuning import winners_files, write

#: The shapes --tune measures: M of every class against N = K of 4096 and 8192, and squares.
SHAPES = tuple((m, n, n) for n in (4096, 8192) for m in (1, 16, 64, 256)) + \
    tuple((n, n, n) for n in (512, 1024, 2048, 4096, 8192))
SPLITS = (2, 4, 8)
_OTHER_CACHE = {"ca": "cg", "cg": "ca"}


def candidates(precision, cc, shape, sms, b_layout=None):
    """{label: config}: the first round of the search at one shape. The
    registered kernels gemm() may choose on this GPU; where a block-tile
    kernel's tiles fill fewer than two waves of the SMs, the same kernel in
    smaller block tiles (INT4's widening wgmma ones also with A widened by
    the consumers); INT4's pass kernel where 16 < M < N also computing C^T
    (swap), in its smaller tiles too, and INT8's wgmma ones where M <= 16 in
    C^T tiles 16 columns wide; small-M tiles that copy by cp.async also with
    the other cache policy (.ca, through L1, streamed FP16's 16 x 8192^2
    11 % faster than .cg on the H200: results/2026-12-04-h200-small-m); and
    each of those split over K where its tiles leave SMs idle, by factors
    that give every block at least two k-tiles (not the widening wgmma
    ones); the persistent TMA ones there also with their
    k-tiles streamed over every SM (stream_k); and each unsplit one whose
    persistent grid even_waves changes at this shape, with it flipped.
    b_layout: B in that layout (each kernel's registry.layout_twin, those
    that have one); None: each kernel's own."""
    M, N, K = shape
    pool = {}
    for name in registry.choices(precision, cc):
        base = registry.REGISTRY["tuned"][name]
        if b_layout is not None and base.b_layout != b_layout:
            base = registry.layout_twin(base, b_layout)
            if base is None:
                continue
        if base.bm == 16 and M > 64:         # small-M tiles: for small M only
            continue
        if base.unpack == "pass" and 16 < M < N:     # C^T: the pass widens A, the smaller operand
            swapped = base.replace(swap=True, stage_c=False)
            tilings = {f"_{swapped.bm}x{swapped.bn}": swapped, **_smaller_tiles(swapped)}
            pool.update({f"{name}_swap{tag}": cfg for tag, cfg in tilings.items()})
        if base.prec.wgmma_swap_ns and base.op == "wgmma" and M <= 16:     # C^T 16 columns wide, B by TMA
            for bm in (64, 128):
                swapped = base.replace(swap=True, stage_c=False, bn=base.prec.wgmma_swap_ns[0], bm=bm,
                                       warps_m=bm // 16)
                pool[f"{name}_swap_{bm}x{swapped.bn}"] = swapped.replace(stages=_deepest(swapped))
        # wgmma's 64-row tiles are for M > 16 (the small-M tiles' shapes below); its
        # clusters pair tile rows, so that below 256 rows of M one CTA computes zeros.
        if base.op == "wgmma" and (M <= 16 or (base.cluster > 1 and M <= 128)):
            pool[name] = base
            continue
        tilings = {"": base}
        if -(-M // base.bm) * -(-N // base.bn) < 2 * sms:
            tilings.update(_smaller_tiles(base))
        if base.bm == 16 and base.copy == "cp_async":     # the stream of B through L1 or past it
            tilings.update({f"{tag}_{_OTHER_CACHE[cfg.cache]}": cfg.replace(cache=_OTHER_CACHE[cfg.cache])
                            for tag, cfg in list(tilings.items())})
        for tag, cfg in tilings.items():
            pool[name + tag] = cfg
            if cfg.widens_tile:     # INT4's widening producer has no registers to spare for a split
                continue
            tiles, ktiles = -(-M // cfg.bm) * -(-N // cfg.bn), -(-cfg.prec.kbytes(K) // cfg.bk_bytes)
            # every SM on the tiles' k-tiles (pingpong: a warpgroup's tiles whole, never streamed)
            if cfg.persistent and cfg.copy == "tma" and tiles < 2 * sms and not cfg.pingpong:
                pool[f"{name}{tag}_sk"] = cfg.replace(stream_k=True)
            for split in SPLITS:
                if tiles < 2 * sms and tiles * split <= 4 * sms and ktiles >= 2 * split:
                    try:
                        pool[f"{name}{tag}_split{split}"] = cfg.replace(split_k=split)
                    except ValueError:      # e.g. f16 sums, which have no workspace
                        continue
    for label, cfg in list(pool.items()):
        other = cfg.replace(even_waves=not cfg.even_waves)
        if cfg.split_k == 1 and other.grid_blocks(M, N, sms) != cfg.grid_blocks(M, N, sms):
            pool[f"{label}_{'ew' if other.even_waves else 'every_sm'}"] = other
    return pool


def _smaller_tiles(cfg):
    """{tag: config}: cfg in smaller block tiles, where valid: mma in 128 x 128
    and 64 x 64 tiles of four warps (FP16's K x N swizzled B: warps 64
    columns wide), small-M tiles 32 columns wide; wgmma with N = 128, in two
    consumer warpgroups or one, and FP16's 64 x 64 and 64 x 32, each with as many stages
    as shared memory holds, and 128 x 128 with pingpong (INT4's widening
    ones instead also with A widened by the other side: the producer where
    the base has the consumers do it)."""
    if cfg.op == "wgmma":
        shapes = {"_128x128": dict(bn=128), "_64x128": dict(bm=64, warps_m=4, bn=128)}
        if cfg.widens_tile:         # A widened by the other side as well
            flip = "_pw" if cfg.a_regs else "_rs"
            shapes.update({tag + flip: dict(change, a_regs=not cfg.a_regs) for tag, change in list(shapes.items())})
        else:       # TMA's ring as deep as shared memory holds (and FP16's 64 x 64 tiles)
            shapes.update({f"_64x{bn}": dict(bm=64, warps_m=4, bn=bn) for bn in (64, 32)     # FP16's
                           if bn in cfg.wgmma_prec.wgmma_ns})
            if not (cfg.a_regs or cfg.swap):
                shapes["_128x128_pp"] = dict(bn=128, pingpong=True)     # one warpgroup a tile, both halves
            shapes = {tag: dict(change, stages=_deepest(cfg.replace(**change))) for tag, change in shapes.items()}
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


def _deepest(cfg):
    """The most stages (up to RING_STAGES) that cfg's tiles can have in shared memory."""
    for stages in range(RING_STAGES, cfg.stages, -1):
        try:
            cfg.replace(stages=stages)
            return stages
        except ValueError:
            continue
    return cfg.stages


def neighbours(cfg):
    """{label suffix: config}: the second round, the winner one step away:
    a stage more or fewer (wgmma by TMA: also the deepest ring shared memory
    holds, and halfway there), another rasterization (block-tile kernels);
    for small-M tiles, k-tiles twice or half as long with the warps moved
    between N and K to match (each warp's share of a k-tile kept); those
    that make a valid config."""
    changes = {f"s{s}": dict(stages=s) for s in (cfg.stages - 1, cfg.stages + 1)}
    if cfg.op == "wgmma" and cfg.copy == "tma":     # a ring of mbarriers: halfway to the deepest too
        deep = _deepest(cfg)
        changes.update({f"s{s}": dict(stages=s) for s in {deep, (cfg.stages + deep + 1) // 2} - {cfg.stages}})
    if cfg.bm > 16 and not cfg.persistent:
        changes.update({f"r{r}": dict(raster=r) for r in (1, 4, 16) if r != cfg.raster})
    if cfg.bm == 16:
        if cfg.warps_n > 1:
            changes["k2"] = dict(bk=cfg.bk * 2, warps_k=cfg.warps_k * 2, warps_n=cfg.warps_n // 2)
        if cfg.warps_k > 1:
            changes["kh"] = dict(bk=cfg.bk // 2, warps_k=cfg.warps_k // 2, warps_n=cfg.warps_n * 2)
    out = {}
    for label, change in changes.items():
        try:
            out[label] = cfg.replace(**change)
        except ValueError:          # e.g. a stage more than shared memory holds
            continue
    return out


def tune(args, shapes=None):
    """bench.py --tune: per precision and shape (default SHAPES), the first
    round's candidates and then the winner's neighbours, each checked
    exactly and timed on the same operands; the fastest of each shape
    written as an entry. Returns the path written."""
    import time

    import numpy as np
    from numba import cuda

    dev = cuda.get_current_device()
    cc, sms = tuple(dev.compute_capability), dev.MULTIPROCESSOR_COUNT
    rng = np.random.default_rng(args.seed)
    shapes = list(shapes or SHAPES)
    doc = {"arch": target_name(cc), "device": device_name(dev), "date": time.strftime("%Y-%m-%d"),
           "command": " ".join(["python bench.py", *getattr(args, "argv", ["--tune"])]),
           "repeats": args.repeats, "entries": []}
    path = Path(args.tune_out or winners_files(target_name(cc))[0])
    for precision in args.precision:
        search = _Search(precision, cc, args, rng)
        first = {shape: candidates(precision, cc, shape, sms, getattr(args, "b_layout", None)) for shape in shapes}
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
        todo = [c for c in dict.fromkeys(pool.values()) if ("tuned", c) not in self.checked]
        if todo:
            prebuild(todo, self.cc, self.args.jobs)
            self.checked.update(check(self.precision, [("tuned", c.name, c) for c in todo], self.cc, self.rng))
        return {label: c for label, c in pool.items() if self.checked["tuned", c][0] == "ok"}

    def measure(self, shape, pool, times):
        """times ({config: (ms, label)}) with pool's checked configs timed at shape."""
        host_sets = operand_sets(self.precision, self.args.batch, shape, self.rng)
        dev_sets = {}
        times = dict(times)
        for label, cfg in self.ready(pool).items():
            if cfg in times:
                continue
            if cfg.b_layout not in dev_sets:
                dev_sets[cfg.b_layout] = [operands.to_device(self.precision, cfg.b_layout, *hs) for hs in host_sets]
            # A burst each: the search ranks many candidates, at the cost of the clock under load
            measured, ok, _, _ = timed(self.precision, cfg, shape, dev_sets[cfg.b_layout], host_sets, self.args,
                                       self.rng)
            ms = measured.ms
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
