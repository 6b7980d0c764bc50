// AVX-512 max pooling: the shared kernels (f32-maxpool2d-impl.h) with 16-lane vectors; stride 2
// keeps the even or odd lanes of 32 by vpermt2ps, stride 3 every third lane of 48 by vpermt2ps +
// masked vpermps; -inf edges by masked loads. Compiled with the AVX-512 flags.
#include <immintrin.h>

#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 on the undefined vectors of the intrinsics (before the include: it covers the templates).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include "kernels/x86/f32-maxpool2d-impl.h"

namespace ds {
namespace {

struct V512 {
  using T = __m512;
  static constexpr int kWidth = 16;
  static constexpr int kPoolRows = 4;  // output rows per band of maxpool_strided
  static __mmask16 mask(int64_t n) { return __mmask16((1u << n) - 1); }
  static T load(const float* p) { return _mm512_loadu_ps(p); }
  static __mmask16 lanes(int64_t begin, int64_t end) {  // lanes [begin, end) of [0, 16)
    begin = std::min<int64_t>(std::max<int64_t>(begin, 0), 16), end = std::min<int64_t>(std::max<int64_t>(end, 0), 16);
    return __mmask16(((1u << end) - 1) & ~((1u << begin) - 1));
  }
  static T load_or(const float* p, __mmask16 m, T fill) { return _mm512_mask_loadu_ps(fill, m, p); }
  static T load_n(const float* p, int64_t n) { return _mm512_maskz_loadu_ps(mask(n), p); }
  static void store(float* p, T v) { _mm512_storeu_ps(p, v); }
  static void store_n(float* p, int64_t n, T v) { _mm512_mask_storeu_ps(p, mask(n), v); }
  static T set1(float v) { return _mm512_set1_ps(v); }
  static T max(T a, T b) { return _mm512_max_ps(a, b); }
  static T even(T lo, T hi) {  // lanes 0, 2, ..., 30 of lo:hi
    const __m512i idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    return _mm512_permutex2var_ps(lo, idx, hi);
  }
  static T odd(T lo, T hi) {  // lanes 1, 3, ..., 31 of lo:hi
    const __m512i idx = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    return _mm512_permutex2var_ps(lo, idx, hi);
  }
  template <int t>
  static T third(T a, T b, T c) {  // lanes t, t + 3, ..., t + 45 of a:b:c
    const __m512i idx = _mm512_add_epi32(_mm512_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 33, 36, 39, 42, 45),
                                         _mm512_set1_epi32(t));
    const __mmask16 from_c = t == 2 ? 0xfc00 : 0xf800;  // lanes whose index is 32 or more
    return _mm512_mask_permutexvar_ps(_mm512_permutex2var_ps(a, idx, b), from_c, idx, c);
  }
  static T shift_in(T a, T b) {  // lanes 1..15 of a, then lane 0 of b
    return _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(b), _mm512_castps_si512(a), 1));
  }
};

}  // namespace

void ds_f32_maxpool2d__avx512(const Pool2dParams& p, const float* x, float* y) { x86::maxpool2d<V512>(p, x, y); }

}  // namespace ds
