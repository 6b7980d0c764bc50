// int8 kernels with AVX-VNNI (the 256-bit, VEX-encoded vpdpbusd of CPUs with AVX2 but no
// AVX-512, e.g. Intel's Alder Lake and later client cores): u8 activations times i8 weights, groups
// of four products added into int32 lanes exactly, as at the avx512vnni level but in ymm registers.
//   GEMM ds_qs8_gemm_6x16__avxvnni: 6 output channels x 16 pixels in 12 ymm accumulators (+2
//     activation vectors + 1 broadcast weight = 15 of the 16 registers); activations packed
//     [k/4][pixel][4], weights [k/4][row][4] (broadcast as one int32). Accumulators start at the
//     bias; the epilogue is the AVX2 level's (kernels/x86/qu8-requant-avx2.h).
//   Dense ds_qs8_dense__avxvnni: one row of x against each weight row, 32 bytes per vpdpbusd.
//   Depthwise: the AVX2 level's kernel (vpmaddwd on int16 planes).
// Compiled with -mavx2 -mfma -mavxvnni.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/qs8-pack.h"
#include "kernels/qu8.h"
#include "kernels/unroll.h"
#include "kernels/x86/qu8-requant-avx2.h"

namespace ds {
namespace {

constexpr int kMr = 6, kNr = 16, kKr = 4;

int64_t groups(int64_t k) { return (k + kKr - 1) / kKr; }

constexpr auto packed_w_bytes = qs8_packed_w_bytes<kMr, kKr>;
constexpr auto pack_w = qs8_pack_w<kMr, kKr>;

int64_t packed_x_bytes(int64_t k, int64_t n) { return (n + kNr - 1) / kNr * kNr * groups(k) * kKr; }

// Packs x (k, n) whose row kk starts at row(kk): four rows of 16 columns are interleaved bytewise
// into [column][4]; panels past n or groups past k are filled element by element, with zeros.
template <typename RowFn>
void pack_x_impl(int64_t k, int64_t n, RowFn row, void* dst) {
  uint8_t* d = static_cast<uint8_t*>(dst);
  const int64_t g_count = groups(k);
  for (int64_t q = 0; q < (n + kNr - 1) / kNr; ++q) {
    const int64_t col0 = q * kNr;
    for (int64_t g = 0; g < g_count; ++g) {
      uint8_t* out = d + (q * g_count + g) * kNr * kKr;
      const int64_t k0 = g * kKr;
      if (k0 + kKr <= k && col0 + kNr <= n) {
        const __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row(k0) + col0));
        const __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row(k0 + 1) + col0));
        const __m128i r2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row(k0 + 2) + col0));
        const __m128i r3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row(k0 + 3) + col0));
        const __m128i t0 = _mm_unpacklo_epi8(r0, r1), t1 = _mm_unpackhi_epi8(r0, r1);
        const __m128i t2 = _mm_unpacklo_epi8(r2, r3), t3 = _mm_unpackhi_epi8(r2, r3);
        __m128i* o = reinterpret_cast<__m128i*>(out);
        _mm_storeu_si128(o + 0, _mm_unpacklo_epi16(t0, t2));
        _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(t0, t2));
        _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(t1, t3));
        _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(t1, t3));
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

// Four packed weights as one int32 to broadcast (the packed buffer is bytes).
typedef int32_t __attribute__((may_alias, aligned(1))) packed_i32;

// Rows [i0, i0 + rows) x columns [j0, j0 + cols) from packed panels wp (6 rows) and xp (16
// columns). The accumulator array is indexed only through unroll<>, so it stays in registers.
void gemm_tile(const QGemmParams& p, int64_t g_count, const int8_t* wp, const uint8_t* xp, int64_t i0,
               int64_t rows, int64_t j0, int64_t cols) {
  __m256i acc[kMr][2];
  unroll<kMr>([&](auto r) { acc[r][0] = acc[r][1] = _mm256_set1_epi32(r < rows ? p.ch.bias[i0 + r] : 0); });
  for (int64_t g = 0; g < g_count; ++g) {
    const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xp + g * kNr * kKr));
    const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xp + g * kNr * kKr + 32));
    const packed_i32* wg = reinterpret_cast<const packed_i32*>(wp + g * kMr * kKr);
    unroll<kMr>([&](auto r) {
      const __m256i wb = _mm256_set1_epi32(wg[r]);
      acc[r][0] = _mm256_dpbusd_avx_epi32(acc[r][0], x0, wb);
      acc[r][1] = _mm256_dpbusd_avx_epi32(acc[r][1], x1, wb);
    });
  }
  alignas(32) int32_t out[kMr][kNr];
  unroll<kMr>([&](auto r) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(out[r]), acc[r][0]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(out[r] + 8), acc[r][1]);
  });
  requant_tile16(out, rows, cols, p, i0, j0);
}

void gemm(const QGemmParams& p) {
  const int64_t g_count = groups(p.k);
  const int8_t* wbase = static_cast<const int8_t*>(p.w);
  const uint8_t* xbase = static_cast<const uint8_t*>(p.x);
  // Pixels outside, channels inside: a panel of packed activations (k * 16 bytes) stays in L1
  // while the row tiles pass over it.
  for (int64_t j0 = 0; j0 < p.n; j0 += kNr) {
    const uint8_t* xp = xbase + (j0 / kNr) * kNr * g_count * kKr;
    const int64_t cols = std::min<int64_t>(kNr, p.n - j0);
    for (int64_t i0 = 0; i0 < p.m; i0 += kMr)
      gemm_tile(p, g_count, wbase + (i0 / kMr) * kMr * g_count * kKr, xp, i0, std::min<int64_t>(kMr, p.m - i0), j0,
                cols);
  }
}

void dense(int64_t k, const uint8_t* x, const int8_t* w, int64_t m0, int64_t m1, const QChannelParams& ch,
           const QuantOut& q, uint8_t* y) {
  for (int64_t j = m0; j < m1; ++j) {
    const int8_t* wj = w + j * k;
    __m256i acc = _mm256_setzero_si256();
    int64_t t = 0;
    for (; t + 32 <= k; t += 32)
      acc = _mm256_dpbusd_avx_epi32(acc, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + t)),
                                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wj + t)));
    alignas(32) int32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc);
    int64_t v = ch.bias[j];
    for (int32_t l : lanes) v += l;
    for (; t < k; ++t) v += int32_t(x[t]) * wj[t];
    y[j] = qu8_clamp(q.y_zp + qu8_requant(v, ch.multiplier[j], ch.shift[j]), q.act_min, q.act_max);
  }
}

}  // namespace

extern const QGemmKernels ds_qs8_gemm_kernels__avxvnni = {
    "ds_qs8_gemm_6x16__avxvnni", kMr, kNr, kKr, 1, packed_w_bytes, pack_w, packed_x_bytes, pack_x, gemm, nullptr,
    pack_x_rows};
extern const QKernels ds_qkernels__avxvnni = {"avxvnni", &ds_qs8_gemm_kernels__avxvnni, ds_qu8_dwconv3x3__avx2, dense};

}  // namespace ds
