// AVX2 max pooling: the shared kernels (f32-maxpool2d-impl.h) with 8-lane vectors; stride 2 keeps
// the even or odd lanes of 16 by shufps + vpermpd, stride 3 every third lane of 24 by 3 vpermps +
// 2 blends; -inf edges by vmaskmovps + blend. Compiled with -mavx2 -mfma.
#include <immintrin.h>

#include "kernels/x86/f32-maxpool2d-impl.h"

namespace ds {
namespace {

struct V256 {
  using T = __m256;
  static constexpr int kWidth = 8;
  static constexpr int kPoolRows = 2;  // output rows per band of maxpool_strided (16 ymm registers)
  static __m256i mask(int64_t n) {  // lanes [0, n) set
    static const int32_t kOnes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kOnes + 8 - n));
  }
  static __m256i lanes(int64_t begin, int64_t end) {  // lanes [begin, end) of [0, 8)
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    begin = std::min<int64_t>(std::max<int64_t>(begin, -1), 8), end = std::min<int64_t>(std::max<int64_t>(end, 0), 8);
    return _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(int32_t(begin)), lane),
                               _mm256_cmpgt_epi32(_mm256_set1_epi32(int32_t(end)), lane));
  }
  static T load_or(const float* p, __m256i m, T fill) {
    return _mm256_blendv_ps(fill, _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
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
  static T odd(T lo, T hi) {  // lanes 1, 3, ..., 15 of lo:hi
    const __m256 t = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
  }
  template <int t>
  static T third(T a, T b, T c) {  // lanes t, t + 3, ..., t + 21 of a:b:c
    const __m256i idx = _mm256_add_epi32(_mm256_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21), _mm256_set1_epi32(t));
    const T from_a = _mm256_permutevar8x32_ps(a, idx), from_b = _mm256_permutevar8x32_ps(b, idx),
            from_c = _mm256_permutevar8x32_ps(c, idx);  // each by the index mod 8
    // The lanes i with 3 i + t in [8, 16) from b, past 16 from c.
    constexpr int kB = t == 0 ? 0x38 : t == 1 ? 0x18 : 0x1c, kC = t == 0 ? 0xc0 : 0xe0;
    return _mm256_blend_ps(_mm256_blend_ps(from_a, from_b, kB), from_c, kC);
  }
  static T shift_in(T a, T b) {  // lanes 1..7 of a, then lane 0 of b
    const T a1 = _mm256_permutevar8x32_ps(a, _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 7));
    return _mm256_blend_ps(a1, _mm256_broadcastss_ps(_mm256_castps256_ps128(b)), 0x80);
  }
};

}  // namespace

void ds_f32_maxpool2d__avx2(const Pool2dParams& p, const float* x, float* y) { x86::maxpool2d<V256>(p, x, y); }

}  // namespace ds
