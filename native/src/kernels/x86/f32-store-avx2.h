// Partial-vector stores for the f32 AVX2 kernels (included by files compiled with AVX2 flags).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace ds {
namespace x86 {

// dst[0..n) = the first n lanes of x, 0 < n < 8, by stores of 4, 2 and 1 lanes (vmaskmovps stores
// are microcoded and slow on AMD Zen).
inline void store_partial(float* dst, __m256 x, int64_t n) {
  __m128 h = _mm256_castps256_ps128(x);
  if (n & 4) {
    _mm_storeu_ps(dst, h);
    h = _mm256_extractf128_ps(x, 1);
    dst += 4;
  }
  if (n & 2) {
    _mm_storel_pi(reinterpret_cast<__m64*>(dst), h);
    h = _mm_movehl_ps(h, h);
    dst += 2;
  }
  if (n & 1) _mm_store_ss(dst, h);
}

}  // namespace x86
}  // namespace ds
