// Depthwise 3x3 u8 x i8 convolution with AVX-512 VNNI: dilation 1, stride 1 or 2 across (any
// stride down); other windows run the generic ds_qu8_dwconv__avx512vnni.
// Each channel is widened once into an int16 plane padded with x_zp (rows of
// ds_qu8_dw_padded_width elements, no bounds checks after), so the 32-bit lane j of a load holds
// two neighbouring pixels [x_a, x_a+1], and vpdpwssd with the weight pair [w_0, w_1] adds
// w_0 * x_a + w_1 * x_a+1 to the int32 lane exactly (|x| <= 255, |w| <= 128).
//   Stride 2: lane j of the loads at 2*ox0 and 2*ox0 + 2 holds [x_2j, x_2j+1] and
//     [x_2j+2, x_2j+3]; weights [w0, w1] and [w2, 0] give 16 outputs, two instructions per row.
//   Stride 1: those give the even outputs; the odd ones take the loads at +1 ([w0, w1]) and at +2
//     ([0, w2]); vpermt2d puts the 32 outputs back in order.
// Accumulators start at the bias (zero-point term folded in by the op); the epilogue is
// kernels/x86/qu8-requant-avx512.h.
#include <immintrin.h>

#include <algorithm>

#include "kernels/qu8.h"
#include "kernels/x86/qu8-requant-avx512.h"

namespace ds {
namespace {

// [a, b] as two int16 in one int32 lane.
inline __m512i weight_pair(int a, int b) {
  return _mm512_set1_epi32(int32_t(uint32_t(uint16_t(int16_t(a))) | (uint32_t(uint16_t(int16_t(b))) << 16)));
}

inline __mmask32 mask32(int64_t n) { return n >= 32 ? ~__mmask32(0) : (__mmask32(1) << n) - 1; }

// Padded rows [0, hp) of channel xc into plane (int16, row stride wp).
void widen_plane(const Conv2dParams& p, int32_t x_zp, const uint8_t* xc, int64_t hp, int64_t wp, int16_t* plane) {
  const __m512i zp = _mm512_set1_epi16(int16_t(x_zp));
  const int64_t n = std::min<int64_t>(p.w, wp - p.pad_left);  // columns that fit the row
  for (int64_t py = 0; py < hp; ++py) {
    int16_t* row = plane + py * wp;
    for (int64_t i = 0; i < wp; i += 32) _mm512_storeu_si512(row + i, zp);
    const int64_t iy = py - p.pad_top;
    if (iy < 0 || iy >= p.h) continue;
    const uint8_t* xr = xc + iy * p.w;
    for (int64_t i = 0; i < n; i += 32) {
      const __mmask32 m = mask32(n - i);
      _mm512_mask_storeu_epi16(row + p.pad_left + i, m, _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(m, xr + i)));
    }
  }
}

inline __m512i load(const int16_t* p) { return _mm512_loadu_si512(p); }

// Stride 1 both ways on one flattened grid: the padded plane has rows of wq = w + pads elements,
// output pixel (oy, ox) is grid position q = oy * wq + ox and its tap (ky, kx) the plane element
// q + ky * wq + kx. One pass of 32-output blocks covers the whole plane (no per-row tails; narrow
// planes like 7x7 fill the vectors); the columns ox >= ow are computed into `grid` and dropped.
void dwconv3x3_s1_grid(const QConv2dParams& q, const uint8_t* x, const int8_t* w, const QChannelParams& ch,
                       uint8_t* workspace, uint8_t* y, int64_t c0, int64_t c1) {
  const Conv2dParams& p = q.conv;
  const int64_t hp = p.oh + 2, wq = p.ow + 2;
  const int64_t span = (p.oh - 1) * wq + p.ow;           // grid positions up to the last output
  const int64_t blocks = (span + 31) / 32;
  const int64_t plane_len = (blocks * 32 + 2 * wq + 2 + 31) / 32 * 32;  // every read of every block
  int16_t* plane = reinterpret_cast<int16_t*>(workspace);
  uint8_t* grid = workspace + 2 * plane_len;
  const __m512i zp = _mm512_set1_epi16(int16_t(q.x_zp));
  const int64_t n = std::min<int64_t>(p.w, wq - p.pad_left);  // input columns that land in a row
  const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i second = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  for (int64_t c = c0; c < c1; ++c) {
    for (int64_t i = 0; i < plane_len; i += 32) _mm512_storeu_si512(plane + i, zp);
    const uint8_t* xc = x + c * p.h * p.w;
    for (int64_t iy = std::max<int64_t>(0, -p.pad_top); iy < std::min<int64_t>(p.h, hp - p.pad_top); ++iy) {
      int16_t* row = plane + (iy + p.pad_top) * wq + p.pad_left;
      for (int64_t i = 0; i < n; i += 32) {
        const __mmask32 m = mask32(n - i);
        _mm512_mask_storeu_epi16(row + i, m, _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(m, xc + iy * p.w + i)));
      }
    }
    const int8_t* wc = w + c * 9;
    __m512i w01[3], w20[3], w02[3];
    for (int ky = 0; ky < 3; ++ky) {
      w01[ky] = weight_pair(wc[ky * 3], wc[ky * 3 + 1]);
      w20[ky] = weight_pair(wc[ky * 3 + 2], 0);
      w02[ky] = weight_pair(0, wc[ky * 3 + 2]);
    }
    const __m512i bias = _mm512_set1_epi32(ch.bias[c]);
    const Requant16 requant(ch.multiplier[c], ch.shift[c], q.out);
    for (int64_t q0 = 0; q0 < blocks * 32; q0 += 32) {
      __m512i even = bias, odd = bias;
      for (int ky = 0; ky < 3; ++ky) {
        const int16_t* r = plane + ky * wq + q0;
        const __m512i l0 = load(r), l1 = load(r + 1), l2 = load(r + 2);
        even = _mm512_dpwssd_epi32(even, l0, w01[ky]);
        odd = _mm512_dpwssd_epi32(odd, l1, w01[ky]);
        even = _mm512_dpwssd_epi32(even, l2, w20[ky]);
        odd = _mm512_dpwssd_epi32(odd, l2, w02[ky]);
      }
      _mm_storeu_si128(reinterpret_cast<__m128i*>(grid + q0), requant(_mm512_permutex2var_epi32(even, first, odd)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(grid + q0 + 16),
                       requant(_mm512_permutex2var_epi32(even, second, odd)));
    }
    uint8_t* yc = y + c * p.oh * p.ow;
    // Short rows: masked moves, not a library call per row.
    for (int64_t oy = 0; oy < p.oh; ++oy)
      for (int64_t i = 0; i < p.ow; i += 64) {
        const __mmask64 m = p.ow - i >= 64 ? ~__mmask64(0) : (__mmask64(1) << (p.ow - i)) - 1;
        _mm512_mask_storeu_epi8(yc + oy * p.ow + i, m, _mm512_maskz_loadu_epi8(m, grid + oy * wq + i));
      }
  }
}

}  // namespace

void ds_qu8_dwconv3x3__avx512vnni(const QConv2dParams& q, const uint8_t* x, const int8_t* w, const QChannelParams& ch,
                                  uint8_t* workspace, uint8_t* y, int64_t c0, int64_t c1) {
  const Conv2dParams& p = q.conv;
  const int64_t sw = p.stride_w;
  if (p.kh != 3 || p.kw != 3 || p.dil_h != 1 || p.dil_w != 1 || (sw != 1 && sw != 2)) {
    ds_qu8_dwconv__avx512vnni(q, x, w, ch, workspace, y, c0, c1);
    return;
  }
  if (sw == 1 && p.stride_h == 1) {
    dwconv3x3_s1_grid(q, x, w, ch, workspace, y, c0, c1);
    return;
  }
  const int64_t hp = (p.oh - 1) * p.stride_h + 3;
  const int64_t wp = ds_qu8_dw_padded_width(p);
  int16_t* plane = reinterpret_cast<int16_t*>(workspace);
  // Output lane order of the stride-1 pairs: even outputs in `even`, odd ones in `odd`.
  const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i second = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  for (int64_t c = c0; c < c1; ++c) {
    widen_plane(p, q.x_zp, x + c * p.h * p.w, hp, wp, plane);
    const int8_t* wc = w + c * 9;
    __m512i w01[3], w20[3], w02[3];
    for (int ky = 0; ky < 3; ++ky) {
      w01[ky] = weight_pair(wc[ky * 3], wc[ky * 3 + 1]);
      w20[ky] = weight_pair(wc[ky * 3 + 2], 0);
      w02[ky] = weight_pair(0, wc[ky * 3 + 2]);
    }
    const __m512i bias = _mm512_set1_epi32(ch.bias[c]);
    const Requant16 requant(ch.multiplier[c], ch.shift[c], q.out);
    uint8_t* yc = y + c * p.oh * p.ow;
    for (int64_t oy = 0; oy < p.oh; ++oy) {
      const int16_t* r0 = plane + oy * p.stride_h * wp;
      uint8_t* yr = yc + oy * p.ow;
      if (sw == 1) {
        for (int64_t ox0 = 0; ox0 < p.ow; ox0 += 32) {
          __m512i even = bias, odd = bias;
          for (int ky = 0; ky < 3; ++ky) {
            const int16_t* r = r0 + ky * wp + ox0;
            const __m512i l0 = load(r), l1 = load(r + 1), l2 = load(r + 2);
            even = _mm512_dpwssd_epi32(even, l0, w01[ky]);
            odd = _mm512_dpwssd_epi32(odd, l1, w01[ky]);
            even = _mm512_dpwssd_epi32(even, l2, w20[ky]);
            odd = _mm512_dpwssd_epi32(odd, l2, w02[ky]);
          }
          const int64_t n = p.ow - ox0;
          _mm_mask_storeu_epi8(yr + ox0, qu8_mask16(n), requant(_mm512_permutex2var_epi32(even, first, odd)));
          if (n > 16)
            _mm_mask_storeu_epi8(yr + ox0 + 16, qu8_mask16(n - 16), requant(_mm512_permutex2var_epi32(even, second, odd)));
        }
      } else {
        for (int64_t ox0 = 0; ox0 < p.ow; ox0 += 16) {
          __m512i acc = bias;
          for (int ky = 0; ky < 3; ++ky) {
            const int16_t* r = r0 + ky * wp + 2 * ox0;
            acc = _mm512_dpwssd_epi32(acc, load(r), w01[ky]);
            acc = _mm512_dpwssd_epi32(acc, load(r + 2), w20[ky]);
          }
          _mm_mask_storeu_epi8(yr + ox0, qu8_mask16(p.ow - ox0), requant(acc));
        }
      }
    }
  }
}

}  // namespace ds
