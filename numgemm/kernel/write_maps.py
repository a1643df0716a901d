"""Tensor maps written by a kernel, for calls captured into a CUDA graph.

Outside a capture numgemm writes a call's tensor maps once, by a copy from
pinned memory (tensormap). A capture cannot hold that copy: nothing runs
while a graph is captured, and a host buffer it read would have to outlive
the graph. This kernel carries the 256 bytes as its parameters, which a
graph's kernel node keeps by value, so every replay writes them again just
before the GEMM that reads them.
"""

from dataclasses import dataclass

from numba import cuda, types

from .regs import u64

WORDS = 32                  # 256 bytes: A's and B's maps (or C's)


@dataclass(frozen=True)
class WriteMaps:
    """The kernel as numgemm's kernel cache keys it (cache.key reads describe())."""

    threads = WORDS

    @property
    def name(self):
        return "write_maps"

    def describe(self):
        return {"kernel": self.name}

    def argtypes(self):
        """dst: 32 words of device memory; words: their values."""
        return types.Array(u64, 1, "C"), types.UniTuple(u64, WORDS)

    def function(self):
        return _write_maps

    def grid(self, dst=None):
        return 1, 1, 1


def _write_maps(dst, words):
    i = cuda.threadIdx.x
    dst[i] = words[i]
