// AVX2 depthwise 3x3, stride 1 or 2, on one plane: 8 output columns per vector, the AVX2 twin of
// f32-dwconv3x3-avx512.cc. Stride 1: one load per tap. Stride 2: per input row, the 16 columns
// from the window start give the even (kx = 0) and odd (kx = 1) taps by shufps + vpermpd, the 16
// from two columns on give kx = 2. Loads are masked to the row (vmaskmovps fills zeros = the
// padding); the store is masked to the row's end. Compiled with -mavx2 -mfma.
#include <immintrin.h>

#include "kernels/dwconv3x3.h"
#include "kernels/gemm.h"

namespace ds {
namespace {

// Lanes of an 8-float load at column `col` that fall inside [0, w), as an all-ones/zero mask.
inline __m256i row_mask(int64_t col, int64_t w) {
  const __m256i e = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const int64_t a = col < 0 ? -col : 0;
  const int64_t b = w - col < 8 ? w - col : 8;
  const __m256i ge_a = _mm256_cmpgt_epi32(e, _mm256_set1_epi32(int(a > 8 ? 8 : a) - 1));
  const __m256i lt_b = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(b < 0 ? 0 : b)), e);
  return _mm256_and_si256(ge_a, lt_b);
}

// Even or odd elements of the 16 floats lo:hi, in order.
inline __m256 take_even(__m256 lo, __m256 hi) {
  const __m256 t = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}
inline __m256 take_odd(__m256 lo, __m256 hi) {
  const __m256 t = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}

inline __m256 activate(__m256 v, int32_t act, __m256 alpha, __m256 beta) {
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
  switch (act) {
    case 1: return _mm256_max_ps(v, zero);
    case 2: return _mm256_min_ps(_mm256_max_ps(v, alpha), beta);
    case 3: return _mm256_blendv_ps(v, _mm256_mul_ps(v, alpha), _mm256_cmp_ps(v, zero, _CMP_LT_OQ));
    case 5: return _mm256_max_ps(zero, _mm256_min_ps(one, _mm256_add_ps(_mm256_mul_ps(alpha, v), beta)));
    case 6: {
      const __m256 t = _mm256_add_ps(_mm256_div_ps(v, _mm256_set1_ps(6.0f)), _mm256_set1_ps(0.5f));
      return _mm256_mul_ps(v, _mm256_max_ps(zero, _mm256_min_ps(one, t)));
    }
    default: return v;  // 0; 4 and 7 by a scalar pass
  }
}

}  // namespace

void ds_f32_dwconv3x3__avx2(const DwConv3x3Params& p, const float* x, const float* w, float bias, float* y) {
  const __m256 vbias = _mm256_set1_ps(bias);
  const __m256 alpha = _mm256_set1_ps(p.alpha), beta = _mm256_set1_ps(p.beta);
  __m256 wv[9];
  for (int t = 0; t < 9; ++t) wv[t] = _mm256_set1_ps(w[t]);
  const int64_t s = p.stride;
  for (int64_t ox0 = 0; ox0 < p.ow; ox0 += 8) {
    const int64_t n = p.ow - ox0 < 8 ? p.ow - ox0 : 8;
    const __m256i out_mask = row_mask(0, n);
    const int64_t base = ox0 * s - p.pad_left;  // input column of lane 0, tap kx = 0
    __m256i m[4];
    if (s == 1) {
      for (int kx = 0; kx < 3; ++kx) m[kx] = row_mask(base + kx, p.w);
    } else {
      m[0] = row_mask(base, p.w), m[1] = row_mask(base + 8, p.w);
      m[2] = row_mask(base + 2, p.w), m[3] = row_mask(base + 10, p.w);
    }
    for (int64_t oy = 0; oy < p.oh; ++oy) {
      __m256 acc = _mm256_setzero_ps();
      for (int64_t ky = 0; ky < 3; ++ky) {
        const int64_t iy = oy * s - p.pad_top + ky;
        if (iy < 0 || iy >= p.h) continue;
        const float* r = x + iy * p.w + base;
        if (s == 1) {
          acc = _mm256_fmadd_ps(_mm256_maskload_ps(r, m[0]), wv[ky * 3], acc);
          acc = _mm256_fmadd_ps(_mm256_maskload_ps(r + 1, m[1]), wv[ky * 3 + 1], acc);
          acc = _mm256_fmadd_ps(_mm256_maskload_ps(r + 2, m[2]), wv[ky * 3 + 2], acc);
        } else {
          const __m256 lo = _mm256_maskload_ps(r, m[0]), hi = _mm256_maskload_ps(r + 8, m[1]);
          const __m256 lo2 = _mm256_maskload_ps(r + 2, m[2]), hi2 = _mm256_maskload_ps(r + 10, m[3]);
          acc = _mm256_fmadd_ps(take_even(lo, hi), wv[ky * 3], acc);
          acc = _mm256_fmadd_ps(take_odd(lo, hi), wv[ky * 3 + 1], acc);
          acc = _mm256_fmadd_ps(take_even(lo2, hi2), wv[ky * 3 + 2], acc);
        }
      }
      float* yr = y + oy * p.ow + ox0;
      _mm256_maskstore_ps(yr, out_mask, activate(_mm256_add_ps(acc, vbias), p.act, alpha, beta));
      if (p.act == 4 || p.act == 7)
        for (int64_t j = 0; j < n; ++j) yr[j] = gemm_activate(p.act, yr[j], p.alpha, p.beta);
    }
  }
}

}  // namespace ds
