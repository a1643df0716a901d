"""Prepared launches, and the calls gemm() repeats through them.

A Launch is one kernel's launch packed once for the driver; calling it is
one cuLaunchKernelEx. A Repeat is a whole gemm() call prepared once (its
kernel chosen and built, its workspaces allocated, its launches packed) and
repeated on any arrays of the same kind, shapes, strides, dtypes and
alignment on the same stream: a new call moves the operands' and C's
addresses into the packed arguments and, for TMA kernels, swaps in the
tensor maps of the new addresses. That is what a model's layers do, call
after call, with activations at new addresses.
"""

import collections
import ctypes

from . import driver, frameworks, tensormap


class Address(int):
    """An argument that is a device address (an array's data, a tensor
    map's): what a Repeat moves when a call brings other arrays."""


class Launch:
    """One kernel launch prepared for the driver: its arguments packed once
    as the kernel's parameter array (kernel.launch_args), its grid, block,
    dynamic shared memory, stream and (a cluster kernel) cluster dimensions
    in one CUlaunchConfig; calling it is one cuLaunchKernelEx, then the
    launch `then` where there is one (split-K's sum; after a padding or
    widening pass, the GEMM). It holds raw values only, and `keep`: the
    device state it reads that is numgemm's (tensor maps, workspaces,
    flags, padded copies), alive as long as it is; never a caller's array.
    The driver copies the parameters at each launch, so they may be moved
    (rebind) as soon as a launch returns."""

    def __init__(self, handle, grid, block, smem, stream, args, name, cluster=1, then=None, keep=None):
        self._values = [ctypes.c_int64(v) if isinstance(v, int) else v for v in args]
        self._addresses = [i for i, v in enumerate(args) if isinstance(v, Address)]
        self._params = (ctypes.c_void_p * len(self._values))(*map(ctypes.addressof, self._values))
        c = self._config = driver.LaunchConfig()
        c.grid[:] = grid                        # in blocks, clusters or not
        c.block[:] = block, 1, 1
        c.smem, c.stream, self._stream = smem, stream or None, stream
        if cluster > 1:
            self._cluster = driver.LaunchAttribute(id=driver.CLUSTER_DIMENSION)
            self._cluster.value[:3] = cluster, 1, 1
            c.attrs, c.num_attrs = ctypes.pointer(self._cluster), 1
        self._args = (ctypes.byref(c), ctypes.c_void_p(int(handle)), self._params, None)
        self.name, self.then, self.keep = name, then, keep

    def __call__(self, stream=None):
        """Launch on `stream` (a raw handle; None: the one it was prepared for)."""
        if stream is not None and stream != self._stream:
            self._config.stream, self._stream = stream or None, stream
        err = driver.calls.cuLaunchKernelEx(*self._args)
        if err:
            raise RuntimeError(f"launching {self.name} failed: {driver.error_name(err)}")
        if self.then is not None:
            self.then(stream)

    def addresses(self):
        """The device addresses among its arguments (arrays' data, tensor
        maps), this launch's and those after it."""
        own = [self._values[i].value for i in self._addresses]
        return own + (self.then.addresses() if self.then is not None else [])

    def rebind(self, moves):
        """Move each address argument found in `moves` (old -> new), in this
        launch and those after it."""
        for i in self._addresses:
            new = moves.get(self._values[i].value)
            if new is not None:
                self._values[i].value = new
        if self.then is not None:
            self.then.rebind(moves)

    def slots(self, address):
        """The arguments holding `address`, in this launch and those after
        it: setting their .value moves it."""
        own = [self._values[i] for i in self._addresses if self._values[i].value == address]
        return own + (self.then.slots(address) if self.then is not None else [])


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
