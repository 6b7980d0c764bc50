// AVX-512 softmax along a contiguous axis (inner == 1; other layouts run the scalar kernel):
// the max, then e = exp(x - max) 16 lanes at a time (stored, and summed in 16 lanes), then
// e / sum. exp is the Cephes-style range reduction n = round(x log2 e), r = x - n ln 2 (ln 2 in
// two parts), a degree-6 polynomial for e^r on [-ln2/2, ln2/2] and 2^n by vscalefps: within 2
// ulp of std::exp. The sum runs in another order than the scalar kernel's, so results differ
// from it by a few ulp (test_elementwise_fast.cc); FaceNet-1M's 848-way softmax 4.7 -> 0.5 us.
#include <immintrin.h>

#include "kernels/kernels.h"

namespace ds {
namespace {

// exp(x) for x <= 0 (x - max); below -103 the result is 0 (as expf's underflow). A NaN x stays
// NaN (vmaxps returns its second operand when either is NaN), so a row with a NaN, or with an
// infinite maximum (inf - inf), sums to NaN and gives NaNs as the scalar kernel does.
inline __m512 exp_nonpositive(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

__mmask16 lanes(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1); }

}  // namespace

void ds_f32_softmax__avx512(const SoftmaxParams& p, const float* x, float* y) {
  if (p.inner != 1) {
    ds_f32_softmax__scalar(p, x, y);
    return;
  }
  const int64_t n = p.axis;
  for (int64_t o = 0; o < p.outer; ++o, x += n, y += n) {
    __m512 m = _mm512_set1_ps(-__builtin_inff());
    for (int64_t a = 0; a < n; a += 16) m = _mm512_max_ps(m, _mm512_mask_loadu_ps(m, lanes(n - a), x + a));
    const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(m));
    __m512 sum = _mm512_setzero_ps();
    for (int64_t a = 0; a < n; a += 16) {
      const __mmask16 k = lanes(n - a);
      const __m512 e = _mm512_maskz_mov_ps(k, exp_nonpositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + a), mx)));
      _mm512_mask_storeu_ps(y + a, k, e);
      sum = _mm512_add_ps(sum, e);
    }
    const __m512 total = _mm512_set1_ps(_mm512_reduce_add_ps(sum));
    for (int64_t a = 0; a < n; a += 16) {
      const __mmask16 k = lanes(n - a);
      _mm512_mask_storeu_ps(y + a, k, _mm512_div_ps(_mm512_maskz_loadu_ps(k, y + a), total));
    }
  }
}

}  // namespace ds
