// The int8 output epilogue with AVX2 (included by the x86 int8 files compiled with AVX2 flags):
// 8 int32 accumulators, bias already added, -> 8 u8 as docs/format.md computes them. AVX2 has no
// 64-bit arithmetic shift, so 2^62 is added to make the product non-negative, shifted logically,
// and 2^(62-n) taken away in 32 bits, which is exact when the result fits int32: always when
// n = 31 + shift >= 31 (|acc * M| < 2^62). Shifts below 0 take the scalar formula.
#pragma once

#include <immintrin.h>

#include <cstring>

#include "kernels/qu8.h"

namespace ds {
namespace {

// 8 int32 accumulators (bias added) -> 8 u8 in the low 64 bits; shift >= 0 only.
inline __m128i requant8(__m256i acc, int32_t mult, int32_t shift, const QuantOut& q) {
  const int n = 31 + shift;
  const __m256i m = _mm256_set1_epi64x(mult);
  const __m256i off = _mm256_set1_epi64x((int64_t(1) << 62) + (int64_t(1) << (n - 1)));
  const __m128i cnt = _mm_cvtsi32_si128(n);
  __m256i even = _mm256_srl_epi64(_mm256_add_epi64(_mm256_mul_epi32(acc, m), off), cnt);
  __m256i odd = _mm256_srl_epi64(_mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(acc, 32), m), off), cnt);
  __m256i v = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  v = _mm256_sub_epi32(v, _mm256_set1_epi32(int32_t(uint32_t(uint64_t(1) << (62 - n)))));
  v = _mm256_max_epi32(_mm256_min_epi32(v, _mm256_set1_epi32(q.act_max - q.y_zp)), _mm256_set1_epi32(q.act_min - q.y_zp));
  v = _mm256_add_epi32(v, _mm256_set1_epi32(q.y_zp));
  const __m256i w16 = _mm256_packus_epi32(v, v);   // [0-3 0-3 | 4-7 4-7] as u16
  const __m256i w8 = _mm256_packus_epi16(w16, w16);  // [0-3 x3 | 4-7 x3] as u8
  return _mm_unpacklo_epi32(_mm256_castsi256_si128(w8), _mm256_extracti128_si256(w8, 1));
}

inline void store_bytes(uint8_t* y, __m128i v, int64_t count) {
  if (count >= 8) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y), v);
  } else {
    uint8_t tmp[16];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(tmp), v);
    std::memcpy(y, tmp, size_t(count));
  }
}

inline void requant_scalar(const int32_t* acc, int64_t n, int32_t mult, int32_t shift, const QuantOut& q, uint8_t* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = qu8_clamp(q.y_zp + qu8_requant(acc[i], mult, shift), q.act_min, q.act_max);
}

// A GEMM tile of `rows` x `cols` (<= 16) int32 sums with the bias added, out[r] holding row i0 + r
// of the output from column j0 -> u8 in p.y; rows with shift < 0 by the scalar formula.
inline void requant_tile16(const int32_t (*out)[16], int64_t rows, int64_t cols, const QGemmParams& p, int64_t i0,
                           int64_t j0) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = i0 + r;
    uint8_t* yr = p.y + i * p.y_row_stride + j0;
    if (p.ch.shift[i] < 0) {
      requant_scalar(out[r], cols, p.ch.multiplier[i], p.ch.shift[i], p.out, yr);
      continue;
    }
    for (int h = 0; h < 2; ++h) {
      const int64_t c = cols - h * 8;
      if (c <= 0) break;
      const __m256i a = _mm256_load_si256(reinterpret_cast<const __m256i*>(out[r] + h * 8));
      store_bytes(yr + h * 8, requant8(a, p.ch.multiplier[i], p.ch.shift[i], p.out), c);
    }
  }
}

}  // namespace
}  // namespace ds
