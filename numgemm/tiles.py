"""Facts of the tiles that a config and the kernel code built from it both
read: the 128-byte swizzle of shared rows, the wgmma instructions a tile's
k step is issued in, the deepest ring of stages; and TileGeometry, what a
config's fields make of its tiles: their rows, pitches and bytes in shared
memory, TMA's boxes, C's staging buffers and the blocks that walk the
tiles. Here, below both, so that the kernel modules need not import
numgemm.config (which imports their rules)."""

SWIZZLE_BYTES = 128         # a swizzled shared row (and a TMA box's row): the 128-byte swizzle's span
#: op="wgmma": the N of each instruction a k step issues, by the tile's bn (320, the
#: width of cuBLAS's fp16 tiles on sm_90: m64n256 and m64n64 side by side). Which N a
#: precision has routines for, in which B layout: Precision.wgmma_ns, wgmma_kn_ns, wgmma_swap_ns.
WGMMA_PARTS = {16: (16,), 32: (32,), 64: (64,), 128: (128,), 192: (192,), 256: (256,), 320: (256, 64)}


def wgmma_acc_arrays(bn, pingpong):
    """The N of each accumulator array a wgmma consumer thread holds (N / 2
    sums each): one of bn; one an instruction side by side (WGMMA_PARTS);
    with pingpong, one a 64-row half of the tile."""
    return (bn, bn) if pingpong else WGMMA_PARTS[bn]


#: copy="tma": the most stages its ring of mbarriers may have (cp.async kernels: 5).
RING_STAGES = 16


def swizzled_offset(offset):
    """Where byte `offset` of a tile of 128-byte rows lies in the 128-byte
    swizzle: 16-byte chunk c of row r at chunk c ^ (r % 8)."""
    return offset ^ (((offset >> 7) & 7) << 4)


class TileGeometry:
    """The sizes and shapes a KernelConfig's fields imply for its tiles (the
    config inherits them): one place for the arithmetic that the kernel
    code, the shared-memory check and the launches all read."""

    @property
    def kstep_bytes(self):
        """Bytes of K one warp-level operation consumes per row."""
        return self.prec.kbytes(self.op_shape[2])

    @property
    def bk_bytes(self):
        return self.prec.kbytes(self.bk)

    @property
    def b_bk_bytes(self):
        """Bytes of a k-tile in a row of B's shared tile: bk_bytes, or
        (unpack="pass") bk, B's s8 as its widening kernel wrote it."""
        return self.bk if self.unpack == "pass" else self.bk_bytes

    @property
    def rows_a(self):
        """Rows of A in one stage's shared tile (per warp with private tiles)."""
        return self.warp_tile[0] if self.private_tiles else self.bm

    @property
    def rows_b(self):
        return self.warp_tile[1] if self.private_tiles else self.bn

    @property
    def pitch_a(self):
        return self.bk_bytes + (0 if self.swizzle else self.smem_pad)

    @property
    def pitch_b(self):
        """Row pitch of the B tile: K bytes (nk) or N bytes (kn) per row;
        swizzled, a K x N tile is boxes side by side, each b_swizzle bytes of
        N wide (the tile's rows, as TMA copies them: tma_box_rows)."""
        if self.swizzle:
            return self.b_swizzle
        return self.b_tile_shape[1] + self.smem_pad

    @property
    def b_swizzle(self):
        """The swizzle span of B's shared rows, in bytes: 128, or 64 for a wgmma
        K x N tile 32 f16 columns wide (one box of 64-byte rows in the 64-byte
        swizzle, which the instruction reads as well)."""
        if self.op == "wgmma" and self.b_layout == "kn" and 2 * self.rows_b == 64:
            return 64
        return SWIZZLE_BYTES

    @property
    def tma_box_bytes(self):
        """copy="tma": the bytes of a row of A's box and of each B box (each
        box lands in the swizzle of that span; unpack="pass": A's s4, 64)."""
        return self.bk_bytes if self.unpack == "pass" else SWIZZLE_BYTES, self.b_swizzle

    @property
    def tma_box_rows(self):
        """copy="tma": rows of A's box and of each B box (128-byte rows; an
        N x K B tile shared by a cluster: each CTA's share)."""
        rows_b = self.b_tile_shape[0]
        if self.multicast == "a":
            return self.bm // self.cluster, rows_b
        return self.bm, rows_b // self.cluster if self.b_layout == "nk" else rows_b

    @property
    def tile_bytes_a(self):
        return self.rows_a * self.pitch_a

    @property
    def tile_bytes_b(self):
        rows, row_bytes = self.b_tile_shape
        return rows * (row_bytes if self.swizzle else self.pitch_b)

    @property
    def b_tile_shape(self):
        """(rows, bytes per row) of B's shared tile before padding: rows of K
        bytes (nk), or rows of 16-bit units of k (kn)."""
        if self.b_layout == "kn":
            return self.bk // self.prec.k_per_unit, 2 * self.rows_b
        return self.rows_b, self.b_bk_bytes

    @property
    def b_copy_bytes(self):
        """Bytes one copy of B moves global -> shared."""
        return 2 if self.b_global == "ldg16" else 16

    @property
    def copiers(self):
        """Threads that copy one shared tile: the block, a warp (private tiles),
        or the producer warpgroup."""
        return 32 if self.private_tiles else self.producer_threads or self.threads

    @property
    def stage_bytes(self):
        if self.widens_tile:
            return self.shared_view.stage_bytes
        tiles = self.warps_m * self.warps_n if self.private_tiles else 1
        return tiles * (self.tile_bytes_a + self.tile_bytes_b)

    @property
    def c_tile_pitch(self):
        """Row pitch, in 4-byte elements, of the C tile a WMMA epilogue stages in
        shared memory (16 bytes of padding keep WMMA's 32-byte alignment)."""
        return self.bn + 4

    @property
    def smem_bytes(self):
        """The pipeline's stages; a WMMA block tile that overhangs C is staged in
        the same memory after the main loop."""
        if self.op == "dp4a":
            return 0
        pipeline = self.stages * self.stage_bytes
        if self.op == "wmma":
            return max(pipeline, self.bm * self.c_tile_pitch * 4)
        return max(pipeline, self.reduce_bytes) + self.c_stage_bytes + self.tma_bytes

    @property
    def c_stage_pitch(self):
        """stage_c: the bytes from one row of a warp's C buffer to the next: 128
        bytes of C (32 columns, 64 of half-float C), padded so that the
        fragment's eight rows of a store fall in distinct banks (4-byte C: a
        quad writes 32 bytes a row, half-float C 16)."""
        return 128 if self.c_tma else 128 + (16 if self.c_bits else 32)

    @property
    def c_stage_bytes(self):
        """stage_c: each consumer warp's 16-row C buffer (c_tma: two, swizzled, no
        padding), after the stages."""
        if not self.stage_c:
            return 0
        return (self.threads - self.producer_threads) // 32 * 16 * self.c_stage_pitch * (2 if self.c_tma else 1)

    @property
    def tma_bytes(self):
        """copy="tma" and op="wgmma": room to align the stages to 1024 bytes (the
        swizzle's period), then one 8-byte mbarrier per stage after them
        (op="wgmma": two, the stage's "full" and its "empty")."""
        if self.copy != "tma" and self.op != "wgmma":
            return 0
        return 1024 + 8 * self.stages * (2 if self.op == "wgmma" else 1)

    @property
    def reduce_bytes(self):
        """Shared memory that warps_k - 1 warps' accumulators take to meet the first's."""
        return (self.warps_k - 1) * self.bm * self.bn * 4


    @property
    def partial_shape(self):
        """stream_k: one CTA's partial sums in its workspace slot, (accumulators
        a consumer thread holds, consumer threads): each thread's stores and
        loads run along the threads, coalesced."""
        consumers = self.threads - self.producer_threads
        return self.bm * self.bn // consumers, consumers

    def grid_blocks(self, M, N, sms):
        """Blocks along grid.x for an M x N output on a GPU of `sms` SMs: a
        block a tile (the tile rows rounded up to whole clusters), or
        (persistent) at most one a SM, in whole clusters (stream_k: one a
        SM, however few the tiles; even_waves: as few as take as many
        waves); split-K's split_k
        blocks of a tile lie along grid.z, so a persistent kernel then has
        1 / split_k of the SMs along x."""
        tiles_m = -(-M // self.bm)
        tiles_n = -(-N // self.bn)
        if self.multicast == "a":           # the tile columns rounded up to whole clusters
            tiles = tiles_m * -(-tiles_n // self.cluster) * self.cluster
        else:
            tiles = -(-tiles_m // self.cluster) * self.cluster * tiles_n
        if not self.persistent:
            return tiles
        if self.stream_k:                   # every SM: the tail's k-tiles spread over them all
            return max(1, sms // self.cluster) * self.cluster
        units, wave = tiles // self.cluster, max(1, sms // self.split_k // self.cluster)
        if self.even_waves:                 # the same count of waves, spread evenly over the clusters
            waves = -(-units // wave)
            wave = -(-units // waves)
        return min(units, wave) * self.cluster
