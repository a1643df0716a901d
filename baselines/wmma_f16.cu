// WMMA fp16: 16x16x16, f16 inputs, f32 accumulator.
// Per thread: A fragment 8 words (16 f16), B fragment 8 words, accumulator 8 f32.
#include <cuda_fp16.h>
#include "wmma_common.cuh"

NUMGEMM_WMMA_LOAD(f16, load_a, matrix_a, row_major, 16, 16, 16, half, half)
NUMGEMM_WMMA_LOAD(f16, load_b_nk, matrix_b, col_major, 16, 16, 16, half, half)
NUMGEMM_WMMA_LOAD(f16, load_b_kn, matrix_b, row_major, 16, 16, 16, half, half)
NUMGEMM_WMMA_MMA(f16, mma_nk, col_major, 16, 16, 16, half, float)
NUMGEMM_WMMA_MMA(f16, mma_kn, row_major, 16, 16, 16, half, float)
NUMGEMM_WMMA_STORE(f16, 16, 16, 16, float)
