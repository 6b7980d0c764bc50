// int8 kernels with AVX2. vpmaddubsw (u8 x i8 pairs summed into int16) would saturate: 255 * 127
// * 2 = 64770 > 32767. Instead both operands are widened to int16 when packed (activations
// zero-extended, weights sign-extended) and vpmaddwd sums pairs of int16 products into int32
// lanes, exactly (|sum| <= 2 * 255 * 128). This costs twice the packed activation bytes but no
// restriction on the weights.
//   GEMM ds_qs8_gemm_4x16__avx2: 4 output channels x 16 pixels in 8 ymm accumulators; packed
//     [k/2][pixel][2] and [k/2][row][2] int16.
//   Epilogue (kernels/x86/qu8-requant-avx2.h): 64-bit products (vpmuldq on even/odd lanes), a
//     logical shift of the value made non-negative; rows with shift < 0 take the scalar formula.
//   3x3 depthwise is in qu8-dwconv3x3-avx2.cc.
#include <immintrin.h>

#include <cstring>

#include "kernels/qu8.h"
#include "kernels/x86/qu8-requant-avx2.h"

namespace ds {
namespace {

constexpr int kMr = 4, kNr = 16, kKr = 2;

int64_t groups(int64_t k) { return (k + kKr - 1) / kKr; }

int64_t packed_w_bytes(int64_t m, int64_t k) { return (m + kMr - 1) / kMr * kMr * groups(k) * kKr * 2; }

void pack_w(int64_t m, int64_t k, const int8_t* w, void* dst) {
  int16_t* d = static_cast<int16_t*>(dst);
  const int64_t g_count = groups(k);
  for (int64_t p = 0; p < (m + kMr - 1) / kMr; ++p)
    for (int64_t g = 0; g < g_count; ++g)
      for (int64_t r = 0; r < kMr; ++r)
        for (int64_t j = 0; j < kKr; ++j) {
          const int64_t row = p * kMr + r, kk = g * kKr + j;
          *d++ = row < m && kk < k ? w[row * k + kk] : 0;
        }
}

int64_t packed_x_bytes(int64_t k, int64_t n) { return (n + kNr - 1) / kNr * kNr * groups(k) * kKr * 2; }

// Packs x (k, n) whose row kk starts at row(kk): two rows of 16 columns at a time are interleaved
// and widened; the edges (past n or past k) element by element with zeros.
template <typename RowFn>
void pack_x_impl(int64_t k, int64_t n, RowFn row, void* dst) {
  int16_t* d = static_cast<int16_t*>(dst);
  const int64_t g_count = groups(k);
  for (int64_t q = 0; q < (n + kNr - 1) / kNr; ++q) {
    const int64_t col0 = q * kNr;
    for (int64_t g = 0; g < g_count; ++g) {
      int16_t* out = d + (q * g_count + g) * kNr * kKr;
      const int64_t k0 = g * kKr;
      if (k0 + kKr <= k && col0 + kNr <= n) {
        const __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row(k0) + col0));
        const __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row(k0 + 1) + col0));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(r0, r1)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16), _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(r0, r1)));
        continue;
      }
      for (int64_t col = 0; col < kNr; ++col)
        for (int64_t j = 0; j < kKr; ++j) {
          const int64_t kk = k0 + j, cc = col0 + col;
          out[col * kKr + j] = kk < k && cc < n ? row(kk)[cc] : 0;
        }
    }
  }
}

void pack_x(int64_t k, int64_t n, const uint8_t* x, int64_t stride, void* dst) {
  pack_x_impl(k, n, [&](int64_t kk) { return x + kk * stride; }, dst);
}

void pack_x_rows(int64_t k, int64_t n, const uint8_t* x, const int64_t* row_offsets, void* dst) {
  pack_x_impl(k, n, [&](int64_t kk) { return x + row_offsets[kk]; }, dst);
}

void requant_row(const int32_t* acc, int64_t n, int32_t bias, int32_t mult, int32_t shift, const QuantOut& q,
                 uint8_t* y) {
  if (shift < 0) {
    for (int64_t i = 0; i < n; ++i)
      y[i] = qu8_clamp(q.y_zp + qu8_requant(int64_t(acc[i]) + bias, mult, shift), q.act_min, q.act_max);
    return;
  }
  const __m256i b = _mm256_set1_epi32(bias);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i a = _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + i)), b);
    store_bytes(y + i, requant8(a, mult, shift, q), 8);
  }
  for (; i < n; ++i) y[i] = qu8_clamp(q.y_zp + qu8_requant(int64_t(acc[i]) + bias, mult, shift), q.act_min, q.act_max);
}

// Two packed int16 weights as one int32 to broadcast.
typedef int32_t __attribute__((may_alias, aligned(2))) packed_i32;

// Rows [i0, i0 + rows) x columns [j0, j0 + cols) from packed panels wp (4 rows) and xp (16
// columns).
inline void gemm_tile(const QGemmParams& p, int64_t g_count, const int16_t* wp, const int16_t* xp, int64_t i0,
                      int64_t rows, int64_t j0, int64_t cols) {
  // Accumulators start at the bias (rows past m: 0). Every index is a constant after unrolling,
  // so they stay in registers.
  __m256i acc[kMr][2];
#pragma GCC unroll 4
  for (int r = 0; r < kMr; ++r) acc[r][0] = acc[r][1] = _mm256_set1_epi32(r < rows ? p.ch.bias[i0 + r] : 0);
  for (int64_t g = 0; g < g_count; ++g) {
    const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xp + g * kNr * kKr));
    const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xp + g * kNr * kKr + 16));
    const packed_i32* wg = reinterpret_cast<const packed_i32*>(wp + g * kMr * kKr);
#pragma GCC unroll 4
    for (int r = 0; r < kMr; ++r) {
      const __m256i wb = _mm256_set1_epi32(wg[r]);
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(x0, wb));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(x1, wb));
    }
  }
  alignas(32) int32_t out[kMr][kNr];
#pragma GCC unroll 4
  for (int r = 0; r < kMr; ++r) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(out[r]), acc[r][0]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(out[r] + 8), acc[r][1]);
  }
  requant_tile16(out, rows, cols, p, i0, j0);
}

void gemm(const QGemmParams& p) {
  const int64_t g_count = groups(p.k);
  const int16_t* wbase = static_cast<const int16_t*>(p.w);
  const int16_t* xbase = static_cast<const int16_t*>(p.x);
  // Pixels outside, channels inside: a panel of packed activations stays in L1 while the row
  // tiles pass over it.
  for (int64_t j0 = 0; j0 < p.n; j0 += kNr) {
    const int16_t* xp = xbase + (j0 / kNr) * kNr * g_count * kKr;
    const int64_t cols = p.n - j0 < kNr ? p.n - j0 : kNr;
    for (int64_t i0 = 0; i0 < p.m; i0 += kMr)
      gemm_tile(p, g_count, wbase + (i0 / kMr) * kMr * g_count * kKr, xp, i0, p.m - i0 < kMr ? p.m - i0 : kMr, j0,
                cols);
  }
}

void dense(int64_t k, const uint8_t* x, const int8_t* w, int64_t m0, int64_t m1, const QChannelParams& ch,
           const QuantOut& q, uint8_t* y) {
  for (int64_t j = m0; j < m1; ++j) {
    const int8_t* wj = w + j * k;
    __m256i acc = _mm256_setzero_si256();
    int64_t t = 0;
    for (; t + 16 <= k; t += 16) {
      const __m256i xv = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + t)));
      const __m256i wv = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wj + t)));
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(xv, wv));
    }
    int32_t lanes[8];
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes), acc);
    int64_t v = ch.bias[j];
    for (int32_t l : lanes) v += l;
    for (; t < k; ++t) v += int32_t(x[t]) * wj[t];
    y[j] = qu8_clamp(q.y_zp + qu8_requant(v, ch.multiplier[j], ch.shift[j]), q.act_min, q.act_max);
  }
}

}  // namespace
}  // namespace ds

#define QU8_DW_NAME ds_qu8_dwconv__avx2
#include "kernels/x86/qu8-dwconv-impl.h"

namespace ds {

extern const QGemmKernels ds_qs8_gemm_kernels__avx2 = {
    "ds_qs8_gemm_4x16__avx2", kMr, kNr, kKr, 2, packed_w_bytes, pack_w, packed_x_bytes, pack_x, gemm, nullptr,
    pack_x_rows};
extern const QKernels ds_qkernels__avx2 = {"avx2", &ds_qs8_gemm_kernels__avx2, ds_qu8_dwconv3x3__avx2, dense};

}  // namespace ds
