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

inline __mmask32 mask32(int64_t n) { return n >= 32 ? ~__mmask32(0) : (__mmask32(1) << n) - 1; }

// Lanes [lo, hi) of 32, clipped to 0..32.
inline __mmask32 lanes32(int64_t lo, int64_t hi) {
  lo = std::max<int64_t>(lo, 0), hi = std::min<int64_t>(hi, 32);
  return hi <= lo ? 0 : __mmask32((~0u >> (32 - (hi - lo))) << lo);
}

// Channel xc into its padded plane (layout l): the input rows at row pad_top on, columns at
// pad_left on; x_zp elsewhere. Each plane row is written once, 32 elements at a time from a
// masked load of the input row (the lanes outside it take x_zp); a row's last store runs into
// the next row, which overwrites it.
void widen_plane(const Conv2dParams& p, const QDw3x3Layout& l, int32_t x_zp, const uint8_t* xc, int16_t* plane) {
  const __m512i zp = _mm512_set1_epi16(int16_t(x_zp));
  for (int64_t py = 0; py < l.hp; ++py) {
    int16_t* row = plane + py * l.wq;
    const int64_t iy = py - p.pad_top;
    if (iy < 0 || iy >= p.h) {
      for (int64_t i = 0; i < l.wq; i += 32) _mm512_storeu_si512(row + i, zp);
      continue;
    }
    const uint8_t* xr = xc + iy * p.w;
    for (int64_t i = 0; i < l.wq; i += 32) {
      // Plane columns i + j hold input columns i + j - pad_left.
      const __mmask32 m = lanes32(p.pad_left - i, p.w + p.pad_left - i);
      const __m256i bytes = _mm256_maskz_loadu_epi8(m, xr + (i - p.pad_left));
      _mm512_storeu_si512(row + i, _mm512_mask_cvtepu8_epi16(zp, m, bytes));
    }
  }
  // The reads past the last row (plane_len is a multiple of 32, at least 32 past the rows).
  for (int64_t i = l.hp * l.wq; i < l.plane_len; i += 32) _mm512_storeu_si512(plane + std::min(i, l.plane_len - 32), zp);
}

inline __m512i load(const int16_t* p) { return _mm512_loadu_si512(p); }

// The weights of one channel as pairs: [w0, w1], [w2, 0] and [0, w2] of each kernel row, picked
// by vpermw from the nine weights widened to int16 (element 15 is 0).
struct Weights3x3 {
  __m512i w01[3], w20[3], w02[3];
  explicit Weights3x3(const int8_t* wc) {
    const __m512i v = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(0x1FF, wc));
    for (int ky = 0; ky < 3; ++ky) {
      w01[ky] = _mm512_permutexvar_epi16(_mm512_set1_epi32((3 * ky + 1) << 16 | 3 * ky), v);
      w20[ky] = _mm512_permutexvar_epi16(_mm512_set1_epi32(15 << 16 | (3 * ky + 2)), v);
      w02[ky] = _mm512_permutexvar_epi16(_mm512_set1_epi32((3 * ky + 2) << 16 | 15), v);
    }
  }
};

// Stride 1 across from rows r (the window's top row), r + wq, r + 2 * wq: 32 outputs, the even
// ones and the odd ones put back in order.
inline void outputs32_s1(const int16_t* r, int64_t wq, const Weights3x3& k, __m512i bias, __m512i& lo, __m512i& hi) {
  const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i second = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  __m512i even = bias, odd = bias;
  for (int ky = 0; ky < 3; ++ky) {
    const int16_t* rk = r + ky * wq;
    const __m512i l0 = load(rk), l1 = load(rk + 1), l2 = load(rk + 2);
    even = _mm512_dpwssd_epi32(even, l0, k.w01[ky]);
    odd = _mm512_dpwssd_epi32(odd, l1, k.w01[ky]);
    even = _mm512_dpwssd_epi32(even, l2, k.w20[ky]);
    odd = _mm512_dpwssd_epi32(odd, l2, k.w02[ky]);
  }
  lo = _mm512_permutex2var_epi32(even, first, odd);
  hi = _mm512_permutex2var_epi32(even, second, odd);
}

// Stride 1 both ways: output pixel (oy, ox) is grid position q = oy * wq + ox and its tap
// (ky, kx) the plane element q + ky * wq + kx, so one pass of 32-output blocks covers the whole
// plane (no per-row tails; narrow planes like 7x7 fill the vectors). The columns ox >= ow are
// computed into the grid and dropped when copying out.
void channel_s1_grid(const QDw3x3Layout& l, const int16_t* plane, const Weights3x3& k,
                     __m512i bias, const Requant16& requant, uint8_t* grid) {
  for (int64_t q0 = 0; q0 < l.grid_len; q0 += 32) {
    __m512i lo, hi;
    outputs32_s1(plane + q0, l.wq, k, bias, lo, hi);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(grid + q0), requant(lo));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(grid + q0 + 16), requant(hi));
  }
}

void copy_out_grid(const Conv2dParams& p, const QDw3x3Layout& l, const uint8_t* grid, uint8_t* yc) {
  for (int64_t oy = 0; oy < p.oh; ++oy)
    for (int64_t i = 0; i < p.ow; i += 64) {
      const __mmask64 m = p.ow - i >= 64 ? ~__mmask64(0) : (__mmask64(1) << (p.ow - i)) - 1;
      _mm512_mask_storeu_epi8(yc + oy * p.ow + i, m, _mm512_maskz_loadu_epi8(m, grid + oy * l.wq + i));
    }
}

// Other strides, one output row at a time. Stride 2 across: lane j of the loads at 2 * ox0 and
// 2 * ox0 + 2 holds [x_2j, x_2j+1] and [x_2j+2, x_2j+3]; weights [w0, w1] and [w2, 0] give 16
// outputs with two instructions per kernel row. Lanes past the row's end read on into the next
// rows (or the plane's tail) and are not stored.
void channel_rows(const Conv2dParams& p, const QDw3x3Layout& l, const int16_t* plane, const Weights3x3& k,
                  __m512i bias, const Requant16& requant, uint8_t* yc) {
  for (int64_t oy = 0; oy < p.oh; ++oy) {
    const int16_t* r0 = plane + oy * p.stride_h * l.wq;
    uint8_t* yr = yc + oy * p.ow;
    if (p.stride_w == 1) {
      for (int64_t ox0 = 0; ox0 < p.ow; ox0 += 32) {
        __m512i lo, hi;
        outputs32_s1(r0 + ox0, l.wq, k, bias, lo, hi);
        const int64_t n = p.ow - ox0;
        _mm_mask_storeu_epi8(yr + ox0, qu8_mask16(n), requant(lo));
        if (n > 16) _mm_mask_storeu_epi8(yr + ox0 + 16, qu8_mask16(n - 16), requant(hi));
      }
    } else {
      for (int64_t ox0 = 0; ox0 < p.ow; ox0 += 16) {
        __m512i acc = bias;
        for (int ky = 0; ky < 3; ++ky) {
          const int16_t* r = r0 + ky * l.wq + 2 * ox0;
          acc = _mm512_dpwssd_epi32(acc, load(r), k.w01[ky]);
          acc = _mm512_dpwssd_epi32(acc, load(r + 2), k.w20[ky]);
        }
        _mm_mask_storeu_epi8(yr + ox0, qu8_mask16(p.ow - ox0), requant(acc));
      }
    }
  }
}

}  // namespace

void ds_qu8_dwconv3x3__avx512vnni(const QConv2dParams& q, const uint8_t* x, const int8_t* w, const QChannelParams& ch,
                                  uint8_t* workspace, uint8_t* y, int64_t c0, int64_t c1) {
  const Conv2dParams& p = q.conv;
  if (p.kh != 3 || p.kw != 3 || p.dil_h != 1 || p.dil_w != 1 || (p.stride_w != 1 && p.stride_w != 2)) {
    ds_qu8_dwconv__avx512vnni(q, x, w, ch, workspace, y, c0, c1);
    return;
  }
  const QDw3x3Layout l = ds_qu8_dw3x3_layout(p);
  const bool grid = l.grid_len > 0;
  // A group of channels is widened before any of them is read back, so the loads do not wait on
  // the stores just made (small planes would stall on store forwarding).
  for (int64_t g0 = c0; g0 < c1; g0 += l.group) {
    const int64_t g1 = std::min(c1, g0 + l.group);
    for (int64_t c = g0; c < g1; ++c)
      widen_plane(p, l, q.x_zp, x + c * p.h * p.w,
                  reinterpret_cast<int16_t*>(workspace + (c - g0) * l.channel_bytes));
    for (int64_t c = g0; c < g1; ++c) {
      uint8_t* ws = workspace + (c - g0) * l.channel_bytes;
      const int16_t* plane = reinterpret_cast<const int16_t*>(ws);
      const Weights3x3 k(w + c * 9);
      const __m512i bias = _mm512_set1_epi32(ch.bias[c]);
      const Requant16 requant(ch.multiplier[c], ch.shift[c], q.out);
      uint8_t* yc = y + c * p.oh * p.ow;
      if (grid) {
        channel_s1_grid(l, plane, k, bias, requant, ws + 2 * l.plane_len);
      } else {
        channel_rows(p, l, plane, k, bias, requant, yc);
      }
    }
    if (grid)
      for (int64_t c = g0; c < g1; ++c)
        copy_out_grid(p, l, workspace + (c - g0) * l.channel_bytes + 2 * l.plane_len, y + c * p.oh * p.ow);
  }
}

}  // namespace ds
