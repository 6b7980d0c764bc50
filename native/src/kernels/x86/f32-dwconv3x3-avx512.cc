// AVX-512 depthwise 3x3, stride 1 or 2, on one plane: 16 output columns per vector, no gathers.
// Stride 1: each tap is one load at the tap's column offset. Stride 2: per input row, the 32
// columns from the window start give the even (kx = 0) and odd (kx = 1) taps by vpermt2ps, the 32
// from two columns on give kx = 2. Loads are masked to the row (zero fill = the padding), so
// borders need no separate code; the output store is masked to the row's end. Taps are summed in
// the reference's order (ky, kx), then bias, then the activation. Compiled with the AVX-512 flags.
#include <immintrin.h>

#include "kernels/dwconv3x3.h"
#include "kernels/gemm.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace ds {
namespace {

// Lanes of a 16-float load at column `col` that fall inside [0, w).
inline __mmask16 row_mask(int64_t col, int64_t w) {
  const int64_t a = col < 0 ? -col : 0;
  const int64_t b = w - col < 16 ? w - col : 16;
  if (b <= a) return 0;
  return __mmask16(((b - a >= 16 ? 0xFFFFu : (1u << (b - a)) - 1u) << a) & 0xFFFFu);
}

inline __m512 activate(__m512 v, int32_t act, __m512 alpha, __m512 beta) {
  const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
  switch (act) {
    case 1: return _mm512_max_ps(v, zero);
    case 2: return _mm512_min_ps(_mm512_max_ps(v, alpha), beta);
    case 3: return _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), v, alpha);
    case 5: return _mm512_max_ps(zero, _mm512_min_ps(one, _mm512_add_ps(_mm512_mul_ps(alpha, v), beta)));
    case 6: {
      const __m512 t = _mm512_add_ps(_mm512_div_ps(v, _mm512_set1_ps(6.0f)), _mm512_set1_ps(0.5f));
      return _mm512_mul_ps(v, _mm512_max_ps(zero, _mm512_min_ps(one, t)));
    }
    default: return v;  // 0; 4 and 7 by a scalar pass
  }
}

}  // namespace

void ds_f32_dwconv3x3__avx512(const DwConv3x3Params& p, const float* x, const float* w, float bias, float* y) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512 vbias = _mm512_set1_ps(bias);
  const __m512 alpha = _mm512_set1_ps(p.alpha), beta = _mm512_set1_ps(p.beta);
  __m512 wv[9];
  for (int t = 0; t < 9; ++t) wv[t] = _mm512_set1_ps(w[t]);
  const int64_t s = p.stride;
  for (int64_t ox0 = 0; ox0 < p.ow; ox0 += 16) {
    const int64_t n = p.ow - ox0 < 16 ? p.ow - ox0 : 16;
    const __mmask16 out_mask = __mmask16((1u << n) - 1);
    const int64_t base = ox0 * s - p.pad_left;  // input column of lane 0, tap kx = 0
    // Masks of the loads, the same for every row: stride 1 at base + kx; stride 2 at base,
    // base + 16 (kx = 0, 1) and base + 2, base + 18 (kx = 2).
    __mmask16 m[4];
    if (s == 1) {
      for (int kx = 0; kx < 3; ++kx) m[kx] = row_mask(base + kx, p.w);
    } else {
      m[0] = row_mask(base, p.w), m[1] = row_mask(base + 16, p.w);
      m[2] = row_mask(base + 2, p.w), m[3] = row_mask(base + 18, p.w);
    }
    for (int64_t oy = 0; oy < p.oh; ++oy) {
      __m512 acc = _mm512_setzero_ps();
      for (int64_t ky = 0; ky < 3; ++ky) {
        const int64_t iy = oy * s - p.pad_top + ky;
        if (iy < 0 || iy >= p.h) continue;
        const float* r = x + iy * p.w + base;
        if (s == 1) {
          acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m[0], r), wv[ky * 3], acc);
          acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m[1], r + 1), wv[ky * 3 + 1], acc);
          acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m[2], r + 2), wv[ky * 3 + 2], acc);
        } else {
          const __m512 lo = _mm512_maskz_loadu_ps(m[0], r), hi = _mm512_maskz_loadu_ps(m[1], r + 16);
          const __m512 lo2 = _mm512_maskz_loadu_ps(m[2], r + 2), hi2 = _mm512_maskz_loadu_ps(m[3], r + 18);
          acc = _mm512_fmadd_ps(_mm512_permutex2var_ps(lo, even, hi), wv[ky * 3], acc);
          acc = _mm512_fmadd_ps(_mm512_permutex2var_ps(lo, odd, hi), wv[ky * 3 + 1], acc);
          acc = _mm512_fmadd_ps(_mm512_permutex2var_ps(lo2, even, hi2), wv[ky * 3 + 2], acc);
        }
      }
      float* yr = y + oy * p.ow + ox0;
      _mm512_mask_storeu_ps(yr, out_mask, activate(_mm512_add_ps(acc, vbias), p.act, alpha, beta));
      if (p.act == 4 || p.act == 7)
        for (int64_t j = 0; j < n; ++j) yr[j] = gemm_activate(p.act, yr[j], p.alpha, p.beta);
    }
  }
}

}  // namespace ds
