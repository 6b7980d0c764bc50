// AVX2 global average pooling: each plane summed in double lanes (as the scalar kernel sums in
// double, so large planes keep their precision), 8 floats per step.
#include <immintrin.h>

#include "kernels/kernels.h"

namespace ds {

void ds_f32_global_avgpool__avx2(int64_t planes, int64_t size, const float* x, float* y) {
  for (int64_t p = 0; p < planes; ++p, x += size) {
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= size; i += 8) {
      const __m256 v = _mm256_loadu_ps(x + i);
      s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
      s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
    }
    const __m256d s = _mm256_add_pd(s0, s1);
    const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    double sum = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
    for (; i < size; ++i) sum += x[i];
    y[p] = float(sum / double(size));
  }
}

}  // namespace ds
