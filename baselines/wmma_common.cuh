// numgemm WMMA baselines: what the three precisions share.
//
// Each precision defines four device functions with Numba's ABI (int status,
// result pointer first), called from the Numba kernels through
// numgemm.primitives.wmma_functions(). NVRTC compiles this code to LTO-IR
// and nvJitLink inlines it, so the fragment arrays that cross the boundary
// (uint32 per thread) stay in registers.
//
//   load_a(frag, a, lda)       A fragment from a row-major tile in shared memory
//   load_b_nk(frag, b, ldb)    B fragment from an N x K tile (col_major)
//   load_b_kn(frag, b, ldb)    B fragment from a K x N tile (row_major)
//   mma_nk(acc, fa, fb)        acc += A * B, B loaded by load_b_nk
//   mma_kn(acc, fa, fb)        acc += A * B, B loaded by load_b_kn
//   store(c, ldc, acc)         accumulator to a row-major tile
//
// lda/ldb/ldc count elements; WMMA wants tiles 256-bit aligned and leading
// dimensions that are multiples of 16 bytes.
#pragma once
#include <mma.h>

using namespace nvcuda;

// A fragment's registers as plain 32-bit words, in both directions.
template <typename Frag>
__device__ __forceinline__ void frag_to_words(unsigned* words, const Frag& f) {
  static_assert(sizeof(f.x) % 4 == 0, "fragment is whole words");
  memcpy(words, &f.x[0], sizeof(f.x));
}

template <typename Frag>
__device__ __forceinline__ void words_to_frag(Frag& f, const unsigned* words) {
  memcpy(&f.x[0], words, sizeof(f.x));
}

// The functions of one precision: P names it, M N K the WMMA shape, T the
// element type as WMMA names it, E the element pointer type, ACC the
// accumulator element type. The B layout is part of the mma instruction, so
// each B layout has its own load and mma.
#define NUMGEMM_WMMA_LOAD(P, NAME, OPERAND, LAYOUT, M, N, K, T, E)                 \
  extern "C" __device__ int numgemm_wmma_##P##_##NAME(int* status, unsigned* frag, \
                                                      const E* p, unsigned ld) {   \
    wmma::fragment<wmma::OPERAND, M, N, K, T, wmma::LAYOUT> f;                     \
    wmma::load_matrix_sync(f, p, ld);                                              \
    frag_to_words(frag, f);                                                        \
    return 0;                                                                      \
  }

#define NUMGEMM_WMMA_MMA(P, NAME, BLAYOUT, M, N, K, T, ACC)                        \
  extern "C" __device__ int numgemm_wmma_##P##_##NAME(int* status, ACC* acc,       \
                                                      const unsigned* fa,          \
                                                      const unsigned* fb) {        \
    wmma::fragment<wmma::matrix_a, M, N, K, T, wmma::row_major> a;                 \
    wmma::fragment<wmma::matrix_b, M, N, K, T, wmma::BLAYOUT> b;                   \
    wmma::fragment<wmma::accumulator, M, N, K, ACC> c;                             \
    words_to_frag(a, fa);                                                          \
    words_to_frag(b, fb);                                                          \
    memcpy(&c.x[0], acc, sizeof(c.x));                                             \
    wmma::mma_sync(c, a, b, c);                                                    \
    memcpy(acc, &c.x[0], sizeof(c.x));                                             \
    return 0;                                                                      \
  }

#define NUMGEMM_WMMA_STORE(P, M, N, K, ACC)                                        \
  extern "C" __device__ int numgemm_wmma_##P##_store(int* status, ACC* c,          \
                                                     unsigned ldc, const ACC* acc) { \
    wmma::fragment<wmma::accumulator, M, N, K, ACC> f;                             \
    memcpy(&f.x[0], acc, sizeof(f.x));                                             \
    wmma::store_matrix_sync(c, f, ldc, wmma::mem_row_major);                       \
    return 0;                                                                      \
  }
