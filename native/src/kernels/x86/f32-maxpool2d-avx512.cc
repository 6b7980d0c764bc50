// AVX-512 max pooling: the shared two-pass kernel (f32-maxpool2d-impl.h) with 16-lane vectors;
// stride 2 keeps the even lanes of 32 by vpermt2ps. Compiled with the AVX-512 flags.
#include <immintrin.h>

#include "kernels/x86/f32-maxpool2d-impl.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // the masked intrinsics' unused source operand
#endif

namespace ds {
namespace {

struct V512 {
  using T = __m512;
  static constexpr int kWidth = 16;
  static __mmask16 mask(int64_t n) { return __mmask16((1u << n) - 1); }
  static T load(const float* p) { return _mm512_loadu_ps(p); }
  static T load_n(const float* p, int64_t n) { return _mm512_maskz_loadu_ps(mask(n), p); }
  static void store(float* p, T v) { _mm512_storeu_ps(p, v); }
  static void store_n(float* p, int64_t n, T v) { _mm512_mask_storeu_ps(p, mask(n), v); }
  static T set1(float v) { return _mm512_set1_ps(v); }
  static T max(T a, T b) { return _mm512_max_ps(a, b); }
  static T even(T lo, T hi) {  // lanes 0, 2, ..., 30 of lo:hi
    const __m512i idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    return _mm512_permutex2var_ps(lo, idx, hi);
  }
};

}  // namespace

void ds_f32_maxpool2d__avx512(const Pool2dParams& p, const float* x, float* y) { x86::maxpool2d<V512>(p, x, y); }

}  // namespace ds
