"""INT4 packing: how INT4 operands are laid out in memory.

Packing: two signed 4-bit values per byte along K, element 2k in the low
nibble of byte k, element 2k+1 in the high nibble. An odd K is padded with a
zero nibble.

W4A16's weights (prepack_w4) are laid out otherwise: once, offline, in the
order its kernel's B fragments take them, with a scale per 128 k.
"""

from dataclasses import dataclass, field

import numpy as np


def pack_int4(x):
    """Integers in [-8, 7], shape (..., K) -> uint8, shape (..., ceil(K/2))."""
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.integer):
        raise TypeError(f"pack_int4 takes integers in [-8, 7], got dtype {x.dtype}")
    if x.size and (x.min() < -8 or x.max() > 7):
        raise ValueError(f"pack_int4: values must lie in [-8, 7], got [{x.min()}, {x.max()}]")
    if x.shape[-1] % 2:
        x = np.concatenate([x, np.zeros((*x.shape[:-1], 1), x.dtype)], axis=-1)
    nib = x.astype(np.uint8) & 0xF
    return np.ascontiguousarray(nib[..., 0::2] | (nib[..., 1::2] << 4))


def unpack_int4(p, k=None):
    """uint8 (..., ceil(K/2)) packed by pack_int4 -> int8 (..., K); K defaults
    to twice the packed width."""
    p = np.asarray(p)
    if p.dtype != np.uint8:
        raise TypeError(f"unpack_int4 takes packed uint8, got dtype {p.dtype}")
    k = 2 * p.shape[-1] if k is None else k
    if not 2 * p.shape[-1] - 1 <= k <= 2 * p.shape[-1]:
        raise ValueError(f"unpack_int4: k={k} does not fit {p.shape[-1]} packed bytes")
    nib = np.stack([p & 0xF, p >> 4], axis=-1).reshape(*p.shape[:-1], -1)[..., :k]
    return np.where(nib >= 8, nib.astype(np.int16) - 16, nib).astype(np.int8)


def pack_int4_kn(b):
    """Integers in [-8, 7], a K x N B of shape (..., K, N) -> uint16 of shape
    (..., ceil(K/4), N): the K x N INT4 layout, four consecutive k of one
    column per 16-bit unit (element 4j+q in bits 4q..4q+3 of unit j), which
    ldmatrix.trans turns into mma fragments. It is pack_int4 of B's transpose,
    read as 16-bit units and transposed back. K is padded with zeros."""
    b = np.asarray(b)
    pad = -b.shape[-2] % 4
    if pad:
        b = np.concatenate([b, np.zeros((*b.shape[:-2], pad, b.shape[-1]), b.dtype)], axis=-2)
    packed = pack_int4(np.swapaxes(b, -1, -2))            # (..., N, K/2) bytes
    return np.ascontiguousarray(np.swapaxes(packed.view(np.uint16), -1, -2))


def unpack_int4_kn(units, k=None):
    """uint16 (..., ceil(K/4), N) from pack_int4_kn -> int8 (..., K, N)."""
    units = np.asarray(units)
    if units.dtype != np.uint16:
        raise TypeError(f"unpack_int4_kn takes uint16 units, got dtype {units.dtype}")
    packed = np.ascontiguousarray(np.swapaxes(units, -1, -2)).view(np.uint8)
    k = 4 * units.shape[-2] if k is None else k
    if not 4 * units.shape[-2] - 3 <= k <= 4 * units.shape[-2]:
        raise ValueError(f"unpack_int4_kn: k={k} does not fit {units.shape[-2]} rows of units")
    return np.swapaxes(unpack_int4(packed)[..., :k], -1, -2)


#: K of one group of INT4 weights that share a scale (and a zero point) per column.
GROUP = 128


@dataclass(frozen=True, eq=False)
class PackedW4:
    """INT4 weights of an N x K nn.Linear layer laid out for W4A16
    (numgemm.gemm(x, w): x (..., K) float16 or bfloat16 times w's transpose),
    made once by prepack_w4. Host arrays, copied to each GPU once, on first
    use (device(), held by this object):

    words  (N/8, K/128, 32, 4) uint32: for column block c, group g and lane
           l = 4 r + t of a warp, the u4 weights of row 8 c + r, k from
           128 g + 32 t, 32 of them, in the order the kernel's mma.sync B
           fragments take them (ptx_asm/dequant_u4.ptx: in each run of 8 k,
           the even k in the low nibbles, the odd ones in the high);
    scales (K/128, N) uint16: each group's scale per column, as the bits of
           the activations' format;
    zeros  (K/128, N) uint8 or None: each group's zero point per column (u4
           weights mean u - z); None: signed weights, stored as u = s + 8.

    The wgmma kernel (numgemm/kernel/w4a16_wgmma.py) reads the same u4 in
    another order, wgmma_words(), made from words on first use: each GPU
    that runs both kernels holds both (a quarter of FP16's bytes each)."""
    words: np.ndarray
    scales: np.ndarray
    zeros: object
    n: int
    k: int
    precision: str                      # the activations' and C's format: "fp16" or "bf16"
    _on: dict = field(default_factory=dict, repr=False)
    _wgmma_on: dict = field(default_factory=dict, repr=False)
    _wgmma: list = field(default_factory=list, repr=False)

    @property
    def shape(self):
        """(N, K): the weight's, as nn.Linear holds it."""
        return self.n, self.k

    def device(self):
        """(words, scales, zeros) on the current GPU (zeros: no_zeros() where
        there are none), copied there on first use."""
        from numba import cuda

        def copies():
            words, scales = (cuda.to_device(np.ascontiguousarray(x)) for x in (self.words, self.scales))
            return words, scales, no_zeros() if self.zeros is None else cuda.to_device(self.zeros)
        return on_this_gpu(self._on, copies)

    def wgmma_words(self):
        """The weight's u4 as the wgmma kernel's A registers take them:
        (ceil(N/16), K/128, 2, 32, 4) uint32; for the 16-row block b, group
        G, half h and lane l = 4 g + t of a warp, four words of row
        16 b + 8 h + g, word j its k 128 G + 32 j + (0..31) of lane t: k step
        2 j + (i >> 1)'s k 2t, 2t + 1 (i even) or 2t + 8, 2t + 9 (i odd) in
        nibbles i and i + 4, the A fragment's registers in dequant_u4's order.
        Rows past N (N not a multiple of 16) are zeros. Host, made once."""
        if not self._wgmma:
            self._wgmma.append(wgmma_layout(unprepack_words(self.words)))
        return self._wgmma[0]

    def device_wgmma(self):
        """device()'s arrays with wgmma_words() in place of words, copied to
        the current GPU on first use."""
        from numba import cuda

        return on_this_gpu(self._wgmma_on, lambda: (cuda.to_device(self.wgmma_words()), *self.device()[1:]))


def unprepack_words(words):
    """prepack_w4's words read back as the (N, K) u4 they hold."""
    n8, groups = words.shape[:2]
    shifts = 4 * np.arange(8, dtype=np.uint32)
    nib = ((words[..., None] >> shifts) & 15).astype(np.uint8)        # (N/8, G, 32 lanes, 4 words, 8)
    pairs = np.stack([nib[..., :4], nib[..., 4:]], axis=-1)            # nibble i: even k, i + 4: odd k
    lanes = pairs.reshape(n8, groups, 8, 4, 32)                        # (block, group, row r, t, 32 k)
    return lanes.transpose(0, 2, 1, 3, 4).reshape(8 * n8, groups * GROUP)


def wgmma_layout(u):
    """(N, K) u4 -> PackedW4.wgmma_words()'s layout."""
    n, k = u.shape
    if n % 16:
        u = np.concatenate([u, np.zeros((16 - n % 16, k), u.dtype)])
    # k of a group = 32 j + 16 sp + 8 e + 2 t + lh: word j, register i = 2 sp + e, t, low or high half
    v = u.reshape(-1, 2, 8, k // GROUP, 4, 2, 2, 4, 2)                  # (b, h, g, G, j, sp, e, t, lh)
    v = v.transpose(0, 3, 1, 2, 7, 4, 5, 6, 8).astype(np.uint32)       # (b, G, h, g, t, j, sp, e, lh)
    v = v.reshape(*v.shape[:6], 4, 2)
    words = np.zeros(v.shape[:6], np.uint32)
    for i in range(4):
        words |= (v[..., i, 0] << (4 * i)) | (v[..., i, 1] << (4 * i + 16))
    return np.ascontiguousarray(words.reshape(words.shape[0], k // GROUP, 2, 32, 4))


def on_this_gpu(held, make):
    """held's value for the current CUDA context (made where there is none
    yet), make() on first use there."""
    from numba import cuda

    from .driver import current_context
    cuda.current_context()
    key = current_context()
    if key not in held:
        held[key] = make()
    return held[key]


_ONE_BYTE = {}


def no_zeros():
    """A one-byte device array on the current GPU, for W4A16's zero-point
    argument where a weight has none (the kernel then does not read it)."""
    from numba import cuda

    return on_this_gpu(_ONE_BYTE, lambda: cuda.device_array((1, 1), np.uint8))


def prepack_w4(weight, scales, zeros=None, precision=None):
    """INT4 weights (N, K) with a scale per 128 k per row (N, K/128), and
    optional zero points (N, K/128), laid out once for W4A16 (PackedW4).

    weight: integers, signed in [-8, 7] where zeros is None (w = s * scale),
    else unsigned in [0, 15] (w = (u - z) * scale), N a multiple of 8 and K
    of 128. scales: float16 (FP16 activations), bfloat16 (torch's or
    ml_dtypes', or float32 with precision="bf16") or float32 (rounded to the
    activations' format). A torch tensor is read on the host."""
    weight, scales = _host(weight, "weight"), _host(scales, "scales")
    from .precision import BY_DTYPE
    from .precision import W4A16_ACTIVATIONS as ACTIVATIONS
    precision = precision or BY_DTYPE.get(str(scales.dtype).removeprefix("torch."), ACTIVATIONS[0])
    if precision not in ACTIVATIONS:
        raise ValueError(f"prepack_w4: precision must be one of {', '.join(map(repr, ACTIVATIONS))}, "
                         f"got {precision!r}")
    if weight.ndim != 2 or not np.issubdtype(weight.dtype, np.integer):
        raise TypeError(f"prepack_w4: weight must be a 2-D integer array (N, K), got {weight.ndim}-D {weight.dtype}")
    n, k = weight.shape
    if n % 8 or k % GROUP or not n or not k:
        raise ValueError(f"prepack_w4: weight (N, K) needs N a positive multiple of 8 and K of {GROUP} "
                         f"(its groups), got ({n}, {k})")
    groups = k // GROUP
    lo, hi = (-8, 7) if zeros is None else (0, 15)
    if weight.min() < lo or weight.max() > hi:
        raise ValueError(f"prepack_w4: weight values must lie in [{lo}, {hi}] "
                         f"({'signed, no zeros' if zeros is None else 'unsigned, with zeros'}), "
                         f"got [{weight.min()}, {weight.max()}]")
    if scales.shape != (n, groups):
        raise ValueError(f"prepack_w4: scales must have shape (N, K/{GROUP}) = {(n, groups)}, got {scales.shape}")
    if zeros is not None:
        zeros = _host(zeros, "zeros")
        if zeros.shape != (n, groups) or not np.issubdtype(zeros.dtype, np.integer):
            raise ValueError(f"prepack_w4: zeros must be integers of shape (N, K/{GROUP}) = {(n, groups)}, "
                             f"got {zeros.dtype} {zeros.shape}")
        if zeros.min() < 0 or zeros.max() > 15:
            raise ValueError(f"prepack_w4: zeros must lie in [0, 15], got [{zeros.min()}, {zeros.max()}]")
        zeros = np.ascontiguousarray(zeros.T.astype(np.uint8))
    u = (weight + (8 if zeros is None else 0)).astype(np.uint8)
    # (N/8, 8 rows, groups, 4 t, 4 words, 4 pairs, 2: even k, odd k): nibble i of a word is pair i's
    # even k, nibble i + 4 its odd k
    u = u.reshape(n // 8, 8, groups, 4, 4, 4, 2)
    words = np.zeros(u.shape[:5], np.uint32)
    for i in range(4):
        words |= u[..., i, 0].astype(np.uint32) << (4 * i)
        words |= u[..., i, 1].astype(np.uint32) << (4 * i + 16)
    words = np.ascontiguousarray(words.transpose(0, 2, 1, 3, 4).reshape(n // 8, groups, 32, 4))
    bits = _scale_bits(scales, precision)
    return PackedW4(words, np.ascontiguousarray(bits.T), zeros, n, k, precision)


def dequantize_w4(weight, scales, zeros=None, rounded=None):
    """The float64 N x K weight that prepack_w4's arguments mean: (w - z)
    times its group's scale (the reference W4A16 is checked against; scales
    as the kernel reads them: rounded to the activations' format first).
    rounded: a precision ("fp16", "bf16"), each weight rounded to its format
    once, as the wgmma kernel multiplies them ((w - z) * s is exact in
    float32: a 4-bit integer times a 16-bit scale)."""
    weight, scales = _host(weight, "weight").astype(np.float64), _host(scales, "scales")
    if scales.dtype == np.uint16:                   # bfloat16's bits
        scales = (scales.astype(np.uint32) << 16).view(np.float32)
    s = np.repeat(np.asarray(scales, np.float64), GROUP, axis=1)
    z = 0.0 if zeros is None else np.repeat(_host(zeros, "zeros").astype(np.float64), GROUP, axis=1)
    w = (weight - z) * s
    if rounded is None:
        return w
    from .precision import PRECISIONS
    prec = PRECISIONS[rounded]
    return np.asarray(prec.decode(prec.encode(w.astype(np.float32))), np.float64)


def _scale_bits(scales, precision):
    """scales as the 16-bit patterns of the activations' format (a format
    NumPy lacks, bfloat16: its bits, as given or rounded to it)."""
    from .precision import PRECISIONS
    prec = PRECISIONS[precision]
    if scales.dtype == np.uint16 or str(scales.dtype) in prec.dtype_aliases:
        if not prec.encoding:
            raise TypeError(f"prepack_w4: uint16 scales are a format's bits; {prec.name} takes "
                            f"{np.dtype(prec.host_dtype).name} or float32 scales")
        return scales.view(np.uint16)
    return prec.encode(scales.astype(np.float32)).view(np.uint16)


def _host(x, name):
    """x as a NumPy array: a torch tensor copied to the host (bfloat16 as its bits)."""
    if type(x).__module__.startswith("torch"):
        import torch
        x = x.detach().cpu()
        return x.view(torch.int16).numpy().view(np.uint16) if x.dtype == torch.bfloat16 else x.numpy()
    if hasattr(x, "__cuda_array_interface__"):
        raise TypeError(f"prepack_w4: {name} must be on the host (NumPy) or a torch tensor, got {type(x).__name__}")
    return np.asarray(x)
