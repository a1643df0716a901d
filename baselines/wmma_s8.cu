// WMMA int8: 16x16x16, s8 inputs, s32 accumulator.
// Per thread: A fragment 2 words (8 s8), B fragment 2 words, accumulator 8 s32.
#include "wmma_common.cuh"

NUMGEMM_WMMA_LOAD(s8, load_a, matrix_a, row_major, 16, 16, 16, signed char, signed char)
NUMGEMM_WMMA_LOAD(s8, load_b_nk, matrix_b, col_major, 16, 16, 16, signed char, signed char)
NUMGEMM_WMMA_LOAD(s8, load_b_kn, matrix_b, row_major, 16, 16, 16, signed char, signed char)
NUMGEMM_WMMA_MMA(s8, mma_nk, col_major, 16, 16, 16, signed char, int)
NUMGEMM_WMMA_MMA(s8, mma_kn, row_major, 16, 16, 16, signed char, int)
NUMGEMM_WMMA_STORE(s8, 16, 16, 16, int)
