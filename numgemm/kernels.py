"""The GEMM kernel skeleton, written once, with the warp-level routine swapped.

A kernel computes C[z] = A[z] @ op(B[z]) for one output tile per block:

    grid.x walks the output tiles (grouped by KernelConfig.raster for L2
    reuse), grid.z the batch. Each k-tile of A and B travels global -> shared
    through a KernelConfig.stages-deep cp.async pipeline (16-byte copies,
    zero-filled past the matrix edges, so any M, N, K works; INT4 with
    unpack="tile" instead loads each k-tile into registers one tile ahead
    and stores it widened to s8). Each warp then runs the warp-level routine
    over its warp tile:

      op="mma"  ldmatrix + mma.sync from ptx_asm/ (numgemm.primitives), the
                accumulators in registers, stored straight to C;
      op="wmma" WMMA load/mma/store from baselines/, with edge tiles staged
                through shared memory (a WMMA fragment's layout is opaque).

Everything else (tiling, pipeline, loaders, rasterization) is shared, so
a WMMA kernel and its mma twin differ in the warp-level routine alone.

The kernel sees every operand as bytes: A is (batch, M, K bytes), B is
(batch, N, K bytes) or (batch, K, N bytes), with any row pitch that is a
multiple of 16 bytes. Fragment arrays are indexed only by loops with constant
trip counts, so LLVM unrolls them into registers.
"""

import functools
from typing import NamedTuple

from llvmlite import ir
from numba import cuda, types
from numba.cuda.extending import intrinsic

from . import primitives as P
from .config import SWIZZLE_BYTES, KernelConfig, swizzled_offset
from .inspect import build
from .toolchain import parse_target, target_name

u8, u32, u64, i32 = types.uint8, types.uint32, types.uint64, types.int32
_ACC = {"f32": types.float32, "s32": types.int32, "f16": types.uint32}
_OUT = {"f32": types.float32, "s32": types.int32, "f16": types.uint16}   # f16 stored as bits


def argtypes(cfg):
    """Numba types of the kernel's arguments: A, B as bytes (dp4a: 32-bit words);
    see gemm_kernel."""
    arr = lambda t: types.Array(t, 3, "A")  # noqa: E731 - any strides
    ab = u32 if cfg.op == "dp4a" else u8
    # The last: the global address of A's and B's tensor maps (copy="tma"), else 0.
    return (arr(ab), arr(ab), arr(_OUT[cfg.acc]), i32, i32, i32, i32, i32, i32, u64)


def _device(fn):
    return cuda.jit(device=True, inline="always")(fn)


_swizzled = _device(swizzled_offset)


@intrinsic
def _divmod32(typingctx, a, b):
    """(a // b, a % b) in unsigned 32-bit arithmetic. Numba widens integer
    arithmetic to 64 bits, and a 64-bit division by a run-time value is a
    called routine."""
    def codegen(context, builder, sig, args):
        x, y = (builder.trunc(v, ir.IntType(32)) if v.type.width > 32 else v for v in args)
        return context.make_tuple(builder, sig.return_type, [builder.udiv(x, y), builder.urem(x, y)])
    return types.UniTuple(u32, 2)(a, b), codegen


@intrinsic
def _sar8(typingctx, v):
    """v >> 8 for an int32, in 32 bits (Numba would widen it to 64)."""
    def codegen(context, builder, sig, args):
        return builder.ashr(args[0], ir.Constant(args[0].type, 8))
    return v(v), codegen


# --- tuples <-> flat register arrays ---------------------------------------------
# Fragments live in flat per-thread arrays; the routines take and return tuples.

def _getter(n):
    if n == 1:
        return _device(lambda a, i: a[i])
    if n == 2:
        return _device(lambda a, i: (a[i], a[i + 1]))
    return _device(lambda a, i: (a[i], a[i + 1], a[i + 2], a[i + 3]))


def _setter(n):
    if n == 1:
        def put(a, i, v):
            a[i] = v
    elif n == 2:
        def put(a, i, v):
            a[i] = v[0]
            a[i + 1] = v[1]
    else:
        def put(a, i, v):
            a[i] = v[0]
            a[i + 1] = v[1]
            a[i + 2] = v[2]
            a[i + 3] = v[3]
    return _device(put)


def _zeroed(n, dtype):
    """A device function returning a zeroed per-thread array of n accumulators."""
    def init():
        acc = cuda.local.array(n, dtype)
        for i in range(n):
            acc[i] = 0
        return acc
    return _device(init)


def _fragments(n_a, n_b):
    """A device function returning per-thread arrays for n_a A and n_b B
    fragment registers (all reg_buffers sets)."""
    def frags():
        return cuda.local.array(n_a, u32), cuda.local.array(n_b, u32)
    return _device(frags)


# --- shared-memory words, element by element (the "manual pack" loaders) ----------

@_device
def _ld8(addr):
    """The byte at a .shared address (dynamic shared memory starts at its base)."""
    sm = cuda.shared.array(0, u8)
    return sm[addr - P.shared_addr(sm, 0)]


@_device
def _ld16(addr):
    sm = cuda.shared.array(0, types.uint16)
    return sm[(addr - P.shared_addr(sm, 0)) >> 1]


def _packed_word(cfg):
    """A 32-bit fragment register loaded element by element and packed: two
    16-bit elements with mov.b32 (fp16), four bytes with prmt (int8, int4)."""
    ptx = P.routines(cfg.linkage)
    if cfg.precision == "fp16":
        pack = ptx.pack_b16x2
        return _device(lambda addr: pack(_ld16(addr), _ld16(addr + 2)))
    pack = ptx.pack_b8x4
    return _device(lambda addr: pack((_ld8(addr), _ld8(addr + 1), _ld8(addr + 2), _ld8(addr + 3))))


# --- global -> shared ------------------------------------------------------------

def _copier(cfg, unit=16):
    """One 16-byte cp.async with the config's cache operator and L2 policy, or
    (unit=2) one 2-byte ld.global + st.shared."""
    ptx = P.routines(cfg.linkage)
    if unit == 2:
        scalar = ptx.copy_b16
        return _device(lambda dst, src, valid, policy: scalar(dst, src, valid))
    if cfg.evict == "none":
        plain = getattr(ptx, f"cp_async_{cfg.cache}")
        return _device(lambda dst, src, valid, policy: plain(dst, src, valid))
    hinted = getattr(ptx, f"cp_async_{cfg.cache}_hint")
    return _device(lambda dst, src, valid, policy: hinted(dst, src, valid, policy))


def _tile_loader(cfg, rows, row_bytes, pitch, unit=16, reg0=0):
    """(setup, issue, land, registers) for copying a rows x row_bytes tile into shared memory.

    Each thread owns one unit-byte column of the tile (16: cp.async; 2: the
    scalar ldg16 loader) and every (copiers / per_row)-th row, so its source
    pointer is set up once and advanced by the caller, and a copy costs a
    compare, a 64-bit add, a 64-bit select (zfill_src="base") and the
    LDGSTS. Rows at or past rows_left and columns past the matrix (col_ok = 0)
    are zero-filled, so a tile may overhang the matrix on every side; rows are
    whole 16-byte columns (gemm() pads K otherwise). Where the caller says
    every copy is in bounds (inside, interior_loop), the compare and the
    select fold away.

    issue starts the copies, all of them (part=-1) or one part of
    cfg.copy_parts (pass i is in part i % copy_parts); land finishes them.
    With cp.async, land has nothing to do (the pipeline's wait does it).
    With unpack="tile", issue loads 16 bytes of s4 into registers regs[reg0:]
    and land widens them to 32 bytes of s8 and stores them, at twice the
    column in shared memory."""
    copy = _copier(cfg, unit)
    per_row = row_bytes // unit
    step = cfg.copiers // per_row                 # rows between a thread's copies
    passes = -(-rows // step)
    ragged = rows % step != 0                     # more threads than copies in the last pass
    parts = cfg.copy_parts
    any_src = cfg.zfill_src == "any"           # see KernelConfig.zfill_src

    def setup(arr, z, row0, copier):
        """This thread's (batch base, first source byte, first row, byte column)."""
        base = P.global_addr(arr, 0) + z * arr.strides[0]
        r = copier // per_row
        col = (copier % per_row) * unit
        return base, base + (row0 + r) * arr.strides[1] + col, r, col

    if cfg.unpack != "tile":
        def copy_one(i, dst, src, ok, policy, regs):
            copy(dst, src, ok, policy)

        def land(rows_in_tile, dst, regs):
            pass
    else:
        ptx = P.routines(cfg.linkage)
        ld, st, widen = getattr(ptx, f"ld_global_{cfg.cache}_v4"), ptx.st_shared_v4, ptx.unpack_s4_s8
        get4, put4 = _getter(4), _setter(4)

        def copy_one(i, dst, src, ok, policy, regs):
            put4(regs, reg0 + 4 * i, ld(src, ok))

        def land(rows_in_tile, dst, regs):
            # Each word's eight s4 become (e0 e2 e4 e6) (e1 e3 e5 e7): A and B rows
            # are permuted alike along K, so their products meet.
            for i in range(passes):
                if not ragged or i * step < rows_in_tile:
                    w = get4(regs, reg0 + 4 * i)
                    x0, x1, x2, x3 = widen(w[0]), widen(w[1]), widen(w[2]), widen(w[3])
                    st(dst + i * step * pitch, (x0[0], x0[1], x1[0], x1[1]))
                    st(dst + i * step * pitch + 16, (x2[0], x2[1], x3[0], x3[1]))
    copy_one = _device(copy_one)

    def issue(copies, policy, regs, part, inside):
        """copies: (base, src, stride, rows_left, rows_in_tile, col_ok, dst),
        with rows_left the rows of the matrix from this thread's first and
        rows_in_tile the rows of the tile from it (int32); part: a constant,
        -1 for all passes; inside: a constant, True where every copy is in
        bounds (interior_loop), so that no row or column is checked."""
        base, src, stride, rows_left, rows_in_tile, col_ok, dst = copies
        for i in range(passes):
            if (part < 0 or i % parts == part) and (not ragged or i * step < rows_in_tile):
                ok = inside or (col_ok and i * step < rows_left)
                at = src + i * step * stride
                copy_one(i, dst + i * step * pitch, at if ok or any_src else base, ok, policy, regs)

    return _device(setup), _device(issue), _device(land), 4 * passes if cfg.unpack == "tile" else 0


# --- warp-level routines ---------------------------------------------------------------

def _lane_free_steps(addr, count):
    """(addr(t, l) - addr(0, l) for t in range(count)), checked to be the
    same for all 32 lanes l: an offset the instruction can carry."""
    steps = tuple(addr(t, 0) - addr(0, 0) for t in range(count))
    for lane in range(32):
        assert all(addr(t, lane) - addr(0, lane) == steps[t] for t in range(count)), (addr, lane)
    return steps


class WarpRoutine(NamedTuple):
    """What the skeleton calls of a warp-level routine (all inline device functions).

    init() -> acc: zeroed accumulators;  frags() -> (fa, fb): fragment registers,
    cfg.reg_buffers sets;  load(fa, fb, buf, a_tile, b_tile, kk, lane): k step kk's
    fragments from shared memory into set buf;  compute(acc, fa, fb, buf): the
    warp tile's operations on set buf;  store(acc, C, ...): the epilogue.
    buf and kk are constants where the skeleton calls them, so every fragment
    index folds and the arrays stay in registers."""
    init: object
    frags: object
    load: object
    compute: object
    store: object


# --- warp-level: mma.sync (ptx_asm/) ------------------------------------------------

def _mma_warp(cfg):
    """The ldmatrix + mma.sync warp routine."""
    ptx = P.routines(cfg.linkage)
    wm, wn = cfg.warp_tile
    bm, bn = cfg.bm, cfg.bn
    mi, nj = wm // 16, wn // 8
    ksb = cfg.kstep_bytes                 # bytes of K per warp-level operation
    na = 2 * ksb // 16                    # A registers (8x8 b16 matrices) per fragment
    nb = ksb // 16                        # B registers per fragment
    nc = 2 if cfg.acc == "f16" else 4
    pitch_a, pitch_b = cfg.pitch_a, cfg.pitch_b
    acc_t = _ACC[cfg.acc]
    wa, wb = min(cfg.a_ldmatrix, mi * na), min(cfg.b_ldmatrix, nj * nb)
    kn = cfg.b_layout == "kn"
    # Fragments by ldmatrix .x<w>, or (w = 0) word by word from ld.shared + packing.
    lda = getattr(ptx, f"ldmatrix_x{wa}") if wa else None
    ldb = getattr(ptx, f"ldmatrix_x{wb}" + ("_trans" if kn else "")) if wb else None
    put_a, put_b = _setter(max(wa, 1)), _setter(max(wb, 1))
    word = _packed_word(cfg)
    pack16 = ptx.pack_b16x2
    get_c, put_c = _getter(nc), _setter(nc)
    n_acc, n_fa, n_fb = mi * nj * nc, mi * na, nj * nb     # array sizes must be constants
    st_pair = {"f32": ptx.st_global_v2_f32, "s32": ptx.st_global_v2_s32, "f16": ptx.st_global_b32}[cfg.acc]
    c_shift = 1 if cfg.acc == "f16" else 2            # log2 of C's element bytes (f16 as 16-bit bits)
    # Scaled widening: 16 x 16 per product, so the sums are 256 x the s4 ones.
    # Written out: a shift inside the store's loops stops LLVM unrolling them.
    descale = _generated("descale", "acc", [f"acc[{e}] = sar8(acc[{e}])" for e in range(n_acc)]
                         if cfg.unpack == "scaled" else ["pass"], {"sar8": _sar8})

    if cfg.unpack != "none":
        # s4 fragments widened to s8 in registers; two m16n8k32.s8 per k64 step.
        mma8 = ptx.mma_m16n8k32_s8_s32
        unpack = ptx.unpack_s4_s8x16 if cfg.unpack == "scaled" else ptx.unpack_s4_s8

        def mma_tile(acc, c, fa, ia, fb, ib):
            a0, a1, a2, a3 = unpack(fa[ia]), unpack(fa[ia + 1]), unpack(fa[ia + 2]), unpack(fa[ia + 3])
            b0, b1 = unpack(fb[ib]), unpack(fb[ib + 1])
            d = mma8((a0[0], a1[0], a0[1], a1[1]), b0, get_c(acc, c))
            put_c(acc, c, mma8((a2[0], a3[0], a2[1], a3[1]), b1, d))
    else:
        mma = getattr(ptx, f"mma_m16n8k{cfg.mma_k}_{_MMA_TYPES[cfg.precision, cfg.acc]}")
        get_a, get_b = _getter(na), _getter(nb)

        def mma_tile(acc, c, fa, ia, fb, ib):
            put_c(acc, c, mma(get_a(fa, ia), get_b(fb, ib), get_c(acc, c)))
    mma_tile = _device(mma_tile)

    # ldmatrix row addresses, relative to the warp's tile at k step 0: lane l
    # addresses a row of matrix t * w + (l / 8) % w. The lane's part is
    # computed once (t = 0); each t adds a constant, the same for every lane,
    # which ptxas folds into the instruction's offset.
    def a_addr(t, lane):
        q = t * wa + (lane >> 3) % wa
        i, r = q // na, q % na
        return (i * 16 + (r % 2) * 8 + (lane & 7)) * pitch_a + (r // 2) * 16

    def b_addr(t, lane):
        q = t * wb + (lane >> 3) % wb
        j, r = q // nb, q % nb
        if kn:   # B is K x N in shared memory: rows of k units, transposed on load
            return (r * 8 + (lane & 7)) * pitch_b + j * 16
        return (j * 8 + (lane & 7)) * pitch_b + r * 16

    b_kk = ksb // 2 * pitch_b if kn else ksb        # a k step's bytes along B's tile
    swizzled = cfg.swizzle

    def lane_classes(addr, count, kk_bytes):
        """Swizzled, a matrix's lane offsets differ from another's by a constant
        only where the XOR permutes their chunks alike (rows 8 apart; for
        K x N B, the same n chunk). So matrix t at k step kk is read at the
        lane offset of a representative (rt, rk) plus a constant: a register
        per class, the rest folded into ldmatrix's immediate.
        Returns (representatives, class[kk][t], constant[kk][t])."""
        def lanes(t, kk):
            return [swizzled_offset(addr(t, lane) + kk * kk_bytes) for lane in range(32)]

        reps, cls, off = [], [], []
        for kk in range(cfg.ksteps):
            cls.append([]), off.append([])
            for t in range(count):
                mine = lanes(t, kk)
                for c, rep in enumerate(reps):
                    theirs = lanes(*rep)
                    d = mine[0] - theirs[0]
                    if all(x - y == d for x, y in zip(mine, theirs)):
                        break
                else:
                    c, d = len(reps), 0
                    reps.append((t, kk))
                cls[-1].append(c), off[-1].append(d)
        return tuple(reps), tuple(map(tuple, cls)), tuple(map(tuple, off))

    def swizzled_reader(addr, count, kk_bytes):
        """matrix_at(t, kk, lane): the shared offset of matrix t at k step kk
        for this lane, swizzled."""
        reps, cls, off = lane_classes(addr, count, kk_bytes)
        # Flat tuples of ints: Numba indexes nested tuples only with constants.
        rep_t = tuple(reps[c][0] for row in cls for c in row)
        rep_k = tuple(reps[c][1] for row in cls for c in row)
        const = tuple(d for row in off for d in row)
        addr_d = _device(addr)

        def matrix_at(t, kk, lane):
            i = kk * count + t
            return _swizzled(addr_d(rep_t[i], lane) + rep_k[i] * kk_bytes) + const[i]
        return _device(matrix_at)

    # ld.shared + packing: each word's offset, swizzled or not (4 bytes stay in their chunk)
    place = _swizzled if swizzled else _device(lambda offset: offset)
    if swizzled:
        a_at = swizzled_reader(a_addr, mi * na // wa, ksb) if wa else None
        b_at = swizzled_reader(b_addr, nj * nb // wb, b_kk) if wb else None
    else:
        a_step = _lane_free_steps(a_addr, mi * na // wa) if wa else (0,)
        b_step = _lane_free_steps(b_addr, nj * nb // wb) if wb else (0,)
    a_addr, b_addr = _device(a_addr), _device(b_addr)

    def load(fa, fb, buf, a_tile, b_tile, kk, lane):
        """Fragments of k step kk into buffer buf, from shared memory.
        a_tile / b_tile: shared addresses of this warp's first A row / B row."""
        oa, ob = buf * n_fa, buf * n_fb
        g4 = (lane & 3) * 4                         # this lane's bytes in a fragment row
        if wa and swizzled:
            for t in range(mi * na // wa):
                put_a(fa, oa + t * wa, lda(a_tile + a_at(t, kk, lane)))
        elif wa:  # ldmatrix x<w>: lanes 8q..8q+7 address the rows of the q-th matrix.
            a_lane = a_addr(0, lane)
            for t in range(mi * na // wa):
                put_a(fa, oa + t * wa, lda(a_tile + a_lane + a_step[t] + kk * ksb))
        else:   # register r of fragment i: 4 bytes of row 16i + 8(r % 2) + lane / 4
            for q in range(mi * na):
                i, r = q // na, q % na
                row = i * 16 + (r % 2) * 8 + (lane >> 2)
                fa[oa + q] = word(a_tile + place(row * pitch_a + kk * ksb + (r // 2) * 16 + g4))
        if wb and swizzled:
            for t in range(nj * nb // wb):
                put_b(fb, ob + t * wb, ldb(b_tile + b_at(t, kk, lane)))
        elif wb:
            b_lane = b_addr(0, lane)
            for t in range(nj * nb // wb):
                put_b(fb, ob + t * wb, ldb(b_tile + b_lane + b_step[t] + kk * b_kk))
        else:
            for q in range(nj * nb):
                j, r = q // nb, q % nb
                if kn:   # two 16-bit k units of column 8j + lane / 4, from rows 2t and 2t + 1
                    row = kk * ksb // 2 + r * 8 + (lane & 3) * 2
                    at = row * pitch_b + (j * 8 + (lane >> 2)) * 2
                    fb[ob + q] = pack16(_ld16(b_tile + place(at)), _ld16(b_tile + place(at + pitch_b)))
                else:
                    fb[ob + q] = word(b_tile + place((j * 8 + (lane >> 2)) * pitch_b + kk * ksb + r * 16 + g4))

    def compute(acc, fa, fb, buf):
        """The warp tile's mi x nj mmas on the fragments in buffer buf."""
        for i in range(mi):
            for j in range(nj):
                mma_tile(acc, (i * nj + j) * nc, fa, buf * n_fa + i * na, fb, buf * n_fb + j * nb)

    def store(acc, C, z, m0, n0, wr0, wc0, M, N, tid, c_aligned):
        """Accumulators straight from registers to C: in a block tile wholly
        inside a 32-byte aligned C, one store per accumulator pair, from a row
        address computed once; else element by element, bounds-checked."""
        descale(acc)
        row0, col0 = m0 + wr0, n0 + wc0
        g, t = (tid & 31) >> 2, tid & 3
        # Indexing C per element costs ~20 instructions a store (int64 strides,
        # negative-index wraparound, generic addressing): 3000 of the tuned
        # INT8 kernel's 3600 outside its k loop (H200, 2026-11-30).
        pairs = c_aligned != 0 and m0 + bm <= M and n0 + bn <= N    # block-uniform, as WMMA's
        ldc = C.strides[1] >> c_shift                   # in elements
        first = z * (C.strides[0] >> c_shift) + col0 + 2 * t
        for i in range(mi):
            for h in range(2):
                r = row0 + i * 16 + h * 8 + g
                row = P.global_addr(C, first + r * ldc)
                for j in range(nj):
                    # lo, hi ahead of the branch, though the pair store does not
                    # read them: moved into the edge branch, acc goes to local
                    # memory (512 bytes in the tuned kernels, sm_89 and sm_90).
                    c = (i * nj + j) * nc
                    col = col0 + j * 8 + 2 * t
                    if nc == 4:
                        lo, hi = acc[c + 2 * h], acc[c + 2 * h + 1]
                    else:       # f16x2: low half is column col
                        lo, hi = acc[c + h] & 0xFFFF, acc[c + h] >> 16
                    if pairs:
                        st_pair(row + u64(j * (8 << c_shift)), (lo, hi) if nc == 4 else acc[c + h])
                    elif r < M:
                        if col < N:         # unsigned indices: no negative-index wraparound
                            C[u32(z), u32(r), u32(col)] = lo
                        if col + 1 < N:
                            C[u32(z), u32(r), u32(col + 1)] = hi

    return WarpRoutine(_zeroed(n_acc, acc_t), _fragments(n_fa * cfg.reg_buffers, n_fb * cfg.reg_buffers),
                       _device(load), _device(compute), _device(store))


_MMA_TYPES = {("fp16", "f32"): "f16_f32", ("fp16", "f16"): "f16_f16",
              ("int8", "s32"): "s8_s32", ("int4", "s32"): "s4_s32"}


# --- warp-level: WMMA (baselines/) ---------------------------------------------------

def _wmma_warp(cfg):
    """The WMMA warp routine, mirroring _mma_warp.

    A warp tile's loads and mmas are each one call of P.wmma_calls (one
    WMMA function call per fragment, at constant offsets), and the store is
    generated source: a Numba loop around the external WMMA calls is not
    unrolled before LTO inlines them, and the fragment indices it leaves
    dynamic put the accumulators in local memory.
    """
    w = P.wmma_functions(cfg.prec.wmma_name)
    om, on, ok = cfg.op_shape
    wm, wn = cfg.warp_tile
    mi, nj = wm // om, wn // on
    na, nb, nacc = w.op.a_regs, w.op.b_regs, w.op.acc_regs
    ksb, pitch_a, pitch_b = cfg.kstep_bytes, cfg.pitch_a, cfg.pitch_b
    shift = 1 if cfg.precision == "fp16" else 0                # byte offset -> element
    per_byte = 2 if cfg.precision == "int4" else 1             # WMMA elements per byte
    lda, ldb = (pitch_a * per_byte) >> shift, (pitch_b * per_byte) >> shift
    layout = cfg.b_layout
    acc_t = _ACC[cfg.acc]
    elem = {"fp16": types.float16, "int8": types.int8, "int4": types.uint8}[cfg.precision]
    env = {"cuda": cuda, "P": P, "w": w, "acc_t": acc_t}

    nfa, nfb = mi * na, nj * nb
    # B's k step moves down K x N rows of 2-byte columns, or along N x K rows.
    kn = layout == "kn"
    b_kstep = ok * pitch_b if kn else ksb
    load_as = P.wmma_calls(w.op.precision, "load_a", [(i * na, (i * om * pitch_a) >> shift, None)
                                                      for i in range(mi)])
    load_bs = P.wmma_calls(w.op.precision, f"load_b_{layout}",
                           [(j * nb, (j * on * (2 if kn else pitch_b)) >> shift, None) for j in range(nj)])
    mmas = P.wmma_calls(w.op.precision, f"mma_{layout}", [((i * nj + j) * nacc, i * na, j * nb)
                                                          for i in range(mi) for j in range(nj)])

    def load(fa, fb, buf, a_tile, b_tile, kk, lane):
        sm = cuda.shared.array(0, elem)
        base = P.shared_addr(sm, 0)
        load_as(P.pointer(fa, buf * nfa), P.pointer(sm, (a_tile - base + kk * ksb) >> shift), lda)
        load_bs(P.pointer(fb, buf * nfb), P.pointer(sm, (b_tile - base + kk * b_kstep) >> shift), ldb)

    def compute(acc, fa, fb, buf):
        mmas(P.pointer(acc, 0), P.pointer(fa, buf * nfa), P.pointer(fb, buf * nfb))

    # Store: a block tile wholly inside C (and C 32-byte aligned) goes straight
    # to C; one that overhangs C goes through shared memory (the pipeline's,
    # free by now) and from there, bounds-checked, to C. The choice is
    # block-uniform, and each fragment has one store call: two call sites would
    # keep the accumulators in local memory.
    bm, bn, threads, tp = cfg.bm, cfg.bn, cfg.threads, cfg.c_tile_pitch
    store = ["ldc = C.strides[1] >> 2",                   # C holds 4-byte elements
             "c_z = z * (C.strides[0] >> 2)",
             f"inside = c_aligned != 0 and m0 + {bm} <= M and n0 + {bn} <= N",
             "if not inside:",
             "    cuda.syncthreads()",
             "tile = cuda.shared.array(0, acc_t)"]
    for i in range(mi):
        for j in range(nj):
            store += [
                f"r, c = wr0 + {i * om}, wc0 + {j * on}",
                f"dst = P.pointer(C, c_z + (m0 + r) * ldc + n0 + c) if inside else P.pointer(tile, r * {tp} + c)",
                f"w.store(dst, ldc if inside else {tp}, P.pointer(acc, {(i * nj + j) * nacc}))"]
    store += ["if not inside:",
              "    cuda.syncthreads()",
              f"    for e in range({bm * bn // threads}):",
              f"        r, c = (e * {threads} + tid) // {bn}, (e * {threads} + tid) % {bn}",
              "        if m0 + r < M and n0 + c < N:",
              f"            C[z, m0 + r, n0 + c] = tile[r * {tp} + c]"]

    return WarpRoutine(_zeroed(mi * nj * nacc, acc_t),
                       _fragments(nfa * cfg.reg_buffers, nfb * cfg.reg_buffers),
                       _device(load), _device(compute),
                       _generated("store", "acc, C, z, m0, n0, wr0, wc0, M, N, tid, c_aligned", store, env))


def _tile_steps(cfg, warp, copy_part):
    """tile_steps(acc, fa, fb, a_tile, b_tile, lane, wk, st, more): this warp's
    k steps of one k-tile, written out (LLVM leaves a loop of 4 steps rolled):
    steps wk, wk + warps_k, ... With two fragment buffers each step loads the
    next step's fragments before its own mmas, and the last step's mmas are
    the skeleton's: it issues them after the barrier that ends the tile,
    behind the next tile's first loads.

    With copy_parts > 1, where `more`, the first copy_parts steps each start
    one part of a later k-tile's copies (st: the skeleton's stage_copies), so
    that no stretch of address math and LDGSTS holds back every warp's mmas
    at once; with 1 the skeleton starts them all ahead of the steps."""
    wk_, n = cfg.warps_k, cfg.warp_ksteps
    kk = (lambda s: f"{s * wk_} + wk") if wk_ > 1 else str    # k step of this warp's s-th
    if cfg.reg_buffers == 2:
        steps = [(s + 1, (s + 1) % 2, s % 2) for s in range(n - 1)]
    else:
        steps = [(s, 0, 0) for s in range(n)]
    lines = []
    for slot, (s, into, buf) in enumerate(steps):
        if slot < cfg.copy_parts and cfg.copy_parts > 1:
            lines += ["if more:", f"    copy_part(st, {slot})"]
        lines += [f"load(fa, fb, {into}, a_tile, b_tile, {kk(s)}, lane)", f"compute(acc, fa, fb, {buf})"]
    return _generated("tile_steps", "acc, fa, fb, a_tile, b_tile, lane, wk, st, more", lines,
                      {"load": warp.load, "compute": warp.compute, "copy_part": copy_part})


def _k_reduce(cfg):
    """reduce(acc, wk, wmn, lane): warps 1..warps_k-1 of a warp tile put their
    sums in shared memory (the pipeline's, free by now), warp 0 adds them.
    Written out: loops over the accumulators would leave them in local memory."""
    n_acc = cfg.warp_tile[0] * cfg.warp_tile[1] // 32          # per thread (f32/s32)
    slots = cfg.warps_m * cfg.warps_n * n_acc * 32            # one warp_k's accumulators
    lines = ["red = cuda.shared.array(0, acc_t)",
             "if wk > 0:",
             f"    base = (wk - 1) * {slots} + wmn * {n_acc * 32} + lane"]
    lines += [f"    red[base + {e * 32}] = acc[{e}]" for e in range(n_acc)]
    lines += ["cuda.syncthreads()", "if wk == 0:"]
    for q in range(cfg.warps_k - 1):
        lines += [f"    base = {q * slots} + wmn * {n_acc * 32} + lane"]
        lines += [f"    acc[{e}] += red[base + {e * 32}]" for e in range(n_acc)]
    return _generated("reduce", "acc, wk, wmn, lane", lines, {"cuda": cuda, "acc_t": _ACC[cfg.acc]})


def _generated(name, params, lines, env):
    """A device function from generated source lines (its body)."""
    src = f"def {name}({params}):\n" + "".join(f"    {line}\n" for line in lines)
    exec(compile(src, f"<numgemm {name}>", "exec"), env)
    return _device(env[name])


# --- the kernel ------------------------------------------------------------------------

def _dp4a_function(cfg):
    """int8 on the CUDA cores: one thread per output, a row of A against a row
    of B (N x K), four bytes per dp4a. The reference point without tensor cores."""
    dp4a = P.routines(cfg.linkage).dp4a_s8
    bm, bn = cfg.bm, cfg.bn

    def gemm_kernel(A, B, C, M, N, K, KB, NB, c_aligned, tmaps):
        tid = cuda.threadIdx.x
        tm, tn = _divmod32(cuda.blockIdx.x, (N + bn - 1) // bn)
        row, col = tm * bm + tid // bn, tn * bn + tid % bn
        z = cuda.blockIdx.z
        zb = z if B.shape[0] > 1 else 0
        if row < M and col < N:
            acc = i32(0)
            for w in range(KB >> 2):
                acc = dp4a(A[z, row, w], B[zb, col, w], acc)
            C[z, row, col] = acc

    gemm_kernel.__name__ = cfg.name
    return gemm_kernel


def kernel_function(cfg: KernelConfig):
    """The Python function of cfg's kernel, ready for cuda.jit or offline build."""
    if cfg.op == "dp4a":
        return _dp4a_function(cfg)
    ptx = P.routines(cfg.linkage)
    # Shared memory and the warps see sv: cfg itself, or (unpack="tile") its s8 tiles.
    sv = cfg.shared_view
    warp_routine = (_wmma_warp if cfg.op == "wmma" else _mma_warp)(sv)
    init, frags, load_frags, compute, store = warp_routine
    k_reduce = _k_reduce(sv) if cfg.warps_k > 1 else None
    widen = sv.bk_bytes // cfg.bk_bytes     # shared bytes per global byte of K
    setup_a, load_a, land_a, regs_a = _tile_loader(cfg, cfg.rows_a, cfg.bk_bytes, sv.pitch_a)
    setup_b, load_b, land_b, regs_b = _tile_loader(cfg, *cfg.b_tile_shape, sv.pitch_b, cfg.b_copy_bytes,
                                                   reg0=regs_a)
    n_regs = max(1, regs_a + regs_b)        # registers that hold a tile in flight (unpack="tile")

    tma = cfg.copy == "tma"
    if tma:
        @_device
        def copy_part(st, part):
            """One thread has the TMA unit copy the whole k-tile (the first part
            or all): A's box and B's (K x N: boxes side by side, 128 bytes of
            N each), the stage's mbarrier told their bytes. st[0]: the stage's
            address, A's box at (kb0, row_a, z), B's first at (b0, b1, zb)."""
            dst, kb0, bar, issuer, tmap, row_a, b0, b1, z, zb = st[0]
            if part <= 0 and issuer:
                ptx.mbarrier_arrive_expect_tx(bar, u32(tma_tx))
                ptx.tma_load_3d(dst, tmap, (kb0, row_a, z), bar)
                for box in range(b_boxes):
                    ptx.tma_load_3d(dst + u32(tile_a + box * b_box_bytes), tmap + u64(128),
                                    (b0 + i32(box * SWIZZLE_BYTES), b1, zb), bar)
    else:
        @_device
        def copy_part(st, part):
            """Start part `part` (-1: all) of one stage's copies; st: stage_copies()."""
            a, b, policy, regs, inside = st
            load_a(a, policy, regs, part, inside)
            load_b(b, policy, regs, part, inside)

    tile_steps = _tile_steps(sv, warp_routine, copy_part)
    if cfg.unpack == "tile" or tma:         # no cp.async groups to close or wait for
        commit = wait = _device(lambda: None)
    else:
        wait = getattr(ptx, f"cp_async_wait_{cfg.stages - 2}")
        commit = ptx.cp_async_commit
    make_policy = getattr(ptx, f"policy_{cfg.evict}") if cfg.evict != "none" else None

    bm, bn, bk, bkb = cfg.bm, cfg.bn, cfg.bk, cfg.bk_bytes
    wm, wn = cfg.warp_tile
    warps_n, warps_k, stages = cfg.warps_n, cfg.warps_k, cfg.stages
    warps_mn = cfg.warps_m * warps_n
    private, raster, k_stagger, spread = cfg.private_tiles, cfg.raster, cfg.k_stagger, cfg.copy_parts > 1
    stage_bytes, tile_a, tile_b = sv.stage_bytes, sv.tile_bytes_a, sv.tile_bytes_b
    pipe_bytes = stages * stage_bytes
    tma_tx, tma_top = stage_bytes, cfg.smem_bytes - cfg.tma_bytes  # a stage's boxes; where the mbarriers go
    kn = cfg.b_layout == "kn"
    pitch_a, pitch_b = sv.pitch_a, sv.pitch_b
    b_esize = 2                             # K x N B: one 16-bit unit per column
    a_tile_rows, b_tile_rows = cfg.rows_a, cfg.b_tile_shape[0]
    bk_units = bk // cfg.prec.k_per_unit    # rows of a K x N B tile
    double = cfg.reg_buffers == 2
    interior = cfg.interior_loop
    b_boxes = cfg.b_tile_shape[1] // SWIZZLE_BYTES                     # copy="tma": B boxes per k-tile
    b_box_bytes = cfg.b_tile_shape[0] * SWIZZLE_BYTES
    swizzled = sv.swizzle

    @_device
    def tile_col(r, col, rows):
        """Where byte col of row r of a tile of `rows` rows lies, less r rows:
        col, or swizzled, its chunk moved within its box of 128-byte rows,
        the boxes side by side."""
        if not swizzled:
            return col
        box, row = col // SWIZZLE_BYTES * rows * SWIZZLE_BYTES, r * SWIZZLE_BYTES
        return box + _swizzled(row + col % SWIZZLE_BYTES) - row

    @_device
    def tile_of(pid, tiles_m, tiles_n):
        """Output tile (row, column) of block pid; groups of `raster` tile rows
        share their B tiles in L2 while they run."""
        if raster == 1:
            return _divmod32(pid, tiles_n)
        group, local = _divmod32(pid, tiles_n * raster)
        first = group * raster
        size = min(tiles_m - first, raster)
        col, row = _divmod32(local, size)
        return first + row, col

    def gemm_kernel(A, B, C, M, N, K, KB, NB, c_aligned, tmaps):
        """K: rows of B when it is K x N (k units), else unused; KB: bytes of K
        in a row of A; NB: bytes in a row of a K x N B; tmaps: copy="tma", the
        global address of A's tensor map, B's 128 bytes after it."""
        tid = cuda.threadIdx.x
        warp, lane = tid >> 5, tid & 31
        wmn, wk = (warp % warps_mn, warp // warps_mn) if warps_k > 1 else (warp, 0)
        wr, wc = wmn // warps_n, wmn % warps_n
        tiles_m, tiles_n = (M + bm - 1) // bm, (N + bn - 1) // bn
        tm, tn = tile_of(cuda.blockIdx.x, tiles_m, tiles_n)
        z = cuda.blockIdx.z
        zb = z if B.shape[0] > 1 else 0
        m0, n0 = i32(tm * bm), i32(tn * bn)
        smem = P.shared_addr(cuda.shared.array(0, u8), 0)
        # copy="tma": the stages on the swizzle's 1024-byte period, an mbarrier per stage after them
        sbase = (smem + u32(1023)) & u32(0xFFFFFC00) if tma else smem
        bars = sbase + u32(tma_top)
        policy = make_policy() if make_policy is not None else u64(0)
        if tma:
            if tid == 0:
                ptx.tensormap_acquire(tmaps)
                ptx.tensormap_acquire(tmaps + u64(128))
                for s in range(stages):
                    ptx.mbarrier_init(bars + u32(8 * s), u32(1))
                ptx.mbarrier_init_fence()
            cuda.syncthreads()

        if private:            # this warp's own A rows and B columns, copied by its lanes
            a_row0, b_row0, copier = m0 + wr * wm, n0 + wc * wn, lane
            tile_off = warp * (tile_a + tile_b)
            a_warp = b_warp = 0
        else:
            a_row0, b_row0, copier = m0, n0, tid
            tile_off = 0
            a_warp, b_warp = wr * wm, wc * wn

        a_base, a_src, a_r, a_col = setup_a(A, z, a_row0, copier)
        a_dst = sbase + tile_off + a_r * pitch_a + tile_col(a_r, a_col * widen, a_tile_rows)
        a_rows = i32(M - a_row0 - a_r)
        if kn:                 # B rows are k: the row offset moves, the column stays
            b_base, b_src, b_r, b_col = setup_b(B, zb, 0, copier)
            b_src += b_row0 * b_esize
            b_step = bk_units * B.strides[1]
            b_cols_ok = i32(b_row0 * b_esize + b_col) < NB
        else:
            b_base, b_src, b_r, b_col = setup_b(B, zb, b_row0, copier)
            b_step = bkb
            b_rows = i32(N - b_row0 - b_r)
        b_dst = sbase + tile_off + tile_a + b_r * pitch_b + tile_col(b_r, b_col * widen, b_tile_rows)
        ktiles = (KB + bkb - 1) // bkb
        k_first = _divmod32(cuda.blockIdx.x * k_stagger, ktiles)[1] if k_stagger else 0

        acc = init()
        regs = cuda.local.array(n_regs, u32)

        def bar_of(off):
            """The mbarrier of the stage at byte offset off (copy="tma")."""
            return bars + u32(8) * _divmod32(off, stage_bytes)[0]

        def stage_copies(step, off, inside):
            """What copy_part needs to copy the k-tile of loop step `step` into
            the stage at byte offset off; inside: see _tile_loader's issue."""
            kt = step + k_first
            if k_stagger and kt >= ktiles:
                kt -= ktiles
            kb0 = i32(kt * bkb)
            if tma:     # B's first box: at (k byte, n row) of N x K B; at (n byte, k row) of K x N B
                b0, b1 = (i32(n0 * b_esize), i32(kt * bk_units)) if kn else (kb0, n0)
                box = (sbase + off, kb0, bar_of(off), tid == 0, tmaps, m0, b0, b1, i32(z), i32(zb))
                return box, None, policy, regs, inside
            a = (a_base, a_src + kb0, A.strides[1], a_rows, a_tile_rows - a_r, kb0 + a_col < KB, a_dst + off)
            if kn:
                b = (b_base, b_src + kt * b_step, B.strides[1], i32(K - kt * bk_units - b_r),
                     b_tile_rows - b_r, b_cols_ok, b_dst + off)
            else:
                b = (b_base, b_src + kb0, B.strides[1], b_rows, b_tile_rows - b_r, kb0 + b_col < KB, b_dst + off)
            return a, b, policy, regs, inside

        def land_stage(off):
            """Finish the copies copy_part started (unpack="tile": widen and store)."""
            land_a(a_tile_rows - a_r, a_dst + off, regs)
            land_b(b_tile_rows - b_r, b_dst + off, regs)

        def next_stage(off):
            """The byte offset of the stage after the one at off (a ring)."""
            return off + stage_bytes if off + stage_bytes < pipe_bytes else 0

        def wait_for(kt, off):
            """Tile kt, in the stage at offset off, has landed: this thread's
            copies (cp.async; the barrier after makes everyone's visible) or
            the whole tile (tma: the phase of its use of the stage)."""
            if not tma:
                wait()
            elif kt < ktiles:
                ptx.mbarrier_wait(bar_of(off), _divmod32(kt, stages)[0] & u32(1))

        def barrier():
            if private:
                cuda.syncwarp()
            else:
                cuda.syncthreads()

        def warp_tiles(read):
            """Shared addresses of this warp's A rows and B rows in stage `read`."""
            a_tile = sbase + read + tile_off + a_warp * pitch_a
            if kn and swizzled:     # the warp's columns are one box of the K x N tile
                return a_tile, sbase + read + tile_a + b_warp * b_esize // SWIZZLE_BYTES * b_box_bytes
            if kn:
                return a_tile, sbase + read + tile_off + tile_a + b_warp * b_esize
            return a_tile, sbase + read + tile_off + tile_a + b_warp * pitch_b

        for s in range(stages - 1):
            if s < ktiles:
                copy_part(stage_copies(s, s * stage_bytes, False), -1)
                land_stage(s * stage_bytes)
            commit()
        wait_for(0, 0)                      # tile 0 has landed (cp.async: this thread's copies)
        barrier()                           # ... everyone's

        fa, fb = frags()
        if double:
            a_tile, b_tile = warp_tiles(0)
            load_frags(fa, fb, 0, a_tile, b_tile, wk, lane)

        def k_loop(inside):
            """The k loop; inside: a constant (two copies of the loop)."""
            read, write = 0, (stages - 1) * stage_bytes       # byte offsets of two stages
            for kt in range(ktiles):
                more = kt + stages - 1 < ktiles     # a k-tile left to copy, into the stage tile kt-1 left
                st = stage_copies(kt + stages - 1, write, inside)
                if not spread:                  # all the copies, then the mmas
                    if more:
                        copy_part(st, -1)
                    commit()
                a_tile, b_tile = warp_tiles(read)
                tile_steps(acc, fa, fb, a_tile, b_tile, lane, wk, st, more)
                if spread:                      # the tile's steps started the copies
                    commit()
                if more:                        # registers -> shared, behind this tile's mmas
                    land_stage(write)
                wait_for(kt + 1, next_stage(read))     # tile kt+1 has landed (cp.async: this thread's copies)
                barrier()                       # ... everyone's, and stage kt is read
                read, write = next_stage(read), next_stage(write)
                if double:                      # the next tile's first fragments, then this one's last mmas
                    if kt + 1 < ktiles:
                        a_tile, b_tile = warp_tiles(read)
                        load_frags(fa, fb, 0, a_tile, b_tile, wk, lane)
                    compute(acc, fa, fb, 1)

        # A block whose copies are all in bounds (its tile inside M and N, K
        # whole k-tiles) runs a k loop without their checks: ~3 instructions
        # a copy (compare, zfill_src="base"'s select).
        if interior and not tma and m0 + bm <= M and KB % bkb == 0 and (
                (n0 + bn) * b_esize <= NB and K % bk_units == 0 if kn else n0 + bn <= N):
            k_loop(True)
        else:
            k_loop(False)

        if warps_k > 1:
            k_reduce(acc, wk, wmn, lane)
        if wk == 0:
            store(acc, C, z, m0, n0, wr * wm, wc * wn, M, N, tid, c_aligned)

    gemm_kernel.__name__ = cfg.name
    return gemm_kernel


def build_config(cfg, target="sm_89"):
    """Offline build (no GPU) of cfg's kernel for target: SASS and resources."""
    if parse_target(target) < cfg.min_cc:
        raise ValueError(f"{cfg.name} needs {target_name(cfg.min_cc)} (copy={cfg.copy!r}); "
                         f"it cannot be built for {target}")
    return build(kernel_function(cfg), argtypes(cfg), target, name=cfg.name,
                 launch_bounds=(cfg.threads, cfg.min_blocks))


@functools.cache
def compiled(cfg: KernelConfig):
    """cfg's kernel compiled for the current GPU (a numba-cuda dispatcher)."""
    return cuda.jit(argtypes(cfg), launch_bounds=(cfg.threads, cfg.min_blocks))(kernel_function(cfg))


def expected_sass(cfg, target):
    """(opcode prefix the kernel's SASS must hold, whether calls are expected).

    s4 tensor-core instructions are native on sm_80/86/89; on sm_90 ptxas
    emulates them with s8 IMMA behind called routines (a fact about Hopper,
    reported by numgemm.inspect.s4_note)."""
    from .toolchain import has_native_s4_mma, parse_target

    if cfg.op == "dp4a":
        return "IDP.4A.S8.S8", False
    s4 = cfg.precision == "int4" and cfg.unpack == "none"
    if s4 and not has_native_s4_mma(parse_target(target)):
        return "IMMA", True                 # the emulation's s8 IMMA, behind calls
    if cfg.op == "wmma":
        return {"fp16": "HMMA.16816.F32", "int8": "IMMA.16816.S8.S8", "int4": "IMMA.8832.S4.S4"}[cfg.precision], False
    m, n, k = cfg.op_shape
    if cfg.precision == "fp16":
        return f"HMMA.{m}{n}{k}.{'F16' if cfg.acc == 'f16' else 'F32'}", False
    if cfg.precision == "int8" or cfg.unpack != "none":
        return f"IMMA.{m}{n}{32 if cfg.unpack != 'none' else k}.S8.S8", False
    return f"IMMA.{m}{n}{k}.S4.S4", False
