// WMMA bf16: 16x16x16, bf16 inputs, f32 accumulator (sm_80 and later).
// Per thread: A fragment 4 words (8 bf16), B fragment 4 words, accumulator 8 f32.
#include <cuda_bf16.h>
#include "wmma_common.cuh"

NUMGEMM_WMMA_LOAD(bf16, load_a, matrix_a, row_major, 16, 16, 16, __nv_bfloat16, __nv_bfloat16)
NUMGEMM_WMMA_LOAD(bf16, load_b_nk, matrix_b, col_major, 16, 16, 16, __nv_bfloat16, __nv_bfloat16)
NUMGEMM_WMMA_LOAD(bf16, load_b_kn, matrix_b, row_major, 16, 16, 16, __nv_bfloat16, __nv_bfloat16)
NUMGEMM_WMMA_MMA(bf16, mma_nk, col_major, 16, 16, 16, __nv_bfloat16, float)
NUMGEMM_WMMA_MMA(bf16, mma_kn, row_major, 16, 16, 16, __nv_bfloat16, float)
NUMGEMM_WMMA_STORE(bf16, 16, 16, 16, float)
