// AVX2 max pooling: the shared two-pass kernel (f32-maxpool2d-impl.h) with 8-lane vectors; stride 2
// keeps the even lanes of 16 by shufps + vpermpd. Compiled with -mavx2 -mfma.
#include <immintrin.h>

#include "kernels/x86/f32-maxpool2d-impl.h"

namespace ds {
namespace {

struct V256 {
  using T = __m256;
  static constexpr int kWidth = 8;
  static __m256i mask(int64_t n) {  // lanes [0, n) set
    static const int32_t kOnes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kOnes + 8 - n));
  }
  static T load(const float* p) { return _mm256_loadu_ps(p); }
  static T load_n(const float* p, int64_t n) { return _mm256_maskload_ps(p, mask(n)); }
  static void store(float* p, T v) { _mm256_storeu_ps(p, v); }
  static void store_n(float* p, int64_t n, T v) { _mm256_maskstore_ps(p, mask(n), v); }
  static T set1(float v) { return _mm256_set1_ps(v); }
  static T max(T a, T b) { return _mm256_max_ps(a, b); }
  static T even(T lo, T hi) {  // lanes 0, 2, ..., 14 of lo:hi
    const __m256 t = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
  }
};

}  // namespace

void ds_f32_maxpool2d__avx2(const Pool2dParams& p, const float* x, float* y) { x86::maxpool2d<V256>(p, x, y); }

}  // namespace ds
