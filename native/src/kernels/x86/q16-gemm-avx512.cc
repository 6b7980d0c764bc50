// The i16-input GEMM tile of qconv2d/qdense (kernels/qi16.h, Q16Kernels::gemm): up to 8 rows of A
// broadcast as int32 pair words, 32 columns of B in two vectors of 16 (int16 pairs), vpmaddwd +
// vpaddd into 16 int32 accumulators, added into int64 every kQ16Flush pair steps. vpdpwssd (AVX-512
// VNNI) in place of the pair measured no faster on this machine's Zen 4 (64x56x56 3x3: 1.92 vs
// 1.80 ms; 256x14x14: 1.33 vs 1.17 ms), so both AVX-512 levels run this one.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 on the undefined vectors in cvtepi32_epi64, extract
#include <immintrin.h>

#include <cstring>

#include "kernels/qi16.h"
#include "kernels/unroll.h"

namespace ds {
namespace {

// The int64 sums live in acc (L1) and take the int32 lanes at each flush; the int32 sums stay
// in registers (indexed through unroll only).
template <int R>
void gemm_rows(int64_t k2, const int16_t* const* a, const int16_t* b, int64_t* acc) {
  for (int i = 0; i < R * kQ16Nr; ++i) acc[i] = 0;
  for (int64_t k0 = 0; k0 < k2; k0 += kQ16Flush) {
    const int64_t k1 = k0 + kQ16Flush < k2 ? k0 + kQ16Flush : k2;
    __m512i sum[R][2];
    unroll<R>([&](auto r) { sum[r][0] = sum[r][1] = _mm512_setzero_si512(); });
    for (int64_t kk = k0; kk < k1; ++kk) {
      const __m512i b0 = _mm512_loadu_si512(b + kk * 64), b1 = _mm512_loadu_si512(b + kk * 64 + 32);
      unroll<R>([&](auto r) {
        int32_t pair;
        std::memcpy(&pair, a[r] + 2 * kk, 4);
        const __m512i ar = _mm512_set1_epi32(pair);
        sum[r][0] = _mm512_add_epi32(sum[r][0], _mm512_madd_epi16(ar, b0));
        sum[r][1] = _mm512_add_epi32(sum[r][1], _mm512_madd_epi16(ar, b1));
      });
    }
    unroll<R>([&](auto r) {
      for (int v = 0; v < 2; ++v) {
        int64_t* dst = acc + r * kQ16Nr + v * 16;
        const __m512i lo = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(sum[r][v]));
        const __m512i hi = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(sum[r][v], 1));
        _mm512_storeu_si512(dst, _mm512_add_epi64(_mm512_loadu_si512(dst), lo));
        _mm512_storeu_si512(dst + 8, _mm512_add_epi64(_mm512_loadu_si512(dst + 8), hi));
      }
    });
  }
}

void gemm(int64_t k2, int rows, const int16_t* const* a, const int16_t* b, int64_t* acc) {
  switch (rows) {
    case 1: gemm_rows<1>(k2, a, b, acc); break;
    case 2: gemm_rows<2>(k2, a, b, acc); break;
    case 3: gemm_rows<3>(k2, a, b, acc); break;
    case 4: gemm_rows<4>(k2, a, b, acc); break;
    case 5: gemm_rows<5>(k2, a, b, acc); break;
    case 6: gemm_rows<6>(k2, a, b, acc); break;
    case 7: gemm_rows<7>(k2, a, b, acc); break;
    default: gemm_rows<8>(k2, a, b, acc); break;
  }
}

}  // namespace

extern const Q16Kernels ds_q16_kernels__avx512 = {"avx512", gemm};

}  // namespace ds
