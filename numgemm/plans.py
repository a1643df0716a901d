"""GemmPlan: a checked GEMM with its kernel chosen and built, its device
state made and its launches packed (launches.Launch); make() builds one
from operands that checks.checked() has passed."""

from dataclasses import dataclass, field

import numpy as np
from numba import cuda

from . import checks, driver, frameworks, registry, tensormap, tuning, views
from .config import KernelConfig
from .launches import Address, Launch


class NotOnThisGPU(RuntimeError):
    """A kernel numgemm knows not to launch on this GPU (it would end the
    process's CUDA context)."""


@dataclass
class GemmPlan:
    """A validated GEMM with its kernel compiled and its arguments prepared:
    launch() enqueues the kernel with none of numba-cuda's per-launch argument
    handling (the bench times kernels this way).

    It owns every piece of device state its launch reads besides the
    operands and C: tensor maps, workspaces, flags, padded rows. No other
    call rewrites them, so a kept plan stays right however many other GEMMs
    run between its launches; its own launches, sharing that state, must
    not overlap (on two streams at once). The operands and C are the
    caller's, held as pointers: a plan whose arrays were freed must not be
    launched."""

    cfg: KernelConfig
    args: tuple
    grid: tuple
    out: object
    host_out: bool
    stream: object                  # a raw handle, or None: the framework's current stream at each launch
    workspace: object = None        # split-K: the (batch * split_k, M, N) partial sums; stream_k: a slot a CTA
    counts: object = None           # split_sum="last": a tile's arrivals (batch x tiles, int32, zeroed);
                                    # stream_k: a flag a slot's consumer warp (zeroed)
    widened: object = None          # unpack="pass": (the s4 operand widened first: B, or with swap A; the
                                    # workspace its widening kernel fills)
    maps: tuple = ()                # copy="tma", c_tma: the tensormap.Maps its kernel reads, its own
    pads: tuple = ()                # (operand, its copy in padded rows): copied by every launch, first
    owned: tuple = ()               # the epilogue's vectors of the plan's own (a scale given as a number)
    framework: str = "numba"        # of the result: whose current stream a following plan launches on
    device: object = None           # torch's device index, for its current stream
    first_stream: int = 0           # the stream the plan was made on

    def __post_init__(self):
        from .kernel import (  # the builder loads on the first plan
            argtypes,
            device_function,
            helper_function,
            launch_args,
        )
        from .kernel.pad_rows import PadRows
        from .kernel.split_k import SplitSum
        from .kernel.widen_pass import WidenPass

        device = cuda.get_current_device().id
        self.cufunc = device_function(self.cfg, device)     # the kernel cache's
        allow_dynamic_shared(self.cufunc, self.cfg.smem_bytes)
        stream, then = self.first_stream, None
        self._last = stream                              # the stream result() waits for
        self._held = False                               # its state kept for a graph (launch())
        C = self.args[2]
        if self.counts is not None:                      # split-K summed by each tile's last block; stream-K
            self.args = (*self.args[:2], (self.workspace, C, self.counts), *self.args[3:])
        elif self.workspace is not None:                 # split-K: the partial sums, then their sum
            spec = SplitSum.of(self.cfg)
            shape = (C[0] if isinstance(C, tuple) else C).shape        # C, or (C, the epilogue's vectors)
            then = Launch(helper_function(spec, device).handle, spec.grid(*shape), spec.threads, 0,
                           stream, launch_args(spec.argtypes(), (self.workspace, C, self.cfg.split_k)), spec.name)
            self.args = (*self.args[:2], self.workspace, *self.args[3:])
        self.prepared = Launch(self.cufunc.handle, self.grid, self.cfg.threads, self.cfg.smem_bytes, stream,
                                launch_args(argtypes(self.cfg), self.args), self.cfg.name, self.cfg.cluster,
                                then, (self.workspace, self.counts, self.maps, self.owned))
        if self.widened is not None:                     # unpack="pass": an operand widened first, every launch
            spec, (B, W) = WidenPass(), self.widened
            self.prepared = Launch(helper_function(spec, device).handle, spec.grid(B), spec.threads, 0, stream,
                                    launch_args(spec.argtypes(), (B, W)), spec.name, then=self.prepared, keep=W)
        for src, dst in reversed(self.pads):             # rows padded to 16 bytes, before all else
            spec = PadRows()
            self.prepared = Launch(helper_function(spec, device).handle, spec.grid(dst), spec.threads, 0, stream,
                                    launch_args(spec.argtypes(), (src, dst)), spec.name, then=self.prepared,
                                    keep=dst)

    @property
    def stateful(self):
        """Whether its launch reads device state of numgemm's own."""
        return bool(self.maps or self.pads or self.owned) or any(x is not None for x in (self.workspace, self.counts, self.widened))

    def launch(self, stream=None):
        """Enqueue the GEMM: on stream (a raw handle or a stream object), else
        on the plan's own, else (a plan made with stream=None) on its
        framework's current stream now, so that a launch inside a CUDA
        graph's capture is captured. A captured launch reads the plan's
        state when the graph replays: that state is then kept for the life
        of the process (tensormap.GRAPHS_HOLD), the plan's arrays are the
        caller's to keep."""
        if stream is not None:
            stream = frameworks.handle(stream)
        elif self.stream is not None:
            stream = self.stream
        else:
            stream = frameworks.current_stream(self.framework, self.device)
        if not self._held and self.stateful and driver.capturing(stream):
            tensormap.GRAPHS_HOLD.append(self.prepared)
            self._held = True
        self.prepared(stream)
        self._last = stream

    def result(self):
        """C: the output array, or for NumPy inputs a NumPy copy (after the last launch)."""
        if not self.host_out:
            return self.out
        from cuda.bindings import driver as drv

        frameworks.check(drv.cuStreamSynchronize(drv.CUstream(self._last)))
        return self.out.copy_to_host()


def make(a, b, shape, preset, out, stream):
    """The GemmPlan of operands that checks.checked() has passed (api.plan_gemm, api.gemm)."""
    host = isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
    precision, (batch, M, N, K), b_units = shape.precision, shape.bmnk, shape.b_units
    if not cuda.is_available():
        raise RuntimeError("numgemm.gemm needs a CUDA GPU and driver; none is available")
    fw = frameworks.of(a, b, out)       # whose stream and allocator (out=None: the result's framework)
    device = frameworks.device_of(fw, a, b, out)
    follow = stream is None             # launch on the framework's current stream, whichever it is then
    stream = frameworks.handle(stream) if stream is not None else frameworks.current_stream(fw, device)
    alloc = frameworks.Allocator(fw, device, stream)
    a, b = views.device(a, "a"), views.device(b, "b")
    a3 = views.unit_strides(a if a.ndim == 3 else views.as_batch(a), "kn")
    b3 = b if b.ndim == 3 else views.as_batch(b)
    layout = views.layout(b3, "b", views.wanted_layout(precision, shape.cfg, b_units))
    b3 = views.unit_strides(b3, layout)
    views.row_major(a3, "a")
    if shape.prec.b_units is not None and (layout == "kn") != b_units:
        raise ValueError("INT4 b is either the transpose of a packed N x K array (uint8, "
                         "b = pack_int4(bt).T) or K x N uint16 units (pack_int4_kn(b)); "
                         f"got {checks.dtype_name(b)} laid out {layout.upper()}")

    dev = cuda.get_current_device()
    cc = tuple(dev.compute_capability)
    cfg = kernel_for(shape.cfg, precision, layout, preset, (M, N, K), cc)
    if shape.cfg is None:               # gemm()'s choice, storing C as asked, with the epilogue asked for
        cfg = checks.with_c_dtype(checks.with_epilogue(cfg, shape.epilogue, True), shape.c_dtype, chosen=True)
    if batch * cfg.split_k > 65535:         # grid.z: the batch times the split
        if shape.cfg is not None:
            raise ValueError(f"kernel {cfg.name} splits K {cfg.split_k} ways: batch {batch} x {cfg.split_k} is "
                             "more than the grid allows (65535)")
        cfg = cfg.replace(split_k=1, split_sum="kernel")
    why = cfg.unsupported(cc)
    if why:
        raise NotOnThisGPU(why)
    # The kernel reads rows as whole, aligned 16-byte copies: where they are not, padded copies, made
    # by the plan's launch itself (pads: (operand, copy) pairs).
    (A, pad_a), (B, pad_b) = (views.aligned_rows(views.as_bytes(x), alloc)
                              for x in (a3, b3 if layout == "kn" else views.transposed(b3)))
    pads = tuple(p for p in (pad_a, pad_b) if p is not None)
    encoding = shape.prec.encoding_of(cfg.c_dtype)          # a C of bfloat16: its bits
    C, host_out, result = views.output(out, a.ndim == 3 or b.ndim == 3, batch, M, N, cfg.c_dtype, host, alloc,
                                       encoding)
    c_aligned = int(C.device_ctypes_pointer.value % 32 == 0
                    and all(s % 32 == 0 for s in C.strides[:2]))
    if cfg.c_dtype == np.float16:       # halves stored as the 16-bit patterns the kernels pack
        C = views.as_bits(C)
    from .kernel import HOST

    vectors, owned = views.vectors(shape.vectors, stream)
    p = Parts(cfg, A, B, C, batch, M, N, c_aligned, dev.MULTIPROCESSOR_COUNT, alloc, stream, vectors)
    KB, k_rows = A.shape[2], B.shape[1] if layout == "kn" else K      # bytes of A's rows; B's k rows
    for step in HOST:                   # each feature's device state and views: its own module's
        step(p)
    return GemmPlan(cfg, (p.A, p.B, p.C, p.kM, p.kN, k_rows, KB, p.B.shape[2], p.c_aligned, p.ab_maps),
                    (p.tiles(), 1, batch * cfg.split_k), result, host_out, None if follow else stream,
                    workspace=p.work, counts=p.counts, widened=p.widened, maps=tuple(p.maps), pads=pads,
                    owned=owned, framework=fw, device=device, first_stream=stream)


@dataclass
class Parts:
    """What a plan's launch reads, as make() hands it to each feature's host
    step (numgemm.kernel.HOST) in turn: the kernel's A and B sides, C, the
    kernel's output shape kM x kN (swap turns it), the c_aligned argument,
    and the plan's own state: tensor maps, a workspace, counts or flags, a
    widened operand. Its methods are the plan's tools a step may use, so
    that the kernel's modules import nothing of the host: memory from the
    framework's allocator on the plan's stream, tensor maps, views."""
    cfg: KernelConfig
    A: object
    B: object
    C: object
    batch: int
    M: int
    N: int
    c_aligned: object
    sms: int
    alloc: object                   # a frameworks.Allocator
    stream: int
    vectors: tuple = (None,) * 3    # the epilogue's scale_a, scale_b, bias: 1-D Numba views, or None
    maps: list = field(default_factory=list)
    ab_maps: object = 0             # copy="tma": the address of A's and B's tensor maps
    work: object = None
    counts: object = None
    widened: object = None

    def __post_init__(self):
        self.kM, self.kN = self.M, self.N

    def tiles(self):
        """The kernel's grid.x: its blocks over kM x kN (persistent: fewer)."""
        return self.cfg.grid_blocks(self.kM, self.kN, self.sms)

    @property
    def sums(self):
        """A workspace's partial sums' dtype."""
        return np.float32 if self.cfg.acc == "f32" else np.int32

    def new(self, shape, dtype):
        """A device array of the plan's own (uninitialised)."""
        return self.alloc.empty(shape, dtype)[1]

    def zeros(self, shape, dtype):
        return self.alloc.zeros(shape, dtype)

    def add_maps(self, specs):
        """The address of new tensor maps of specs ((array, box rows, box bytes), at most two:
        tensormap.maps), held by the plan."""
        self.maps.append(tensormap.maps(specs, self.stream, self.alloc))
        return Address(self.maps[-1].address)

    @staticmethod
    def view(x, shape, strides, dtype):
        return views.view(x, shape, strides, dtype)

    @staticmethod
    def bytes_of(x):
        """A (batch, rows, bytes) uint8 view of x."""
        return views.as_bytes(x)


# How to pass B in each layout (a Numba device array's .T is a transposed copy, not a view).
_LAYOUT_HINT = {"nk": "b = bt.T for a row-major N x K array bt; numgemm.transposed(bt) for a Numba "
                      "device array, whose .T copies",
                "kn": "b as a row-major K x N array"}


def kernel_for(cfg, precision, layout, preset, mnk, cc):
    """The kernel to launch: cfg (named by the caller and checked by checks.checked())
    where it fits B's layout and K, else the choice for this shape on this GPU
    (numgemm.tuning: the tuned winners, else the preset's default)."""
    k = mnk[2]
    if cfg is None:
        try:
            return tuning.choose(precision, layout, *mnk, cc, preset)
        except ValueError as e:
            other = "kn" if layout == "nk" else "nk"
            raise ValueError(f"{e} ({_LAYOUT_HINT[other]})") from None
    if cfg.b_layout != layout:
        raise ValueError(f"kernel {cfg.name} takes B as {cfg.b_layout.upper()} "
                         f"({_LAYOUT_HINT[cfg.b_layout]}); "
                         f"this b is {layout.upper()}")
    if cfg.max_k is not None and k > cfg.max_k:
        exact = cfg.exact_twin
        twin = next((n for n, c in registry.REGISTRY[preset].items() if c == exact), exact.name)
        raise ValueError(f"kernel {cfg.name} widens s4 to 16 x s8 and is exact for K <= {cfg.max_k}; "
                         f"K is {k} ({twin} widens exactly)")
    return cfg


def allow_dynamic_shared(cufunc, nbytes):
    """Kernels may use more than 48 KB of dynamic shared memory only after
    opting in; numba-cuda has no API for it, the driver has."""
    if nbytes <= 48 * 1024:
        return
    from numba.cuda.cudadrv.driver import binding, driver

    attr = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    driver.cuKernelSetAttribute(attr, nbytes, cufunc.handle, cufunc.device.id)
