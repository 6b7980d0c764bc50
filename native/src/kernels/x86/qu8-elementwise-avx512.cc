// AVX-512 quantize, dequantize and qadd on contiguous data, the formulas of
// kernels/ref/qu8-elementwise-scalar.cc lane for lane:
//   quantize: the float32 division, round to nearest even (vrndscaleps), + zp in float32, clamp,
//     NaN -> zp.
//   qadd: (a - a_zp) * a_mult + (b - b_zp) * b_mult in 64-bit lanes (vpmuldq on the even and the
//     odd int32 lanes: |a - a_zp| <= 255 and the multipliers < 2^31 fit its operands), rounding
//     add, arithmetic shift, clamp in 64 bits.
#include <immintrin.h>

#include "kernels/qu8.h"
#include "kernels/x86/qu8-requant-avx512.h"

namespace ds {

void ds_qu8_quantize__avx512(int64_t n, float scale, int32_t zp, const float* x, uint8_t* y) {
  const __m512 s = _mm512_set1_ps(scale), z = _mm512_set1_ps(float(zp));
  const __m512 lo = _mm512_setzero_ps(), hi = _mm512_set1_ps(255.0f);
  const __m512i zpi = _mm512_set1_epi32(zp);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = qu8_mask16(n - i);
    const __m512 v = _mm512_div_ps(_mm512_maskz_loadu_ps(m, x + i), s);
    const __m512 q = _mm512_add_ps(_mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), z);
    const __mmask16 nan = _mm512_cmp_ps_mask(q, q, _CMP_UNORD_Q);
    // Clamp before converting: q is integral, so the truncation is exact.
    __m512i r = _mm512_cvttps_epi32(_mm512_min_ps(_mm512_max_ps(q, lo), hi));
    r = _mm512_mask_mov_epi32(r, nan, zpi);
    _mm_mask_storeu_epi8(y + i, m, _mm512_cvtepi32_epi8(r));
  }
}

void ds_qu8_dequantize__avx512(int64_t n, float scale, int32_t zp, const uint8_t* x, float* y) {
  const __m512 s = _mm512_set1_ps(scale), z = _mm512_set1_ps(float(zp));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = qu8_mask16(n - i);
    const __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, x + i)));
    _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_sub_ps(v, z), s));
  }
}

void ds_qu8_vadd__avx512(int64_t n, const QAddParams& q, const uint8_t* a, const uint8_t* b, uint8_t* y) {
  const int shift = 31 + q.shift;
  const __m512i am = _mm512_set1_epi64(q.a_mult), bm = _mm512_set1_epi64(q.b_mult);
  const __m512i azp = _mm512_set1_epi32(q.a_zp), bzp = _mm512_set1_epi32(q.b_zp);
  const __m512i round = _mm512_set1_epi64(int64_t(1) << (shift - 1));
  const __m128i count = _mm_cvtsi32_si128(shift);
  const __m512i lo = _mm512_set1_epi64(q.out.act_min - q.out.y_zp), hi = _mm512_set1_epi64(q.out.act_max - q.out.y_zp);
  const __m512i y_zp = _mm512_set1_epi32(q.out.y_zp);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = qu8_mask16(n - i);
    const __m512i va = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, a + i)), azp);
    const __m512i vb = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, b + i)), bzp);
    __m512i even = _mm512_add_epi64(_mm512_mul_epi32(va, am), _mm512_mul_epi32(vb, bm));
    __m512i odd = _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(va, 32), am),
                                   _mm512_mul_epi32(_mm512_srli_epi64(vb, 32), bm));
    even = _mm512_max_epi64(_mm512_min_epi64(_mm512_sra_epi64(_mm512_add_epi64(even, round), count), hi), lo);
    odd = _mm512_max_epi64(_mm512_min_epi64(_mm512_sra_epi64(_mm512_add_epi64(odd, round), count), hi), lo);
    const __m512i v = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
    _mm_mask_storeu_epi8(y + i, m, _mm512_cvtepi32_epi8(_mm512_add_epi32(v, y_zp)));
  }
}

}  // namespace ds
