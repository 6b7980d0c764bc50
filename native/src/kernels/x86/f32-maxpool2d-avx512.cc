// AVX-512 max pooling, NCHW: 16 output columns per vector. Stride 1 reads each tap's inputs with
// one masked load; stride 2 with two (32 columns) and keeps the even ones (vpermt2ps). Padding and
// columns past the row come from the mask as -inf, so borders need no separate code. Other strides
// and dilations run the scalar reference plane by plane. Same result as the reference (max is
// exact). Compiled with the AVX-512 flags.
#include <immintrin.h>

#include <limits>

#include "kernels/kernels.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace ds {
namespace {

// Bits [a, b) of a 32-bit mask (empty when b <= a).
inline uint32_t bit_range(int64_t a, int64_t b) {
  if (b <= a) return 0;
  const uint32_t width = b - a >= 32 ? ~0u : (1u << (b - a)) - 1;
  return width << a;
}

}  // namespace

void ds_f32_maxpool2d__avx512(const Pool2dParams& p, const float* x, float* y) {
  const int64_t s = p.stride_w;
  if ((s != 1 && s != 2) || p.dil_w != 1) {
    ds_f32_maxpool2d__scalar(p, x, y);
    return;
  }
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  for (int64_t plane = 0; plane < p.n * p.c; ++plane) {
    const float* xp = x + plane * p.h * p.w;
    float* yp = y + plane * p.oh * p.ow;
    for (int64_t oy = 0; oy < p.oh; ++oy) {
      for (int64_t ox0 = 0; ox0 < p.ow; ox0 += 16) {
        const int64_t n = p.ow - ox0 < 16 ? p.ow - ox0 : 16;
        __m512 m = ninf;
        for (int64_t ky = 0; ky < p.kh; ++ky) {
          const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dil_h;
          if (iy < 0 || iy >= p.h) continue;
          const float* row = xp + iy * p.w;
          for (int64_t kx = 0; kx < p.kw; ++kx) {
            const int64_t base = ox0 * s - p.pad_left + kx;  // input column of lane 0
            // Element e of the loaded span is column base + e: inside the row and a needed lane.
            const int64_t a = base < 0 ? -base : 0;
            const int64_t span = s * (n - 1) + 1;
            const int64_t b = p.w - base < span ? p.w - base : span;
            if (base >= 0 && base + 16 * s <= p.w) {  // every loaded column inside the row: plain loads
              if (s == 1) {
                m = _mm512_max_ps(m, _mm512_loadu_ps(row + base));
              } else {
                m = _mm512_max_ps(m, _mm512_permutex2var_ps(_mm512_loadu_ps(row + base), even,
                                                            _mm512_loadu_ps(row + base + 16)));
              }
              continue;
            }
            const uint32_t bits = bit_range(a, b);
            if (s == 1) {
              m = _mm512_max_ps(m, _mm512_mask_loadu_ps(ninf, __mmask16(bits), row + base));
            } else {
              const __m512 lo = _mm512_mask_loadu_ps(ninf, __mmask16(bits), row + base);
              const __m512 hi = _mm512_mask_loadu_ps(ninf, __mmask16(bits >> 16), row + base + 16);
              m = _mm512_max_ps(m, _mm512_permutex2var_ps(lo, even, hi));
            }
          }
        }
        _mm512_mask_storeu_ps(yp + oy * p.ow + ox0, __mmask16((1u << n) - 1), m);
      }
    }
  }
}

}  // namespace ds
