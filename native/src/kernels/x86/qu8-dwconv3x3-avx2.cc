// Depthwise 3x3 u8 x i8 convolution with AVX2: the design of qu8-dwconv3x3-avx512vnni.cc (int16
// planes of ds_qu8_dw3x3_layout; a 32-bit lane holds two neighbouring pixels, and vpmaddwd with a
// weight pair adds both products exactly) on 8-lane vectors, vpmaddwd + vpaddd in place of
// vpdpwssd. Dilation 1, stride 1 or 2 across; other windows run the generic ds_qu8_dwconv__avx2.
// The epilogue is kernels/x86/qu8-requant-avx2.h (the scalar formula for shifts below 0).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/qu8.h"
#include "kernels/x86/qu8-requant-avx2.h"

namespace ds {
namespace {

// [a, b] as two int16 in one int32 lane.
inline __m256i weight_pair(int a, int b) {
  return _mm256_set1_epi32(int32_t(uint32_t(uint16_t(int16_t(a))) | (uint32_t(uint16_t(int16_t(b))) << 16)));
}

inline __m256i load(const int16_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Channel xc into its padded plane (layout l): the input rows at row pad_top on, columns at
// pad_left on; x_zp elsewhere. Rows are filled with x_zp in 16-element stores (the last one runs
// into the next row, which is written after), then the input row goes over them.
void widen_plane(const Conv2dParams& p, const QDw3x3Layout& l, int32_t x_zp, const uint8_t* xc, int16_t* plane) {
  const __m256i zp = _mm256_set1_epi16(int16_t(x_zp));
  const int64_t n = std::min<int64_t>(p.w, l.wq - p.pad_left);  // input columns inside a row
  for (int64_t py = 0; py < l.hp; ++py) {
    int16_t* row = plane + py * l.wq;
    for (int64_t i = 0; i < l.wq; i += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + i), zp);
    const int64_t iy = py - p.pad_top;
    if (iy < 0 || iy >= p.h) continue;
    const uint8_t* xr = xc + iy * p.w;
    int16_t* out = row + p.pad_left;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                          _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xr + i))));
    for (; i < n; ++i) out[i] = xr[i];
  }
  // The reads past the last row (plane_len is a multiple of 32, at least 32 past the rows).
  for (int64_t i = l.hp * l.wq; i < l.plane_len; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(plane + std::min(i, l.plane_len - 16)), zp);
}

struct Weights3x3 {
  __m256i w01[3], w20[3], w02[3];
  explicit Weights3x3(const int8_t* wc) {
    for (int ky = 0; ky < 3; ++ky) {
      w01[ky] = weight_pair(wc[ky * 3], wc[ky * 3 + 1]);
      w20[ky] = weight_pair(wc[ky * 3 + 2], 0);
      w02[ky] = weight_pair(0, wc[ky * 3 + 2]);
    }
  }
};

// One channel's requantization: vector for shift >= 0, else the scalar formula.
struct Requant8 {
  int32_t mult, shift;
  const QuantOut& q;
  void operator()(__m256i acc, uint8_t* y, int64_t count) const {
    if (count <= 0) return;
    if (shift >= 0) {
      store_bytes(y, requant8(acc, mult, shift, q), count);
      return;
    }
    alignas(32) int32_t tmp[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(tmp), acc);
    requant_scalar(tmp, std::min<int64_t>(count, 8), mult, shift, q, y);
  }
};

// Stride 1 across from rows r, r + wq, r + 2 * wq: 16 outputs in order in lo (0-7) and hi (8-15).
inline void outputs16_s1(const int16_t* r, int64_t wq, const Weights3x3& k, __m256i bias, __m256i& lo, __m256i& hi) {
  __m256i even = bias, odd = bias;
  for (int ky = 0; ky < 3; ++ky) {
    const int16_t* rk = r + ky * wq;
    const __m256i l0 = load(rk), l1 = load(rk + 1), l2 = load(rk + 2);
    even = _mm256_add_epi32(even, _mm256_add_epi32(_mm256_madd_epi16(l0, k.w01[ky]), _mm256_madd_epi16(l2, k.w20[ky])));
    odd = _mm256_add_epi32(odd, _mm256_add_epi32(_mm256_madd_epi16(l1, k.w01[ky]), _mm256_madd_epi16(l2, k.w02[ky])));
  }
  const __m256i a = _mm256_unpacklo_epi32(even, odd);  // e0 o0 e1 o1 | e4 o4 e5 o5
  const __m256i b = _mm256_unpackhi_epi32(even, odd);  // e2 o2 e3 o3 | e6 o6 e7 o7
  lo = _mm256_permute2x128_si256(a, b, 0x20);
  hi = _mm256_permute2x128_si256(a, b, 0x31);
}

// Stride 1 both ways on the flattened grid (see the AVX-512 kernel).
void channel_s1_grid(const QDw3x3Layout& l, const int16_t* plane, const Weights3x3& k, __m256i bias,
                     const Requant8& requant, uint8_t* grid) {
  for (int64_t q0 = 0; q0 < l.grid_len; q0 += 16) {
    __m256i lo, hi;
    outputs16_s1(plane + q0, l.wq, k, bias, lo, hi);
    requant(lo, grid + q0, 8);
    requant(hi, grid + q0 + 8, 8);
  }
}

// Other strides, one output row at a time; lanes past the row's end are not stored.
void channel_rows(const Conv2dParams& p, const QDw3x3Layout& l, const int16_t* plane, const Weights3x3& k,
                  __m256i bias, const Requant8& requant, uint8_t* yc) {
  for (int64_t oy = 0; oy < p.oh; ++oy) {
    const int16_t* r0 = plane + oy * p.stride_h * l.wq;
    uint8_t* yr = yc + oy * p.ow;
    if (p.stride_w == 1) {
      for (int64_t ox0 = 0; ox0 < p.ow; ox0 += 16) {
        __m256i lo, hi;
        outputs16_s1(r0 + ox0, l.wq, k, bias, lo, hi);
        requant(lo, yr + ox0, std::min<int64_t>(8, p.ow - ox0));
        requant(hi, yr + ox0 + 8, std::min<int64_t>(8, p.ow - ox0 - 8));
      }
    } else {
      for (int64_t ox0 = 0; ox0 < p.ow; ox0 += 8) {
        __m256i acc = bias;
        for (int ky = 0; ky < 3; ++ky) {
          const int16_t* r = r0 + ky * l.wq + 2 * ox0;
          acc = _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(load(r), k.w01[ky]),
                                                       _mm256_madd_epi16(load(r + 2), k.w20[ky])));
        }
        requant(acc, yr + ox0, std::min<int64_t>(8, p.ow - ox0));
      }
    }
  }
}

}  // namespace

void ds_qu8_dwconv3x3__avx2(const QConv2dParams& q, const uint8_t* x, const int8_t* w, const QChannelParams& ch,
                            uint8_t* workspace, uint8_t* y, int64_t c0, int64_t c1) {
  const Conv2dParams& p = q.conv;
  if (p.kh != 3 || p.kw != 3 || p.dil_h != 1 || p.dil_w != 1 || (p.stride_w != 1 && p.stride_w != 2)) {
    ds_qu8_dwconv__avx2(q, x, w, ch, workspace, y, c0, c1);
    return;
  }
  const QDw3x3Layout l = ds_qu8_dw3x3_layout(p);
  const bool grid = l.grid_len > 0;
  for (int64_t g0 = c0; g0 < c1; g0 += l.group) {
    const int64_t g1 = std::min(c1, g0 + l.group);
    for (int64_t c = g0; c < g1; ++c)
      widen_plane(p, l, q.x_zp, x + c * p.h * p.w, reinterpret_cast<int16_t*>(workspace + (c - g0) * l.channel_bytes));
    for (int64_t c = g0; c < g1; ++c) {
      uint8_t* ws = workspace + (c - g0) * l.channel_bytes;
      const int16_t* plane = reinterpret_cast<const int16_t*>(ws);
      const Weights3x3 k(w + c * 9);
      const __m256i bias = _mm256_set1_epi32(ch.bias[c]);
      const Requant8 requant{ch.multiplier[c], ch.shift[c], q.out};
      uint8_t* yc = y + c * p.oh * p.ow;
      if (grid) {
        channel_s1_grid(l, plane, k, bias, requant, ws + 2 * l.plane_len);
        for (int64_t oy = 0; oy < p.oh; ++oy)
          std::memcpy(yc + oy * p.ow, ws + 2 * l.plane_len + oy * l.wq, size_t(p.ow));
      } else {
        channel_rows(p, l, plane, k, bias, requant, yc);
      }
    }
  }
}

}  // namespace ds
