"""The ldmatrix + mma.sync warp routine (ptx_asm/, through numgemm.primitives).

A warp tile of wm x wn outputs is (wm / 16) x (wn / 8) m16n8k<k> tiles, its
accumulators in registers. Each k step reads the warp's A and B fragments
from the stage's shared tiles with ldmatrix (or, a_ldmatrix / b_ldmatrix = 0,
word by word with ld.shared and packing), then issues the tiles' mmas; the
epilogue stores the accumulators straight from registers to C. INT4 with
unpack="register" / "scaled" widens the s4 fragments to s8 in registers and
issues two m16n8k32.s8 per k64 step.
"""

from numba import cuda, types

from .. import primitives as P
from ..precision import NARROW
from ..tiles import SWIZZLE_BYTES, swizzled_offset
from .regs import (
    ACC,
    device,
    fragments,
    generated,
    getter,
    i32,
    inlined,
    sar8,
    setter,
    swizzled,
    u8,
    u32,
    u64,
    zeroed,
)
from .seams import WarpRoutine


def routine(cfg):
    """cfg's mma warp routine: WarpRoutine(init, frags, load, compute, store),
    reading the stages as cfg.shared_view holds them."""
    cfg, scaled = cfg.shared_view, cfg.scaled
    mi, nj, na, nb, nc = _counts(cfg)
    n_fa, n_fb = mi * na, nj * nb
    mma_tile = _mma_tile(cfg)

    def compute(acc, fa, fb, buf):
        """The warp tile's mi x nj mmas on the fragments in buffer buf."""
        for i in range(mi):
            for j in range(nj):
                mma_tile(acc, (i * nj + j) * nc, fa, buf * n_fa + i * na, fb, buf * n_fb + j * nb)

    return WarpRoutine(zeroed(mi * nj * nc, ACC[cfg.acc]), fragments(n_fa * cfg.reg_buffers, n_fb * cfg.reg_buffers),
                       _loader(cfg), device(compute), _store(cfg, scaled))


def _counts(cfg):
    """(mi, nj, na, nb, nc): m16n8 tiles down and across the warp tile; A and B
    registers (8x8 b16 matrices) per fragment; accumulator registers per tile."""
    wm, wn = cfg.warp_tile
    ksb = cfg.kstep_bytes                 # bytes of K per warp-level operation
    return wm // 16, wn // 8, 2 * ksb // 16, ksb // 16, 2 if cfg.acc == "f16" else 4


def _mma_tile(cfg):
    """mma_tile(acc, c, fa, ia, fb, ib): one m16n8 tile's k step, accumulators at acc[c:]."""
    ptx = P.routines(cfg.linkage)
    _, _, na, nb, nc = _counts(cfg)
    get_c, put_c = getter(nc), setter(nc)
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
        mma = getattr(ptx, f"mma_m16n8k{cfg.mma_k}_{cfg.prec.mma_types[cfg.acc]}")
        get_a, get_b = getter(na), getter(nb)

        def mma_tile(acc, c, fa, ia, fb, ib):
            put_c(acc, c, mma(get_a(fa, ia), get_b(fb, ib), get_c(acc, c)))
    return device(mma_tile)


# --- fragments from shared memory ------------------------------------------------------

def _addresses(cfg):
    """(a_addr, b_addr, wa, wb): ldmatrix row addresses, relative to the warp's
    tile at k step 0, and the ldmatrix widths. Lane l addresses a row of
    matrix t * w + (l / 8) % w. The lane's part is computed once (t = 0); each
    t adds a constant, the same for every lane, which ptxas folds into the
    instruction's offset."""
    mi, nj, na, nb, _ = _counts(cfg)
    pitch_a, pitch_b = cfg.pitch_a, cfg.pitch_b
    wa, wb = min(cfg.a_ldmatrix, mi * na), min(cfg.b_ldmatrix, nj * nb)
    kn = cfg.b_layout == "kn"

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
    return a_addr, b_addr, wa, wb


def _loader(cfg):
    """load(fa, fb, buf, a_tile, b_tile, kk, lane): k step kk's fragments into
    buffer buf, from shared memory; a_tile / b_tile: the shared addresses of
    this warp's first A row / B row."""
    ptx = P.routines(cfg.linkage)
    mi, nj, na, nb, _ = _counts(cfg)
    n_fa, n_fb = mi * na, nj * nb
    ksb, pitch_a, pitch_b, kn = cfg.kstep_bytes, cfg.pitch_a, cfg.pitch_b, cfg.b_layout == "kn"
    b_kk = ksb // 2 * pitch_b if kn else ksb        # a k step's bytes along B's tile
    a_addr, b_addr, wa, wb = _addresses(cfg)
    # Fragments by ldmatrix .x<w>, or (w = 0) word by word from ld.shared + packing.
    lda = getattr(ptx, f"ldmatrix_x{wa}") if wa else None
    ldb = getattr(ptx, f"ldmatrix_x{wb}" + ("_trans" if kn else "")) if wb else None
    put_a, put_b, pack16 = setter(max(wa, 1)), setter(max(wb, 1)), ptx.pack_b16x2
    word, sw = _packed_word(cfg), cfg.swizzle
    # ld.shared + packing: each word's offset, swizzled or not (4 bytes stay in their chunk)
    place = swizzled if sw else device(lambda offset: offset)
    a_at = _swizzled_reader(cfg, a_addr, mi * na // wa, ksb) if wa and sw else None
    b_at = _swizzled_reader(cfg, b_addr, nj * nb // wb, b_kk) if wb and sw else None
    a_step = _lane_free_steps(a_addr, mi * na // wa) if wa and not sw else (0,)
    b_step = _lane_free_steps(b_addr, nj * nb // wb) if wb and not sw else (0,)
    a_addr, b_addr = device(a_addr), device(b_addr)

    def load(fa, fb, buf, a_tile, b_tile, kk, lane):
        oa, ob = buf * n_fa, buf * n_fb
        g4 = (lane & 3) * 4                         # this lane's bytes in a fragment row
        if wa and sw:
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
        if wb and sw:
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
    # Inlined by Numba, not NVVM: NVVM simplifies a called function before it
    # inlines it, and the fragment addresses then come out split across the
    # call (tile address + lane part + k step): +6 integer instructions in the
    # tuned INT8 k loop and 1% of its time (results/2026-12-01-h200-builds).
    return inlined(load)


def _lane_free_steps(addr, count):
    """(addr(t, l) - addr(0, l) for t in range(count)), checked to be the
    same for all 32 lanes l: an offset the instruction can carry."""
    steps = tuple(addr(t, 0) - addr(0, 0) for t in range(count))
    for lane in range(32):
        assert all(addr(t, lane) - addr(0, lane) == steps[t] for t in range(count)), (addr, lane)
    return steps


def _lane_classes(cfg, addr, count, kk_bytes):
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


def _swizzled_reader(cfg, addr, count, kk_bytes):
    """matrix_at(t, kk, lane): the shared offset of matrix t at k step kk
    for this lane, swizzled."""
    reps, cls, off = _lane_classes(cfg, addr, count, kk_bytes)
    # Flat tuples of ints: Numba indexes nested tuples only with constants.
    rep_t = tuple(reps[c][0] for row in cls for c in row)
    rep_k = tuple(reps[c][1] for row in cls for c in row)
    const = tuple(d for row in off for d in row)
    addr_d = device(addr)

    def matrix_at(t, kk, lane):
        i = kk * count + t
        return swizzled(addr_d(rep_t[i], lane) + rep_k[i] * kk_bytes) + const[i]
    return device(matrix_at)


# --- shared-memory words, element by element (the "manual pack" readers) ----------

@device
def _ld8(addr):
    """The byte at a .shared address (dynamic shared memory starts at its base)."""
    sm = cuda.shared.array(0, u8)
    return sm[addr - P.shared_addr(sm, 0)]


@device
def _ld16(addr):
    sm = cuda.shared.array(0, types.uint16)
    return sm[(addr - P.shared_addr(sm, 0)) >> 1]


def _packed_word(cfg):
    """A 32-bit fragment register loaded element by element and packed: two
    16-bit elements with mov.b32 (fp16), four bytes with prmt (int8, int4)."""
    ptx = P.routines(cfg.linkage)
    if cfg.prec.bits == 16:
        pack = ptx.pack_b16x2
        return device(lambda addr: pack(_ld16(addr), _ld16(addr + 2)))
    pack = ptx.pack_b8x4
    return device(lambda addr: pack((_ld8(addr), _ld8(addr + 1), _ld8(addr + 2), _ld8(addr + 3))))


# --- the epilogue ------------------------------------------------------------------------

def _store(cfg, scaled):
    """store(acc, C, z, m0, n0, wr0, wc0, M, N, tid, c_aligned): accumulators
    straight from registers to C: in a block tile wholly inside a 32-byte
    aligned C, one store per accumulator pair, from a row address computed
    once; else element by element, bounds-checked. With out="f16" each f32
    pair is first rounded to one f16x2 word (cvt_f16x2_f32), and a quad's
    words of two 8-column blocks are exchanged (_quad_words) so that each
    lane stores 4 halves, the quad a whole 32-byte sector, as f32 pairs do."""
    ptx = P.routines(cfg.linkage)
    mi, nj, _, _, nc = _counts(cfg)
    bm, bn = cfg.bm, cfg.bn
    half = cfg.c_bits and cfg.stored == "f32"   # f32 sums rounded to f16x2 words (_half_rows)
    st_pair = {"f32": ptx.st_global_v2_f32, "s32": ptx.st_global_v2_s32, "f16": ptx.st_global_b32}[cfg.stored]
    c_shift = 1 if cfg.c_bits else 2                  # log2 of C's element bytes (f16 as 16-bit bits)
    # Scaled widening: 16 x 16 per product, so the sums are 256 x the s4 ones.
    # Written out: a shift inside the store's loops stops LLVM unrolling them.
    descale = generated("descale", "acc", [f"acc[{e}] = sar8(acc[{e}])" for e in range(mi * nj * nc)]
                        if scaled else ["pass"], {"sar8": sar8})

    halves = _half_rows(ptx, mi, nj, nc, getattr(ptx, NARROW[cfg.out].cvt)) if half else None

    def store(acc, C, z, m0, n0, wr0, wc0, M, N, tid, c_aligned):
        descale(acc)
        row0, col0 = m0 + wr0, n0 + wc0
        g, t = (tid & 31) >> 2, tid & 3
        # Indexing C per element costs ~20 instructions a store (int64 strides,
        # negative-index wraparound, generic addressing).
        pairs = c_aligned != 0 and m0 + bm <= M and n0 + bn <= N    # block-uniform, as WMMA's
        ldc = C.strides[1] >> c_shift                   # in elements
        first = z * (C.strides[0] >> c_shift) + col0 + 2 * t
        if half:
            halves(acc, C, z, row0, col0, first, ldc, M, N, g, t, pairs)
            return
        for i in range(mi):
            for h in range(2):
                r = row0 + i * 16 + h * 8 + g
                row = P.global_addr(C, first + r * ldc)
                for j in range(nj):
                    # lo, hi ahead of the branch, though the pair store does not
                    # read them: moved into the edge branch, acc goes to local memory.
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
    return device(store)


def _half_rows(ptx, mi, nj, nc, to_half):
    """out="f16" (or "bf16"): the epilogue written out (a loop this long LLVM
    leaves rolled, and the accumulators it indexes go to local memory): each
    row's 8-column blocks two at a time, rounded by to_half, exchanged across
    the quad and stored 8 bytes a lane; at C's edges element by element. ptx:
    the routines in the kernel's linkage."""
    lines = []
    for i in range(mi):
        for h in range(2):
            lines += [f"r = row0 + {i * 16 + h * 8} + g", "row = global_addr(C, first + r * ldc)"]
            for jj in range(nj // 2):
                c = (i * nj + 2 * jj) * nc + 2 * h
                lines += [f"w0, w1 = to_half(acc[{c}], acc[{c + 1}]), to_half(acc[{c + nc}], acc[{c + nc + 1}])",
                          "if pairs:", f"    st_words(row + u64({jj * 32} + 4 * t), quad(w0, w1, t))",
                          "elif r < M:", f"    edge(C, z, r, col0 + {jj * 16} + 2 * t, w0, w1, N)"]
    return generated("halves", "acc, C, z, row0, col0, first, ldc, M, N, g, t, pairs", lines,
                     {"to_half": to_half, "st_words": ptx.st_global_v2_b32, "quad": _quad_words,
                      "edge": _half_edge, "global_addr": P.global_addr, "u64": u64})


@device
def _half_edge(C, z, r, col, w0, w1, N):
    """Row r's words w0, w1 (columns col, col + 1 and col + 8, col + 9) as
    far as C reaches: unsigned indices, no negative-index wraparound."""
    if col < N:
        C[u32(z), u32(r), u32(col)] = w0 & 0xFFFF
    if col + 1 < N:
        C[u32(z), u32(r), u32(col + 1)] = w0 >> 16
    if col + 8 < N:
        C[u32(z), u32(r), u32(col + 8)] = w1 & 0xFFFF
    if col + 9 < N:
        C[u32(z), u32(r), u32(col + 9)] = w1 >> 16


@device
def _quad_words(w0, w1, t):
    """The words lane t of a quad stores, of its words w0 and w1 of two
    adjacent 8-column blocks (columns 2t, 2t + 1 of each): columns 4t .. 4t +
    3 of the 16, in two shuffles. Across lanes 2 apart, lanes 0, 1 give their
    w1 for the others' w0; then across neighbours each passes on the word the
    other lacks."""
    up, odd = (t & 2) != 0, (t & 1) != 0
    a = u32(cuda.shfl_xor_sync(0xFFFFFFFF, i32(w0 if up else w1), 2))     # shfl takes signed words
    first, second = (a, w1) if up else (w0, a)
    b = u32(cuda.shfl_xor_sync(0xFFFFFFFF, i32(first if odd else second), 1))
    return (b, second) if odd else (first, b)


def rules(cfg):
    """What the mma routine needs of a config: an m16n8k<k> of its
    precision, f16 sums from the k16 one, and swizzled tiles it can read
    (whole 16-byte chunks, 128-byte rows, a K x N warp one box wide)."""
    err = []
    if cfg.op == "mma" and cfg.mma_k not in cfg.prec.mma_ks:
        err.append(f"{cfg.precision} mma has k in {cfg.prec.mma_ks}, not {cfg.mma_k}")
    if cfg.acc == "f16" and (cfg.op != "mma" or cfg.mma_k != 16):
        err.append("f16 accumulation is the m16n8k16 mma")
    if cfg.op == "wgmma" or not cfg.swizzle:
        return err                  # the wgmma shared view's tiles: warp_wgmma.rules
    if cfg.op != "mma" or cfg.b_global != "cp_async" or cfg.private_tiles or cfg.unpack == "tile":
        err.append(f"swizzled tiles (swizzle, copy={cfg.copy}) are shared tiles of whole 16-byte "
                   f"chunks that mma kernels read (op=mma; no private tiles, ldg16 or unpack=tile; "
                   f"WMMA reads rows of one stride only)")
    elif cfg.bk_bytes != SWIZZLE_BYTES:
        err.append(f"swizzled tiles have rows of {SWIZZLE_BYTES} bytes of K: bk={cfg.bk} is {cfg.bk_bytes} bytes")
    elif cfg.b_layout == "kn" and 2 * cfg.warp_tile[1] != SWIZZLE_BYTES:
        err.append(f"swizzled K x N B: a warp's {cfg.warp_tile[1]} columns must be one {SWIZZLE_BYTES}-byte box wide")
    return err
