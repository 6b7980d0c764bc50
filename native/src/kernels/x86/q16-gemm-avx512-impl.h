// The i16-input GEMM of qconv2d/qdense at the AVX-512 levels (kernels/qi16.h, Q16Kernels), for
// q16-gemm-avx512.cc and q16-gemm-avx512vnni.cc: eight rows of A broadcast as int32 pair words, 32
// columns of B in two vectors of 16 (int16 pairs), into 16 int32 accumulators added into int64
// every kQ16Flush pair steps; the B panel packed from rows read in place; the requantizing
// epilogue on int64 vectors.
#pragma once
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 on the undefined vectors in cvtepi32_epi64, extract
#include <immintrin.h>

#include <cstring>

#include "kernels/qi16.h"

namespace ds {
// Unnamed: each including file compiles its own copy with its own ISA flags (a shared inline
// copy could be the VNNI-compiled one at the avx512 level).
namespace {

__mmask32 first_columns(int64_t n) { return n >= kQ16Nr ? ~__mmask32(0) : (__mmask32(1) << n) - 1; }

// Adds the int32 lanes c0 (columns 0-15) and c1 (16-31) of a row into its int64 sums (first:
// they are the first, stored without reading dst).
inline void flush_row(__m512i c0, __m512i c1, bool first, int64_t* dst) {
  const __m512i parts[4] = {_mm512_cvtepi32_epi64(_mm512_castsi512_si256(c0)),
                            _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(c0, 1)),
                            _mm512_cvtepi32_epi64(_mm512_castsi512_si256(c1)),
                            _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(c1, 1))};
  for (int i = 0; i < 4; ++i)
    _mm512_storeu_si512(dst + 8 * i, first ? parts[i] : _mm512_add_epi64(_mm512_loadu_si512(dst + 8 * i), parts[i]));
}

inline __m512i broadcast_pair(const int16_t* p) {
  int32_t pair;
  std::memcpy(&pair, p, 4);
  return _mm512_set1_epi32(pair);
}

// s + the pair sums of x . y per int32 lane: vpdpwssd with AVX-512 VNNI, else vpmaddwd + vpaddd.
template <bool kVnni>
inline __m512i pair_dot(__m512i s, __m512i x, __m512i y) {
  if constexpr (kVnni) return _mm512_dpwssd_epi32(s, x, y);
  else return _mm512_add_epi32(s, _mm512_madd_epi16(x, y));
}

// R rows; the int64 sums live in acc (L1) and take the int32 lanes at each flush. Sixteen named
// accumulators (those of rows >= R unused): an array of them gets copied around the loop by GCC.
template <bool kVnni, int R>
void gemm_rows(int64_t k2, const int16_t* const* a, const int16_t* b, int64_t* acc) {
  const int16_t *a0 = a[0], *a1 = a[R > 1 ? 1 : 0], *a2 = a[R > 2 ? 2 : 0], *a3 = a[R > 3 ? 3 : 0],
                *a4 = a[R > 4 ? 4 : 0], *a5 = a[R > 5 ? 5 : 0], *a6 = a[R > 6 ? 6 : 0], *a7 = a[R > 7 ? 7 : 0];
  if (k2 == 0)
    for (int i = 0; i < R * kQ16Nr; ++i) acc[i] = 0;
  for (int64_t k0 = 0; k0 < k2; k0 += kQ16Flush) {
    const int64_t k1 = k0 + kQ16Flush < k2 ? k0 + kQ16Flush : k2;
    __m512i c00 = _mm512_setzero_si512(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00,
            c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00, c61 = c00, c70 = c00, c71 = c00;
    for (int64_t kk = k0; kk < k1; ++kk) {
      const __m512i b0 = _mm512_loadu_si512(b + kk * 64), b1 = _mm512_loadu_si512(b + kk * 64 + 32);
#define DS_Q16_STEP(r, ap, s0, s1)                   \
  if constexpr (R > r) {                             \
    const __m512i x = broadcast_pair(ap + 2 * kk);   \
    s0 = pair_dot<kVnni>(s0, x, b0);                 \
    s1 = pair_dot<kVnni>(s1, x, b1);                 \
  }
      DS_Q16_STEP(0, a0, c00, c01)
      DS_Q16_STEP(1, a1, c10, c11)
      DS_Q16_STEP(2, a2, c20, c21)
      DS_Q16_STEP(3, a3, c30, c31)
      DS_Q16_STEP(4, a4, c40, c41)
      DS_Q16_STEP(5, a5, c50, c51)
      DS_Q16_STEP(6, a6, c60, c61)
      DS_Q16_STEP(7, a7, c70, c71)
#undef DS_Q16_STEP
    }
    const __m512i lanes[kQ16Mr][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31},
                                      {c40, c41}, {c50, c51}, {c60, c61}, {c70, c71}};
    for (int r = 0; r < R; ++r) flush_row(lanes[r][0], lanes[r][1], k0 == 0, acc + r * kQ16Nr);
  }
}

template <bool kVnni>
void gemm(int64_t k2, int rows, const int16_t* const* a, const int16_t* b, int64_t* acc) {
  switch (rows) {
    case 1: gemm_rows<kVnni, 1>(k2, a, b, acc); break;
    case 2: gemm_rows<kVnni, 2>(k2, a, b, acc); break;
    case 3: gemm_rows<kVnni, 3>(k2, a, b, acc); break;
    case 4: gemm_rows<kVnni, 4>(k2, a, b, acc); break;
    case 5: gemm_rows<kVnni, 5>(k2, a, b, acc); break;
    case 6: gemm_rows<kVnni, 6>(k2, a, b, acc); break;
    case 7: gemm_rows<kVnni, 7>(k2, a, b, acc); break;
    default: gemm_rows<kVnni, 8>(k2, a, b, acc); break;
  }
}

// Two depth rows of 32 columns interleaved into pairs: columns 0-15, then 16-31.
void pack_rows(int64_t k, const int16_t* x, const int64_t* offsets, int64_t n, int16_t* dst) {
  const __mmask32 mask = first_columns(n);
  alignas(64) int16_t lo_idx[32], hi_idx[32];
  for (int j = 0; j < 16; ++j) {
    lo_idx[2 * j] = int16_t(j), lo_idx[2 * j + 1] = int16_t(32 + j);
    hi_idx[2 * j] = int16_t(16 + j), hi_idx[2 * j + 1] = int16_t(48 + j);
  }
  const __m512i lo = _mm512_load_si512(lo_idx), hi = _mm512_load_si512(hi_idx);
  for (int64_t t = 0; t < k; t += 2) {
    const __m512i r0 = _mm512_maskz_loadu_epi16(mask, x + offsets[t]);
    const __m512i r1 = t + 1 < k ? _mm512_maskz_loadu_epi16(mask, x + offsets[t + 1]) : _mm512_setzero_si512();
    _mm512_storeu_si512(dst + t * kQ16Nr, _mm512_permutex2var_epi16(r0, lo, r1));
    _mm512_storeu_si512(dst + t * kQ16Nr + 32, _mm512_permutex2var_epi16(r0, hi, r1));
  }
}

// The low 16 bits of the int64 lanes of v[0..3] (columns 0-7, 8-15, 16-23, 24-31) as 32 int16, in
// registers (vpmovqw to memory and a reload of the four parts stalls on store forwarding).
inline __m512i low_words(const __m512i v[4]) {
  alignas(64) int16_t idx[32];
  for (int j = 0; j < 16; ++j) idx[j] = idx[16 + j] = int16_t(j < 8 ? 4 * j : 32 + 4 * (j - 8));
  const __m512i pick = _mm512_load_si512(idx);
  return _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_permutex2var_epi16(v[0], pick, v[1]),
                                 _mm512_permutex2var_epi16(v[2], pick, v[3]));
}

// Q16Kernels::store on 32 columns of each row: the product's low 64 bits (vpmullq), a wrapping
// add and an arithmetic shift of int64 lanes (as qu8_round_shift), then y_zp and the clamp.
template <typename Y>
void store(const int64_t* acc, int rows, int64_t n, const QChannelParams& ch, int multiplier_shift, const QuantOut& out,
           Y* y, int64_t y_stride) {
  const __mmask32 mask = first_columns(n);
  const __m512i zp = _mm512_set1_epi64(out.y_zp), lo = _mm512_set1_epi64(out.act_min),
                hi = _mm512_set1_epi64(out.act_max);
  for (int r = 0; r < rows; ++r) {
    const int bits = 31 - multiplier_shift + ch.shift[r];
    const __m512i bias = _mm512_set1_epi64(ch.bias[r]), mult = _mm512_set1_epi64(ch.multiplier[r] >> multiplier_shift);
    const __m512i round = _mm512_set1_epi64(int64_t(1) << (bits - 1));
    const __m128i count = _mm_cvtsi32_si128(bits);
    __m512i v[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm512_add_epi64(_mm512_loadu_si512(acc + r * kQ16Nr + 8 * i), bias);
      v[i] = _mm512_sra_epi64(_mm512_add_epi64(_mm512_mullo_epi64(v[i], mult), round), count);
      v[i] = _mm512_min_epi64(_mm512_max_epi64(_mm512_add_epi64(v[i], zp), lo), hi);
    }
    const __m512i words = low_words(v);  // in Y's range after the clamp
    if constexpr (sizeof(Y) == 2) _mm512_mask_storeu_epi16(y + r * y_stride, mask, words);
    else _mm256_mask_storeu_epi8(y + r * y_stride, mask, _mm512_cvtepi16_epi8(words));
  }
}

// The level's table; kVnni: vpdpwssd in the GEMM.
template <bool kVnni>
constexpr Q16Kernels q16_kernels(const char* isa) {
  return {isa, gemm<kVnni>, pack_rows, store<uint8_t>, store<int16_t>};
}

}  // namespace
}  // namespace ds
