"""Prepared launches: a Launch is one kernel's launch packed once for the
driver; calling it is one cuLaunchKernelEx. Its arguments that are device
addresses (Address) can be moved in place, which is how a prepared call
(numgemm.repeats) serves other arrays.
"""

import ctypes

from . import driver


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
    (slots) as soon as a launch returns."""

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

    def slots(self, address):
        """The arguments holding `address`, in this launch and those after
        it: setting their .value moves it."""
        own = [self._values[i] for i in self._addresses if self._values[i].value == address]
        return own + (self.then.slots(address) if self.then is not None else [])
