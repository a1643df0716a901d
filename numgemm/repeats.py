"""The calls gemm() repeats: a whole call prepared once (its kernel chosen
and built, its workspaces allocated, its launches packed: launches.Launch)
and repeated on any arrays of the same kind, shapes, strides, dtypes and
alignment on the same stream. A new call moves the operands' and C's
addresses into the packed arguments and, for TMA kernels, swaps in the
tensor maps of the new addresses. That is what a model's layers do, call
after call, with activations at new addresses.
"""

import collections

from . import driver, frameworks, tensormap


class Repeat:
    """A gemm() call prepared once, for arrays of one description (see
    api._call): `launch` (its first Launch), the caller's addresses it was
    last bound to (a, b, and C), the tensor maps it reads of them, for a
    call that returns a new C that C's shape, dtype and alignment (`new_c`),
    and the framework and device whose allocator serves it. It holds no
    caller's array: each call binds the addresses it is given.

    `stateful`: it reads device state of numgemm's own (tensor maps,
    workspaces, padded copies). Such a call captured into a CUDA graph
    reads maps that the graph writes, and its state is kept for as long as
    the process lives (tensormap.GRAPHS_HOLD): a graph outlives any cache."""

    def __init__(self, launch, addresses, maps, new_c=None, framework=("numba", None), stateful=True):
        self.launch, self.bound, self.maps, self.new_c = launch, addresses, list(maps), new_c
        self.framework, self.stateful = framework, stateful
        self.captured = any(m.captured for m in self.maps)      # maps that only a graph's replay writes
        # Each array's own arguments, and whether a tensor map encodes it: a
        # call that moves only arrays no map encodes (C, most often) just
        # sets those arguments.
        self._slots = [launch.slots(p) if p else [] for p in addresses]
        mapped = {spec[0] for m in self.maps for spec in m.key[1:]}
        self._mapped = [bool(p) and p in mapped for p in addresses]
        # The maps' own arguments, and the maps of recent addresses of the
        # mapped arrays (a model's activations come back to a few
        # addresses): the Maps themselves, which own their memory, so a
        # remembered one stays what it encodes however many others are made.
        self._map_slots = [launch.slots(m.address) for m in self.maps]
        self._known = collections.OrderedDict()
        if not self.captured:
            self._known[tuple(p for p, mapped in zip(addresses, self._mapped) if mapped)] = self.maps

    def __call__(self, addresses, stream):
        """Launch on stream (a raw handle) with the arrays at `addresses`."""
        if self.captured or addresses != self.bound:
            self._bind(addresses, stream)
        if self.stateful and driver.capturing(stream):
            tensormap.GRAPHS_HOLD.append((self.launch, tuple(self.maps)))
        self.launch(stream)

    def _bind(self, addresses, stream):
        moved = [i for i, (old, new) in enumerate(zip(self.bound, addresses)) if old != new]
        if self.captured or any(self._mapped[i] for i in moved):
            self._move_maps(addresses, moved, stream)
        for i in moved:
            for slot in self._slots[i]:
                slot.value = addresses[i]
        self.bound = addresses

    def _move_maps(self, addresses, moved, stream):
        """Swap in the maps of the mapped arrays at `addresses`: remembered
        ones, else tensormap.moved's (maps a graph's capture writes are
        used by that capture only, never remembered)."""
        seen = tuple(p for p, mapped in zip(addresses, self._mapped) if mapped)
        maps = self._known.get(seen)
        if maps is None:
            moves = {self.bound[i]: addresses[i] for i in moved}
            alloc = frameworks.Allocator(*self.framework, stream)
            maps = [tensormap.moved(m, moves, stream, alloc) for m in self.maps]   # all, before any change
            if not any(m.captured for m in maps):
                self._known[seen] = maps
                if len(self._known) > _KNOWN:
                    self._known.popitem(last=False)
        else:
            self._known.move_to_end(seen)
        for slots, m in zip(self._map_slots, maps):
            for slot in slots:
                slot.value = m.address
        self.maps = maps
        self.captured = any(m.captured for m in maps)


#: Maps of recent addresses a Repeat keeps (each holds 256 bytes of device memory alive).
_KNOWN = 16
