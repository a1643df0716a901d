"""numgemm's kernel builder: a config in, a Numba kernel out.

    skeleton.py        the kernel: tile walk, stage ring, prologue, k loop,
                       reduction, store; it reads the two seams only
    skeleton_ws.py     the warp-specialised kernel (wgmma): a producer
                       warpgroup fills the ring, consumer warpgroups compute
    seams.py           WarpRoutine and CopyRoutine
    epilogue.py        scales, bias and activation on the f32 sums, around the store
    warp_mma.py        ldmatrix + mma.sync (ptx_asm/)
    warp_wgmma.py      wgmma from shared-memory descriptors (ptx_asm/, sm_90a)
    warp_wmma.py       WMMA (baselines/)
    copy_cp_async.py   cp.async, each thread its 16-byte pieces
    copy_widen.py      INT4 widened to s8 on its way into shared memory
    copy_widen_ring.py ... by the producer warpgroup, into the wgmma ring
    copy_tma.py        the TMA unit, an mbarrier per stage (sm_90)
    ring.py            the ring of stages, and its full and empty mbarriers
    split_k.py         split-K's second kernel: the partial sums added into C
    widen_pass.py      INT4 unpack="pass": B widened to s8 by a kernel before the GEMM
    copy_threads.py    what the two per-thread copy paths share
    dp4a.py            INT8 on the CUDA cores (no tensor cores, no seams)
    w4a16.py           FP16/BF16 x INT4 weights, widened in registers (no seams)
    w4a16_wgmma.py     the same on wgmma (sm_90a): the weights as A registers, the activations by cp.async or TMA
    regs.py            Numba register plumbing (getters, setters, generated code)
"""

import ctypes
import functools
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor

from numba import cuda, types

# numgemm.cache is imported by the functions that build: `import numgemm` imports this package
# (KernelConfig.validate reads RULES), and `python -m numgemm.cache` must find that module unimported.
from ..tiles import WGMMA_PARTS
from ..launches import Address
from ..sass import (
    NVVM_OPTIONS,
    Build,
    build_many,
    front_end,
    library_cubin,
    refuse_ptxas_losses,
)
from ..toolchain import has_native_s4_mma, parse_target, target_name
from . import (
    copy_cp_async,
    copy_threads,
    copy_tma,
    copy_widen,
    copy_widen_ring,
    dp4a,
    epilogue,
    skeleton,
    skeleton_ws,
    split_k,
    warp_mma,
    warp_wgmma,
    warp_wmma,
    widen_pass,
)
from .regs import OUT, i32, u8, u32, u64

#: Each feature's rules for a config (KernelConfig.validate joins their errors):
#: the warp routines', the copy paths', the skeletons' own features', split-K's.
RULES = (warp_mma.rules, warp_wmma.rules, warp_wgmma.rules, copy_threads.rules, copy_tma.rules, copy_widen.rules,
         copy_widen_ring.rules, widen_pass.rules, skeleton.rules, skeleton_ws.rules, split_k.rules, epilogue.rules)

#: Each feature's host side, in the order a plan runs them (plans.Parts): the
#: operands as dp4a reads them; C's map, swap's sides and stream-K's slots;
#: the widened s4 workspace; the operands' tensor maps, which encode the
#: kernel's A and B sides as the steps before leave them; split-K's workspace;
#: C with the epilogue's vectors beside it.
HOST = (dp4a.host, skeleton_ws.host, widen_pass.host, copy_tma.host, split_k.host, epilogue.host)

#: Which file builds a config's warp routine (by op) and copy routine (by copy;
#: INT4 with unpack="tile" widens on its way in: in the producer, with wgmma).
WARP_ROUTINES = {"mma": warp_mma.routine, "wmma": warp_wmma.routine, "wgmma": warp_wgmma.routine}
COPY_ROUTINES = {"cp_async": copy_cp_async.routine, "tma": copy_tma.routine, "widen": copy_widen.routine,
                 "widen_ring": copy_widen_ring.routine}


def argtypes(cfg):
    """Numba types of the kernel's arguments: A, B as bytes (dp4a: 32-bit
    words), C, M, N, K, KB, NB, c_aligned (with c_tma: 0, or the global
    address of C's tensor map), and the global address of A's and B's tensor
    maps (copy="tma"; else 0); see skeleton.gemm_kernel. With
    split_sum="last", C is (the workspace, C, a tile's arrival counts); with
    stream_k, (the workspace's slots, C, a flag a slot's consumer warp);
    with an epilogue (on whole sums: split_k=1), (C, scale_a, scale_b, bias)."""
    arr = lambda t: types.Array(t, 3, "A")  # noqa: E731 - any strides
    ab = u32 if cfg.op == "dp4a" else u8
    c = arr(OUT["f16" if cfg.c_bits else cfg.stored])
    if cfg.split_sum == "last" or cfg.stream_k:        # stream_k: its slots, one after another
        c = types.Tuple((types.Array(OUT[cfg.acc], 1 if cfg.stream_k else 3, "C"), c, types.Array(i32, 1, "C")))
    elif cfg.epilogue and cfg.split_k == 1:
        c = epilogue.argtype(c)
    return (arr(ab), arr(ab), c, i32, i32, i32, i32, i32, u64 if cfg.c_tma else i32, u64)


def kernel_function(cfg):
    """The Python function of cfg's kernel, ready for cuda.jit or an offline build."""
    if cfg.op == "dp4a":
        return dp4a.kernel_function(cfg)
    # Shared memory and the warps see cfg.shared_view: cfg itself, or (widened once per k-tile) its
    # s8 tiles; each warp routine reads that view.
    copy = cfg.copy
    if cfg.widens_tile and cfg.copy == "cp_async":     # s4 widened on its way in
        copy = "widen_ring" if cfg.producer_threads else "widen"
    frame = skeleton_ws if cfg.producer_threads else skeleton
    warp = WARP_ROUTINES[cfg.op](cfg)
    if cfg.epilogue and cfg.split_k == 1:             # split-K: the sum kernel's (split_k.SplitSum)
        warp = warp._replace(store=epilogue.around(cfg, warp.store), prefetch=epilogue.prefetch(cfg))
    return frame.kernel_function(cfg, warp, COPY_ROUTINES[copy](cfg))


def _options(cfg):
    return {"launch_bounds": [cfg.threads, cfg.min_blocks], "lto": True, "nvvm": NVVM_OPTIONS}


def _entry(build):
    """A Build as a cache entry: (meta, parts)."""
    meta = {"name": build.name, "target": build.target, "seconds": build.seconds, "registers": build.registers,
            "shared_bytes": build.shared_bytes, "local_bytes": build.local_bytes, "built_with": build.built_with}
    return meta, {"cubin": build.cubin, "sass": build.sass.encode()}


def _from_entry(meta, parts):
    meta = dict(meta, built_with=tuple(meta.get("built_with", ())))
    return Build(cubin=parts["cubin"], sass=parts["sass"].decode(), cached=True, **meta)


#: The targets a cache miss builds beside the one asked for, from the same front end: the study's
#: GPU and ours, which the tests, inspect and gemm() ask for; sm_80 only when asked.
BUILT_TOGETHER = ("sm_89", "sm_90")


def build_config(cfg, target="sm_89", together=BUILT_TOGETHER):
    """Offline build (no GPU) of cfg's kernel for target: SASS and resources.

    Read from numgemm's kernel cache where it is there; on a miss, one
    front end builds target and the `together` targets of cfg that the
    cache lacks, and stores each (test_sass and inspect ask for several;
    prebuild_offline names the ones it is asked for)."""
    from .. import cache
    why = cfg.unsupported(target, launch=False)
    if why:
        raise ValueError(why)
    target = cfg.build_target(target)         # sm_90 -> sm_90a for wgmma
    keys = {t: cache.key(cfg, t, argtypes(cfg), _options(cfg))
            for t in dict.fromkeys((target, *map(cfg.build_target, together)))
            if not cfg.unsupported(t, launch=False)}
    hit = cache.load(keys[target])
    if hit is not None:
        return _from_entry(*hit)
    with cache.building(cache.key(cfg, "any", argtypes(cfg), _options(cfg))):      # the config's, any target
        hit = cache.load(keys[target])
        if hit is not None:
            return _from_entry(*hit)
        cache.STATS["builds"] += 1
        missing = [t for t in keys if t == target or (cache.enabled() and not cache.has(keys[t]))]
        builds = build_many(kernel_function(cfg), argtypes(cfg), missing, name=cfg.name,
                            launch_bounds=(cfg.threads, cfg.min_blocks), strict_ptxas=cfg.arch_specific)
        for t, b in builds.items():
            cache.store(keys[t], *_entry(b))
    return builds[target]


def device_target(cc):
    """The target numgemm builds for a GPU of compute capability cc: sm_90a
    on Hopper (the arch-specific target that wgmma and setmaxnreg need), as
    numba-cuda's own dispatcher does."""
    return target_name(cc) + ("a" if tuple(cc) >= (9, 0) else "")


def device_cubin(cfg, cc):
    """(cubin, entry name) of cfg's kernel for a GPU of compute capability cc,
    from the cache or built (no GPU is needed to build it)."""
    return _cached_cubin(cfg, kernel_function, argtypes(cfg), _options(cfg), cc, cfg.arch_specific)


def helper_cubin(spec, cc):
    """(cubin, entry name) of a kernel of numgemm's own beside the configs'
    (one with a spec: its name, describe(), argtypes(), function(),
    threads, min_blocks where more than one): split-K's sum
    (split_k.SplitSum), unpack="pass"'s widening (widen_pass.WidenPass),
    W4A16's GEMMs (w4a16.W4A16, w4a16_wgmma.W4A16Wgmma: arch_specific, so
    that ptxas's serialised wgmmas are refused)."""
    return _cached_cubin(spec, lambda _: spec.function(), spec.argtypes(), _helper_options(spec), cc,
                         getattr(spec, "arch_specific", False))


def _helper_options(spec):
    return {"launch_bounds": [spec.threads, getattr(spec, "min_blocks", 1)], "lto": True, "nvvm": NVVM_OPTIONS}


def _cached_cubin(what, pyfunc_of, types_, options, cc, strict):
    """The cache's cubin of what (a config, or the split-K sum) for cc, or built."""
    from .. import cache
    target = device_target(cc)

    def make():
        start = time.perf_counter()
        bounds = tuple(options["launch_bounds"])
        lib, entry = front_end(pyfunc_of(what), types_, cc, launch_bounds=bounds)
        cubin = library_cubin(lib, target)
        if strict:
            refuse_ptxas_losses(lib, target, what.name)
        return {"name": what.name, "target": target, "entry": entry, "seconds": time.perf_counter() - start}, \
            {"cubin": cubin}
    return cache.cached(cache.key(what, target, types_, options), make,
                        lambda meta, parts: (parts["cubin"], meta["entry"]))


def _in_processes(fn, calls, jobs):
    """fn(*args) for each args of calls, jobs processes at a time (Numba's
    front end holds the GIL); each stores what it builds in the cache."""
    from .. import cache
    if calls and cache.enabled() and jobs > 1:
        with ProcessPoolExecutor(min(jobs, len(calls)), mp_context=multiprocessing.get_context("spawn")) as pool:
            list(pool.map(fn, *zip(*calls)))


def prebuild(cfgs, cc, jobs):
    """Build, jobs at a time, the device kernels of cfgs that the cache lacks.
    (needed, from the cache, built, seconds)."""
    return _prebuild(cfgs, cc, jobs, lambda c: (argtypes(c), _options(c)), device_cubin)


def prebuild_helpers(specs, cc, jobs):
    """prebuild's for kernels of numgemm's own (helper_cubin's specs)."""
    return _prebuild(specs, cc, jobs, lambda s: (s.argtypes(), _helper_options(s)), helper_cubin)


def _prebuild(items, cc, jobs, typed, build):
    """build(item, cc) for each of items whose cache entry (typed(item): its
    argument types and options) is missing, jobs at a time."""
    from .. import cache
    target = device_target(cc)
    needed = list(dict.fromkeys(items))
    todo = [x for x in needed if not cache.has(cache.key(x, target, *typed(x)))]
    start = time.perf_counter()
    _in_processes(build, [(x, tuple(cc)) for x in todo], jobs)
    return len(needed), len(needed) - len(todo), len(todo), time.perf_counter() - start


def prebuild_offline(cfgs, targets, jobs):
    """Build into the cache, jobs at a time, the offline targets of cfgs that
    it lacks: one build_config per config makes all of those targets and no
    other (the shipped winners' test asks for sm_90 alone)."""
    from .. import cache
    calls = []
    for c in dict.fromkeys(cfgs):
        ts = tuple(t for t in targets if not c.unsupported(t, launch=False))
        if any(not cache.has(cache.key(c, c.build_target(t), argtypes(c), _options(c))) for t in ts):
            calls.append((c, ts[0], ts))
    _in_processes(build_config, calls, jobs)


@functools.cache
def device_function(cfg, device_id):
    """cfg's kernel loaded on GPU device_id of the current context: a numba-cuda
    Function (its .kernel is the cuda.core Kernel that launch() takes)."""
    return _loaded(device_cubin, cfg, device_id)


@functools.cache
def helper_function(spec, device_id):
    """A helper kernel (helper_cubin), loaded as device_function loads a kernel."""
    return _loaded(helper_cubin, spec, device_id)


def _loaded(cubin_of, what, device_id):
    from cuda.core import ObjectCode

    ctx = cuda.current_context()
    assert ctx.device.id == device_id, (ctx.device.id, device_id)
    cubin, entry = cubin_of(what, tuple(ctx.device.compute_capability))
    return ctx.create_module_image(ObjectCode.from_cubin(cubin)).get_function(entry)


def launch_args(types_, args):
    """Arguments of a kernel of argument types types_ (argtypes(cfg)) as the
    driver takes them, in numba-cuda's layout: an array is (meminfo, parent,
    size, itemsize, data, *shape, *strides), a scalar its ctypes value; an
    array's data, and a scalar given as an Address, as an Address."""
    out = []
    for ty, value in zip(types_, args):
        if isinstance(ty, types.BaseTuple):         # its members, one after another
            out += launch_args(ty.types, value)
        elif isinstance(ty, types.Array):
            out += [0, 0, value.size, value.dtype.itemsize, Address(value.device_ctypes_pointer.value or 0),
                    *value.shape, *value.strides]
        elif isinstance(value, Address):
            out.append(value)
        else:
            out.append(getattr(ctypes, f"c_{ty}")(value))
    return out


def expected_sass(cfg, target):
    """(opcode prefix the kernel's SASS must hold, whether ptxas emulates the
    instruction there: its calls and spills are then expected).

    s4 tensor-core instructions are native on sm_80/86/89; on sm_90 ptxas
    emulates them with s8 IMMA behind called routines (a fact about Hopper,
    reported by numgemm.inspect.s4_note). FP8's mma.sync is native on sm_89;
    on sm_90 ptxas converts its operands to f16 for HMMA (two a QMMA), and
    the converted fragments spill (Precision.mma_converted_on)."""
    if cfg.op == "dp4a":
        return "IDP.4A.S8.S8", False
    if cfg.op == "mma" and parse_target(target) in cfg.prec.mma_converted_on:
        return "HMMA.16816.F32", True
    s4 = cfg.prec.packed and cfg.unpack == "none"         # sub-byte mma.sync, native or emulated
    if s4 and not has_native_s4_mma(parse_target(target)):
        return "IMMA", True                 # the emulation's s8 IMMA, behind calls
    if cfg.op == "wmma":
        return cfg.prec.wmma_sass, False
    m, n, k = cfg.op_shape
    if cfg.op == "wgmma":
        n = WGMMA_PARTS[n][0]               # the first (widest) of the instructions side by side
        return cfg.wgmma_prec.wgmma_sass(m, n, k), False
    if cfg.unpack != "none":                # widened: the wide precision's mma.sync
        wide = cfg.prec.wide
        return wide.mma_sass(m, n, wide.mma_ks[0], cfg.acc), False
    return cfg.prec.mma_sass(m, n, k, cfg.acc), False
