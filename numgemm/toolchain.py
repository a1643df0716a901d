"""Where numgemm finds its sources and CUDA's tools, and the facts about targets.

Everything here works without a GPU: the CUDA pieces come from pip wheels
(NVRTC, NVVM, nvJitLink, the nvcc wheel's ptxas and crt/ headers, cuobjdump,
nvdisasm), found through cuda-pathfinder, or from a CUDA toolkit on the
machine (CUDA_HOME).
"""

import collections
import contextlib
import functools
import os
import subprocess
from pathlib import Path

from cuda import pathfinder

#: The targets numgemm builds and inspects for: Ampere, Ada (the study's L4), Hopper.
TARGETS = ("sm_80", "sm_89", "sm_90")


def _source_dir(name):
    # An installed numgemm carries the folders inside the package (setup.cfg's
    # package_dir); a source checkout has them beside it.
    here = Path(__file__).resolve().parent
    for candidate in (here / name, here.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"numgemm cannot find its {name}/ folder next to {here}; "
        "install numgemm from its source tree (pip install -e .)"
    )


PTX_DIR = _source_dir("ptx_asm")
BASELINES_DIR = _source_dir("baselines")


def parse_target(target):
    """'sm_89', 'sm_90a', '89', 89 or (8, 9) -> (8, 9)."""
    if isinstance(target, tuple):
        return tuple(target[:2])
    text = str(target).lower().removeprefix("sm_").rstrip("a")
    if not text.isdigit() or len(text) < 2:
        raise ValueError(f"unknown target {target!r}; expected e.g. 'sm_89'")
    return int(text[:-1]), int(text[-1])


def target_name(cc):
    return f"sm_{cc[0]}{cc[1]}"


def arch_suffix(target):
    """'a' for an arch-specific target ('sm_90a', or (9, 0, 'a')), else ''."""
    if isinstance(target, tuple):
        return target[2] if len(target) > 2 else ""
    return "a" if str(target).lower().endswith("a") else ""


def has_native_s4_mma(cc):
    """Whether ptxas emits native IMMA for s4 mma.sync / WMMA on this target.

    Native s4 tensor-core instructions exist on sm_80, sm_86, sm_87 and sm_89;
    on sm_90 ptxas emulates them (a called routine widens s4 to s8), which is
    why numgemm has an INT4 path that widens in the kernel and issues s8 mma.
    """
    return tuple(cc) in {(8, 0), (8, 6), (8, 7), (8, 9)}


@functools.cache
def tool(name):
    """Path of a CUDA binary utility (ptxas, cuobjdump, nvdisasm)."""
    path = pathfinder.find_nvidia_binary_utility(name)
    if path is None:
        raise RuntimeError(
            f"{name} not found: install the CUDA wheels that carry it "
            "(nvidia-cuda-nvcc for ptxas, nvidia-cuda-cuobjdump, "
            "nvidia-cuda-nvdisasm) or a CUDA toolkit"
        )
    return path


def run_tool(name, *args):
    proc = subprocess.run([tool(name), *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{name} {' '.join(args)} failed:\n{proc.stderr}")
    return proc.stdout + proc.stderr


def _wmma_include_candidates():
    try:
        yield Path(pathfinder.find_nvidia_header_directory("nvcc"))
    except Exception:  # noqa: BLE001 - pathfinder raises several kinds
        pass
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            yield Path(os.environ[var]) / "include"
    yield Path("/usr/local/cuda/include")


@functools.cache
def enable_wmma_headers():
    """Let NVRTC see crt/mma.h, which mma.h (WMMA) includes, and baselines/.

    NVRTC's wheel ships mma.h without crt/mma.h; the nvcc wheel or a CUDA
    toolkit has it. NVRTC gets the baselines' source without its folder, so
    their shared header needs the folder on the path too. numba-cuda fixes
    NVRTC's options: both go into its extra search paths.
    """
    from numba.cuda import config

    for inc in _wmma_include_candidates():
        if (inc / "crt" / "mma.h").is_file():
            paths = [p for p in config.CUDA_NVRTC_EXTRA_SEARCH_PATHS.split(":") if p]
            paths += [str(d) for d in (inc, BASELINES_DIR) if str(d) not in paths]
            config.CUDA_NVRTC_EXTRA_SEARCH_PATHS = ":".join(paths)
            return inc
    raise RuntimeError(
        "WMMA baselines need crt/mma.h, which NVRTC's wheel lacks: "
        "pip install nvidia-cuda-nvcc, or set CUDA_HOME to a CUDA toolkit"
    )


@contextlib.contextmanager
def quick_front_end():
    """Numba's front end with two of its steps in linear time, for the
    builds inside (numgemm's kernels are long straight blocks of inlined
    routines, where both are quadratic: results/2026-12-04-cpu-front-end
    has the build times with and without). Each gives what
    numba-cuda 0.30's own gives, so the kernels' LLVM IR and SASS are the
    same (compared over every registered build); other numba-cuda versions
    run their own steps.

    - Lowering's search for the variables assigned once (to keep them out
      of allocas) scans a block's statements for each of its variables;
      here each block is counted once.
    - An @overload's implementations are cached by the compile's flags, and
      hashing and comparing a Flags reads every option through its getter,
      16,690 lookups a build; here the key is the options set on it (the
      rest are the class's defaults, so equal keys mean equal flags).
    - A function type's call is typed by trying its templates in turn, and
      typed again where lowering needs the signature: 4,535 calls and
      41,130 template tries in one fp16_wgmma build, 915 of them distinct.
      Inside one build each distinct call is typed once (_CallTypes); a
      repeat gets the first's signature and sets the implementation key
      the first set, as typing it again would."""
    import numba_cuda
    from numba.cuda import lowering
    from numba.cuda.typing import templates

    from numba.core.types import functions

    if not numba_cuda.__version__.startswith("0.30."):
        yield
        return
    saved = (lowering.Lower._find_singly_assigned_variable, templates._OverloadFunctionTemplate._get_impl,
             functions.BaseFunction.get_call_type)
    lowering.Lower._find_singly_assigned_variable = _singly_assigned_variables
    templates._OverloadFunctionTemplate._get_impl = _overload_impl
    functions.BaseFunction.get_call_type = _CallTypes(functions.BaseFunction.get_call_type)
    try:
        yield
    finally:
        (lowering.Lower._find_singly_assigned_variable, templates._OverloadFunctionTemplate._get_impl,
         functions.BaseFunction.get_call_type) = saved


def _singly_assigned_variables(lower):
    """Lower._find_singly_assigned_variable's set: the variables of a
    non-generator function defined in one block only, used in no other
    block, not forced into an alloca, with one assignment in their block."""
    from numba.cuda.core import ir
    from numba.cuda.core.analysis import compute_use_defs, must_use_alloca

    once = set()
    if not lower.func_ir.func_id.is_generator:
        blocks = lower.func_ir.blocks
        use_defs = compute_use_defs(blocks)
        forced = must_use_alloca(blocks)
        used = set().union(*use_defs.usemap.values())
        blocks_defining = collections.Counter(v for defs in use_defs.defmap.values() for v in defs)
        for label, defs in use_defs.defmap.items():
            assigned = collections.Counter(s.target.name for s in lower.blocks[label].body
                                           if isinstance(s, ir.assign_types))
            once.update(v for v in defs if blocks_defining[v] == 1 and v not in forced and v not in used
                        and assigned[v] == 1)
    lower._singly_assigned_vars = once
    lower._blk_local_varmap = {}


def _overload_impl(template, args, kws):
    """_OverloadFunctionTemplate._get_impl keyed by the flags' set options."""
    from numba.cuda.core import targetconfig

    flags = targetconfig.ConfigStack.top_or_none()
    key = template.context, tuple(args), tuple(kws.items()), None if flags is None else _FlagsKey(flags)
    if key in template._impl_cache:
        return template._impl_cache[key]
    return template._build_impl(key, args, kws)


class _FlagsKey:
    """The options set on a Flags, as they are now: equal where the Flags'
    values are (the others are its class's defaults). Flags hash by their
    options' names alone (all alike) and compare every option's value."""

    __slots__ = ("cls", "values", "_hash")

    def __init__(self, flags):
        self.cls, self.values = type(flags), dict(flags._values)
        self._hash = hash((self.cls, tuple(sorted(self.values))))

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return isinstance(other, _FlagsKey) and self.cls is other.cls and self.values == other.values


class _CallTypes:
    """BaseFunction.get_call_type typing each distinct call once: keyed by
    the function type, the typing context and the argument types (literal
    values included); failures are not kept, so they raise as Numba's do."""

    def __init__(self, typed):
        self._typed, self._seen = typed, {}

    def __get__(self, fnty, owner=None):
        return functools.partial(self, fnty)

    def __call__(self, fnty, context, args, kws):
        try:
            key = fnty, context, tuple(args), tuple(kws.items())
            known = self._seen.get(key)
        except TypeError:                           # an unhashable argument type: typed as Numba would
            return self._typed(fnty, context, args, kws)
        if known is not None:
            sig, impl = known
            fnty._impl_keys[sig.args] = impl
            return sig
        sig = self._typed(fnty, context, args, kws)
        if sig is not None:
            self._seen[key] = sig, fnty._impl_keys[sig.args]
        return sig
