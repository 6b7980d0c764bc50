// AVX-512 quantize, dequantize and qadd on contiguous data, the formulas of
// kernels/ref/qu8-elementwise-scalar.cc lane for lane:
//   quantize: the float32 division, round to nearest even (vrndscaleps), + zp in float32, clamp,
//     NaN -> zp.
//   qadd: with 16-bit products on int32 lanes when qu8_qadd_split applies (the usual shifts);
//     otherwise (a - a_zp) * a_mult + (b - b_zp) * b_mult in 64-bit lanes (vpmuldq on the even and the
//     odd int32 lanes: |a - a_zp| <= 255 and the multipliers < 2^31 fit its operands), rounding
//     add, arithmetic shift, clamp in 64 bits.
//   u8 maxpool: per output row the maximum down the window's rows into a zero-padded row (0 is
//     the smallest u8, so padding never wins), then across: loads at the taps' offsets (stride
//     1) or their even bytes (vpmovwb, stride 2); other strides run the scalar kernel.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

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
  QAddSplit split;
  if (qu8_qadd_split(q, split)) {  // 32 outputs a step: the (a, b) pairs as 16-bit words
    const QAddLanes lanes(split);
    const __m512i lo = _mm512_set1_epi16(int16_t(q.out.act_min)), hi = _mm512_set1_epi16(int16_t(q.out.act_max));
    for (int64_t i = 0; i < n; i += 32) {
      const __mmask32 m = n - i >= 32 ? ~__mmask32(0) : (__mmask32(1) << (n - i)) - 1;
      const __m512i wa = _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(m, a + i));
      const __m512i wb = _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(m, b + i));
      // Per 128-bit lane: pairs of its words 0..3, then 4..7; packs puts them back in order.
      const __m512i v = _mm512_packs_epi32(lanes(_mm512_unpacklo_epi16(wa, wb)), lanes(_mm512_unpackhi_epi16(wa, wb)));
      _mm256_mask_storeu_epi8(y + i, m, _mm512_cvtepi16_epi8(_mm512_min_epi16(_mm512_max_epi16(v, lo), hi)));
    }
    return;
  }
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

void ds_u8_maxpool2d__avx512(const Pool2dParams& p, const uint8_t* x, uint8_t* y) {
  constexpr int64_t kRow = 4096, kBuffer = 32768;
  const int64_t span = (p.kw - 1) * p.dil_w + 1;
  const int64_t width = std::max((p.ow - 1) * p.stride_w + span, p.pad_left + p.w);
  if (p.stride_w > 2 || width > kRow) {
    ds_u8_maxpool2d__scalar(p, x, y);
    return;
  }
  // The window maxima down the rows of a block of output rows first, each into its own zero-padded
  // row of vm, then across: the loads across then read rows stored a block earlier (reading a row
  // right after its unaligned stores stalls on store forwarding). Columns outside
  // [pad_left, pad_left + w) stay 0, and 128 bytes of slack take the full-vector reads.
  const int64_t row_bytes = (width + 128 + 63) / 64 * 64;
  const int64_t block = std::max<int64_t>(1, std::min(p.oh, kBuffer / row_bytes));
  alignas(64) uint8_t vm[kBuffer + kRow + 192];
  std::memset(vm, 0, size_t(block * row_bytes));
  for (int64_t plane = 0; plane < p.n * p.c; ++plane) {
    const uint8_t* xp = x + plane * p.h * p.w;
    uint8_t* yp = y + plane * p.oh * p.ow;
    for (int64_t oy0 = 0; oy0 < p.oh; oy0 += block) {
      const int64_t oy1 = std::min(p.oh, oy0 + block);
      for (int64_t oy = oy0; oy < oy1; ++oy) {
        uint8_t* row = vm + (oy - oy0) * row_bytes + p.pad_left;
        // The window's rows [ky0, ky1) in the input (none: every output 0, as the scalar kernel).
        const int64_t iy0 = oy * p.stride_h - p.pad_top;
        const int64_t ky0 = iy0 >= 0 ? 0 : (-iy0 + p.dil_h - 1) / p.dil_h;
        const int64_t ky1 = std::max(ky0, std::min(p.kh, p.h - iy0 <= 0 ? 0 : (p.h - iy0 + p.dil_h - 1) / p.dil_h));
        for (int64_t i = 0; i < p.w; i += 64) {
          const __mmask64 m = p.w - i >= 64 ? ~__mmask64(0) : (__mmask64(1) << (p.w - i)) - 1;
          __m512i v = _mm512_setzero_si512();
          for (int64_t ky = ky0; ky < ky1; ++ky)
            v = _mm512_max_epu8(v, _mm512_maskz_loadu_epi8(m, xp + (iy0 + ky * p.dil_h) * p.w + i));
          _mm512_mask_storeu_epi8(row + i, m, v);
        }
      }
      for (int64_t oy = oy0; oy < oy1; ++oy) {
        const uint8_t* r = vm + (oy - oy0) * row_bytes;
        uint8_t* yr = yp + oy * p.ow;
        if (p.stride_w == 1) {
          for (int64_t ox = 0; ox < p.ow; ox += 64) {
            __m512i acc = _mm512_loadu_si512(r + ox);
            for (int64_t kx = 1; kx < p.kw; ++kx) acc = _mm512_max_epu8(acc, _mm512_loadu_si512(r + ox + kx * p.dil_w));
            _mm512_mask_storeu_epi8(yr + ox, p.ow - ox >= 64 ? ~__mmask64(0) : (__mmask64(1) << (p.ow - ox)) - 1, acc);
          }
        } else {
          for (int64_t ox = 0; ox < p.ow; ox += 32) {
            __m256i acc = _mm256_setzero_si256();
            for (int64_t kx = 0; kx < p.kw; ++kx)
              acc = _mm256_max_epu8(acc, _mm512_cvtepi16_epi8(_mm512_loadu_si512(r + 2 * ox + kx * p.dil_w)));
            _mm256_mask_storeu_epi8(yr + ox, p.ow - ox >= 32 ? ~__mmask32(0) : (__mmask32(1) << (p.ow - ox)) - 1, acc);
          }
        }
      }
    }
  }
}

// Per plane the byte sum by vpsadbw (64 bytes a step, masked at the end), then the scalar epilogue.
void ds_qu8_global_avgpool__avx512(int64_t planes, int64_t size, int32_t x_zp, int32_t y_zp, int32_t mult,
                                   int32_t shift, const uint8_t* x, uint8_t* y) {
  const __m512i zero = _mm512_setzero_si512();
  for (int64_t p = 0; p < planes; ++p) {
    const uint8_t* xp = x + p * size;
    __m512i acc = zero;
    for (int64_t i = 0; i < size; i += 64) {
      const __mmask64 m = size - i >= 64 ? ~__mmask64(0) : (__mmask64(1) << (size - i)) - 1;
      acc = _mm512_add_epi64(acc, _mm512_sad_epu8(_mm512_maskz_loadu_epi8(m, xp + i), zero));
    }
    const int64_t sum = _mm512_reduce_add_epi64(acc) - int64_t(x_zp) * size;
    y[p] = qu8_clamp(y_zp + qu8_requant(sum, mult, shift), 0, 255);
  }
}

}  // namespace ds
