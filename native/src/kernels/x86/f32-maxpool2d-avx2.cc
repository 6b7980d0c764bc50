// AVX2 max pooling, NCHW: 8 output columns per vector. Stride 1 reads each tap's inputs with one
// masked load; stride 2 with two (16 columns) and keeps the even ones (shufps + vpermpd). Padding
// and columns past the row are blended in as -inf, so borders need no separate code. Other strides
// and dilations run the scalar reference. Same result as the reference (max is exact). Compiled
// with -mavx2 -mfma.
#include <immintrin.h>

#include <limits>

#include "kernels/kernels.h"

namespace ds {
namespace {

// Lanes e of an 8-lane vector with a <= e - offset < b, as an all-ones/zero mask.
inline __m256i lane_range(int64_t a, int64_t b, int offset) {
  const __m256i e = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(offset));
  const __m256i ge_a = _mm256_cmpgt_epi32(e, _mm256_set1_epi32(int(a < -1 ? -1 : a) - 1));
  const __m256i lt_b = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(b < -1 ? -1 : b > 64 ? 64 : b)), e);
  return _mm256_and_si256(ge_a, lt_b);
}

inline __m256 load_or(const float* p, __m256i mask, __m256 fill) {
  return _mm256_blendv_ps(fill, _mm256_maskload_ps(p, mask), _mm256_castsi256_ps(mask));
}

}  // namespace

void ds_f32_maxpool2d__avx2(const Pool2dParams& p, const float* x, float* y) {
  const int64_t s = p.stride_w;
  if ((s != 1 && s != 2) || p.dil_w != 1) {
    ds_f32_maxpool2d__scalar(p, x, y);
    return;
  }
  const __m256 ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t plane = 0; plane < p.n * p.c; ++plane) {
    const float* xp = x + plane * p.h * p.w;
    float* yp = y + plane * p.oh * p.ow;
    for (int64_t oy = 0; oy < p.oh; ++oy) {
      for (int64_t ox0 = 0; ox0 < p.ow; ox0 += 8) {
        const int64_t n = p.ow - ox0 < 8 ? p.ow - ox0 : 8;
        __m256 m = ninf;
        for (int64_t ky = 0; ky < p.kh; ++ky) {
          const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dil_h;
          if (iy < 0 || iy >= p.h) continue;
          const float* row = xp + iy * p.w;
          for (int64_t kx = 0; kx < p.kw; ++kx) {
            const int64_t base = ox0 * s - p.pad_left + kx;  // input column of lane 0
            const int64_t a = base < 0 ? -base : 0;
            const int64_t span = s * (n - 1) + 1;
            const int64_t b = p.w - base < span ? p.w - base : span;
            if (s == 1) {
              m = _mm256_max_ps(m, load_or(row + base, lane_range(a, b, 0), ninf));
            } else {
              const __m256 lo = load_or(row + base, lane_range(a, b, 0), ninf);
              const __m256 hi = load_or(row + base + 8, lane_range(a, b, 8), ninf);
              // [lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6] -> [lo0 lo2 lo4 lo6 hi0 hi2 hi4 hi6]
              const __m256 t = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
              m = _mm256_max_ps(m, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0))));
            }
          }
        }
        const __m256i out = lane_range(0, n, 0);
        _mm256_maskstore_ps(yp + oy * p.ow + ox0, out, m);
      }
    }
  }
}

}  // namespace ds
