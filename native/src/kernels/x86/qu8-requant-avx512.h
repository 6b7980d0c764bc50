// The int8 output epilogue with AVX-512 (included by the x86 int8 files compiled with AVX-512
// flags): 16 int32 accumulators, bias already added, -> 16 u8 as docs/format.md computes them,
//   clamp(y_zp + round_shift(acc * mult, 31 + shift), act_min, act_max)
// with 64-bit products (vpmuldq on the even and the odd lanes) and arithmetic shifts.
#pragma once

#include <immintrin.h>

#include "kernels/qu8.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // false positives inside the intrinsics
#endif

namespace ds {
namespace {

// The broadcast constants of one output channel.
struct Requant16 {
  __m512i mult, round, lo, hi, y_zp;
  __m128i count, count_odd;
  bool narrow;  // shift >= 1: every result fits int32, so clamp after narrowing

  Requant16(int32_t multiplier, int32_t shift, const QuantOut& q) {
    const int n = 31 + shift;
    mult = _mm512_set1_epi64(multiplier);
    round = _mm512_set1_epi64(int64_t(1) << (n - 1));
    count = _mm_cvtsi32_si128(n);
    narrow = n >= 32;
    // Shifting the odd products by n - 32 leaves round_shift(., n) in their high 32 bits.
    count_odd = _mm_cvtsi32_si128(narrow ? n - 32 : 0);
    if (narrow) {
      lo = _mm512_set1_epi32(q.act_min);
      hi = _mm512_set1_epi32(q.act_max);
    } else {
      lo = _mm512_set1_epi64(q.act_min - q.y_zp);
      hi = _mm512_set1_epi64(q.act_max - q.y_zp);
    }
    y_zp = _mm512_set1_epi32(q.y_zp);
  }

  __m128i operator()(__m512i acc) const {
    __m512i even = _mm512_add_epi64(_mm512_mul_epi32(acc, mult), round);
    __m512i odd = _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(acc, 32), mult), round);
    if (narrow) {
      // |acc * mult| < 2^62 and n >= 32: the shifted values fit int32.
      even = _mm512_sra_epi64(even, count);
      odd = _mm512_sra_epi64(odd, count_odd);
      __m512i v = _mm512_add_epi32(_mm512_mask_blend_epi32(0xAAAA, even, odd), y_zp);
      v = _mm512_min_epi32(_mm512_max_epi32(v, lo), hi);
      return _mm512_cvtepi32_epi8(v);
    }
    // n <= 31: the shifted value may exceed int32; clamp in 64 bits first.
    even = _mm512_max_epi64(_mm512_min_epi64(_mm512_sra_epi64(even, count), hi), lo);
    odd = _mm512_max_epi64(_mm512_min_epi64(_mm512_sra_epi64(odd, count), hi), lo);
    const __m512i v = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
    return _mm512_cvtepi32_epi8(_mm512_add_epi32(v, y_zp));
  }
};

inline __mmask16 qu8_mask16(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1); }

}  // namespace
}  // namespace ds
