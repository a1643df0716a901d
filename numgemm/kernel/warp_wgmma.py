"""The wgmma warp routine (sm_90a; ptx_asm/wgmma.ptx, through numgemm.primitives).

A consumer warpgroup computes 64 rows x bn of the block tile with
wgmma.mma_async m64n256 (or m64n128, or for FP16 m64n64 and m64n32; bn =
320 issues m64n256 and m64n64 side by side), its bn / 2 accumulators a
thread in registers. Its A
rows and all of B are read from the stage's 128-byte swizzled tiles, as TMA
landed them, through matrix descriptors: A and an N x K B are K-major (a k
step moves the descriptor along the row), a K x N B (fp16) is N-major (the
instruction transposes it; boxes of 64 columns lie a box apart, a k step is
16 rows down; a tile 32 columns wide is one box in the 64-byte swizzle).
A k-tile's wgmmas form one commit group, fenced before. With pingpong a
warpgroup computes both 64-row halves of the tile, an accumulator array
each (acc is the pair). With a_regs (INT4)
A comes from registers instead: each thread reads its s4 with ldmatrix and
widens it to s8 itself, then fences and issues the wgmmas
(_a_from_registers).

The accumulator layout is mma.sync's m16n8 C fragment, warp w of the
warpgroup holding its rows 16w .. 16w + 15: the mma epilogue stores it, as
it would a 16 x bn warp tile (cfg.warp_tile); with stage_c, through the
warp's buffer in shared memory in whole lines (_staged), the mma epilogue
keeping C's edges.
"""

from types import SimpleNamespace

from numba import cuda

from .. import primitives as P
from ..precision import NARROW
from ..tiles import SWIZZLE_BYTES, WGMMA_PARTS, wgmma_acc_arrays
from .regs import ACC, device, generated, i32, inlined, u8, u32, u64, zeroed
from .seams import WarpRoutine
from .warp_mma import _store

_SBO = 8 * SWIZZLE_BYTES        # the swizzle's 8-row period: one group of rows to the next
_HALF = 64 * SWIZZLE_BYTES >> 4   # pingpong: an A descriptor's step to the tile's second 64 rows


def routine(cfg):
    """cfg's wgmma warp routine: WarpRoutine(init, None, None, compute, store),
    reading the stages as cfg.shared_view holds them (INT4: widened to s8;
    scaled, the epilogue shifts the sums back)."""
    ptx = P.routines("inline")
    a_regs, widen = cfg.a_regs, ptx.unpack_s4_s8x16 if cfg.scaled else ptx.unpack_s4_s8
    cfg, scaled = cfg.shared_view, cfg.scaled
    kn = cfg.b_layout == "kn"
    n_acc = 64 * cfg.bn // 128         # a thread's of a 64-row half (its warp's 16 rows)
    parts = WGMMA_PARTS[cfg.bn]
    mmas = {f"mma{i}": getattr(ptx, cfg.wgmma_prec.wgmma_at(n) + ("_tb" if kn else "") + ("_rs" if a_regs else ""))
            for i, n in enumerate(parts)}
    # A descriptor's step for one k step, in its 16-byte units: along the 128-byte
    # row (K-major), or 16 rows of k units down a K x N box (N-major).
    a_step = cfg.wgmma_prec.kbytes(cfg.mma_k) >> 4
    span = cfg.b_swizzle                # B's rows: 128 bytes, or 64 (a K x N tile of 32 columns)
    b_step = (cfg.mma_k // cfg.prec.k_per_unit * span >> 4) if kn else a_step
    b_lbo = cfg.b_tile_shape[0] * span if kn else 16      # K x N: box to box along N
    desc, b_desc = ptx.wgmma_desc_sw128, getattr(ptx, f"wgmma_desc_sw{span}")
    # The k-tile's wgmmas, written out: the accumulators go in as one tuple and
    # come back as one, so that between fence and commit nothing else defines them.
    acc_tuple = "(" + ", ".join(f"acc[{e}]" for e in range(n_acc)) + ")"
    if a_regs:
        lines = _a_from_registers(cfg.ksteps, cfg.pitch_a, b_step, acc_tuple)
        lines += [f"acc[{e}] = d[{e}]" for e in range(n_acc)]
    elif cfg.pingpong:
        # Both 64-row halves, an accumulator array each, the A rows of the second
        # 64 rows of 128 bytes further (the descriptor's 16-byte units); each k
        # step's two wgmmas read the same B.
        lines = ["fence()", "da = desc(a_tile, u32(16), u32(sbo))", "db = b_desc(b_tile, u32(b_lbo), u32(b_sbo))"]
        lines += [f"d{h} = (" + ", ".join(f"acc[{h}][{e}]" for e in range(n_acc)) + ")" for h in range(2)]
        lines += [f"d{h} = mma0(d{h}, da + u64({h * _HALF + kk * a_step}), db + u64({kk * b_step}), u32(1))"
                  for kk in range(cfg.ksteps) for h in range(2)]
        lines += [f"acc[{h}][{e}] = d{h}[{e}]" for h in range(2) for e in range(n_acc)]
    elif len(parts) == 1:
        lines = ["fence()", "da = desc(a_tile, u32(16), u32(sbo))", "db = b_desc(b_tile, u32(b_lbo), u32(b_sbo))",
                 f"d = {acc_tuple}"]
        lines += [f"d = mma0(d, da + u64({kk * a_step}), db + u64({kk * b_step}), u32(1))"
                  for kk in range(cfg.ksteps)]
        lines += [f"acc[{e}] = d[{e}]" for e in range(n_acc)]
    else:
        # Instructions side by side (WGMMA_PARTS): acc is a pair of arrays, one a
        # part, so that each part's epilogue is the mma one on an array of its
        # own; a part's B is the boxes of 64 columns from its first (lbo apart).
        firsts = [sum(parts[:i]) for i in range(len(parts))]       # each part's first column
        lines = ["fence()", "da = desc(a_tile, u32(16), u32(sbo))", "db = b_desc(b_tile, u32(b_lbo), u32(b_sbo))"]
        lines += [f"d{i} = (" + ", ".join(f"acc[{i}][{e}]" for e in range(n // 2)) + ")" for i, n in enumerate(parts)]
        for kk in range(cfg.ksteps):
            lines += [f"d{i} = mma{i}(d{i}, da + u64({kk * a_step}), db + u64({(f // 64 * b_lbo >> 4) + kk * b_step}), "
                      f"u32(1))" for i, f in enumerate(firsts)]
        lines += [f"acc[{i}][{e}] = d{i}[{e}]" for i, n in enumerate(parts) for e in range(n // 2)]
    lines.append("commit()")
    compute = generated("compute", "acc, a_tile, b_tile", lines,
                        {"fence": ptx.wgmma_fence, "commit": ptx.wgmma_commit, "desc": desc, "b_desc": b_desc,
                         **mmas, "u32": u32, "u64": u64, "sbo": _SBO, "b_sbo": 8 * span, "b_lbo": b_lbo, "cuda": cuda,
                         "ld4": ptx.ldmatrix_x4, "widen": widen, "wait_1": wait_1})
    arrays = wgmma_acc_arrays(cfg.bn, cfg.pingpong)    # pingpong: an array a half, stored as a warp's 16 rows
    init = zeroed(n_acc, ACC[cfg.acc]) if len(arrays) == 1 else _zeroed_parts(arrays, ACC[cfg.acc])
    store = _transposed(cfg, n_acc) if cfg.swap else _stores(cfg, scaled, parts)
    return WarpRoutine(init, None, None, compute, store)


def _transposed(cfg, n_acc):
    """swap: store(acc, C, z, m0, n0, wr0, wc0, M, N, tid, c_aligned) of a
    consumer warp's 16 x bn tile of C^T (M and N C^T's) into C, element
    (r, c) to C[c, r]: accumulator pair p of lane (g, t) in 8-column block j
    is rows g, g + 8 of columns 8j + 2t and 8j + 2t + 1, so that each store
    instruction writes 8 consecutive words of 4 rows of C, four whole 32-byte
    sectors. A tile inside C^T stores from one address and constant offsets
    (a multiple of C's row stride each); at the edges, element by element,
    bounds-checked, as a 16-bit C (out: W8A8's) always is, each value
    rounded to its format. Written out, as the epilogue is."""
    # accumulator e: row r0 + dr, column c0 + dc of C^T
    cells = [(e, 8 * ((e >> 1) & 1), 8 * (e // 4) + (e & 1)) for e in range(n_acc)]
    lines = ["lane = tid & 31", "g, t = lane >> 2, lane & 3", "r0, c0 = m0 + wr0 + g, n0 + 2 * t"]
    if not cfg.out:         # 32-bit C: whole sectors from one address; a 16-bit C (out) element by element
        lines += ["if m0 + bm <= M and n0 + bn <= N:",
                  "    ldc = u64(C.strides[1])",
                  "    at = global_addr(C, 0) + u64(z) * u64(C.strides[0]) + u64(c0) * ldc + u64(r0) * u64(4)"]
        lines += [f"    st(at + u64({dc}) * ldc + u64({4 * dr}), bits(acc[{e}]))" for e, dr, dc in cells]
        lines += ["    return"]
    for e, dr, dc in cells:
        lines += [f"if r0 + {dr} < M and c0 + {dc} < N:",
                  f"    C[u32(z), u32(c0 + {dc}), u32(r0 + {dr})] = value(acc[{e}])"]
    ptx, same = P.routines("inline"), device(lambda v: v)
    if cfg.out:
        to_bits = getattr(ptx, NARROW[cfg.out].cvt)
        value = device(lambda v: to_bits(v, 0.0) & 0xFFFF)
    else:
        value = same
    env = {"bm": cfg.bm, "bn": cfg.bn, "global_addr": P.global_addr, "u32": u32, "u64": u64, "value": value,
           "st": ptx.st_global_f32 if cfg.stored == "f32" else ptx.st_global_b32,
           "bits": same if cfg.stored == "f32" else u32}
    return generated("store", "acc, C, z, m0, n0, wr0, wc0, M, N, tid, c_aligned", lines, env)


def _zeroed_parts(parts, dtype):
    """init for two instructions side by side: a pair of zeroed arrays."""
    z0, z1 = (zeroed(n // 2, dtype) for n in parts)

    def init():
        return z0(), z1()
    return inlined(init)


def _stores(cfg, scaled, parts):
    """The epilogue: the mma one (stage_c: _staged, around it); for
    instructions side by side, that of each part (its array of accumulators,
    its columns); with pingpong, that of each half (its rows). Across all
    320 columns the mma epilogue's loop is more than LLVM unrolls (so is one
    that starts at an offset into the array), and accumulators indexed in a
    rolled loop live in local memory."""
    def one(c):
        plain = _store(c, scaled)
        return _staged(cfg, c.bn, plain) if cfg.stage_c else plain
    if cfg.pingpong:                    # each 64-row half as the warp's 16 rows of its own tile
        return generated("store", "acc, C, z, m0, n0, wr0, wc0, M, N, tid, c_aligned",
                         [f"s(acc[{h}], C, z, m0, n0, wr0 + {64 * h}, wc0, M, N, tid, c_aligned)" for h in range(2)],
                         {"s": one(cfg)})
    if len(parts) == 1:
        return one(cfg)
    # A part as a tile of its own: the fields of a config that _store reads.
    env = {f"s{i}": one(SimpleNamespace(bm=cfg.bm, bn=n, warp_tile=(16, n), kstep_bytes=cfg.kstep_bytes,
                                        acc=cfg.acc, stored=cfg.stored, c_bits=cfg.c_bits, out=cfg.out, prec=cfg.prec,
                                        linkage=cfg.linkage))
           for i, n in enumerate(parts)}
    return generated("store", "acc, C, z, m0, n0, wr0, wc0, M, N, tid, c_aligned",
                     [f"s{i}(acc[{i}], C, z, m0, n0 + {sum(parts[:i])}, wr0, wc0, M, N, tid, c_aligned)"
                      for i in range(len(parts))], env)


def _staged(cfg, n, plain):
    """stage_c: store(acc, C, z, m0, n0, wr0, wc0, M, N, tid, c_aligned) of a
    consumer warp's 16 x n accumulators through its buffer in shared memory
    (after the stages: cfg.c_stage_bytes), 128 bytes of C a row at a time
    (32 columns; 64 of half-float C): each lane writes its pairs where the
    fragment puts them (f16 C: each pair rounded to one word), then reads 16
    bytes of a row and stores them, so that an instruction writes whole rows
    of the chunk (never scaled sums: the widening kernels refuse stage_c).
    plain, the epilogue from registers, stores the tiles at C's edges or in a
    C not 32-byte aligned. Written out, as the epilogue is. The stages' base
    is found as copy_tma.ring's place() finds it: dynamic shared memory
    raised to 1024. With c_tma, _tma_stored instead."""
    if cfg.c_tma:
        return _tma_stored(cfg, n, plain)
    ptx = P.routines("inline")
    half, pitch = cfg.c_bits, cfg.c_stage_pitch
    esize, c_shift = (2, 1) if half else (4, 2)
    kind = "b32" if half else cfg.stored
    lines = _buffer_head(cfg) + [
             "g, t = lane >> 2, lane & 3",
             "at = buf + u32(g * pitch + t * 2 * esize)",
             f"ldc = C.strides[1] >> {c_shift}", "first = z * (C.strides[0] >> c_shift) + n0 + wc0 + (m0 + wr0) * ldc"]
    width = 128 // esize                            # a chunk's columns
    for c0 in range(0, n, width):
        w = min(width, n - c0)
        for j in range(c0 // 8, (c0 + w) // 8):
            for h in range(2):
                e, off = 4 * j + 2 * h, 8 * h * pitch + (8 * j - c0) * esize
                pair = f"acc[{e}], acc[{e + 1}]"
                lines.append(f"st_w(at + u32({off}), to_half({pair}))" if half else f"st_p(at + u32({off}), ({pair}))")
        per_row = w * esize // 16                   # lanes that read one row of the chunk
        rows = 32 // per_row                        # rows an instruction stores
        lines += ["cuda.syncwarp()", f"rr, cb = lane // {per_row}, (lane % {per_row}) * 16"]
        for r0 in range(0, 16, rows):
            lines += [f"v = ld4(buf + u32(({r0} + rr) * pitch + cb))",
                      f"st4(global_addr(C, first + ({r0} + rr) * ldc + {c0} + (cb >> c_shift)), v)"]
        lines.append("cuda.syncwarp()")             # the buffer read before the next chunk overwrites it
    env = {"plain": plain, "bm": cfg.bm, "bn": n, "pitch": pitch, "esize": esize, "c_shift": c_shift,
           "shared_addr": P.shared_addr, "global_addr": P.global_addr, "cuda": cuda, "u8": u8, "u32": u32,
           "to_half": getattr(ptx, NARROW[cfg.out].cvt) if half else None, "st_w": ptx.st_shared_b32,
           "st_p": getattr(ptx, f"st_shared_v2_{cfg.stored}"), "ld4": getattr(ptx, f"ld_shared_v4_{kind}"),
           "st4": getattr(ptx, f"st_global_v4_{kind}")}
    return generated("store", "acc, C, z, m0, n0, wr0, wc0, M, N, tid, c_aligned", lines, env)


def c_buffer(cfg):
    """(top, per_warp): where stage_c's buffers start, in bytes from the
    stages' base (after the stages), and a consumer warp's share of them."""
    return (cfg.smem_bytes - cfg.tma_bytes - cfg.c_stage_bytes,
            cfg.c_stage_bytes // ((cfg.threads - cfg.producer_threads) // 32))


def c_buffer_line(cfg):
    """buf = the .shared address of the consumer warp's buffer (of thread
    tid): the stages' base is dynamic shared memory raised to 1024."""
    top, per_warp = c_buffer(cfg)
    return (f"buf = ((shared_addr(cuda.shared.array(0, u8), 0) + u32(1023)) & u32(0xFFFFFC00)) + u32({top}) "
            f"+ u32((tid >> 5) - {cfg.producer_threads // 32}) * u32({per_warp})")


def _buffer_head(cfg):
    """The staged stores' first lines: the tiles that are not inside an
    aligned C go to plain; lane, and buf, this warp's buffer."""
    return ["if not (c_aligned != 0 and m0 + bm <= M and n0 + bn <= N):",
            "    plain(acc, C, z, m0, n0, wr0, wc0, M, N, tid, c_aligned)", "    return",
            "lane = tid & 31", c_buffer_line(cfg)]


def _tma_stored(cfg, n, plain):
    """stage_c with c_tma: the same store, each 128-byte chunk of the warp's 16
    rows written into one of its two 2 KB buffers in the 128-byte swizzle
    (chunk q of row r at q ^ (r % 8): a fragment's eight rows in distinct
    banks, no padding) and stored by one TMA store that lane 0 issues, C's
    tensor map at the address c_aligned holds (skeleton_ws.host makes it).
    The warp goes on while the copy drains: before it writes a buffer again,
    lane 0 waits until the store before the last one has read its source;
    before a tile's first chunk, until all of them have (the skeleton waits
    for the last writes before the block exits)."""
    ptx = P.routines("inline")
    half, pitch = cfg.c_bits, cfg.c_stage_pitch     # a row of a chunk: 128 bytes, unpadded
    esize = 2 if half else 4
    width = pitch // esize                          # a chunk's columns
    chunk = 16 * pitch                              # one of the warp's two buffers
    lines = _buffer_head(cfg) + [
             "g, t = u32(lane >> 2), u32(lane & 3)",
             f"row = buf + g * u32({pitch})", "tmap = u64(c_aligned)",
             f"col, top_row = i32((n0 + wc0) * {esize}), i32(m0 + wr0)",
             "if lane == 0:", "    wait_read_0()", "cuda.syncwarp()"]
    for i, c0 in enumerate(range(0, n, width)):
        half_buf = (i % 2) * chunk
        if i >= 2:
            lines += ["if lane == 0:", "    wait_read_1()", "cuda.syncwarp()"]
        for j in range(c0 // 8, min(c0 + width, n) // 8):
            for h in range(2):
                e = 4 * j + 2 * h
                pair = f"acc[{e}], acc[{e + 1}]"
                if half:        # columns 8j + 2t, 8j + 2t + 1: word t of chunk j - c0 / 8
                    at = f"row + u32({half_buf + 8 * pitch * h}) + ((u32({j - c0 // 8}) ^ g) << u32(4)) + (t << u32(2))"
                    lines.append(f"st_w({at}, to_half({pair}))")
                else:           # their 8 bytes: half t & 1 of chunk 2 (j - c0 / 8) + t / 2
                    at = (f"row + u32({half_buf + 8 * pitch * h}) + (((u32({2 * (j - c0 // 8)}) | (t >> u32(1))) ^ g) "
                          "<< u32(4)) + ((t & u32(1)) << u32(3))")
                    lines.append(f"st_p({at}, ({pair}))")
        lines += ["fence_async()", "cuda.syncwarp()", "if lane == 0:",
                  f"    tma_store(tmap, buf + u32({half_buf}), (col + i32({c0 * esize}), top_row, i32(z)))",
                  "    commit()"]
    env = {"plain": plain, "bm": cfg.bm, "bn": n, "shared_addr": P.shared_addr, "cuda": cuda, "u8": u8,
           "u32": u32, "u64": u64, "i32": i32, "to_half": getattr(ptx, NARROW[cfg.out].cvt) if half else None,
           "st_w": ptx.st_shared_b32,
           "st_p": getattr(ptx, f"st_shared_v2_{cfg.stored}"), "fence_async": ptx.fence_proxy_async,
           "tma_store": ptx.tma_store_3d, "commit": ptx.bulk_commit, "wait_read_0": ptx.bulk_wait_read_0,
           "wait_read_1": ptx.bulk_wait_read_1}
    return generated("store", "acc, C, z, m0, n0, wr0, wc0, M, N, tid, c_aligned", lines, env)


def partials(cfg):
    """stream_k: (save, add). save(acc, W, slot, ct) stores consumer thread
    ct's accumulators in slot `slot` of the workspace W (flat, cfg.partial_shape
    a slot), 16 bytes at a time, accumulators 4q .. 4q + 3 at word 4 (q *
    threads + ct); add(acc, W, slot, ct) adds that slot's into them
    (ptx_asm/partials.ptx). Written out, as the epilogue is: accumulators
    indexed in a loop would live in local memory."""
    ptx = P.routines("inline")
    parts = WGMMA_PARTS[cfg.bn]
    n_acc, threads = cfg.partial_shape
    if len(parts) == 1:
        regs = [f"acc[{e}]" for e in range(n_acc)]
    else:                       # a pair of arrays, one a part, one after the other in the slot
        regs = [f"acc[{i}][{e}]" for i, n in enumerate(parts) for e in range(n // 2)]
    quads = [regs[e:e + 4] for e in range(0, n_acc, 4)]
    first = ["a = global_addr(W, u64(slot) * u64(n_acc * threads) + u64(4 * ct))"]
    save = first + [f"st(a + u64({q * threads * 16}), ({', '.join(r)}))" for q, r in enumerate(quads)]
    add = first + [line for q, r in enumerate(quads) for line in
                   [f"v = ld(a + u64({q * threads * 16}))", *(f"{x} += v[{k}]" for k, x in enumerate(r))]]
    env = {"global_addr": P.global_addr, "u64": u64, "n_acc": n_acc, "threads": threads,
           "st": getattr(ptx, f"st_global_v4_{cfg.acc}"), "ld": getattr(ptx, f"ld_global_cg_v4_{cfg.acc}")}
    return generated("save", "acc, W, slot, ct", save, dict(env)), generated("add", "acc, W, slot, ct", add, env)


#: a_regs: k steps whose A registers one commit group reads. A k-tile's
#: wgmmas are groups of these; a group's registers are written again two
#: groups later, once wgmma.wait_group 1 has seen it end, so that one group's
#: widening runs while the group before it is on the tensor cores.
A_GROUP = 2


def _a_from_registers(ksteps, pitch, b_step, acc_tuple):
    """a_regs: the k-tile's lines up to its commit. The stage holds A's s4 as
    it came, k step kk's 16 bytes of a row in rows of `pitch` bytes: 128 (the
    widening producer's: in the row's swizzled chunk 2 kk, of the 128-byte
    swizzle) or 64 (TMA's, unpack="pass": chunk kk of the 64-byte swizzle,
    at kk ^ (row / 2 % 4)). One
    ldmatrix.x4 reads two k steps of the warp's 16 rows (lanes 0-15 the first
    step's rows, 16-31 the second's), and lane (g, q) receives word q of rows
    g and g + 8 of each. A word widened gives its even elements (first
    register) and odd ones (second): a0, a2 and a1, a3 of the wgmma's A
    fragment (a<kk>: k step kk's), in the order B is laid out (by the
    widening producer, or unpack="pass"'s kernel: widen_pass). Each group of
    A_GROUP k steps is committed before the next is widened, which waits
    (wait_group 1) for the group before that one: the consumer's k loop ends
    each k-tile with the same wait, so the k-tile's first group finds the
    last but one group ended too."""
    unit = pitch // 64                  # chunks a k step's s4 lies apart
    lines = ["tid = cuda.threadIdx.x", "lane = tid & 31",
             f"row = a_tile + u32((((tid >> 5) & 3) * 16 + (lane & 15)) * {pitch})",
             "x = lane & 7" if pitch == 128 else "x = (lane >> 1) & 3",        # the swizzle's XOR for the row
             f"hi = (lane >> 4) * {unit}", "db = b_desc(b_tile, u32(b_lbo), u32(b_sbo))", f"d = {acc_tuple}"]
    for g0 in range(0, ksteps, A_GROUP):
        if g0:
            lines += ["commit()", "wait_1()"]
        for kk in range(g0, g0 + A_GROUP):
            if kk % 2 == 0:
                lines.append(f"r = ld4(row + u32((({unit * kk} + hi) ^ x) << 4))")
            h = 2 * (kk % 2)
            lines += [f"w0, w1 = widen(r[{h}]), widen(r[{h + 1}])", f"a{kk} = (w0[0], w1[0], w0[1], w1[1])"]
        lines += ["fence()"] + [f"d = mma0(d, a{kk}, db + u64({kk * b_step}), u32(1))"
                                for kk in range(g0, g0 + A_GROUP)]
    return lines


#: The end of a consumer's k loop: wait_1 lets the newest k-tile's wgmmas run
#: on while the one before releases its stage; wait_0 before the epilogue.
wait_1 = device(lambda: P.wgmma_wait_1())
wait_0 = device(lambda: P.wgmma_wait_0())


def rules(cfg):
    """What a wgmma kernel needs: whole consumer warpgroups of 64 rows, the
    N and k of a routine in ptx_asm/wgmma.ptx, TMA copies into 128-byte
    rows, B as the instruction can read it; swap's C^T from registers."""
    if cfg.op != "wgmma":
        return [f"{field} is the wgmma kernels' ({why})" for field, why in (
            ("a_regs", "INT4's A widened by the consumers, for wgmma from registers"),
            ("swap", "C^T = B A^T, B's rows as the wgmma's A side")) if getattr(cfg, field)]
    err = []
    if cfg.warps_n != 1 or cfg.warps_k != 1 or cfg.warps_m % 4 or cfg.bm != 16 * cfg.warps_m:
        err.append(f"wgmma: consumer warpgroups of 64 rows (warps_m = bm / 16, a multiple of 4; "
                   f"warps_n = warps_k = 1), got bm={cfg.bm}, warps {cfg.warps_m}x{cfg.warps_n}x{cfg.warps_k}")
    if cfg.shared_view.b_bk_bytes != SWIZZLE_BYTES:
        err.append(f"wgmma reads rows of {SWIZZLE_BYTES} bytes of K in the swizzle: bk={cfg.bk} is "
                   f"{cfg.shared_view.b_bk_bytes} bytes in shared memory")
    w = cfg.wgmma_prec
    if not w.wgmma or cfg.bn not in WGMMA_PARTS or not (
            cfg.bn in w.wgmma_ns or (cfg.bn in w.wgmma_kn_ns and cfg.b_layout == "kn")
            or (cfg.bn in cfg.prec.wgmma_swap_ns and cfg.swap)):
        err.append(f"wgmma: {cfg.precision} has routines for N = {', '.join(map(str, w.wgmma_ns))}"
                   + (f" (and {', '.join(map(str, w.wgmma_kn_ns))} with B as K x N)" if w.wgmma_kn_ns else "")
                   + (f" (and {', '.join(map(str, cfg.prec.wgmma_swap_ns))} for C^T: swap)"
                      if cfg.prec.wgmma_swap_ns else "") + f", got bn={cfg.bn}")
    if cfg.copy != ("cp_async" if cfg.widens_tile else "tma") or cfg.linkage != "inline" \
            or cfg.unpack not in ("none", "tile", "tile_scaled", "pass"):
        err.append("wgmma: its stages come by TMA (copy=tma; INT4 unpack=pass), or for INT4 widened by the "
                   "producer warpgroup's own loads (unpack=tile or tile_scaled, copy=cp_async); its routines "
                   "inline")
    if cfg.a_regs != (cfg.unpack == "pass") and not cfg.widens_tile:
        err.append("a_regs: A widened by the consumers for wgmma with A from registers (unpack=tile or "
                   "tile_scaled; with unpack=pass, always)")
    if cfg.swap and (not (cfg.unpack == "pass" or cfg.prec.swaps) or cfg.copy != "tma"
                     or cfg.stage_c or cfg.split_k > 1 or cfg.stream_k):
        err.append("swap: C^T from an INT8, FP8 or unpack=pass INT4 TMA kernel, stored transposed from "
                   "registers (no stage_c; no split-K or stream-K, whose workspaces hold C's own layout)")
    if w.exact and cfg.b_layout != "nk":
        err.append("wgmma: integer B is K-major only (b_layout=nk)")
    return err
