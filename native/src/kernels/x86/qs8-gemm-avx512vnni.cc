// int8 kernels with AVX-512 VNNI: vpdpbusd multiplies u8 activations by i8 weights and adds
// groups of four products into int32 lanes, exactly (no intermediate saturation).
//   GEMM ds_qs8_gemm_8x32__avx512vnni: 8 output channels x 32 pixels in 16 zmm accumulators;
//     activations packed [k/4][pixel][4], weights [k/4][row][4] (broadcast as one int32).
//     Accumulators start at the bias.
//   Epilogue (kernels/x86/qu8-requant-avx512.h): requant with 64-bit products (vpmuldq on
//     even/odd lanes), rounding add, arithmetic shift, clamp, narrow to u8 (vpmovdb): the formula
//     of docs/format.md exactly.
//   Packing of activations from rows at a stride (pack_x) or at given offsets (pack_x_rows, the
//     taps of a convolution read in place), and an im2col with vector copies.
//   Dense ds_qs8_dense__avx512vnni (one row of x against each weight row) and the generic
//     depthwise ds_qu8_dwconv__avx512vnni (kernels/x86/qu8-dwconv-impl.h); 3x3 depthwise is in
//     qu8-dwconv3x3-avx512vnni.cc.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "kernels/qs8-pack.h"
#include "kernels/qu8.h"
#include "kernels/x86/qu8-requant-avx512.h"

namespace ds {
namespace {

constexpr int kMr = 8, kNr = 32, kKr = 4;

int64_t groups(int64_t k) { return (k + kKr - 1) / kKr; }

constexpr auto packed_w_bytes = qs8_packed_w_bytes<kMr, kKr>;
constexpr auto pack_w = qs8_pack_w<kMr, kKr>;

int64_t packed_x_bytes(int64_t k, int64_t n) { return (n + kNr - 1) / kNr * kNr * groups(k) * kKr; }

// 64 columns of four rows interleaved bytewise: v[i] = columns 16i .. 16i + 15 as [column][4].
// 512-bit unpacks of the rows, then a 4x4 transpose of their 128-bit lanes.
inline void interleave4x64(__m512i r0, __m512i r1, __m512i r2, __m512i r3, __m512i v[4]) {
  const __m512i t0 = _mm512_unpacklo_epi8(r0, r1), t1 = _mm512_unpackhi_epi8(r0, r1);
  const __m512i t2 = _mm512_unpacklo_epi8(r2, r3), t3 = _mm512_unpackhi_epi8(r2, r3);
  // Lane L of u_j: columns 16L + 4j .. 16L + 4j + 3, four bytes each.
  const __m512i u0 = _mm512_unpacklo_epi16(t0, t2), u1 = _mm512_unpackhi_epi16(t0, t2);
  const __m512i u2 = _mm512_unpacklo_epi16(t1, t3), u3 = _mm512_unpackhi_epi16(t1, t3);
  const __m512i w0 = _mm512_shuffle_i32x4(u0, u1, _MM_SHUFFLE(1, 0, 1, 0));
  const __m512i w1 = _mm512_shuffle_i32x4(u2, u3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m512i w2 = _mm512_shuffle_i32x4(u0, u1, _MM_SHUFFLE(3, 2, 3, 2));
  const __m512i w3 = _mm512_shuffle_i32x4(u2, u3, _MM_SHUFFLE(3, 2, 3, 2));
  v[0] = _mm512_shuffle_i32x4(w0, w1, _MM_SHUFFLE(2, 0, 2, 0));
  v[1] = _mm512_shuffle_i32x4(w0, w1, _MM_SHUFFLE(3, 1, 3, 1));
  v[2] = _mm512_shuffle_i32x4(w2, w3, _MM_SHUFFLE(2, 0, 2, 0));
  v[3] = _mm512_shuffle_i32x4(w2, w3, _MM_SHUFFLE(3, 1, 3, 1));
}

// Packs x (k, n) whose row kk starts at row(kk): four rows are interleaved bytewise into
// [column][4], 64 columns (two panels) at a time with 512-bit unpacks and a 4x4 transpose of their
// 128-bit lanes, the rest 16 columns at a time; masked loads give the zeros past n and past k.
template <typename RowFn>
void pack_x_impl(int64_t k, int64_t n, RowFn row, void* dst) {
  uint8_t* d = static_cast<uint8_t*>(dst);
  const int64_t g_count = groups(k), panels = (n + kNr - 1) / kNr;
  int64_t q = 0;
  for (; q + 2 <= panels && (q + 2) * kNr <= n; q += 2) {
    const int64_t col0 = q * kNr;
    for (int64_t g = 0; g < g_count; ++g) {
      const int64_t k0 = g * kKr;
      __m512i v[4];
      interleave4x64(_mm512_loadu_si512(row(k0) + col0),
                     k0 + 1 < k ? _mm512_loadu_si512(row(k0 + 1) + col0) : _mm512_setzero_si512(),
                     k0 + 2 < k ? _mm512_loadu_si512(row(k0 + 2) + col0) : _mm512_setzero_si512(),
                     k0 + 3 < k ? _mm512_loadu_si512(row(k0 + 3) + col0) : _mm512_setzero_si512(), v);
      uint8_t* o0 = d + (q * g_count + g) * kNr * kKr;        // columns 0..31
      uint8_t* o1 = d + ((q + 1) * g_count + g) * kNr * kKr;  // columns 32..63
      _mm512_storeu_si512(o0, v[0]);
      _mm512_storeu_si512(o0 + 64, v[1]);
      _mm512_storeu_si512(o1, v[2]);
      _mm512_storeu_si512(o1 + 64, v[3]);
    }
  }
  for (; q < panels; ++q) {
    const int64_t col0 = q * kNr;
    for (int64_t g = 0; g < g_count; ++g) {
      uint8_t* out = d + (q * g_count + g) * kNr * kKr;
      const int64_t k0 = g * kKr;
      const uint8_t* s0 = row(k0);
      const uint8_t* s1 = k0 + 1 < k ? row(k0 + 1) : nullptr;
      const uint8_t* s2 = k0 + 2 < k ? row(k0 + 2) : nullptr;
      const uint8_t* s3 = k0 + 3 < k ? row(k0 + 3) : nullptr;
      for (int64_t h = 0; h < kNr; h += 16) {
        const int64_t c = col0 + h;
        const __mmask16 m = c >= n ? 0 : qu8_mask16(n - c);
        const __m128i r0 = _mm_maskz_loadu_epi8(m, s0 + c);
        const __m128i r1 = s1 ? _mm_maskz_loadu_epi8(m, s1 + c) : _mm_setzero_si128();
        const __m128i r2 = s2 ? _mm_maskz_loadu_epi8(m, s2 + c) : _mm_setzero_si128();
        const __m128i r3 = s3 ? _mm_maskz_loadu_epi8(m, s3 + c) : _mm_setzero_si128();
        const __m128i t0 = _mm_unpacklo_epi8(r0, r1), t1 = _mm_unpackhi_epi8(r0, r1);
        const __m128i t2 = _mm_unpacklo_epi8(r2, r3), t3 = _mm_unpackhi_epi8(r2, r3);
        __m128i* o = reinterpret_cast<__m128i*>(out + h * kKr);
        _mm_storeu_si128(o + 0, _mm_unpacklo_epi16(t0, t2));
        _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(t0, t2));
        _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(t1, t3));
        _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(t1, t3));
      }
    }
  }
}

void pack_x(int64_t k, int64_t n, const uint8_t* x, int64_t stride, void* dst) {
  pack_x_impl(k, n, [&](int64_t kk) { return x + kk * stride; }, dst);
}

void pack_x_rows(int64_t k, int64_t n, const uint8_t* x, const int64_t* row_offsets, void* dst) {
  pack_x_impl(k, n, [&](int64_t kk) { return x + row_offsets[kk]; }, dst);
}

void requant_row(const int32_t* acc, int64_t n, int32_t bias, int32_t mult, int32_t shift, const QuantOut& q,
                 uint8_t* y) {
  const __m512i b = _mm512_set1_epi32(bias);
  const Requant16 requant(mult, shift, q);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = qu8_mask16(n - i);
    const __m512i a = _mm512_add_epi32(_mm512_maskz_loadu_epi32(mask, acc + i), b);
    _mm_mask_storeu_epi8(y + i, mask, requant(a));
  }
}

// ds_u8_im2col__scalar with vector copies: runs inside the row as masked 64-byte moves (stride
// 1) or the even bytes of 64-byte loads (vpmovwb, stride 2); padding as masked stores of x_zp.
void im2col(const Conv2dParams& p, int64_t channels, int32_t x_zp, const uint8_t* x, int64_t p0, int64_t p1,
            uint8_t* dst) {
  const int64_t cols = p1 - p0;
  const __m512i zp = _mm512_set1_epi8(char(x_zp));
  auto fill = [&](uint8_t* out, int64_t n) {
    for (int64_t t = 0; t < n; t += 64) {
      const __mmask64 m = n - t >= 64 ? ~__mmask64(0) : (__mmask64(1) << (n - t)) - 1;
      _mm512_mask_storeu_epi8(out + t, m, zp);
    }
  };
  for (int64_t c = 0; c < channels; ++c) {
    const uint8_t* xc = x + c * p.h * p.w;
    for (int64_t ky = 0; ky < p.kh; ++ky) {
      for (int64_t kx = 0; kx < p.kw; ++kx) {
        uint8_t* row = dst + ((c * p.kh + ky) * p.kw + kx) * cols;
        for (int64_t j = 0; j < cols;) {
          const int64_t oy = (p0 + j) / p.ow, ox0 = (p0 + j) % p.ow;
          const int64_t len = std::min(cols - j, p.ow - ox0);
          const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dil_h;
          uint8_t* out = row + j;
          j += len;
          if (iy < 0 || iy >= p.h) {
            fill(out, len);
            continue;
          }
          const int64_t s = p.stride_w, base = kx * p.dil_w - p.pad_left;  // ix = ox * s + base
          const int64_t ox_lo = base >= 0 ? 0 : (-base + s - 1) / s;
          const int64_t ox_hi = p.w - base <= 0 ? 0 : (p.w - base + s - 1) / s;
          const int64_t t0 = std::min(len, std::max<int64_t>(0, ox_lo - ox0));
          const int64_t t1 = std::max(t0, std::min(len, ox_hi - ox0));
          fill(out, t0);
          fill(out + t1, len - t1);
          const uint8_t* src = xc + iy * p.w + (ox0 + t0) * s + base;
          const int64_t n = t1 - t0;
          if (s == 1) {
            for (int64_t t = 0; t < n; t += 64) {
              const __mmask64 m = n - t >= 64 ? ~__mmask64(0) : (__mmask64(1) << (n - t)) - 1;
              _mm512_mask_storeu_epi8(out + t0 + t, m, _mm512_maskz_loadu_epi8(m, src + t));
            }
          } else if (s == 2) {
            for (int64_t t = 0; t < n; t += 32) {
              const int64_t cnt = std::min<int64_t>(32, n - t);
              // Bytes 0 .. 2 * cnt - 2 are in the row; the last odd byte may not be.
              const __mmask64 m = (cnt == 32 ? ~__mmask64(0) >> 1 : (__mmask64(1) << (2 * cnt - 1)) - 1);
              const __m256i even = _mm512_cvtepi16_epi8(_mm512_maskz_loadu_epi8(m, src + 2 * t));
              _mm256_mask_storeu_epi8(out + t0 + t, __mmask32(cnt == 32 ? ~0u : (1u << cnt) - 1), even);
            }
          } else {
            for (int64_t t = 0; t < n; ++t) out[t0 + t] = src[t * s];
          }
        }
      }
    }
  }
}

// Every stride-th byte; stride 2 as the even bytes of 64-byte loads (vpmovwb).
void gather_row(int64_t n, const uint8_t* src, int64_t stride, uint8_t* dst) {
  if (stride != 2) {
    for (int64_t j = 0; j < n; ++j) dst[j] = src[j * stride];
    return;
  }
  for (int64_t j = 0; j < n; j += 32) {
    const int64_t cnt = std::min<int64_t>(32, n - j);
    // Bytes 0 .. 2 * cnt - 2 are read; the last odd byte may lie past the source.
    const __mmask64 m = cnt == 32 ? ~__mmask64(0) >> 1 : (__mmask64(1) << (2 * cnt - 1)) - 1;
    const __m256i even = _mm512_cvtepi16_epi8(_mm512_maskz_loadu_epi8(m, src + 2 * j));
    _mm256_mask_storeu_epi8(dst + j, __mmask32(cnt == 32 ? ~0u : (1u << cnt) - 1), even);
  }
}

// A padded row of four channels interleaved bytewise (QGemmKernels::interleave4): 64 columns
// per step, the rows loaded under the mask of the columns in [lo, hi) (x_zp elsewhere), stride 2
// as the even bytes of two 64-byte loads (vpmovwb), then interleave4x64.
void interleave4(int64_t n, int64_t lo, int64_t hi, const uint8_t* const s[4], int64_t stride, int32_t x_zp,
                 uint8_t* dst) {
  if (stride > 2) {
    for (int64_t j = 0; j < n; ++j)
      for (int r = 0; r < 4; ++r) dst[4 * j + r] = j >= lo && j < hi ? s[r][(j - lo) * stride] : uint8_t(x_zp);
    return;
  }
  const __m512i zp = _mm512_set1_epi8(char(x_zp));
  // Bits [a, b) of a 64-bit mask (a and b clamped to 0..64).
  auto bits = [](int64_t a, int64_t b) {
    const __mmask64 below_b = b >= 64 ? ~__mmask64(0) : (__mmask64(1) << std::max<int64_t>(0, b)) - 1;
    const __mmask64 below_a = a <= 0 ? 0 : a >= 64 ? ~__mmask64(0) : (__mmask64(1) << a) - 1;
    return below_b & ~below_a;
  };
  for (int64_t c0 = 0; c0 < n; c0 += 64) {
    const __mmask64 valid = bits(lo - c0, hi - c0);  // lanes c0 + t holding input columns
    const __mmask64 even = 0x5555555555555555ull;
    const __mmask64 half0 = even & bits(2 * (lo - c0), 2 * (hi - c0));
    const __mmask64 half1 = even & bits(2 * (lo - c0 - 32), 2 * (hi - c0 - 32));
    auto load = [&](const uint8_t* row) {
      // Masked-off lanes are not read: the load may start before the row (lanes < lo) or run
      // past it.
      if (stride == 1) return _mm512_mask_loadu_epi8(zp, valid, row + (c0 - lo));
      // Lane t reads byte 2 (c0 + t - lo): the even bytes of 128, only those of valid lanes
      // loaded (the odd byte after the last one may lie past the row).
      const uint8_t* src = row + 2 * (c0 - lo);
      const __m256i e0 = _mm512_cvtepi16_epi8(_mm512_maskz_loadu_epi8(half0, src));
      const __m256i e1 = _mm512_cvtepi16_epi8(_mm512_maskz_loadu_epi8(half1, src + 64));
      return _mm512_mask_blend_epi8(valid, zp, _mm512_inserti64x4(_mm512_castsi256_si512(e0), e1, 1));
    };
    __m512i v[4];
    interleave4x64(load(s[0]), load(s[1]), load(s[2]), load(s[3]), v);
    uint8_t* out = dst + 4 * c0;
    const int64_t cols = std::min<int64_t>(64, n - c0);
    if (cols == 64) {
      _mm512_storeu_si512(out, v[0]);
      _mm512_storeu_si512(out + 64, v[1]);
      _mm512_storeu_si512(out + 128, v[2]);
      _mm512_storeu_si512(out + 192, v[3]);
      continue;
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const int64_t left = cols - 16 * i;  // columns of v[i] inside the row
      if (left >= 16) _mm512_storeu_si512(out + 64 * i, v[i]);
      else if (left > 0) _mm512_mask_storeu_epi8(out + 64 * i, (__mmask64(1) << (4 * left)) - 1, v[i]);
    }
  }
}

// ---- transposed: 32 output channels in two vectors, 8 pixels broadcast ----
int64_t packed_wt_bytes(int64_t m, int64_t k) { return (m + 31) / 32 * 32 * groups(k) * kKr; }

void pack_wt(int64_t m, int64_t k, const int8_t* w, void* dst) {
  int8_t* d = static_cast<int8_t*>(dst);
  const int64_t g_count = groups(k);
  for (int64_t p = 0; p < (m + 31) / 32; ++p)
    for (int64_t g = 0; g < g_count; ++g)
      for (int64_t r = 0; r < 32; ++r)
        for (int64_t j = 0; j < kKr; ++j) {
          const int64_t row = p * 32 + r, kk = g * kKr + j;
          *d++ = row < m && kk < k ? w[row * k + kk] : 0;
        }
}

typedef int32_t __attribute__((may_alias, aligned(1))) packed_x32;

// Per-lane requantization of 16 channels (lane = channel). When every lane's n = 31 + shift is in
// 33..52, the products' high halves on int32 lanes (RequantChannel::high: y_zp in the rounding
// term, then a 32-bit clamp); otherwise the formula with 64-bit lanes and clamp, for any shift.
struct LaneRequant {
  __m512i mult_e, mult_o, round_e, round_o, count_e, count_o;
  __m512i round_high, count_high;
  bool high = false;
  void set(const int32_t* mult, const int32_t* shift, int64_t count, int32_t y_zp) {
    alignas(64) int64_t me[8], mo[8], re[8], ro[8], ce[8], co[8];
    alignas(64) int32_t rh[16], ch[16];
    high = true;
    for (int i = 0; i < 16; ++i) {
      RequantChannel c;
      c.set(i < count ? mult[i] : 0, i < count ? shift[i] : 2, y_zp);
      high = high && c.high;
      rh[i] = c.round_high, ch[i] = c.count_high;
    }
    for (int i = 0; i < 8; ++i) {
      const bool e = 2 * i < count, o = 2 * i + 1 < count;
      const int ne = e ? 31 + shift[2 * i] : 32, no = o ? 31 + shift[2 * i + 1] : 32;
      me[i] = e ? mult[2 * i] : 0, mo[i] = o ? mult[2 * i + 1] : 0;
      re[i] = int64_t(1) << (ne - 1), ro[i] = int64_t(1) << (no - 1);
      ce[i] = ne, co[i] = no;
    }
    mult_e = _mm512_load_si512(me), mult_o = _mm512_load_si512(mo);
    round_e = _mm512_load_si512(re), round_o = _mm512_load_si512(ro);
    count_e = _mm512_load_si512(ce), count_o = _mm512_load_si512(co);
    round_high = _mm512_load_si512(rh), count_high = _mm512_load_si512(ch);
  }
  __m128i operator()(__m512i acc, const RequantRange& r) const {
    if (high) {  // the even products' high halves moved next to the odd ones' (as requant32)
      const __m512i even = _mm512_mul_epi32(acc, mult_e), odd = _mm512_mul_epi32(_mm512_srli_epi64(acc, 32), mult_o);
      const __m512i v = _mm512_srav_epi32(
          _mm512_add_epi32(_mm512_mask_shuffle_epi32(odd, 0x5555, even, _MM_PERM_CDAB), round_high), count_high);
      return _mm512_cvtepi32_epi8(_mm512_min_epi32(_mm512_max_epi32(v, r.lo32), r.hi32));
    }
    __m512i even = _mm512_add_epi64(_mm512_mul_epi32(acc, mult_e), round_e);
    __m512i odd = _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(acc, 32), mult_o), round_o);
    even = _mm512_max_epi64(_mm512_min_epi64(_mm512_srav_epi64(even, count_e), r.hi64), r.lo64);
    odd = _mm512_max_epi64(_mm512_min_epi64(_mm512_srav_epi64(odd, count_o), r.hi64), r.lo64);
    const __m512i v = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
    return _mm512_cvtepi32_epi8(_mm512_add_epi32(v, r.y_zp));
  }
};

// The epilogue constants of a panel of 32 output channels, set once per panel (not per tile:
// their vector loads right after the scalar stores that build them stall on store forwarding).
struct PanelRequant {
  LaneRequant rq[2];
  __m512i bias0, bias1;
  void set(const QGemmTParams& p, int64_t i0, int64_t rows) {
    rq[0].set(p.ch.multiplier + i0, p.ch.shift + i0, std::min<int64_t>(16, rows), p.out.y_zp);
    rq[1].set(p.ch.multiplier + i0 + 16, p.ch.shift + i0 + 16, std::max<int64_t>(0, rows - 16), p.out.y_zp);
    bias0 = _mm512_maskz_loadu_epi32(qu8_mask16(rows), p.ch.bias + i0);
    bias1 = rows > 16 ? _mm512_maskz_loadu_epi32(qu8_mask16(rows - 16), p.ch.bias + i0 + 16) : _mm512_setzero_si512();
  }
};

// The epilogue of one tile, out of line: its constants are not live across the K loop. Per 16
// channels, the tile's pixels (16 bytes each, one per channel) are transposed by unpacks into
// each channel's 8 pixel bytes, stored as masked qwords into the channel rows (byte by byte from a
// staging block it took a few percent of the 14x14 layers).
__attribute__((noinline)) void gemm_t_store(const QGemmTParams& p, const PanelRequant& pr, const __m512i (*acc)[2],
                                            int64_t i0, int64_t rows, int64_t t0, int64_t cnt) {
  const RequantRange range(p.out);
  const __mmask16 low = __mmask16((1u << cnt) - 1), high = __mmask16(low << 8);
  for (int h = 0; h < 2 && 16 * h < rows; ++h) {
    const __m512i bias = h == 0 ? pr.bias0 : pr.bias1;
    __m128i px[8];
    for (int t = 0; t < 8; ++t)
      px[t] = t < cnt ? pr.rq[h](_mm512_add_epi32(acc[t][h], bias), range) : _mm_setzero_si128();
    // Words of (pixel 2j, 2j + 1) per channel, then dwords of four pixels, then qwords of eight.
    __m128i a[8], b[8];
    for (int j = 0; j < 4; ++j) {
      a[2 * j] = _mm_unpacklo_epi8(px[2 * j], px[2 * j + 1]);      // channels 0..7
      a[2 * j + 1] = _mm_unpackhi_epi8(px[2 * j], px[2 * j + 1]);  // channels 8..15
    }
    for (int j = 0; j < 2; ++j)  // pixels 4j .. 4j + 3 of channels 0-3, 4-7, 8-11, 12-15
      for (int half = 0; half < 2; ++half) {
        b[4 * j + 2 * half] = _mm_unpacklo_epi16(a[4 * j + half], a[4 * j + 2 + half]);
        b[4 * j + 2 * half + 1] = _mm_unpackhi_epi16(a[4 * j + half], a[4 * j + 2 + half]);
      }
    uint8_t* y = p.y + (i0 + 16 * h) * p.y_row_stride + t0;
    for (int q = 0; q < 4; ++q) {  // channels 4q .. 4q + 3: b[q] holds pixels 0..3, b[4 + q] pixels 4..7
      const __m128i c01 = _mm_unpacklo_epi32(b[q], b[4 + q]), c23 = _mm_unpackhi_epi32(b[q], b[4 + q]);
      const int64_t r = 16 * h + 4 * q;
      const __m128i pairs[2] = {c01, c23};
      for (int k = 0; k < 2; ++k) {
        uint8_t* row = y + (4 * q + 2 * k) * p.y_row_stride;
        if (r + 2 * k < rows) _mm_mask_storeu_epi8(row, low, pairs[k]);
        if (r + 2 * k + 1 < rows) _mm_mask_storeu_epi8(row + p.y_row_stride - 8, high, pairs[k]);
      }
    }
  }
}

// Tiles of P pixels (8, or 7 when that divides the pixels and 8 does not: ResNet's 7x7 and 14x14
// outputs, 49 and 196 pixels, leave no partial tile whose missing pixels would be computed too).
// Every tile reads the whole panel's weights (K * 32 bytes, 147 KB for K = 4608): from L2 but for
// the first tile, which would wait on memory for all of them (a network's weights are not in the
// caches when its layer runs again). So the steps also prefetch the next panel's weights (`next`)
// into L2, spread evenly over this panel's tiles, one line every `period` steps (each step's own
// prefetch cost the warm runs up to a third of their speed).
template <int P>
void gemm_t_panel(const QGemmTParams& p, const PanelRequant& pr, const int8_t* wp, const int8_t* next,
                  int64_t g_count, int64_t i0, int64_t rows) {
  const int64_t tiles = (p.n + P - 1) / P, panel_bytes = g_count * 128;
  // Bytes of the next panel per step, in 1/256ths; steps per line.
  const int64_t step256 = std::max<int64_t>(1, panel_bytes * 256 / (tiles * g_count));
  const int64_t period = std::max<int64_t>(1, 64 * 256 / step256);
  for (int64_t t0 = 0; t0 < p.n; t0 += P) {
    const int8_t* pf = next + t0 / P * panel_bytes / tiles;
    int64_t countdown = 1;
    const int64_t cnt = std::min<int64_t>(P, p.n - t0);
    const uint8_t* xp[8];
    for (int t = 0; t < 8; ++t) xp[t] = p.x + 4 * int64_t(p.pix[t0 + std::min<int64_t>(t, cnt - 1)]);
    // Sixteen named accumulators (an array gets copied around the loop by GCC).
    __m512i a00 = _mm512_setzero_si512(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00,
            a31 = a00, a40 = a00, a41 = a00, a50 = a00, a51 = a00, a60 = a00, a61 = a00, a70 = a00, a71 = a00;
    const uint8_t *x0 = xp[0], *x1 = xp[1], *x2 = xp[2], *x3 = xp[3], *x4 = xp[4], *x5 = xp[5], *x6 = xp[6],
                  *x7 = xp[7];
    for (int64_t g = 0; g < g_count; ++g) {
      if (--countdown == 0) {
        countdown = period;
        _mm_prefetch(reinterpret_cast<const char*>(pf + (g * step256 >> 8)), _MM_HINT_T2);
      }
      const __m512i w0 = _mm512_loadu_si512(wp + g * 128), w1 = _mm512_loadu_si512(wp + g * 128 + 64);
      const int64_t off = p.x_offsets[g];
#define DS_QT_STEP(xt, c0, c1)                                                           \
  {                                                                                      \
    const __m512i xb = _mm512_set1_epi32(*reinterpret_cast<const packed_x32*>(xt + off)); \
    c0 = _mm512_dpbusd_epi32(c0, xb, w0);                                                \
    c1 = _mm512_dpbusd_epi32(c1, xb, w1);                                                \
  }
      DS_QT_STEP(x0, a00, a01) DS_QT_STEP(x1, a10, a11) DS_QT_STEP(x2, a20, a21) DS_QT_STEP(x3, a30, a31)
      DS_QT_STEP(x4, a40, a41) DS_QT_STEP(x5, a50, a51) DS_QT_STEP(x6, a60, a61)
      if constexpr (P == 8) DS_QT_STEP(x7, a70, a71)
#undef DS_QT_STEP
    }
    const __m512i acc[8][2] = {{a00, a01}, {a10, a11}, {a20, a21}, {a30, a31},
                               {a40, a41}, {a50, a51}, {a60, a61}, {a70, a71}};
    gemm_t_store(p, pr, acc, i0, rows, t0, cnt);
  }
}

void gemm_t(const QGemmTParams& p) {
  const int64_t g_count = groups(p.k);
  const bool sevens = p.n % 8 != 0 && p.n % 7 == 0;
  for (int64_t i0 = p.m0; i0 < p.m1; i0 += 32) {
    const int64_t rows = std::min<int64_t>(32, p.m1 - i0);
    const int8_t* wp = static_cast<const int8_t*>(p.w) + (i0 / 32) * 32 * g_count * kKr;
    const int8_t* next = i0 + 32 < p.m1 ? wp + 32 * g_count * kKr : wp;  // the last: its own, cached
    PanelRequant pr;
    pr.set(p, i0, rows);
    if (sevens) gemm_t_panel<7>(p, pr, wp, next, g_count, i0, rows);
    else gemm_t_panel<8>(p, pr, wp, next, g_count, i0, rows);
  }
}

// qdense over the weights packed as for gemm_t ([panel of 32 rows][k/4][32][4]): per panel the 32
// rows are the lanes of two accumulators and each step broadcasts four bytes of x, so the weights
// stream in order and no horizontal sums are needed; even and odd depth groups go to separate
// accumulators (four chains), added at the end (exact: int32 sums without overflow).
void dense_packed(int64_t k, const uint8_t* x, const int8_t* w, int64_t m0, int64_t m1, const QChannelParams& ch,
                  const QuantOut& q, uint8_t* y) {
  const int64_t g_count = groups(k), full = k / kKr;
  int32_t tail = 0;  // the last, partial depth group of x (the packed weights are zero past k)
  std::memcpy(&tail, x + full * kKr, size_t(k - full * kKr));
  const RequantRange range(q);
  for (int64_t i0 = m0; i0 < m1; i0 += 32) {
    const int64_t rows = std::min<int64_t>(32, m1 - i0);
    const int8_t* wp = w + (i0 / 32) * 32 * g_count * kKr;
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, b0 = a0, b1 = a0;
    int64_t g = 0;
    for (; g + 2 <= full; g += 2) {
      const __m512i xa = _mm512_set1_epi32(*reinterpret_cast<const packed_x32*>(x + g * kKr));
      const __m512i xb = _mm512_set1_epi32(*reinterpret_cast<const packed_x32*>(x + g * kKr + kKr));
      a0 = _mm512_dpbusd_epi32(a0, xa, _mm512_loadu_si512(wp + g * 128));
      a1 = _mm512_dpbusd_epi32(a1, xa, _mm512_loadu_si512(wp + g * 128 + 64));
      b0 = _mm512_dpbusd_epi32(b0, xb, _mm512_loadu_si512(wp + g * 128 + 128));
      b1 = _mm512_dpbusd_epi32(b1, xb, _mm512_loadu_si512(wp + g * 128 + 192));
    }
    for (; g < g_count; ++g) {
      const __m512i xa = _mm512_set1_epi32(g < full ? *reinterpret_cast<const packed_x32*>(x + g * kKr) : tail);
      a0 = _mm512_dpbusd_epi32(a0, xa, _mm512_loadu_si512(wp + g * 128));
      a1 = _mm512_dpbusd_epi32(a1, xa, _mm512_loadu_si512(wp + g * 128 + 64));
    }
    const int64_t lo = std::min<int64_t>(16, rows), hi = rows - lo;
    LaneRequant rq;
    rq.set(ch.multiplier + i0, ch.shift + i0, lo, q.y_zp);
    const __m512i acc0 = _mm512_add_epi32(_mm512_add_epi32(a0, b0), _mm512_maskz_loadu_epi32(qu8_mask16(lo), ch.bias + i0));
    _mm_mask_storeu_epi8(y + i0, qu8_mask16(lo), rq(acc0, range));
    if (hi > 0) {
      rq.set(ch.multiplier + i0 + 16, ch.shift + i0 + 16, hi, q.y_zp);
      const __m512i acc1 =
          _mm512_add_epi32(_mm512_add_epi32(a1, b1), _mm512_maskz_loadu_epi32(qu8_mask16(hi), ch.bias + i0 + 16));
      _mm_mask_storeu_epi8(y + i0 + 16, qu8_mask16(hi), rq(acc1, range));
    }
  }
}

// Four packed weights as one int32 to broadcast (the packed buffer is bytes).
typedef int32_t __attribute__((may_alias, aligned(1))) packed_i32;

// Where the 32 columns of a tile go in each output row: the same vector stored at row + offset[s]
// under mask[s] for each segment s (one for a plain tile; with QGemmParams::grid_w, one per grid
// row the tile touches, its dropped columns masked off).
struct TileStores {
  static constexpr int kMax = 34;
  int count = 0;
  int64_t offset[kMax];
  __mmask32 mask[kMax];
  TileStores(const QGemmParams& p, int64_t j0, int64_t cols) {
    const __mmask32 all = cols >= 32 ? ~__mmask32(0) : (__mmask32(1) << cols) - 1;
    if (p.grid_w == 0 || p.pixel_cols) {
      count = 1, offset[0] = p.pixel_cols ? p.grid0 + j0 : j0, mask[0] = all;
      return;
    }
    const int64_t q0 = p.grid0 + j0, q1 = q0 + cols;
    for (int64_t row = q0 / p.grid_w; row * p.grid_w < q1; ++row) {
      const int64_t a = std::max(q0, row * p.grid_w), b = std::min(q1, row * p.grid_w + p.out_w);
      if (a >= b) continue;
      const __mmask32 valid = (b - q0 >= 32 ? ~__mmask32(0) : (__mmask32(1) << (b - q0)) - 1) & ~((__mmask32(1) << (a - q0)) - 1);
      offset[count] = q0 - row * (p.grid_w - p.out_w);
      mask[count++] = valid;
    }
  }
};

// Where the two 16-column vectors of a tile are read, in bytes from a depth group's start
// (QGemmParams::x_offsets): at offset[v], and with pixel_cols, when the vector's pixels reach
// into the next output row, its lanes in split[v] from split_offset[v] (the next grid row: the
// same lanes moved by the grid_w - out_w dropped columns). A vector meets at most one row end
// (out_w >= 16).
struct TileLoads {
  int64_t offset[2], split_offset[2];
  __mmask16 split[2] = {0, 0};
  TileLoads(const QGemmParams& p, int64_t j0) {
    for (int v = 0; v < 2; ++v) {
      const int64_t first = j0 + 16 * v;
      if (!p.pixel_cols) {
        offset[v] = first * kKr, split_offset[v] = offset[v];
        continue;
      }
      const int64_t t = p.grid0 + first, row = t / p.out_w, skip = p.grid_w - p.out_w;
      offset[v] = (t + row * skip) * kKr;
      split_offset[v] = offset[v] + skip * kKr;
      const int64_t left = p.out_w - t % p.out_w;  // lanes before the row's end
      if (left < 16) split[v] = __mmask16(~((1u << left) - 1));
    }
  }
  bool any_split() const { return (split[0] | split[1]) != 0; }
};

// Rows [i0, i0 + rows) x columns [j0, j0 + cols) from packed panels wp (8 rows) and xp (32
// columns); rc holds the epilogue constants of row i0.
// With xoff (QGemmParams::x_offsets) group g's columns are at xp + xoff[g], else packed at xp + g * 128.
// The qadd of QGemmParams::residual: its lanes and its output range.
struct EpilogueAdd {
  QAddLanes lanes;
  RequantRange range;
  explicit EpilogueAdd(const QGemmParams& p) : lanes(p.add), range(p.add_out) {}
};

// The 32 residual bytes of a tile's columns in one output row: a masked load per store segment.
inline __m256i load_tile_row(const uint8_t* row, const TileStores& st) {
  __m256i v = _mm256_maskz_loadu_epi8(st.mask[0], row + st.offset[0]);
  for (int s = 1; s < st.count; ++s) v = _mm256_mask_loadu_epi8(v, st.mask[s], row + st.offset[s]);
  return v;
}

// The conv's clamped result (requant32's 16 lanes) paired with 16 residual bytes, through the qadd.
inline __m512i add_lanes(__m512i acc, __m128i residual, const RequantRange& range, const QAddLanes& lanes) {
  const __m512i c = _mm512_min_epi32(_mm512_max_epi32(acc, range.lo32), range.hi32);
  return lanes(_mm512_or_si512(c, _mm512_slli_epi32(_mm512_cvtepu8_epi32(residual), 16)));
}

template <bool kOffsets, bool kAdd, bool kSplit = false>
inline void gemm_tile(const QGemmParams& p, int64_t g_count, const int8_t* wp, const uint8_t* xp,
                      const int64_t* xoff, const TileLoads& ld, int64_t i0, int64_t rows, const TileStores& st,
                      const RequantChannel* rc, const RequantRange& range, const EpilogueAdd* add) {
  // Accumulators start at the bias (rows past m: 0). Every index is a constant after unrolling,
  // so they stay in registers.
  __m512i acc[kMr][2];
#pragma GCC unroll 8
  for (int r = 0; r < kMr; ++r) acc[r][0] = acc[r][1] = _mm512_set1_epi32(r < rows ? p.ch.bias[i0 + r] : 0);
  for (int64_t g = 0; g < g_count; ++g) {
    const uint8_t* xg = kOffsets ? xp + xoff[g] : xp + g * kNr * kKr;
    __m512i x0 = _mm512_loadu_si512(kOffsets ? xg + ld.offset[0] : xg);
    __m512i x1 = _mm512_loadu_si512(kOffsets ? xg + ld.offset[1] : xg + 64);
    if constexpr (kSplit) {  // the lanes past a row's end from the next grid row
      x0 = _mm512_mask_loadu_epi32(x0, ld.split[0], xg + ld.split_offset[0]);
      x1 = _mm512_mask_loadu_epi32(x1, ld.split[1], xg + ld.split_offset[1]);
    }
    const packed_i32* wg = reinterpret_cast<const packed_i32*>(wp + g * kMr * kKr);
#pragma GCC unroll 8
    for (int r = 0; r < kMr; ++r) {
      const __m512i wb = _mm512_set1_epi32(wg[r]);
      acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], x0, wb);
      acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], x1, wb);
    }
  }
  // The epilogue straight from the registers, two rows at a time (unrolled, rows past m skipped).
  const bool whole = st.count == 1 && st.mask[0] == ~__mmask32(0);
#pragma GCC unroll 4
  for (int r = 0; r < kMr; r += 2) {
    if (r >= rows) break;
    const bool second = r + 1 < rows;
    __m512i a0 = requant32(acc[r][0], rc[r], range), a1 = requant32(acc[r][1], rc[r], range);
    __m512i b0 = second ? requant32(acc[r + 1][0], rc[r + 1], range) : a0;
    __m512i b1 = second ? requant32(acc[r + 1][1], rc[r + 1], range) : a1;
    if constexpr (kAdd) {  // rows past m read row r's residual again (not stored)
      const uint8_t* rr = p.residual + (i0 + r) * p.y_row_stride;
      const __m256i ra = load_tile_row(rr, st), rb = second ? load_tile_row(rr + p.y_row_stride, st) : ra;
      a0 = add_lanes(a0, _mm256_castsi256_si128(ra), range, add->lanes);
      a1 = add_lanes(a1, _mm256_extracti128_si256(ra, 1), range, add->lanes);
      b0 = add_lanes(b0, _mm256_castsi256_si128(rb), range, add->lanes);
      b1 = add_lanes(b1, _mm256_extracti128_si256(rb, 1), range, add->lanes);
    }
    const __m512i v = pack_rows32(a0, a1, b0, b1, kAdd ? add->range : range);
    uint8_t* yr = p.y + (i0 + r) * p.y_row_stride;
    if (whole) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(yr + st.offset[0]), _mm512_castsi512_si256(v));
      if (second)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(yr + p.y_row_stride + st.offset[0]), _mm512_extracti64x4_epi64(v, 1));
      continue;
    }
    for (int s = 0; s < st.count; ++s) {
      _mm256_mask_storeu_epi8(yr + st.offset[s], st.mask[s], _mm512_castsi512_si256(v));
      if (second) _mm256_mask_storeu_epi8(yr + p.y_row_stride + st.offset[s], st.mask[s], _mm512_extracti64x4_epi64(v, 1));
    }
  }
}

void gemm(const QGemmParams& p) {
  const int64_t g_count = groups(p.k);
  const int8_t* wbase = static_cast<const int8_t*>(p.w);
  const uint8_t* xbase = static_cast<const uint8_t*>(p.x);
  // Blocks of rows whose packed weights stay in L2 (about 256 KiB), at most kBlockRows so that
  // their epilogue constants are computed once; in a block, pixels outside and channels inside:
  // a panel of packed activations (k * 32 bytes) stays in L1 while every row tile passes over it.
  constexpr int64_t kBlockRows = 256;
  const int64_t block = std::min(kBlockRows, std::max<int64_t>(1, (256 * 1024) / (kMr * g_count * kKr)) * kMr);
  const RequantRange range(p.out);
  alignas(64) RequantChannel rc[kBlockRows];
  std::optional<EpilogueAdd> fused;
  if (p.residual) fused.emplace(p);
  const EpilogueAdd* add = p.residual ? &*fused : nullptr;
  for (int64_t b0 = 0; b0 < p.m; b0 += block) {
    const int64_t b1 = std::min(p.m, b0 + block);
    for (int64_t i = b0; i < b1; ++i) rc[i - b0].set(p.ch.multiplier[i], p.ch.shift[i], p.out.y_zp);
    for (int64_t j0 = 0; j0 < p.n; j0 += kNr) {
      const TileStores st(p, j0, std::min<int64_t>(kNr, p.n - j0));
      if (st.count == 0) continue;  // dropped columns only
      const bool offsets = p.x_offsets != nullptr;
      const uint8_t* xp = offsets ? xbase : xbase + (j0 / kNr) * kNr * g_count * kKr;
      const TileLoads ld(p, j0);
      const bool split = ld.any_split();
      for (int64_t i0 = b0; i0 < b1; i0 += kMr) {
        const int8_t* wp = wbase + (i0 / kMr) * kMr * g_count * kKr;
        const int64_t rows = std::min<int64_t>(kMr, p.m - i0);
        const RequantChannel* rci = rc + (i0 - b0);
        const int64_t* xoff = p.x_offsets;
        if (split && add) gemm_tile<true, true, true>(p, g_count, wp, xp, xoff, ld, i0, rows, st, rci, range, add);
        else if (split) gemm_tile<true, false, true>(p, g_count, wp, xp, xoff, ld, i0, rows, st, rci, range, nullptr);
        else if (offsets && add) gemm_tile<true, true>(p, g_count, wp, xp, xoff, ld, i0, rows, st, rci, range, add);
        else if (offsets) gemm_tile<true, false>(p, g_count, wp, xp, xoff, ld, i0, rows, st, rci, range, nullptr);
        else if (add) gemm_tile<false, true>(p, g_count, wp, xp, nullptr, ld, i0, rows, st, rci, range, add);
        else gemm_tile<false, false>(p, g_count, wp, xp, nullptr, ld, i0, rows, st, rci, range, nullptr);
      }
    }
  }
}

// Four rows at a time, so that four vpdpbusd chains run side by side (one row's chain is
// latency bound); the rest one at a time.
void dense(int64_t k, const uint8_t* x, const int8_t* w, int64_t m0, int64_t m1, const QChannelParams& ch,
           const QuantOut& q, uint8_t* y) {
  auto out = [&](int64_t j, __m512i acc) {
    const int64_t v = int64_t(_mm512_reduce_add_epi32(acc)) + ch.bias[j];
    y[j] = qu8_clamp(q.y_zp + qu8_requant(v, ch.multiplier[j], ch.shift[j]), q.act_min, q.act_max);
  };
  int64_t j = m0;
  for (; j + 4 <= m1; j += 4) {
    const int8_t* wj = w + j * k;
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t t = 0; t < k; t += 64) {
      const __mmask64 mask = k - t >= 64 ? ~__mmask64(0) : (__mmask64(1) << (k - t)) - 1;
      const __m512i xv = _mm512_maskz_loadu_epi8(mask, x + t);
      a0 = _mm512_dpbusd_epi32(a0, xv, _mm512_maskz_loadu_epi8(mask, wj + t));
      a1 = _mm512_dpbusd_epi32(a1, xv, _mm512_maskz_loadu_epi8(mask, wj + k + t));
      a2 = _mm512_dpbusd_epi32(a2, xv, _mm512_maskz_loadu_epi8(mask, wj + 2 * k + t));
      a3 = _mm512_dpbusd_epi32(a3, xv, _mm512_maskz_loadu_epi8(mask, wj + 3 * k + t));
    }
    out(j, a0), out(j + 1, a1), out(j + 2, a2), out(j + 3, a3);
  }
  for (; j < m1; ++j) {
    const int8_t* wj = w + j * k;
    __m512i acc = _mm512_setzero_si512();
    for (int64_t t = 0; t < k; t += 64) {
      const __mmask64 mask = k - t >= 64 ? ~__mmask64(0) : (__mmask64(1) << (k - t)) - 1;
      acc = _mm512_dpbusd_epi32(acc, _mm512_maskz_loadu_epi8(mask, x + t), _mm512_maskz_loadu_epi8(mask, wj + t));
    }
    out(j, acc);
  }
}

}  // namespace
}  // namespace ds

#define QU8_DW_NAME ds_qu8_dwconv__avx512vnni
#include "kernels/x86/qu8-dwconv-impl.h"

namespace ds {

extern const QGemmKernels ds_qs8_gemm_kernels__avx512vnni = {
    "ds_qs8_gemm_8x32__avx512vnni", kMr, kNr, kKr, 1, packed_w_bytes, pack_w, packed_x_bytes, pack_x, gemm,
    im2col, pack_x_rows, gather_row, interleave4, packed_wt_bytes, pack_wt, gemm_t, true, true, true};
extern const QKernels ds_qkernels__avx512vnni = {"avx512vnni", &ds_qs8_gemm_kernels__avx512vnni,
                                                 ds_qu8_dwconv3x3__avx512vnni, dense,
                                                 ds_qu8_vadd__avx512,         ds_qu8_quantize__avx512,
                                                 ds_qu8_dequantize__avx512,   ds_u8_maxpool2d__avx512,
                                                 ds_qu8_global_avgpool__avx512, packed_wt_bytes,
                                                 pack_wt,                     dense_packed,
                                                 32,                          ds_qu8_dw3x3_packed_bytes__avx512vnni,
                                                 ds_qu8_dw3x3_pack__avx512vnni, ds_qu8_dwconv3x3_packed__avx512vnni};

}  // namespace ds
