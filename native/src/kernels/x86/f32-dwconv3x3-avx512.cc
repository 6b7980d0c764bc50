// AVX-512 depthwise 3x3, stride 1 or 2, on one plane: 16 output columns per vector; each tap's
// inputs come from a masked gather whose mask drops taps in the padding and lanes past the row,
// so borders need no separate code. Compiled with the AVX-512 flags.
#include <immintrin.h>

#include "kernels/dwconv3x3.h"
#include "kernels/gemm.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace ds {

void ds_f32_dwconv3x3__avx512(const DwConv3x3Params& p, const float* x, const float* w, float bias, float* y) {
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i lane_step = _mm512_mullo_epi32(iota, _mm512_set1_epi32(int(p.stride)));
  const __m512i zero_i = _mm512_setzero_si512(), width = _mm512_set1_epi32(int(p.w));
  const __m512 vbias = _mm512_set1_ps(bias);
  const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
  const __m512 alpha = _mm512_set1_ps(p.alpha), beta = _mm512_set1_ps(p.beta);
  __m512 wv[9];
  for (int t = 0; t < 9; ++t) wv[t] = _mm512_set1_ps(w[t]);
  for (int64_t oy = 0; oy < p.oh; ++oy) {
    float* yr = y + oy * p.ow;
    for (int64_t ox0 = 0; ox0 < p.ow; ox0 += 16) {
      const int64_t n = p.ow - ox0 < 16 ? p.ow - ox0 : 16;
      const __mmask16 out_mask = __mmask16((1u << n) - 1);
      __m512 acc = _mm512_setzero_ps();
      for (int64_t ky = 0; ky < 3; ++ky) {
        const int64_t iy = oy * p.stride - p.pad_top + ky;
        if (iy < 0 || iy >= p.h) continue;
        const float* xr = x + iy * p.w;
        for (int64_t kx = 0; kx < 3; ++kx) {
          const __m512i ix = _mm512_add_epi32(_mm512_set1_epi32(int(ox0 * p.stride - p.pad_left + kx)), lane_step);
          const __mmask16 m = out_mask & _mm512_cmpge_epi32_mask(ix, zero_i) & _mm512_cmplt_epi32_mask(ix, width);
          __m512 v;
          if (p.stride == 1 && m == out_mask && ox0 - p.pad_left + kx >= 0)
            v = _mm512_maskz_loadu_ps(m, xr + ox0 - p.pad_left + kx);  // interior: contiguous
          else
            v = _mm512_mask_i32gather_ps(zero, m, ix, xr, 4);
          acc = _mm512_fmadd_ps(v, wv[ky * 3 + kx], acc);
        }
      }
      __m512 v = _mm512_add_ps(acc, vbias);
      switch (p.act) {
        case 1: v = _mm512_max_ps(v, zero); break;
        case 2: v = _mm512_min_ps(_mm512_max_ps(v, alpha), beta); break;
        case 3: v = _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), v, alpha); break;
        case 5: v = _mm512_max_ps(zero, _mm512_min_ps(one, _mm512_add_ps(_mm512_mul_ps(alpha, v), beta))); break;
        case 6: {
          const __m512 t = _mm512_add_ps(_mm512_div_ps(v, _mm512_set1_ps(6.0f)), _mm512_set1_ps(0.5f));
          v = _mm512_mul_ps(v, _mm512_max_ps(zero, _mm512_min_ps(one, t)));
          break;
        }
        default: break;
      }
      _mm512_mask_storeu_ps(yr + ox0, out_mask, v);
      if (p.act == 4 || p.act == 7)
        for (int64_t j = 0; j < n; ++j) yr[ox0 + j] = gemm_activate(p.act, yr[ox0 + j], p.alpha, p.beta);
    }
  }
}

}  // namespace ds
