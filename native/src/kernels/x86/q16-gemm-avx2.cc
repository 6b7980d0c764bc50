// The i16-input GEMM of qconv2d/qdense at the AVX2 levels (kernels/qi16.h, Q16Kernels), in the 16
// ymm registers: per half panel of 16 columns, groups of four rows of A broadcast as int32 pair
// words, vpmaddwd + vpaddd into 8 int32 accumulators (+ 2 B vectors + 1 broadcast), added into
// int64 every kQ16Flush pair steps; the B panel packed from rows read in place; the requantizing
// epilogue on int64 lanes with the 64-bit multiply, arithmetic shift and clamp AVX2 lacks built
// from 32-bit multiplies, logical shifts and compares. Compiled with -mavx2 -mfma.
#include <immintrin.h>

#include <cstring>

#include "kernels/qi16.h"

namespace ds {
namespace {

// Adds the int32 lanes of s (8 columns) into their int64 sums (first: they are the first,
// stored without reading dst).
inline void flush(__m256i s, bool first, int64_t* dst) {
  const __m256i parts[2] = {_mm256_cvtepi32_epi64(_mm256_castsi256_si128(s)),
                            _mm256_cvtepi32_epi64(_mm256_extracti128_si256(s, 1))};
  for (int i = 0; i < 2; ++i) {
    __m256i* d = reinterpret_cast<__m256i*>(dst + 4 * i);
    _mm256_storeu_si256(d, first ? parts[i] : _mm256_add_epi64(_mm256_loadu_si256(d), parts[i]));
  }
}

inline __m256i broadcast_pair(const int16_t* p) {
  int32_t pair;
  std::memcpy(&pair, p, 4);
  return _mm256_set1_epi32(pair);
}

inline __m256i load(const int16_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// R <= 4 rows x 16 columns from column `half` * 16; eight named accumulators (those of rows >= R
// unused): an array of them gets copied around the loop by GCC.
template <int R>
void gemm_rows(int64_t k2, const int16_t* const* a, const int16_t* b, int half, int64_t* acc) {
  const int16_t *a0 = a[0], *a1 = a[R > 1 ? 1 : 0], *a2 = a[R > 2 ? 2 : 0], *a3 = a[R > 3 ? 3 : 0];
  b += half * 32;
  for (int64_t k0 = 0; k0 < k2; k0 += kQ16Flush) {
    const int64_t k1 = k0 + kQ16Flush < k2 ? k0 + kQ16Flush : k2;
    __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    for (int64_t kk = k0; kk < k1; ++kk) {
      const __m256i b0 = load(b + kk * 64), b1 = load(b + kk * 64 + 16);
#define DS_Q16_STEP(r, ap, s0, s1)                           \
  if constexpr (R > r) {                                     \
    const __m256i x = broadcast_pair(ap + 2 * kk);           \
    s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(x, b0));     \
    s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(x, b1));     \
  }
      DS_Q16_STEP(0, a0, c00, c01)
      DS_Q16_STEP(1, a1, c10, c11)
      DS_Q16_STEP(2, a2, c20, c21)
      DS_Q16_STEP(3, a3, c30, c31)
#undef DS_Q16_STEP
    }
    const __m256i lanes[4][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}};
    for (int r = 0; r < R; ++r) {
      flush(lanes[r][0], k0 == 0, acc + r * kQ16Nr + half * 16);
      flush(lanes[r][1], k0 == 0, acc + r * kQ16Nr + half * 16 + 8);
    }
  }
}

void gemm(int64_t k2, int rows, const int16_t* const* a, const int16_t* b, int64_t* acc) {
  if (k2 == 0)
    for (int i = 0; i < rows * kQ16Nr; ++i) acc[i] = 0;
  for (int r0 = 0; r0 < rows; r0 += 4) {
    const int group = rows - r0 < 4 ? rows - r0 : 4;
    for (int half = 0; half < 2; ++half) {
      int64_t* acc_rows = acc + r0 * kQ16Nr;
      switch (group) {
        case 1: gemm_rows<1>(k2, a + r0, b, half, acc_rows); break;
        case 2: gemm_rows<2>(k2, a + r0, b, half, acc_rows); break;
        case 3: gemm_rows<3>(k2, a + r0, b, half, acc_rows); break;
        default: gemm_rows<4>(k2, a + r0, b, half, acc_rows); break;
      }
    }
  }
}

// Two depth rows of 32 columns interleaved into pairs, 8 columns a vector; a partial panel's rows
// are copied into zeros first (AVX2 has no 16-bit masked load).
void pack_rows(int64_t k, const int16_t* x, const int64_t* offsets, int64_t n, int16_t* dst) {
  alignas(32) int16_t part[2][kQ16Nr] = {};
  for (int64_t t = 0; t < k; t += 2) {
    __m256i r[2][2];
    for (int i = 0; i < 2; ++i) {
      const int16_t* row = x + (t + i < k ? offsets[t + i] : 0);
      if (t + i >= k) {
        r[i][0] = r[i][1] = _mm256_setzero_si256();
        continue;
      }
      if (n < kQ16Nr) {
        std::memcpy(part[i], row, size_t(n) * 2);
        row = part[i];
      }
      r[i][0] = load(row), r[i][1] = load(row + 16);
    }
    for (int h = 0; h < 2; ++h) {
      // unpack interleaves within 128-bit lanes: lo = columns 0-3 | 8-11, hi = 4-7 | 12-15.
      const __m256i lo = _mm256_unpacklo_epi16(r[0][h], r[1][h]), hi = _mm256_unpackhi_epi16(r[0][h], r[1][h]);
      int16_t* d = dst + t * kQ16Nr + h * 32;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), _mm256_permute2x128_si256(lo, hi, 0x20));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 16), _mm256_permute2x128_si256(lo, hi, 0x31));
    }
  }
}

// Q16Kernels::store on 4 int64 lanes v (bias added): the low 64 bits of v * m (0 <= m < 2^31) from
// the two 32-bit halves of v (wrapping as qu8_requant's), + 2^(bits - 1), arithmetic shift right
// by bits (a logical shift of v or ~v), + y_zp, clamp (64-bit compares).
inline __m256i requant4(__m256i v, __m256i m, __m256i round, __m128i bits, __m256i zp, __m256i lo, __m256i hi) {
  const __m256i low = _mm256_mul_epu32(v, m), high = _mm256_mul_epi32(_mm256_srli_epi64(v, 32), m);
  __m256i p = _mm256_add_epi64(_mm256_add_epi64(low, _mm256_slli_epi64(high, 32)), round);
  const __m256i sign = _mm256_cmpgt_epi64(_mm256_setzero_si256(), p);
  p = _mm256_xor_si256(_mm256_srl_epi64(_mm256_xor_si256(p, sign), bits), sign);
  p = _mm256_add_epi64(p, zp);
  p = _mm256_blendv_epi8(p, lo, _mm256_cmpgt_epi64(lo, p));
  return _mm256_blendv_epi8(p, hi, _mm256_cmpgt_epi64(p, hi));
}

template <typename Y>
void store(const int64_t* acc, int rows, int64_t n, const QChannelParams& ch, int multiplier_shift, const QuantOut& out,
           Y* y, int64_t y_stride) {
  const __m256i zp = _mm256_set1_epi64x(out.y_zp), lo = _mm256_set1_epi64x(out.act_min),
                hi = _mm256_set1_epi64x(out.act_max);
  const __m256i low_dwords = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  for (int r = 0; r < rows; ++r) {
    const int bits = 31 - multiplier_shift + ch.shift[r];
    const __m256i bias = _mm256_set1_epi64x(ch.bias[r]), mult = _mm256_set1_epi64x(ch.multiplier[r] >> multiplier_shift);
    const __m256i round = _mm256_set1_epi64x(int64_t(1) << (bits - 1));
    const __m128i count = _mm_cvtsi32_si128(bits);
    __m128i q[4];  // 8 columns each, int32 (in range of Y)
    for (int i = 0; i < 4; ++i) {
      const int64_t* src = acc + r * kQ16Nr + 8 * i;
      const __m256i v0 = requant4(_mm256_add_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)), bias),
                                  mult, round, count, zp, lo, hi);
      const __m256i v1 = requant4(_mm256_add_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 4)), bias),
                                  mult, round, count, zp, lo, hi);
      const __m256i d0 = _mm256_permutevar8x32_epi32(v0, low_dwords), d1 = _mm256_permutevar8x32_epi32(v1, low_dwords);
      q[i] = _mm_packs_epi32(_mm256_castsi256_si128(d0), _mm256_castsi256_si128(d1));  // 8 int16
    }
    alignas(32) Y row[kQ16Nr];
    if constexpr (sizeof(Y) == 2) {
      for (int i = 0; i < 4; ++i) _mm_store_si128(reinterpret_cast<__m128i*>(row + 8 * i), q[i]);
    } else {
      _mm_store_si128(reinterpret_cast<__m128i*>(row), _mm_packus_epi16(q[0], q[1]));
      _mm_store_si128(reinterpret_cast<__m128i*>(row + 16), _mm_packus_epi16(q[2], q[3]));
    }
    std::memcpy(y + r * y_stride, row, size_t(n) * sizeof(Y));
  }
}

}  // namespace

extern const Q16Kernels ds_q16_kernels__avx2 = {"avx2", gemm, pack_rows, store<uint8_t>, store<int16_t>};

}  // namespace ds
