"""What a bench run covers: its kernels (--preset, --precision, --kernels,
--family, --b-layout, --out-dtype), gemm()'s own pick per shape
("default"), and its shapes (--sizes, --shapes, llm)."""

import numpy as np

from .cli import UsageError, kernel_names
from .measure import log
from .precision import NARROW, PRECISIONS

PRECISION_ORDER = tuple(PRECISIONS)
SIZES = (512, 1024, 2048, 4096, 8192)


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


def wants_default(args):
    """Whether --kernels names "default": gemm()'s own choice at each shape."""
    return bool(args.kernels) and "default" in args.kernels


def default_pick(precision, shape, cc, args=None):
    """("tuned", "default", config): the kernel gemm() picks for this shape
    (numgemm.tuning.choose) with B as --b-layout asks, else in its
    precision's layout, and C as --out-dtype asks."""
    from . import registry

    layout = getattr(args, "b_layout", None) or registry.choice_layout(precision)
    return pick(precision, shape, cc, args, layout, "default")


def default_picks(precision, shape, cc, args):
    """default_pick, and where --b-layout names a layout other than the
    precision's own, gemm()'s pick in its own layout too ("default KN"), so
    that the two layouts compare in one run."""
    from . import registry

    picks = [default_pick(precision, shape, cc, args)]
    own = registry.choice_layout(precision)
    if getattr(args, "b_layout", None) not in (None, own):
        picks.append(pick(precision, shape, cc, args, own, f"default {own.upper()}"))
    return picks


def pick(precision, shape, cc, args, layout, name):
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


def epilogue_fields(spec):
    """--epilogue's FIELD=VALUE,... (bias alone: bias=True) as KernelConfig's
    epilogue fields, every one named; {} for None."""
    if not spec:
        return {}
    from .kernel.epilogue import NONE

    fields = dict(NONE)
    for item in spec.split(","):
        key, _, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if key not in fields:
            raise UsageError(f"--epilogue takes {', '.join(fields)}; got {key!r}")
        fields[key] = value in ("", "True", "true", "1") if key == "bias" else value
    try:
        from .config import KernelConfig

        KernelConfig("fp16", **fields)
    except ValueError as e:
        raise UsageError(f"--epilogue {spec}: {e}") from None
    return fields


def c_as_asked(cfg, args, chosen=False):
    """cfg with --epilogue's fields (epilogue_fields), storing C as
    --out-dtype asks (as gemm(out_dtype=) has it: float16 for FP16, bfloat16
    for BF16, narrow for each its own; an integer precision's C through an
    epilogue: float32, or either), or None for a kernel that cannot (WMMA, or
    a format it lacks), which the run leaves out. The integers keep int32."""
    from .api import with_c_dtype
    from .checks import with_epilogue

    fields = epilogue_fields(getattr(args, "epilogue", None))
    if cfg is not None and fields:
        try:
            cfg = with_epilogue(cfg, fields, chosen)
        except ValueError as e:
            log(f"left out: {e}")
            return None
    asked = getattr(args, "out_dtype", "float32")
    if asked == "float32" or cfg is None or not cfg.narrows:
        return cfg
    narrows = cfg.narrows
    narrow = narrows[0] if asked == "narrow" else next((n for n in narrows if NARROW[n].dtype_name == asked), "")
    if not narrow:
        log(f"left out: {cfg.name}: {cfg.precision} has no {asked} C")
        return None
    try:
        return with_c_dtype(cfg, np.dtype(NARROW[narrow].dtype), chosen)
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


def check_selection(args):
    """Refuse, before any GPU work, kernel names no chosen preset has, a
    selection that leaves nothing to run, shapes that are not MxNxK, and a
    search for a 16-bit C (the winners are timed with float32 C and serve
    both: gemm(out_dtype=float16) rounds the same kernel's sums)."""
    from . import registry

    presets = registry.PRESETS if args.preset == "all" else (args.preset,)
    if args.diff or args.claims or args.linkage_cost:
        return
    if getattr(args, "tune", False) and getattr(args, "out_dtype", "float32") != "float32":
        raise UsageError(f"--tune searches with float32 C, and its winners serve 16-bit C too; "
                         f"--out-dtype {args.out_dtype} is not searched (leave it out)")
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
