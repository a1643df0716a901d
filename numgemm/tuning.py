"""Shape-aware kernel choice: which kernel gemm() runs for an M x N x K problem.

The winners of `python bench.py --tune` (numgemm.tune) are JSON files, one
per GPU architecture (sm_90.json): numgemm ships those measured on an H200
(numgemm/tuned/), and a user's own in the kernel cache's folder (tuned/)
take precedence, class by class (precision, B layout, class of M). For a
problem, gemm() takes the entry of its precision and B layout in the same
class of M whose M, N and K are nearest (in log2; M matters within the
last class, where 512 and 8192 tokens share one), and registry.default where
no file or entry fits. plan_gemm(...).cfg names the kernel; the logger
"numgemm" says at DEBUG level which entry chose it.
"""

import functools
import json
import logging
import math
import warnings
from pathlib import Path

from . import registry
from .config import KernelConfig
from .precision import PRECISIONS
from .toolchain import target_name

log = logging.getLogger("numgemm")

M_CLASSES = (1, 16, 64, 256, 1024)      # the last: M >= 1024 (any M past 256)
SHIPPED = Path(__file__).resolve().parent / "tuned"


def m_class(M):
    """The class of M a winner stands for: the first of M_CLASSES at least M."""
    return next((c for c in M_CLASSES[:-1] if M <= c), M_CLASSES[-1])


def winners_files(arch):
    """The files gemm() reads for arch ('sm_90'), the one that counts first:
    the user's (the cache folder's tuned/), then the package's. (numgemm.cache
    is imported here, not with numgemm: `python -m numgemm.cache` runs it.)"""
    from . import cache

    return [cache.folder() / "tuned" / f"{arch}.json", SHIPPED / f"{arch}.json"]


@functools.cache
def _entries(arch, user_file):
    """{(precision, b_layout, m class): (path, [(m, n, k, config, name)])} from the
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
                mine.setdefault(key, (path, []))[1].append((int(e["m"]), int(e["n"]), int(e["k"]), cfg, e.get("kernel", cfg.name)))
            except (KeyError, TypeError, ValueError) as err:
                warnings.warn(f"numgemm: tuned winner {e.get('kernel')} in {path} left out: {err}", stacklevel=3)
        table.update(mine)
    return table


def winners(arch):
    """{config: name} of every winner in the file gemm() reads for arch ({} where none)."""
    table = _entries(arch, str(winners_files(arch)[0]))
    return {c: name for _, entries in table.values() for *_, c, name in entries}


@functools.lru_cache(maxsize=4096)
def choose(precision, b_layout, M, N, K, cc, preset="tuned"):
    """The kernel gemm() runs for an M x N x K problem of this precision and B
    layout on a GPU of compute capability cc: the nearest tuned winner
    (tuned preset only), else registry.default."""
    cfg, why = None, "registry.default"
    if preset == "tuned":
        arch = target_name(cc)
        table = _entries(arch, str(winners_files(arch)[0]))
        entries = _with_path(*table.get((precision, b_layout, m_class(M)), (None, ())))
        if not entries:                 # none searched in this layout: the other layout's, as twins (FP16)
            entries = _with_path(*_layout_twins(arch, precision, b_layout, m_class(M)))
        twin_of = PRECISIONS[precision].tuned_as
        if twin_of:                     # its twin precision's, at shapes it has not searched (BF16: FP16's)
            searched = {e[:3] for e in entries}
            path, borrowed = table.get((twin_of, b_layout, m_class(M)), (None, ()))
            entries += [(m, n, k, t, f"{name} in {precision}", path) for m, n, k, c, name in borrowed
                        if (m, n, k) not in searched and (t := _in_precision(c, precision)) is not None]
        near = sorted(entries, key=lambda e: sum(math.log2(x / y) ** 2 for x, y in zip((M, N, K), e)))
        for m, n, k, c, name, path in near:
            c = _exact_for(c, K)
            if c.unsupported(cc) is None:
                cfg, why = c, f"{path}: {name}, tuned at {m}x{n}x{k}"
                break
    if cfg is None:
        cfg = registry.default(precision, b_layout, preset, cc, M, K)
    log.debug("numgemm: %s %dx%dx%d, B %s -> %s (%s)", precision, M, N, K, b_layout, cfg.name, why)
    return cfg


def _with_path(path, entries):
    return [(*e, path) for e in entries]


def _layout_twins(arch, precision, b_layout, m):
    """(path, entries) of the winners searched with B in the other layout,
    each as its registry.layout_twin in b_layout, where it has one."""
    other = "kn" if b_layout == "nk" else "nk"
    path, entries = _entries(arch, str(winners_files(arch)[0])).get((precision, other, m), (None, ()))
    twins = [(m, n, k, registry.layout_twin(c, b_layout), f"{name} with B {b_layout.upper()}")
             for m, n, k, c, name in entries]
    return path, [t for t in twins if t[3] is not None]


def _in_precision(cfg, precision):
    """cfg with precision's operands and sums, or None where it has no such
    form (INT8's C^T tiles 16 wide: FP8's wgmma has no N = 16)."""
    try:
        return cfg.replace(precision=precision, acc=PRECISIONS[precision].acc)
    except ValueError:
        return None


def _exact_for(cfg, K):
    """cfg, or its exactly widening twin where K is past a scaled widening's reach."""
    return cfg.exact_twin if cfg.max_k is not None and K > cfg.max_k else cfg


def write(path, doc):
    """A winners file written (bench.py --tune), and this process's choices forgotten."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    _entries.cache_clear()
    choose.cache_clear()
    return path
