"""What the two per-thread copy paths share: each thread copies its own
pieces of every tile, at addresses it sets up once.

Each thread owns one unit-byte column of a tile (16: cp.async; 2: the
scalar ldg16 loader of a K x N B) and every (copiers / per_row)-th row, so
its source pointer is set up once and advanced by the k-tile, and a copy
costs a compare, a 64-bit add, a 64-bit select (zfill_src="base") and the
copy itself. Rows at or past the matrix and columns past it are zero-filled,
so a tile may overhang the matrix on every side; rows are whole 16-byte
columns (gemm() pads K otherwise). Where every copy is in bounds (inside,
interior_loop), the compare and the select fold away.

The paths (copy_cp_async, copy_widen) differ in what one copy is and in
what land does; routine() builds their CopyRoutine from those two.
"""

from collections import namedtuple

from numba import cuda

from .. import primitives as P
from ..tiles import SWIZZLE_BYTES
from .regs import device, i32, inlined, swizzled, u32, u64
from .seams import CopyRoutine

#: One thread's part of one operand's copies, set up once: A or an N x K B
#: (k along the rows; kb: K's bytes), or a K x N B (k down the rows: its
#: columns are checked once, cols_ok; k: K's rows of 16-bit units).
RowsOperand = namedtuple("RowsOperand", "base src stride rows_left r col dst kb")
KRowsOperand = namedtuple("KRowsOperand", "base src stride step r col dst cols_ok k")
#: What one k-tile's copies of one operand take: rows_left, the rows of the
#: matrix from this thread's first; rows_in_tile, the rows of the tile from
#: it (int32); col_ok, this thread's column lies inside the matrix.
Copies = namedtuple("Copies", "base src stride rows_left rows_in_tile col_ok dst")
State = namedtuple("State", "a b policy regs")
Stage = namedtuple("Stage", "a b policy regs inside")


def routine(cfg, copy_one, land_one, n_regs, commit, wait, land_one_a=None):
    """The CopyRoutine of a per-thread path, from what the path does itself:
    copy_one(cfg, unit, reg0) -> device fn (i, dst, src, ok, policy, regs),
    the i-th copy of a tile; land_one(cfg, rows, row_bytes, pitch, unit, reg0)
    -> device fn (rows_in_tile, dst, regs), the tile's landing (land_one_a:
    A's, where it lands otherwise); n_regs(cfg, rows, row_bytes, unit): the
    registers a tile in flight takes (reg0: where B's start); commit(),
    wait(state, kt, off, ktiles): the path's own."""
    sv = cfg.shared_view
    (a_rows, a_bytes), (b_rows, b_bytes) = (cfg.rows_a, cfg.bk_bytes), cfg.b_tile_shape
    regs_a = n_regs(cfg, a_rows, a_bytes, 16)
    regs = max(1, regs_a + n_regs(cfg, b_rows, b_bytes, cfg.b_copy_bytes))
    load_a = _tile_loader(cfg, a_rows, a_bytes, sv.pitch_a, 16, copy_one(cfg, 16, 0))
    load_b = _tile_loader(cfg, b_rows, b_bytes, sv.pitch_b, cfg.b_copy_bytes, copy_one(cfg, cfg.b_copy_bytes, regs_a))
    land_a = (land_one_a or land_one)(cfg, a_rows, a_bytes, sv.pitch_a, 16, 0)
    land_b = land_one(cfg, b_rows, b_bytes, sv.pitch_b, cfg.b_copy_bytes, regs_a)
    setup_a, at_a = _rows_walk(cfg, a_rows, a_bytes, sv.pitch_a, 16, 0)
    kn = cfg.b_layout == "kn"
    setup_b, at_b = (_k_rows_walk if kn else _rows_walk)(cfg, b_rows, b_bytes, sv.pitch_b, cfg.b_copy_bytes,
                                                       sv.tile_bytes_a)
    make_policy = getattr(P.routines(cfg.linkage), f"policy_{cfg.evict}") if cfg.evict != "none" else None
    bkb, bm, bn = cfg.bk_bytes, cfg.bm, cfg.bn
    b_esize, bk_units = 2, cfg.bk // cfg.prec.k_per_unit     # K x N B: 16-bit units; rows of its tile

    def start(smem, tmaps, tid):
        return smem, make_policy() if make_policy is not None else u64(0)

    def setup(policy, sbase, A, B, z, zb, row_a, row_b, copier, tile_off, dims):
        M, N, K, KB, NB = dims
        a = setup_a(A, z, row_a, copier, sbase, tile_off, M, dims)
        b = setup_b(B, zb, row_b, copier, sbase, tile_off, N, dims)
        return State(a, b, policy, cuda.local.array(regs, u32))

    def stage(st, kt, off, inside):
        kb0 = i32(kt * bkb)
        return Stage(at_a(st.a, kt, kb0, off), at_b(st.b, kt, kb0, off), st.policy, st.regs, inside)

    def issue(st, part):
        load_a(st.a, st.policy, st.regs, part, st.inside)
        load_b(st.b, st.policy, st.regs, part, st.inside)

    def land(st, off):
        land_a(a_rows - st.a.r, st.a.dst + off, st.regs)
        land_b(b_rows - st.b.r, st.b.dst + off, st.regs)

    def inside(m0, n0, dims):
        # An if, not the returned `and` chain: returned, it changed the SASS
        # of the interior-loop kernels.
        M, N, K, KB, NB = dims
        if m0 + bm <= M and KB % bkb == 0 and (
                (n0 + bn) * b_esize <= NB and K % bk_units == 0 if kn else n0 + bn <= N):
            return True
        return False

    return CopyRoutine(device(start), inlined(setup), device(stage), device(issue), device(land),
                       commit, wait, device(inside))


def _first(per_row, unit):
    """setup(arr, z, row0, copier): this thread's (batch base, first source
    byte, first row, byte column) in a tile of rows of per_row units."""
    def first(arr, z, row0, copier):
        base = P.global_addr(arr, 0) + z * arr.strides[0]
        r = copier // per_row
        col = (copier % per_row) * unit
        return base, base + (row0 + r) * arr.strides[1] + col, r, col
    return device(first)


def _tile_col(cfg, rows):
    """tile_col(r, col): where byte col of row r of a tile of `rows` rows lies,
    less r rows: col, or swizzled, its chunk moved within its box of 128-byte
    rows, the boxes side by side."""
    swz = cfg.shared_view.swizzle

    def tile_col(r, col):
        if not swz:
            return col
        box, row = col // SWIZZLE_BYTES * rows * SWIZZLE_BYTES, r * SWIZZLE_BYTES
        return box + swizzled(row + col % SWIZZLE_BYTES) - row
    return device(tile_col)


def _rows_walk(cfg, rows, row_bytes, pitch, unit, tile):
    """(setup, at) of an operand whose tile rows are the matrix's rows (A, N x K B),
    its tile at byte `tile` of a stage: setup(arr, z, row0, copier, sbase,
    tile_off, limit, dims) with limit the matrix's rows (M, N)."""
    first, tile_col = _first(row_bytes // unit, unit), _tile_col(cfg, rows)
    widen = cfg.shared_view.bk_bytes // cfg.bk_bytes     # shared bytes per global byte of K

    # The sums are written out whole, as warp_tiles' are, and in the order
    # the SASS was tuned with: A's destination first, B's bounds first.
    if tile == 0:
        def setup(arr, z, row0, copier, sbase, tile_off, limit, dims):
            base, src, r, col = first(arr, z, row0, copier)
            dst = sbase + tile_off + r * pitch + tile_col(r, col * widen)
            rows_left = i32(limit - row0 - r)
            return RowsOperand(base, src, arr.strides[1], rows_left, r, col, dst, dims[3])
    else:
        def setup(arr, z, row0, copier, sbase, tile_off, limit, dims):
            base, src, r, col = first(arr, z, row0, copier)
            rows_left = i32(limit - row0 - r)
            dst = sbase + tile_off + tile + r * pitch + tile_col(r, col * widen)
            return RowsOperand(base, src, arr.strides[1], rows_left, r, col, dst, dims[3])

    def at(s, kt, kb0, off):
        return Copies(s.base, s.src + kb0, s.stride, s.rows_left, rows - s.r, kb0 + s.col < s.kb, s.dst + off)
    return device(setup), device(at)


def _k_rows_walk(cfg, rows, row_bytes, pitch, unit, tile):
    """(setup, at) of a K x N B: its tile rows are k (16-bit units of k), its
    columns the block's; the row offset moves, the column stays."""
    first, tile_col = _first(row_bytes // unit, unit), _tile_col(cfg, rows)
    widen = cfg.shared_view.bk_bytes // cfg.bk_bytes
    b_esize, bk_units = 2, cfg.bk // cfg.prec.k_per_unit

    def setup(arr, z, col0, copier, sbase, tile_off, limit, dims):
        base, src, r, col = first(arr, z, 0, copier)
        src += col0 * b_esize
        step = bk_units * arr.strides[1]
        cols_ok = i32(col0 * b_esize + col) < dims[4]
        dst = sbase + tile_off + tile + r * pitch + tile_col(r, col * widen)
        return KRowsOperand(base, src, arr.strides[1], step, r, col, dst, cols_ok, dims[2])

    def at(s, kt, kb0, off):
        return Copies(s.base, s.src + kt * s.step, s.stride, i32(s.k - kt * bk_units - s.r), rows - s.r,
                      s.cols_ok, s.dst + off)
    return device(setup), device(at)


def _tile_loader(cfg, rows, row_bytes, pitch, unit, copy_one):
    """issue(copies, policy, regs, part, inside): start one operand's copies of
    a k-tile, all (part = -1) or one part of cfg.copy_parts (pass i is in part
    i % copy_parts); inside: a constant, True where every copy is in bounds,
    so that no row or column is checked."""
    passes, step, ragged = pass_count(cfg, rows, row_bytes, unit)
    parts = cfg.copy_parts
    any_src = cfg.zfill_src == "any"              # see KernelConfig.zfill_src

    def issue(copies, policy, regs, part, inside):
        base, src, stride, rows_left, rows_in_tile, col_ok, dst = copies
        for i in range(passes):
            if (part < 0 or i % parts == part) and (not ragged or i * step < rows_in_tile):
                ok = inside or (col_ok and i * step < rows_left)
                at = src + i * step * stride
                copy_one(i, dst + i * step * pitch, at if ok or any_src else base, ok, policy, regs)
    return device(issue)


def pass_count(cfg, rows, row_bytes, unit):
    """(passes, rows between a thread's copies, whether the last pass is
    ragged: more threads than copies) of one thread's copies of a tile."""
    step = cfg.copiers // (row_bytes // unit)
    return -(-rows // step), step, rows % step != 0


def rules(cfg):
    """What the per-thread copy paths need: a tile's rows whole among the
    copying threads (swizzled: a thread's rows 8 apart, so one swizzled
    column serves all its copies), copy_parts within a warp's k steps,
    ldg16 on a K x N B."""
    err = []
    if cfg.warp_ksteps and not 1 <= cfg.copy_parts <= max(1, cfg.copy_slots):
        err.append(f"copy_parts must be 1..{cfg.copy_slots}: one part before each k step "
                   f"that a warp starts before the tile's barrier")
    if cfg.b_global == "ldg16" and cfg.b_layout != "kn":
        err.append("ldg16 copies the 16-bit units of a K x N B")
    if cfg.copy == "tma":
        return err
    for what, row_bytes, unit in (("A", cfg.bk_bytes, 16), ("B", cfg.b_tile_shape[1], cfg.b_copy_bytes)):
        if row_bytes % unit == 0 and cfg.copiers % (row_bytes // unit):
            err.append(f"{what} tile rows of {row_bytes} bytes do not divide among {cfg.copiers} threads")
        elif cfg.swizzle and (cfg.copiers // (row_bytes // unit)) % 8:
            err.append(f"swizzled cp.async: a thread's rows of the {what} tile must be a multiple "
                       f"of 8 apart, not {cfg.copiers // (row_bytes // unit)}")
    return err
