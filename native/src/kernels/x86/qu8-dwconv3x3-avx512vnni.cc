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
#include <type_traits>

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

void ds_qu8_dwconv3x3_planes__avx512vnni(const QConv2dParams& q, const uint8_t* x, const int8_t* w,
                                         const QChannelParams& ch, uint8_t* workspace, uint8_t* y, int64_t c0,
                                         int64_t c1) {
  const Conv2dParams& p = q.conv;
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

namespace ds {

namespace {

// ---- channels in lanes ----
// 16 channels at a time. Their input rows are transposed into padded rows of 16-byte pixels
// (byte c: channel c), each row stored as its even pixels then its odd pixels (QDw3x3ClLayout), so
// that the loads at even pixel e and odd pixel e (and at e + 1) hold, in 128-bit lane k, the
// pixels 2(e + k), 2(e + k) + 1, 2(e + k) + 2, 2(e + k) + 3. Two rounds of unpacks turn them into
// four vectors, g = 0..3, whose int32 lane (k, c) holds those four pixels of channel 4g + c: the
// window at column 2(e + k). vpdpbusd with the weights [w0, w1, w2, 0] of a kernel row gives
// output column 2(e + k) at stride 2 (output e + k) and with [0, w0, w1, w2] the next column at
// stride 1: three (stride 2) or six (stride 1) vpdpbusd per kernel row for 16 or 32 outputs of
// 4 channels x 4 windows. Requantization per lane (per channel constants), then 4x4 byte
// transposes back to channel rows.

// 16 rows of 16 bytes -> o[j]: columns 4j..4j+3, 16 bytes each (column c: byte i of row i).
template <typename RowFn>
inline void transpose16x16(RowFn row, __m512i o[4]) {
  __m512i z[4];
#pragma GCC unroll 4
  for (int a = 0; a < 4; ++a) {
    __m512i v = _mm512_castsi128_si512(row(a));
    v = _mm512_inserti32x4(v, row(a + 4), 1);
    v = _mm512_inserti32x4(v, row(a + 8), 2);
    z[a] = _mm512_inserti32x4(v, row(a + 12), 3);
  }
  const __m512i t0 = _mm512_unpacklo_epi8(z[0], z[1]), t1 = _mm512_unpackhi_epi8(z[0], z[1]);
  const __m512i t2 = _mm512_unpacklo_epi8(z[2], z[3]), t3 = _mm512_unpackhi_epi8(z[2], z[3]);
  const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  o[0] = _mm512_permutexvar_epi32(idx, _mm512_unpacklo_epi16(t0, t2));
  o[1] = _mm512_permutexvar_epi32(idx, _mm512_unpackhi_epi16(t0, t2));
  o[2] = _mm512_permutexvar_epi32(idx, _mm512_unpacklo_epi16(t1, t3));
  o[3] = _mm512_permutexvar_epi32(idx, _mm512_unpackhi_epi16(t1, t3));
}

// Per-lane requantization constants of one vector g (lane (k, c): channel 4g + c).
struct alignas(64) ClRequant {
  __m512i mult_e, mult_o, round_e, round_o, count_e, count_o;
};

// How a block requantizes (every mode gives the docs/format.md result):
//   kWide: any shift; 64-bit products, rounding and shift, clamp in 64 bits, then y_zp.
//   kNarrow: every channel's n = 31 + shift in 32..52: y_zp folded into the 64-bit rounding term.
//   kHigh: every n in 33..52: with n = 32 + t (t >= 1) the rounding term 2^(n-1) + y_zp 2^n is
//     2^32 R (R = 2^(t-1) + y_zp 2^t), so floor((P + 2^32 R) / 2^n) = (floor(P / 2^32) + R) >> t
//     for the 64-bit product P = acc * M: only the products' high halves are needed, and the
//     rounding and shift run on 16 int32 lanes (|P| < 2^62, so |P >> 32| + R < 2^30 + 2^29).
enum ClMode { kWide = 0, kNarrow = 1, kHigh = 2 };

struct ClBlock {
  ClRequant rq[4];
  __m512i wa[3][4], wb[3][4], bias[4];
  __m512i lo, hi, y_zp, lo8, hi8;
  int mode;  // ClMode
};

// The per-channel constants of a block of 16 channels before broadcasting: computed per call, or
// once per session (ds_qu8_dw3x3_pack__avx512vnni).
struct alignas(64) ClConsts {
  int32_t bias[16], wa[3][16], wb[3][16], round32[16], count32[16];
  int64_t mult[2][8], round[2][8], count[2][8];
  int32_t mode;  // ClMode
};

void pack_consts(const QConv2dParams& q, const int8_t* w, const QChannelParams& ch, int64_t c0, int64_t nch,
                 ClConsts& k) {
  bool narrow = true, high = true;
  for (int c = 0; c < 16; ++c) {
    const int32_t n = c < nch ? 31 + ch.shift[c0 + c] : 33;  // lanes past nch: multiplier 0
    if (n < 32 || n > 52) narrow = false;
    if (n < 33 || n > 52) high = false;
  }
  k.mode = high ? kHigh : narrow ? kNarrow : kWide;
  const int64_t y_zp = q.out.y_zp;
  for (int c = 0; c < 16; ++c) {
    const bool on = c < nch;
    const int32_t n = on ? 31 + ch.shift[c0 + c] : 33;
    k.bias[c] = on ? ch.bias[c0 + c] : 0;
    k.mult[c & 1][c >> 1] = on ? ch.multiplier[c0 + c] : 0;
    k.round[c & 1][c >> 1] = (int64_t(1) << (n - 1)) + (narrow ? y_zp << n : 0);
    k.count[c & 1][c >> 1] = narrow && (c & 1) ? n - 32 : n;
    k.round32[c] = high ? int32_t((int64_t(1) << (n - 33)) + (y_zp << (n - 32))) : 0;
    k.count32[c] = high ? n - 32 : 0;
    const int8_t* wc = w + (c0 + c) * 9;
    for (int ky = 0; ky < 3; ++ky) {
      const uint32_t w0 = on ? uint8_t(wc[ky * 3]) : 0, w1 = on ? uint8_t(wc[ky * 3 + 1]) : 0,
                     w2 = on ? uint8_t(wc[ky * 3 + 2]) : 0;
      k.wa[ky][c] = int32_t(w0 | w1 << 8 | w2 << 16);
      k.wb[ky][c] = int32_t(w0 << 8 | w1 << 16 | w2 << 24);
    }
  }
}

void load_block(const QConv2dParams& q, const ClConsts& k, ClBlock& b) {
  // Lane (k, c) of vector g: channel 4g + c; qword (k, h) of the even / odd constants: channel
  // 4g + 2h / 4g + 2h + 1.
  auto b32 = [](const int32_t* v) { return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(v))); };
  auto b64 = [](const int64_t* v) { return _mm512_broadcast_i64x2(_mm_load_si128(reinterpret_cast<const __m128i*>(v))); };
  b.mode = k.mode;
  for (int g = 0; g < 4; ++g) {
    b.bias[g] = b32(k.bias + 4 * g);
    for (int ky = 0; ky < 3; ++ky) b.wa[ky][g] = b32(k.wa[ky] + 4 * g), b.wb[ky][g] = b32(k.wb[ky] + 4 * g);
    ClRequant& r = b.rq[g];
    r.mult_e = b64(k.mult[0] + 2 * g), r.mult_o = b64(k.mult[1] + 2 * g);
    if (k.mode == kHigh) {  // int32 lanes
      r.round_e = b32(k.round32 + 4 * g), r.count_e = b32(k.count32 + 4 * g);
    } else {
      r.round_e = b64(k.round[0] + 2 * g), r.round_o = b64(k.round[1] + 2 * g);
      r.count_e = b64(k.count[0] + 2 * g), r.count_o = b64(k.count[1] + 2 * g);
    }
  }
  b.lo = _mm512_set1_epi64(q.out.act_min - q.out.y_zp), b.hi = _mm512_set1_epi64(q.out.act_max - q.out.y_zp);
  b.lo8 = _mm512_set1_epi8(char(q.out.act_min)), b.hi8 = _mm512_set1_epi8(char(q.out.act_max));
  b.y_zp = _mm512_set1_epi32(q.out.y_zp);
}

// The int32 result before the clamp (kNarrow: y_zp already in the rounding term; else clamped to
// the output range in 64 bits and y_zp added), which the packs below saturate to 0..255.
template <int kMode>
inline __m512i requant_lanes(__m512i acc, const ClRequant& r, const ClBlock& b) {
  if (kMode == kHigh) {
    // The high halves of the even lanes' products moved down into the even lanes (vpshufd with
    // a merge mask), the odd lanes' already in place; then R and the shift t in int32 lanes.
    const __m512i even = _mm512_mul_epi32(acc, r.mult_e);
    const __m512i odd = _mm512_mul_epi32(_mm512_srli_epi64(acc, 32), r.mult_o);
    const __m512i high = _mm512_mask_shuffle_epi32(odd, 0x5555, even, _MM_PERM_CDAB);
    return _mm512_srav_epi32(_mm512_add_epi32(high, r.round_e), r.count_e);
  }
  __m512i even = _mm512_add_epi64(_mm512_mul_epi32(acc, r.mult_e), r.round_e);
  __m512i odd = _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(acc, 32), r.mult_o), r.round_o);
  even = _mm512_srav_epi64(even, r.count_e);
  odd = _mm512_srav_epi64(odd, r.count_o);
  if (kMode == kNarrow) return _mm512_mask_blend_epi32(0xAAAA, even, odd);
  even = _mm512_max_epi64(_mm512_min_epi64(even, b.hi), b.lo);
  odd = _mm512_max_epi64(_mm512_min_epi64(odd, b.hi), b.lo);
  return _mm512_add_epi32(_mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32)), b.y_zp);
}

// The four vectors g of 4 windows -> 128-bit lane k: the 16 channels of window k, as u8 clamped
// to the output range (lo8, hi8).
template <int kMode>
inline __m512i requant_windows(const __m512i acc[4], const ClBlock& b) {
  const __m512i v01 = _mm512_packs_epi32(requant_lanes<kMode>(acc[0], b.rq[0], b),
                                          requant_lanes<kMode>(acc[1], b.rq[1], b));
  const __m512i v23 = _mm512_packs_epi32(requant_lanes<kMode>(acc[2], b.rq[2], b),
                                          requant_lanes<kMode>(acc[3], b.rq[3], b));
  return _mm512_min_epu8(_mm512_max_epu8(_mm512_packus_epi16(v01, v23), b.lo8), b.hi8);
}

// Padded rows [r0, r1) of the strip starting at padded row py0 (channels c0.. of x, nch of them).
void cl_fill_rows(const QConv2dParams& q, const QDw3x3ClLayout& l, const uint8_t* x, int64_t nch, int64_t py0,
                  int64_t r0, int64_t r1, uint8_t* u) {
  const Conv2dParams& p = q.conv;
  const __m128i zp = _mm_set1_epi8(char(q.x_zp));
  const int64_t plane = p.h * p.w, half = l.we * 16, wide = (p.w + 15) / 16 * 16;
  auto entry = [&](uint8_t* row, int64_t col) { return row + (col & 1) * half + (col >> 1) * 16; };
  for (int64_t r = r0; r < r1; ++r) {
    uint8_t* row = u + r * l.row_bytes;
    const int64_t iy = py0 + r - p.pad_top;
    if (iy < 0 || iy >= p.h) {
      for (int64_t i = 0; i < l.row_bytes; i += 16) _mm_storeu_si128(reinterpret_cast<__m128i*>(row + i), zp);
      continue;
    }
    for (int64_t col = 0; col < p.pad_left; ++col) _mm_storeu_si128(reinterpret_cast<__m128i*>(entry(row, col)), zp);
    for (int64_t col = p.pad_left + wide; col < 2 * l.we; ++col)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(entry(row, col)), zp);
    const uint8_t* xr = x + iy * p.w;
    for (int64_t px0 = 0; px0 < p.w; px0 += 16) {
      const __mmask16 m = qu8_mask16(p.w - px0);
      __m512i o[4];
      if (nch == 16 && p.w - px0 >= 16)  // plain loads, which fold into the inserts
        transpose16x16([&](int c) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(xr + c * plane + px0)); },
                       o);
      else
        transpose16x16([&](int c) { return c < nch ? _mm_mask_loadu_epi8(zp, m, xr + c * plane + px0) : zp; }, o);
      // Tile pixels 0, 2, ..., 14 and 1, 3, ..., 15.
      const __m512i ev0 = _mm512_shuffle_i32x4(o[0], o[1], _MM_SHUFFLE(2, 0, 2, 0));
      const __m512i ev1 = _mm512_shuffle_i32x4(o[2], o[3], _MM_SHUFFLE(2, 0, 2, 0));
      const __m512i od0 = _mm512_shuffle_i32x4(o[0], o[1], _MM_SHUFFLE(3, 1, 3, 1));
      const __m512i od1 = _mm512_shuffle_i32x4(o[2], o[3], _MM_SHUFFLE(3, 1, 3, 1));
      const int64_t col = p.pad_left + px0;
      uint8_t* de = entry(row, col);
      uint8_t* dd = entry(row, col + 1);
      _mm512_storeu_si512(de, ev0), _mm512_storeu_si512(de + 64, ev1);
      _mm512_storeu_si512(dd, od0), _mm512_storeu_si512(dd + 64, od1);
    }
  }
}

// Qword c of v (c < count) to d + c * stride, n <= 8 bytes of it; with `spill`, all 8 (the bytes
// past n belong to the next output row, written later).
inline void store_qwords(uint8_t* d, int64_t stride, int64_t count, int64_t n, bool spill, __m512i v) {
  const __m128i l[4] = {_mm512_castsi512_si128(v), _mm512_extracti32x4_epi32(v, 1), _mm512_extracti32x4_epi32(v, 2),
                        _mm512_extracti32x4_epi32(v, 3)};
  if (n == 8 || spill) {
    if (count == 8) {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        _mm_storel_epi64(reinterpret_cast<__m128i*>(d + 2 * j * stride), l[j]);
        _mm_storeh_pd(reinterpret_cast<double*>(d + (2 * j + 1) * stride), _mm_castsi128_pd(l[j]));
      }
      return;
    }
    for (int64_t c = 0; c < count; ++c) {
      if (c & 1) _mm_storeh_pd(reinterpret_cast<double*>(d + c * stride), _mm_castsi128_pd(l[c >> 1]));
      else _mm_storel_epi64(reinterpret_cast<__m128i*>(d + c * stride), l[c >> 1]);
    }
    return;
  }
  const __mmask16 m = qu8_mask16(n);
  for (int64_t c = 0; c < count; ++c)
    _mm_mask_storeu_epi8(d + c * stride, m, c & 1 ? _mm_unpackhi_epi64(l[c >> 1], l[c >> 1]) : l[c >> 1]);
}

template <int kStride, int kMode>
void cl_block(const QConv2dParams& q, const QDw3x3ClLayout& l, const ClBlock& b, const uint8_t* x, int64_t nch,
              uint8_t* u, uint8_t* y) {
  const Conv2dParams& p = q.conv;
  const int64_t out_plane = p.oh * p.ow, half = l.we * 16;
  const __m512i order2 = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15));
  // word 4c + k <- word 8k + c.
  const __m512i gather8 = _mm512_set_epi16(31, 23, 15, 7, 30, 22, 14, 6, 29, 21, 13, 5, 28, 20, 12, 4, 27, 19, 11, 3,
                                           26, 18, 10, 2, 25, 17, 9, 1, 24, 16, 8, 0);
  for (int64_t oy0 = 0; oy0 < p.oh; oy0 += l.strip) {
    const int64_t oy1 = std::min(p.oh, oy0 + l.strip);
    const int64_t rows = (oy1 - oy0 - 1) * p.stride_h + 3;
    cl_fill_rows(q, l, x, nch, oy0 * p.stride_h, 0, rows, u);
    for (int64_t oy = oy0; oy < oy1; ++oy) {
      const uint8_t* r0 = u + (oy - oy0) * p.stride_h * l.row_bytes;
      uint8_t* yr = y + oy * p.ow;
      // Stride 1: 4 windows, 8 outputs (a: even columns, b: odd); stride 2: 8 windows, 8 outputs
      // (a: the first 4, b: the next 4).
      for (int64_t e = 0; e < l.windows; e += 4 * kStride) {
        __m512i acc_a[4], acc_b[4];
#pragma GCC unroll 4
        for (int g = 0; g < 4; ++g) acc_a[g] = acc_b[g] = b.bias[g];
#pragma GCC unroll 3
        for (int ky = 0; ky < 3; ++ky) {
#pragma GCC unroll 2
          for (int set = 0; set < kStride; ++set) {
            const uint8_t* ev = r0 + ky * l.row_bytes + (e + 4 * set) * 16;
            const __m512i A = _mm512_loadu_si512(ev), B = _mm512_loadu_si512(ev + half);
            const __m512i C = _mm512_loadu_si512(ev + 16), D = _mm512_loadu_si512(ev + half + 16);
            const __m512i ab_lo = _mm512_unpacklo_epi8(A, B), ab_hi = _mm512_unpackhi_epi8(A, B);
            const __m512i cd_lo = _mm512_unpacklo_epi8(C, D), cd_hi = _mm512_unpackhi_epi8(C, D);
            const __m512i v[4] = {_mm512_unpacklo_epi16(ab_lo, cd_lo), _mm512_unpackhi_epi16(ab_lo, cd_lo),
                                  _mm512_unpacklo_epi16(ab_hi, cd_hi), _mm512_unpackhi_epi16(ab_hi, cd_hi)};
#pragma GCC unroll 4
            for (int g = 0; g < 4; ++g) {
              if (kStride == 1) {
                acc_a[g] = _mm512_dpbusd_epi32(acc_a[g], v[g], b.wa[ky][g]);
                acc_b[g] = _mm512_dpbusd_epi32(acc_b[g], v[g], b.wb[ky][g]);
              } else if (set == 0) {
                acc_a[g] = _mm512_dpbusd_epi32(acc_a[g], v[g], b.wa[ky][g]);
              } else {
                acc_b[g] = _mm512_dpbusd_epi32(acc_b[g], v[g], b.wa[ky][g]);
              }
            }
          }
        }
        const int64_t ox = kStride == 1 ? 2 * e : e, n = std::min<int64_t>(8, p.ow - ox);
        const __m512i ra = requant_windows<kMode>(acc_a, b), rb = requant_windows<kMode>(acc_b, b);
        // Word c of lane k: channel c at the columns of a and b in lane k; then qword c: channel c
        // (stride 2: its bytes in the order 0, 4, 1, 5, ..., put right by `order2`).
        __m512i lo = _mm512_permutexvar_epi16(gather8, _mm512_unpacklo_epi8(ra, rb));
        __m512i hi = _mm512_permutexvar_epi16(gather8, _mm512_unpackhi_epi8(ra, rb));
        if (kStride == 2) lo = _mm512_shuffle_epi8(lo, order2), hi = _mm512_shuffle_epi8(hi, order2);
        // A row's last partial store may run into the next rows (written later), not past the plane.
        const bool spill = (oy + 1) * p.ow + 8 - n <= out_plane;
        store_qwords(yr + ox, out_plane, std::min<int64_t>(8, nch), n, spill, lo);
        if (nch > 8) store_qwords(yr + ox + 8 * out_plane, out_plane, nch - 8, n, spill, hi);
      }
    }
  }
}

// ---- channel rows ----
// One channel at a time, from its input padded with x_zp (rows_pad_plane; no transposes). The
// dword at byte a of a padded row is [x_a, x_a+1, x_a+2, x_a+3], so vpdpbusd with the dword
// [w0, w1, w2, 0] of a kernel row adds that row's taps to the output whose window starts at a.
// The outputs run as one flat grid over the padded rows (QDw3x3RowsLayout): grid position
// g = oy * gw + ox reads, for kernel row ky, byte stride * g of a plane row base (stride 1: the
// padded rows, pitch gw, base row ky; stride 2: the even and the odd padded rows apart, pitch
// 2 gw, bases even row 0, odd row 0, even row 1), so 64 consecutive positions take 12 loads and 12
// vpdpbusd whatever the row width, and only the gw - ow columns past each row are wasted. The
// loads at 0, 1, 2, 3 (stride 1) or 0, 2, 64, 66 (stride 2) give the positions 4d + m in dword d
// of accumulator m (stride 2: 2d, 2d + 1, 32 + 2d, 33 + 2d); the saturating packs leave byte
// 4m + j of each 128-bit lane from dword j of accumulator m, and one vpshufb (stride 2: and a
// vpermq) puts the 64 bytes in order. The grid's rows are then copied out without their tails.

// Lanes [lo, hi) of 64, clipped to 0..64.
inline __mmask64 lanes64(int64_t lo, int64_t hi) {
  lo = std::max<int64_t>(lo, 0), hi = std::min<int64_t>(hi, 64);
  return hi <= lo ? 0 : __mmask64((~0ull >> (64 - (hi - lo))) << lo);
}

// The requantization constants of channel c of a packed block, broadcast to every lane.
ClRequant channel_requant(const ClConsts& k, int c) {
  ClRequant r;
  r.mult_e = r.mult_o = _mm512_set1_epi64(k.mult[c & 1][c >> 1]);
  if (k.mode == kHigh) {
    r.round_e = _mm512_set1_epi32(k.round32[c]), r.count_e = _mm512_set1_epi32(k.count32[c]);
    r.round_o = r.count_o = _mm512_setzero_si512();
    return r;
  }
  // kNarrow stores the odd channels' shift as n - 32 (their results land in the high halves).
  const int64_t n = k.count[c & 1][c >> 1] + (k.mode == kNarrow && (c & 1) ? 32 : 0);
  r.round_e = r.round_o = _mm512_set1_epi64(k.round[c & 1][c >> 1]);
  r.count_e = _mm512_set1_epi64(n), r.count_o = _mm512_set1_epi64(k.mode == kNarrow ? n - 32 : n);
  return r;
}

// Channel xc padded into the planes of l: padded row r at plane row r (stride 1) or at even
// row r / 2 or odd row r / 2 (stride 2); x_zp outside the input. Each row is written 64 bytes at
// a time from a masked load that takes x_zp outside the input row; a row's last store runs into
// the next row of its plane, written later, or into the plane's slack.
void rows_pad_plane(const Conv2dParams& p, const QDw3x3RowsLayout& l, const __m512i zp, const uint8_t* xc,
                    uint8_t* ws) {
  for (int64_t r = 0; r < l.rows; ++r) {
    uint8_t* row = ws + (p.stride_w == 1 ? r * l.pitch : (r & 1) * l.odd_offset + (r >> 1) * l.pitch);
    const int64_t iy = r - p.pad_top;
    const bool inside = iy >= 0 && iy < p.h;
    const uint8_t* xr = xc + (inside ? iy : 0) * p.w;
    for (int64_t i = 0; i < l.row_bytes; i += 64) {
      const __mmask64 m = inside ? lanes64(p.pad_left - i, p.pad_left + p.w - i) : 0;
      _mm512_storeu_si512(row + i, _mm512_mask_loadu_epi8(zp, m, xr + (i - p.pad_left)));
    }
  }
}

template <int kStride, int kMode>
void rows_channel(const QConv2dParams& q, const QDw3x3RowsLayout& l, const ClConsts& k, const ClBlock& b, int c,
                  uint8_t* ws, uint8_t* yc) {
  const Conv2dParams& p = q.conv;
  // Byte 4m + j of a 128-bit lane after the packs: accumulator m, dword j (see above).
  const __m512i order = _mm512_broadcast_i32x4(
      kStride == 1 ? _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15)
                   : _mm_setr_epi8(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15));
  const __m512i order2 = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
  constexpr int64_t offsets[4] = {0, kStride == 1 ? 1 : 2, kStride == 1 ? 2 : 64, kStride == 1 ? 3 : 66};
  const uint8_t* base[3] = {ws, kStride == 1 ? ws + l.pitch : ws + l.odd_offset,
                            kStride == 1 ? ws + 2 * l.pitch : ws + l.pitch};
  const __m512i bias = _mm512_set1_epi32(k.bias[c]);
  const __m512i w[3] = {_mm512_set1_epi32(k.wa[0][c]), _mm512_set1_epi32(k.wa[1][c]), _mm512_set1_epi32(k.wa[2][c])};
  const ClRequant r = channel_requant(k, c);
  uint8_t* grid = ws + l.grid_offset;
  for (int64_t g0 = 0; g0 < l.grid_len; g0 += 64) {
    __m512i acc[4] = {bias, bias, bias, bias};
#pragma GCC unroll 3
    for (int ky = 0; ky < 3; ++ky) {
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i)
        acc[i] = _mm512_dpbusd_epi32(acc[i], _mm512_loadu_si512(base[ky] + kStride * g0 + offsets[i]), w[ky]);
    }
    const __m512i lo = _mm512_packs_epi32(requant_lanes<kMode>(acc[0], r, b), requant_lanes<kMode>(acc[1], r, b));
    const __m512i hi = _mm512_packs_epi32(requant_lanes<kMode>(acc[2], r, b), requant_lanes<kMode>(acc[3], r, b));
    __m512i out = _mm512_shuffle_epi8(_mm512_packus_epi16(lo, hi), order);
    if (kStride == 2) out = _mm512_permutexvar_epi64(order2, out);
    _mm512_storeu_si512(grid + g0, _mm512_min_epu8(_mm512_max_epu8(out, b.lo8), b.hi8));
  }
  for (int64_t oy = 0; oy < p.oh; ++oy)
    for (int64_t i = 0; i < p.ow; i += 64) {
      const __mmask64 m = lanes64(0, p.ow - i);
      _mm512_mask_storeu_epi8(yc + oy * p.ow + i, m, _mm512_maskz_loadu_epi8(m, grid + oy * l.gw + i));
    }
}

template <int kStride, int kMode>
void rows_block(const QConv2dParams& q, const ClConsts& k, const ClBlock& b, const uint8_t* x, int64_t nch,
                uint8_t* workspace, uint8_t* y) {
  const Conv2dParams& p = q.conv;
  const QDw3x3RowsLayout l = ds_qu8_dw3x3_rows_layout(p);
  const __m512i zp = _mm512_set1_epi8(char(q.x_zp));
  for (int c = 0; c < nch; ++c) {
    rows_pad_plane(p, l, zp, x + c * p.h * p.w, workspace);
    rows_channel<kStride, kMode>(q, l, k, b, c, workspace, y + c * p.oh * p.ow);
  }
}

}  // namespace

namespace {

// Blocks of 16 channels from cb = c0 (nch each, at most 16) with constants from `consts(cb, nch)`.
template <typename ConstsFn>
void cl_blocks(const QConv2dParams& q, const uint8_t* x, uint8_t* workspace, uint8_t* y, int64_t c0, int64_t c1,
               bool rows, ConstsFn consts) {
  const Conv2dParams& p = q.conv;
  const QDw3x3ClLayout l = ds_qu8_dw3x3_cl_layout(p);
  ClBlock b;
  for (int64_t cb = c0; cb < c1; cb += 16) {
    const int64_t nch = std::min<int64_t>(16, c1 - cb);
    const ClConsts& k = consts(cb, nch);
    load_block(q, k, b);
    const uint8_t* xb = x + cb * p.h * p.w;
    uint8_t* yb = y + cb * p.oh * p.ow;
    // The kernel instance for this block's stride and requantization mode.
    const auto run = [&](auto stride, auto mode) {
      if (rows) rows_block<stride(), mode()>(q, k, b, xb, nch, workspace, yb);
      else cl_block<stride(), mode()>(q, l, b, xb, nch, workspace, yb);
    };
    const auto with_mode = [&](auto stride) {
      if (b.mode == kHigh) run(stride, std::integral_constant<int, kHigh>());
      else if (b.mode == kNarrow) run(stride, std::integral_constant<int, kNarrow>());
      else run(stride, std::integral_constant<int, kWide>());
    };
    if (p.stride_w == 1) with_mode(std::integral_constant<int, 1>());
    else with_mode(std::integral_constant<int, 2>());
  }
}

bool cl_applies(const Conv2dParams& p) {
  return p.kh == 3 && p.kw == 3 && p.dil_h == 1 && p.dil_w == 1 && (p.stride_w == 1 || p.stride_w == 2);
}

}  // namespace

namespace {

void blocks_per_call(const QConv2dParams& q, const uint8_t* x, const int8_t* w, const QChannelParams& ch,
                     uint8_t* workspace, uint8_t* y, int64_t c0, int64_t c1, bool rows) {
  ClConsts k;
  const bool rows_apply = rows && ds_qu8_dw3x3_rows_layout(q.conv).applies;
  cl_blocks(q, x, workspace, y, c0, c1, rows_apply, [&](int64_t cb, int64_t nch) -> const ClConsts& {
    pack_consts(q, w, ch, cb, nch, k);
    return k;
  });
}

// Channel rows where the per-channel work (padding, constants, copying out) is small beside the
// outputs. In MobileNet V2 they win at 56 and 112 output columns; at 28 they win alone (bench_qconv
// dw: 192 x 28 x 28 38 -> 35 us) but lose in the model (its per-node times, 0.044 -> 0.048 ms),
// and lose at 14 and 7 in both.
bool rows_win(const Conv2dParams& p) { return ds_qu8_dw3x3_rows_layout(p).applies && p.ow >= 48; }

}  // namespace

void ds_qu8_dwconv3x3_cl__avx512vnni(const QConv2dParams& q, const uint8_t* x, const int8_t* w,
                                     const QChannelParams& ch, uint8_t* workspace, uint8_t* y, int64_t c0,
                                     int64_t c1) {
  blocks_per_call(q, x, w, ch, workspace, y, c0, c1, false);
}

void ds_qu8_dwconv3x3_rows__avx512vnni(const QConv2dParams& q, const uint8_t* x, const int8_t* w,
                                       const QChannelParams& ch, uint8_t* workspace, uint8_t* y, int64_t c0,
                                       int64_t c1) {
  blocks_per_call(q, x, w, ch, workspace, y, c0, c1, true);
}

int64_t ds_qu8_dw3x3_packed_bytes__avx512vnni(const QConv2dParams& q) {
  return cl_applies(q.conv) ? (q.conv.c + 15) / 16 * int64_t(sizeof(ClConsts)) + 64 : 0;
}

void ds_qu8_dw3x3_pack__avx512vnni(const QConv2dParams& q, const int8_t* w, const QChannelParams& ch, void* dst) {
  ClConsts* k = reinterpret_cast<ClConsts*>((reinterpret_cast<uintptr_t>(dst) + 63) / 64 * 64);
  for (int64_t cb = 0; cb < q.conv.c; cb += 16) pack_consts(q, w, ch, cb, std::min<int64_t>(16, q.conv.c - cb), k[cb / 16]);
}

void ds_qu8_dwconv3x3_packed__avx512vnni(const QConv2dParams& q, const uint8_t* x, const void* packed,
                                         uint8_t* workspace, uint8_t* y, int64_t c0, int64_t c1) {
  const ClConsts* k = reinterpret_cast<const ClConsts*>((reinterpret_cast<uintptr_t>(packed) + 63) / 64 * 64);
  cl_blocks(q, x, workspace, y, c0, c1, rows_win(q.conv),
            [&](int64_t cb, int64_t) -> const ClConsts& { return k[cb / 16]; });
}

void ds_qu8_dwconv3x3__avx512vnni(const QConv2dParams& q, const uint8_t* x, const int8_t* w, const QChannelParams& ch,
                                  uint8_t* workspace, uint8_t* y, int64_t c0, int64_t c1) {
  if (!cl_applies(q.conv)) {
    ds_qu8_dwconv__avx512vnni(q, x, w, ch, workspace, y, c0, c1);
    return;
  }
  blocks_per_call(q, x, w, ch, workspace, y, c0, c1, rows_win(q.conv));
}

}  // namespace ds
