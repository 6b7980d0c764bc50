// AVX-512 global average pooling: each plane summed in double lanes (as the scalar kernel sums in
// double, so large planes keep their precision), 16 floats per step.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 on the undefined vectors in cvtps_pd, extract
#endif

#include <immintrin.h>

#include "kernels/kernels.h"

namespace ds {

void ds_f32_global_avgpool__avx512(int64_t planes, int64_t size, const float* x, float* y) {
  for (int64_t p = 0; p < planes; ++p, x += size) {
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 16 <= size; i += 16) {
      const __m512 v = _mm512_loadu_ps(x + i);
      s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
      s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
    }
    for (; i < size; i += 8) {  // the last 1-15 floats, 8 at a time, masked
      const int64_t n = size - i < 8 ? size - i : 8;
      const __m256 v = _mm256_maskz_loadu_ps(__mmask8((1u << n) - 1), x + i);
      s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(v));
    }
    y[p] = float(_mm512_reduce_add_pd(_mm512_add_pd(s0, s1)) / double(size));
  }
}

}  // namespace ds
