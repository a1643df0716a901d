"""The cp.async copy path: each thread copies its 16-byte pieces of every
tile straight into shared memory (LDGSTS), one cp.async group per stage.

The copies carry the config's cache operator (cache: .ca / .cg) and L2
policy (evict); a K x N B can instead go through 2-byte ld.global +
st.shared (b_global="ldg16", the study's INT4 transposed-B loader). A
stage has landed once this thread's group is complete (cp.async.wait_group
with stages - 2 groups still in flight) and the barrier after it has
passed.
"""

from .. import primitives as P
from . import copy_threads
from .regs import device


def routine(cfg):
    ptx = P.routines(cfg.linkage)
    return copy_threads.routine(cfg, _copy_one, _no_landing, lambda *_: 0, ptx.cp_async_commit,
                                _wait(getattr(ptx, f"cp_async_wait_{cfg.stages - 2}")))


def _copy_one(cfg, unit, reg0):
    """One 16-byte cp.async with the config's cache operator and L2 policy, or
    (unit=2) one 2-byte ld.global + st.shared."""
    ptx = P.routines(cfg.linkage)
    if unit == 2:
        scalar = ptx.copy_b16
        return device(lambda i, dst, src, valid, policy, regs: scalar(dst, src, valid))
    if cfg.evict == "none":
        plain = getattr(ptx, f"cp_async_{cfg.cache}")
        return device(lambda i, dst, src, valid, policy, regs: plain(dst, src, valid))
    hinted = getattr(ptx, f"cp_async_{cfg.cache}_hint")
    return device(lambda i, dst, src, valid, policy, regs: hinted(dst, src, valid, policy))


def _no_landing(cfg, rows, row_bytes, pitch, unit, reg0):
    """The copies land by themselves: the pipeline's wait sees them."""
    def land(rows_in_tile, dst, regs):
        pass
    return device(land)


def _wait(wait_group):
    return device(lambda st, kt, off, ktiles: wait_group())
