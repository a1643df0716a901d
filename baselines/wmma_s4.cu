// WMMA int4: 8x8x32, s4 inputs (wmma::experimental::precision::s4), s32
// accumulator. Sub-byte WMMA takes A row-major and B col-major only, so B is
// N x K. Pointers address bytes holding two s4 each (element 2j in the low
// nibble of byte j); leading dimensions count s4 elements.
// Per thread: A fragment 1 word (8 s4), B fragment 1 word, accumulator 2 s32.
#include "wmma_common.cuh"

using s4 = wmma::experimental::precision::s4;

NUMGEMM_WMMA_LOAD(s4, load_a, matrix_a, row_major, 8, 8, 32, s4, unsigned char)
NUMGEMM_WMMA_LOAD(s4, load_b_nk, matrix_b, col_major, 8, 8, 32, s4, unsigned char)
NUMGEMM_WMMA_MMA(s4, mma_nk, col_major, 8, 8, 32, s4, int)
NUMGEMM_WMMA_STORE(s4, 8, 8, 32, int)
