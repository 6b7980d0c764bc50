// The int8 output epilogue with AVX-512 (included by the x86 int8 files compiled with AVX-512
// flags): 16 int32 accumulators, bias already added, -> 16 u8 as docs/format.md computes them,
//   clamp(y_zp + round_shift(acc * mult, 31 + shift), act_min, act_max)
// with 64-bit products (vpmuldq on the even and the odd lanes) and arithmetic shifts.
#pragma once

#include <immintrin.h>

#include "kernels/qu8.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // false positives inside the intrinsics
#pragma GCC diagnostic ignored "-Wuninitialized"  // likewise (_mm512_broadcast_i32x4's undefined source)
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

// The same epilogue for many channels, as in the GEMM: per channel four int64 constants that
// broadcast straight from memory (the shifts by vpsravq), and the output range shared by all.
struct RequantChannel {
  int64_t mult, round, count, count_odd;
  bool folded = false;  // y_zp * 2^n in round (set with y_zp, 32 <= n <= 52: no overflow)
  // Set with y_zp and 33 <= n <= 52: with n = 32 + t the rounding term 2^(n-1) + y_zp 2^n is
  // 2^32 R, R = 2^(t-1) + y_zp 2^t, so floor((P + 2^32 R) / 2^n) = (floor(P / 2^32) + R) >> t for
  // the 64-bit product P = acc * M: the products' high halves, R and t on int32 lanes give the
  // same result (|P| < 2^62, so |P >> 32| + R < 2^30 + 2^29 fits).
  bool high = false;
  int32_t round_high = 0, count_high = 0;
  void set(int32_t multiplier, int32_t shift) {
    const int n = 31 + shift;
    mult = multiplier;
    round = int64_t(1) << (n - 1);
    count = n;
    count_odd = n >= 32 ? n - 32 : 0;
    folded = high = false;
  }
  void set(int32_t multiplier, int32_t shift, int32_t y_zp) {
    set(multiplier, shift);
    folded = count >= 32 && count <= 52;
    if (folded) round += int64_t(y_zp) << count;
    high = count >= 33 && count <= 52;
    if (high) {
      const int t = int(count) - 32;
      round_high = int32_t((int64_t(1) << (t - 1)) + (int64_t(y_zp) << t));
      count_high = t;
    }
  }
};

struct RequantRange {
  __m512i y_zp, lo32, hi32, lo64, hi64, lo8, hi8;
  explicit RequantRange(const QuantOut& q)
      : y_zp(_mm512_set1_epi32(q.y_zp)),

        lo32(_mm512_set1_epi32(q.act_min)),
        hi32(_mm512_set1_epi32(q.act_max)),
        lo64(_mm512_set1_epi64(q.act_min - q.y_zp)),
        hi64(_mm512_set1_epi64(q.act_max - q.y_zp)),
        lo8(_mm512_set1_epi8(char(q.act_min))),
        hi8(_mm512_set1_epi8(char(q.act_max))) {}
};

// Requant16's arithmetic with those constants.
inline __m128i requant16(__m512i acc, const RequantChannel& c, const RequantRange& r) {
  const __m512i mult = _mm512_set1_epi64(c.mult), round = _mm512_set1_epi64(c.round);
  const __m512i count = _mm512_set1_epi64(c.count);
  __m512i even = _mm512_add_epi64(_mm512_mul_epi32(acc, mult), round);
  __m512i odd = _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(acc, 32), mult), round);
  if (c.count >= 32) {
    even = _mm512_srav_epi64(even, count);
    odd = _mm512_srav_epi64(odd, _mm512_set1_epi64(c.count_odd));
    __m512i v = _mm512_add_epi32(_mm512_mask_blend_epi32(0xAAAA, even, odd), r.y_zp);
    v = _mm512_min_epi32(_mm512_max_epi32(v, r.lo32), r.hi32);
    return _mm512_cvtepi32_epi8(v);
  }
  even = _mm512_max_epi64(_mm512_min_epi64(_mm512_srav_epi64(even, count), r.hi64), r.lo64);
  odd = _mm512_max_epi64(_mm512_min_epi64(_mm512_srav_epi64(odd, count), r.hi64), r.lo64);
  const __m512i v = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
  return _mm512_cvtepi32_epi8(_mm512_add_epi32(v, r.y_zp));
}

// The int32 results before the output clamp, for RequantChannel::set with y_zp: y_zp added,
// either in the rounding term (folded) or after a clamp in 64 bits (n < 32), so that saturating
// packs and an epu8 clamp to [lo8, hi8] finish the epilogue for four vectors at once.
inline __m512i requant32(__m512i acc, const RequantChannel& c, const RequantRange& r) {
  if (c.high) {  // the even products' high halves moved down by vpshufd under a merge mask
    const __m512i mult = _mm512_set1_epi64(c.mult);
    const __m512i even = _mm512_mul_epi32(acc, mult), odd = _mm512_mul_epi32(_mm512_srli_epi64(acc, 32), mult);
    const __m512i high = _mm512_mask_shuffle_epi32(odd, 0x5555, even, _MM_PERM_CDAB);
    return _mm512_srav_epi32(_mm512_add_epi32(high, _mm512_set1_epi32(c.round_high)), _mm512_set1_epi32(c.count_high));
  }
  const __m512i mult = _mm512_set1_epi64(c.mult), round = _mm512_set1_epi64(c.round);
  const __m512i count = _mm512_set1_epi64(c.count);
  __m512i even = _mm512_add_epi64(_mm512_mul_epi32(acc, mult), round);
  __m512i odd = _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(acc, 32), mult), round);
  if (c.folded) {
    even = _mm512_srav_epi64(even, count);
    odd = _mm512_srav_epi64(odd, _mm512_set1_epi64(c.count_odd));
    return _mm512_mask_blend_epi32(0xAAAA, even, odd);
  }
  if (c.count >= 32) {
    even = _mm512_srav_epi64(even, count);
    odd = _mm512_srav_epi64(odd, _mm512_set1_epi64(c.count_odd));
    return _mm512_add_epi32(_mm512_mask_blend_epi32(0xAAAA, even, odd), r.y_zp);
  }
  even = _mm512_max_epi64(_mm512_min_epi64(_mm512_srav_epi64(even, count), r.hi64), r.lo64);
  odd = _mm512_max_epi64(_mm512_min_epi64(_mm512_srav_epi64(odd, count), r.hi64), r.lo64);
  return _mm512_add_epi32(_mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32)), r.y_zp);
}

// Rows a and b of 32 columns (two requant32 vectors each) -> row a in the low 256 bits, row b in
// the high, as u8 clamped to the output range.
inline __m512i pack_rows32(__m512i a0, __m512i a1, __m512i b0, __m512i b1, const RequantRange& r) {
  // Lane L: a's columns 4L.., 16 + 4L.., then b's; vpermd puts each row's dwords in order.
  const __m512i v = _mm512_packus_epi16(_mm512_packs_epi32(a0, a1), _mm512_packs_epi32(b0, b1));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_epi32(order, _mm512_min_epu8(_mm512_max_epu8(v, r.lo8), r.hi8));
}

// qu8_qadd_split_eval on 16 int32 lanes, each a pair: operand a in the low 16 bits, b in the high
// (both 0..255); two vpdpwssd (AVX512-VNNI) and the shifts. The result is y_zp + q, unclamped.
struct QAddLanes {
  __m512i mult_lo, mult_hi, k_lo, k_hi, y_zp;
  __m128i count;
  explicit QAddLanes(const QAddSplit& s)
      : mult_lo(_mm512_set1_epi32(int32_t(uint32_t(uint16_t(s.a_lo)) | uint32_t(uint16_t(s.b_lo)) << 16))),
        mult_hi(_mm512_set1_epi32(int32_t(uint32_t(uint16_t(s.a_hi)) | uint32_t(uint16_t(s.b_hi)) << 16))),
        k_lo(_mm512_set1_epi32(s.k_lo)),
        k_hi(_mm512_set1_epi32(s.k_hi)),
        y_zp(_mm512_set1_epi32(s.y_zp)),
        count(_mm_cvtsi32_si128(s.count)) {}
  __m512i operator()(__m512i pairs) const {
    const __m512i lo = _mm512_dpwssd_epi32(k_lo, pairs, mult_lo), hi = _mm512_dpwssd_epi32(k_hi, pairs, mult_hi);
    return _mm512_sub_epi32(y_zp, _mm512_sra_epi32(_mm512_add_epi32(hi, _mm512_srai_epi32(lo, 16)), count));
  }
};

inline __mmask16 qu8_mask16(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1); }

}  // namespace
}  // namespace ds
