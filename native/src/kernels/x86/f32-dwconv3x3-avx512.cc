// AVX-512 depthwise 3x3 over a run of NCHW planes. One code path per shape class, all with the
// activation as a template parameter (codes 4 and 7 by a scalar pass) and the load masks computed
// once per call:
// - stride 1 (band_s1): bands of 8 output rows, column blocks of 16 outputs left to right; at
//   pad_left 1 one load of the block's columns per input row and the kx = 0, 2 taps by valignd,
//   else each tap one masked load at its column offset (zero fill = the padding); the next band's
//   new rows prefetched (past the plane's end: the next plane's first rows).
// - stride 2 (band_s2a at pad_left 1, band_s2n otherwise): bands of 8 output rows; per input row,
//   32 columns deinterleaved by vpermt2ps; the next band's new rows prefetched.
// - small stride-1 planes (plane_flat, plane_flat7): the plane as a flat run of pixels, 16 per
//   vector whatever the row width.
// - stride 2 at <= 7 output columns (plane_s2_narrow): two output rows per vector.
// The rest (stride-1 rows of <= 8 outputs outside the flat path, stride 2 at 8 outputs) runs the
// AVX2 kernel. The accumulators sum their taps in the reference's order (ky, kx), then the bias.
// Compiled with the AVX-512 flags.
#include <immintrin.h>

#include <cstdint>

#include "kernels/dwconv3x3.h"
#include "kernels/gemm.h"
#include "kernels/unroll.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif






namespace ds {
namespace {

// Lanes of a 16-float load at column `col` that fall inside [0, w).
inline __mmask16 row_mask(int64_t col, int64_t w) {
  const int64_t a = col < 0 ? -col : 0;
  const int64_t b = w - col < 16 ? w - col : 16;
  if (b <= a) return 0;
  return __mmask16(((b - a >= 16 ? 0xFFFFu : (1u << (b - a)) - 1u) << a) & 0xFFFFu);
}

DS_ALWAYS_INLINE __m512 activate(__m512 v, int32_t act, __m512 alpha, __m512 beta) {
  const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
  switch (act) {
    case 1: return _mm512_max_ps(v, zero);
    case 2: return _mm512_min_ps(_mm512_max_ps(v, alpha), beta);
    case 3: return _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), v, alpha);
    case 5: return _mm512_max_ps(zero, _mm512_min_ps(one, _mm512_add_ps(_mm512_mul_ps(alpha, v), beta)));
    case 6: {
      const __m512 t = _mm512_add_ps(_mm512_div_ps(v, _mm512_set1_ps(6.0f)), _mm512_set1_ps(0.5f));
      return _mm512_mul_ps(v, _mm512_max_ps(zero, _mm512_min_ps(one, t)));
    }
    default: return v;  // 0; 4 and 7 by a scalar pass
  }
}

// Activation code A applied in registers (codes 4 and 7 by a scalar pass after the band).
template <int A>
DS_ALWAYS_INLINE __m512 activate_t(__m512 v, __m512 alpha, __m512 beta) {
  return A == 4 || A == 7 ? v : activate(v, A, alpha, beta);
}

// What a call shares across its planes: weights and bias change per plane, the rest per call.
struct Plane {
  const DwConv3x3Params* p;
  const float* x;
  float* y;
  __m512 wv[9], bias, alpha, beta;
};

// Bias + activation on R accumulated output rows of one 16-column block, stored (masked at the
// row's end) at rows oy0 .. oy0 + R - 1, columns ox0 .. ox0 + 15.
template <int R, int A>
DS_ALWAYS_INLINE void store_rows(const Plane& pl, const __m512* acc, int64_t oy0, int64_t ox0) {
  const int64_t ow = pl.p->ow, n = ow - ox0;
  const __mmask16 out_mask = n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
  unroll<R>([&](auto r) {
    _mm512_mask_storeu_ps(pl.y + (oy0 + r) * ow + ox0, out_mask,
                          activate_t<A>(_mm512_add_ps(acc[r], pl.bias), pl.alpha, pl.beta));
  });
}

// One input row's three taps (t0, t1, t2 = columns kx 0..2 of the outputs' windows) added to each of
// the R output rows that uses it: input row I of the band is tap row ky = I - STRIDE * r of output r.
template <int R, int I, int STRIDE>
DS_ALWAYS_INLINE void add_row_taps(__m512* acc, const __m512* wv, __m512 t0, __m512 t1, __m512 t2) {
  // Forced inline: GCC outlined this lambda (and store_rows), taking acc through memory: 1.3-1.9x
  // slower bands (32x112x112 s1 0.110 -> 0.066 ms, 144x56x56 s1 0.150 -> 0.087).
  unroll<R>([&](auto rc) DS_ALWAYS_INLINE_LAMBDA {
    constexpr int ky = I - decltype(rc)::value * STRIDE;
    if constexpr (ky >= 0 && ky <= 2) {
      __m512& a = acc[decltype(rc)::value];
      a = _mm512_fmadd_ps(t0, wv[ky * 3], a);
      a = _mm512_fmadd_ps(t1, wv[ky * 3 + 1], a);
      a = _mm512_fmadd_ps(t2, wv[ky * 3 + 2], a);
    }
  });
}

// band(rows, oy) over output rows 0 .. oh - 1 in bands of 8 rows, the remainder in one band
// (rows is std::integral_constant<int, 1..8>, so each band size is its own register-blocked loop).
template <class Band>
DS_ALWAYS_INLINE void for_bands(int64_t oh, Band&& band) {
  int64_t oy = 0;
  for (; oy + 8 <= oh; oy += 8) band(std::integral_constant<int, 8>{}, oy);
  const int64_t rest = oh - oy;
  unroll<7>([&](auto i) {
    if (rest == decltype(i)::value + 1) band(std::integral_constant<int, decltype(i)::value + 1>{}, oy);
  });
}

// Stride 1, output rows oy0 .. oy0 + R - 1 of a plane, column blocks of 16 outputs left to right.
// Per block each of the R + 2 input rows is loaded once (3 masked loads, kx = 0, 1, 2) and added
// to the up to 3 outputs it feeds; the R accumulators each sum their taps in the reference's order.
// The first R new input rows of the next band (past the plane's end: the next plane's first rows)
// are prefetched at the same columns, so a large plane streams in ahead of use.
// kShifted (pad_left == 1): per block and input row one load of the block's own 16 columns (64-byte
// aligned when the plane's rows are: no cache-line splits) gives kx = 1, and kx = 0 / kx = 2 are it
// moved up / down a lane by valignd with the column before / after the block shifted in (one-lane
// loads at the neighbouring aligned vectors); m holds per block the masks of those three loads.
// Against three shifted loads: 32x112x112 0.066 -> 0.054 ms, 144x56x56 0.087 -> 0.077.
template <int R, int A, bool kShifted>
void band_s1(const Plane& pl, int64_t oy0, const __mmask16* m) {
  const DwConv3x3Params& p = *pl.p;
  const int64_t iy0 = oy0 - p.pad_top;
  __m512 wv[9];
  unroll<9>([&](auto t) { wv[t] = pl.wv[t]; });
  for (int64_t ox0 = 0, q = 0; ox0 < p.ow; ox0 += 16, ++q) {
    const __mmask16 m0 = m[3 * q], m1 = m[3 * q + 1], m2 = m[3 * q + 2];
    const float* src = pl.x + ox0 - p.pad_left;
    __m512 acc[R];
    unroll<R>([&](auto r) { acc[r] = _mm512_setzero_ps(); });
    unroll<R + 2>([&](auto ic) {
      constexpr int I = decltype(ic)::value;
      const int64_t iy = iy0 + I;
      const float* row = src + iy * p.w;
      if constexpr (I < R) {
        const char* next = reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(row) +
                                                         uintptr_t((R + 2) * p.w) * sizeof(float));
        _mm_prefetch(next, _MM_HINT_T0);
      }
      if (iy >= 0 && iy < p.h) {
        if constexpr (kShifted) {
          const __m512i prev = _mm512_castps_si512(_mm512_maskz_loadu_ps(m0, row - 15));
          const __m512i cur = _mm512_castps_si512(_mm512_maskz_loadu_ps(m1, row + 1));
          const __m512i next = _mm512_castps_si512(_mm512_maskz_loadu_ps(m2, row + 17));
          add_row_taps<R, I, 1>(acc, wv, _mm512_castsi512_ps(_mm512_alignr_epi32(cur, prev, 15)),
                                _mm512_castsi512_ps(cur), _mm512_castsi512_ps(_mm512_alignr_epi32(next, cur, 1)));
        } else {
          const __m512 t0 = _mm512_maskz_loadu_ps(m0, row);
          const __m512 t1 = _mm512_maskz_loadu_ps(m1, row + 1);
          const __m512 t2 = _mm512_maskz_loadu_ps(m2, row + 2);
          // Output r uses this row as its tap row ky = I - r when that is 0..2.
          add_row_taps<R, I, 1>(acc, wv, t0, t1, t2);
        }
      }
    });
    store_rows<R, A>(pl, acc, oy0, ox0);
  }
}

// Bands of 8 output rows, the remainder in one band (thread CPU time against bands of 4, MobileNet V2
// layers: 32x112x112 0.082 -> 0.070 ms, 144x56x56 0.097 -> 0.084, 576x14x14 0.028 -> 0.024).
template <int A, bool kShifted>
void plane_s1(const Plane& pl, const __mmask16* m) {
  for_bands(pl.p->oh, [&](auto rows, int64_t oy) { band_s1<decltype(rows)::value, A, kShifted>(pl, oy, m); });
}

// Small planes at stride 1 (at most kFlatVectors vectors of output, rows narrower than 16): the
// plane is computed as a flat run of pixels, output pixel i = 16 q + lane, its tap (ky, kx) one
// load at i + (ky - pad_top) * w + kx - pad_left (same size in and out). The masks keep the taps
// inside the plane and inside the pixel's row; they depend only on the shape, so a call computes
// them once for all its planes. A 7x7 plane is 4 vectors (49 of 64 lanes) instead of 7 rows of 7
// of 16 lanes.
constexpr int kFlatVectors = 8;

struct FlatMasks {
  int nq;
  __mmask16 tap[kFlatVectors][9], out[kFlatVectors];
};

bool flat_fits(const DwConv3x3Params& p) {
  return p.stride == 1 && p.ow < 16 && p.oh == p.h && p.ow == p.w && p.oh * p.ow <= 16 * kFlatVectors;
}

void flat_masks(const DwConv3x3Params& p, FlatMasks& f) {
  const int64_t n = p.oh * p.ow;
  f.nq = int((n + 15) / 16);
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i w = _mm512_set1_epi32(int(p.w)), nn = _mm512_set1_epi32(int(n));
  const __m512 inv_w = _mm512_set1_ps(1.0f / float(p.ow));
  for (int q = 0; q < f.nq; ++q) {
    const __m512i i = _mm512_add_epi32(iota, _mm512_set1_epi32(16 * q));
    // oy = floor((i + 0.5) / ow): exact, i + 0.5 is at least 0.5 / ow away from a multiple of ow.
    const __m512i oy = _mm512_cvttps_epi32(
        _mm512_mul_ps(_mm512_add_ps(_mm512_cvtepi32_ps(i), _mm512_set1_ps(0.5f)), inv_w));
    const __m512i ox = _mm512_sub_epi32(i, _mm512_mullo_epi32(oy, _mm512_set1_epi32(int(p.ow))));
    const __mmask16 in = _mm512_cmplt_epi32_mask(i, nn);
    f.out[q] = in;
    for (int ky = 0; ky < 3; ++ky) {
      const __m512i iy = _mm512_add_epi32(oy, _mm512_set1_epi32(ky - int(p.pad_top)));
      const __mmask16 rows = _mm512_mask_cmplt_epi32_mask(_mm512_cmpge_epi32_mask(iy, _mm512_setzero_si512()), iy,
                                                          _mm512_set1_epi32(int(p.h)));
      for (int kx = 0; kx < 3; ++kx) {
        const __m512i ix = _mm512_add_epi32(ox, _mm512_set1_epi32(kx - int(p.pad_left)));
        const __mmask16 cols = _mm512_mask_cmplt_epi32_mask(_mm512_cmpge_epi32_mask(ix, _mm512_setzero_si512()), ix, w);
        f.tap[q][ky * 3 + kx] = __mmask16(in & rows & cols);
      }
    }
  }
}

template <int A>
void plane_flat(const Plane& pl, const FlatMasks& f) {
  const DwConv3x3Params& p = *pl.p;
  for (int q = 0; q < f.nq; ++q) {
    const float* src = pl.x + 16 * q - p.pad_top * p.w - p.pad_left;
    __m512 a = _mm512_setzero_ps();
    unroll<9>([&](auto tc) {
      constexpr int t = decltype(tc)::value;
      a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(f.tap[q][t], src + (t / 3) * p.w + t % 3), pl.wv[t], a);
    });
    _mm512_mask_storeu_ps(pl.y + 16 * q, f.out[q], activate_t<A>(_mm512_add_ps(a, pl.bias), pl.alpha, pl.beta));
  }
}

// The flat path for 7x7 planes with padding 1 (MobileNet V2's last stage): the plane is loaded once
// as 4 vectors (49 floats, zero past its end) and each tap vector is cut from two neighbours by
// valignd with the tap's offset as the immediate, instead of 9 loads per output vector (960 7x7
// planes, in L1: 26 -> 20 ns per plane).
template <int A>
void plane_flat7(const Plane& pl, const FlatMasks& f) {
  constexpr int kW = 7;
  const __m512i zero = _mm512_setzero_si512();
  // v[k] = pixels 16 (k - 1) .. 16 (k - 1) + 15 of the plane.
  const __m512i v[6] = {zero,
                        _mm512_castps_si512(_mm512_loadu_ps(pl.x)),
                        _mm512_castps_si512(_mm512_loadu_ps(pl.x + 16)),
                        _mm512_castps_si512(_mm512_loadu_ps(pl.x + 32)),
                        _mm512_castps_si512(_mm512_maskz_loadu_ps(1, pl.x + 48)),
                        zero};
  unroll<4>([&](auto qc) {
    constexpr int q = decltype(qc)::value;
    __m512 a = _mm512_setzero_ps();
    unroll<9>([&](auto tc) {
      constexpr int t = decltype(tc)::value;
      constexpr int d = (t / 3 - 1) * kW + t % 3 - 1;  // tap offset in the flat plane
      __m512 tap;
      if constexpr (d == 0)
        tap = _mm512_maskz_mov_ps(f.tap[q][t], _mm512_castsi512_ps(v[q + 1]));
      else if constexpr (d > 0)
        tap = _mm512_castsi512_ps(_mm512_maskz_alignr_epi32(f.tap[q][t], v[q + 2], v[q + 1], d));
      else
        tap = _mm512_castsi512_ps(_mm512_maskz_alignr_epi32(f.tap[q][t], v[q + 1], v[q], 16 + d));
      a = _mm512_fmadd_ps(tap, pl.wv[t], a);
    });
    _mm512_mask_storeu_ps(pl.y + 16 * q, f.out[q], activate_t<A>(_mm512_add_ps(a, pl.bias), pl.alpha, pl.beta));
  });
}

// Stride 2 with at most 7 output columns (14x14 -> 7x7): two output rows per vector. For tap row
// ky, one masked load of input row r = 2 oy - pad_top + ky and one of row r + 2 (16 columns from
// column -pad_left each), and per kx one vpermt2ps takes columns 2j + kx of the first into lanes
// j < ow and of the second into lanes ow .. 2 ow - 1, so the vector's lanes are the two output
// rows back to back as they lie in NCHW: one masked store. 14 of 16 lanes at ow = 7, against 7 of
// 8 in the AVX2 kernel (576 planes 14x14 -> 7x7, thread CPU time: 22 -> 19 us).
struct Narrow2 {
  __m512i idx[3];
  __mmask16 cols;
};

void narrow2_setup(const DwConv3x3Params& p, Narrow2& n) {
  alignas(64) int32_t idx[3][16];
  for (int kx = 0; kx < 3; ++kx)
    for (int j = 0; j < 16; ++j)
      idx[kx][j] = j < p.ow ? 2 * j + kx : j < 2 * p.ow ? 16 + 2 * (j - int(p.ow)) + kx : 0;
  for (int kx = 0; kx < 3; ++kx) n.idx[kx] = _mm512_load_si512(idx[kx]);
  n.cols = row_mask(-p.pad_left, p.w);
}

template <int A>
void plane_s2_narrow(const Plane& pl, const Narrow2& n) {
  const DwConv3x3Params& p = *pl.p;
  const __mmask16 one_row = __mmask16((1u << p.ow) - 1), two_rows = __mmask16((1u << (2 * p.ow)) - 1);
  const float* base = pl.x - p.pad_left;
  // Two vectors (output rows oy0 .. oy0 + 3) per step, two independent FMA chains: 576 planes
  // 14x14 -> 7x7 0.018 -> 0.016 ms (one vector per step: one 36-cycle chain at a time; four: 0.019).
  for (int64_t oy0 = 0; oy0 < p.oh; oy0 += 4) {
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    unroll<3>([&](auto kyc) {
      constexpr int ky = decltype(kyc)::value;
      unroll<2>([&](auto vc) DS_ALWAYS_INLINE_LAMBDA {
        const int64_t oy = oy0 + 2 * decltype(vc)::value;
        const int64_t r = 2 * oy - p.pad_top + ky, r2 = r + 2;
        const bool in_a = oy < p.oh && r >= 0 && r < p.h, in_b = oy + 1 < p.oh && r2 >= 0 && r2 < p.h;
        const __m512 a = _mm512_maskz_loadu_ps(in_a ? n.cols : 0, in_a ? base + r * p.w : pl.x);
        const __m512 b = _mm512_maskz_loadu_ps(in_b ? n.cols : 0, in_b ? base + r2 * p.w : pl.x);
        unroll<3>([&](auto kxc) DS_ALWAYS_INLINE_LAMBDA {
          constexpr int kx = decltype(kxc)::value;
          __m512& c = acc[decltype(vc)::value];
          c = _mm512_fmadd_ps(_mm512_permutex2var_ps(a, n.idx[kx], b), pl.wv[ky * 3 + kx], c);
        });
      });
    });
    unroll<2>([&](auto vc) DS_ALWAYS_INLINE_LAMBDA {
      const int64_t oy = oy0 + 2 * decltype(vc)::value;
      if (oy < p.oh)
        _mm512_mask_storeu_ps(pl.y + oy * p.ow, oy + 1 < p.oh ? two_rows : one_row,
                              activate_t<A>(_mm512_add_ps(acc[decltype(vc)::value], pl.bias), pl.alpha, pl.beta));
    });
  }
}

// Stride 2, output rows oy0 .. oy0 + R - 1 of a plane, column blocks of 16 outputs left to right:
// per block and input row, the 32 columns from the window start give kx = 0 and kx = 1 by one
// vpermt2ps each (even / odd columns) and kx = 2 is the even vector moved down a lane with the
// 33rd column (a one-lane load) shifted in. The next band's new input rows are prefetched.
template <int R, int A>
void band_s2n(const Plane& pl, int64_t oy0, const __mmask16* m) {
  constexpr int kRows = 2 * R + 1;
  const DwConv3x3Params& p = *pl.p;
  const int64_t iy0 = oy0 * 2 - p.pad_top;
  const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512i i2 = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
  __m512 wv[9];
  unroll<9>([&](auto t) { wv[t] = pl.wv[t]; });
  for (int64_t ox0 = 0, q = 0; ox0 < p.ow; ox0 += 16, ++q) {
    const __mmask16 mlo = m[3 * q], mhi = m[3 * q + 1], m32 = m[3 * q + 2];
    const float* src = pl.x + 2 * ox0 - p.pad_left;
    __m512 acc[R];
    unroll<R>([&](auto r) { acc[r] = _mm512_setzero_ps(); });
    unroll<kRows>([&](auto ic) {
      constexpr int I = decltype(ic)::value;
      const int64_t iy = iy0 + I;
      const float* row = src + iy * p.w;
      if constexpr (I < 2 * R) {
        const char* next = reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(row) +
                                                         uintptr_t((2 * R + 1) * p.w) * sizeof(float));
        _mm_prefetch(next, _MM_HINT_T0);
        _mm_prefetch(next + 64, _MM_HINT_T0);
      }
      if (iy >= 0 && iy < p.h) {
        const __m512 lo = _mm512_maskz_loadu_ps(mlo, row), hi = _mm512_maskz_loadu_ps(mhi, row + 16);
        const __m512 t0 = _mm512_permutex2var_ps(lo, ie, hi);
        const __m512 t1 = _mm512_permutex2var_ps(lo, io, hi);
        const __m512 t2 = _mm512_permutex2var_ps(t0, i2, _mm512_maskz_loadu_ps(m32, row + 32));
        add_row_taps<R, I, 2>(acc, wv, t0, t1, t2);
      }
    });
    store_rows<R, A>(pl, acc, oy0, ox0);
  }
}

// Stride 2 with pad_left == 1 (the usual padding): the loads start at the block's even input column
// 2 ox0 (64-byte aligned when the plane's rows are, no cache-line splits): kx = 1 and kx = 2 are the
// even and odd columns of the 32 from there, and kx = 0 is the odd vector moved up a lane (valignd)
// with column 2 ox0 - 1, the last of the 16 before (one more aligned load), shifted in. 2 permutes
// + 1 valignd per input row instead of 3 permutes; thread CPU time against band_s2n: 96x112x112
// 0.112 -> 0.105 ms, 144x56x56 0.045 -> 0.040, 192x28x28 level.
template <int R, int A>
void band_s2a(const Plane& pl, int64_t oy0, const __mmask16* m) {
  constexpr int kRows = 2 * R + 1;
  const DwConv3x3Params& p = *pl.p;
  const int64_t iy0 = oy0 * 2 - p.pad_top;
  const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  __m512 wv[9];
  unroll<9>([&](auto t) { wv[t] = pl.wv[t]; });
  for (int64_t ox0 = 0, q = 0; ox0 < p.ow; ox0 += 16, ++q) {
    const __mmask16 mlo = m[3 * q], mhi = m[3 * q + 1], mprev = m[3 * q + 2];
    const float* src = pl.x + 2 * ox0;
    __m512 acc[R];
    unroll<R>([&](auto r) { acc[r] = _mm512_setzero_ps(); });
    unroll<kRows>([&](auto ic) {
      constexpr int I = decltype(ic)::value;
      const int64_t iy = iy0 + I;
      const float* row = src + iy * p.w;
      if constexpr (I < 2 * R) {
        const char* next = reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(row) +
                                                         uintptr_t((2 * R + 1) * p.w) * sizeof(float));
        _mm_prefetch(next, _MM_HINT_T0);
        _mm_prefetch(next + 64, _MM_HINT_T0);
      }
      if (iy >= 0 && iy < p.h) {
        const __m512 lo = _mm512_maskz_loadu_ps(mlo, row), hi = _mm512_maskz_loadu_ps(mhi, row + 16);
        const __m512 t1 = _mm512_permutex2var_ps(lo, ie, hi);
        const __m512 t2 = _mm512_permutex2var_ps(lo, io, hi);
        const __m512 prev = _mm512_maskz_loadu_ps(mprev, row - 16);
        const __m512 t0 = _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(t2), _mm512_castps_si512(prev), 15));
        add_row_taps<R, I, 2>(acc, wv, t0, t1, t2);
      }
    });
    store_rows<R, A>(pl, acc, oy0, ox0);
  }
}

template <int A>
void plane_s2a(const Plane& pl, const __mmask16* m) {
  for_bands(pl.p->oh, [&](auto rows, int64_t oy) { band_s2a<decltype(rows)::value, A>(pl, oy, m); });
}

template <int A>
void plane_s2(const Plane& pl, const __mmask16* m) {
  for_bands(pl.p->oh, [&](auto rows, int64_t oy) { band_s2n<decltype(rows)::value, A>(pl, oy, m); });
}

// Planes through the kernels above: stride 1, and stride 2 at most 7 outputs wide, activation code A in registers (4 and 7 in a scalar pass).
template <int A>
void run_planes(const DwConv3x3Params& p, int64_t planes, const float* x, const float* w, const float* bias,
                float* y) {
  Plane pl;
  pl.p = &p;
  pl.alpha = _mm512_set1_ps(p.alpha), pl.beta = _mm512_set1_ps(p.beta);
  const bool flat = flat_fits(p), narrow = p.stride == 2 && p.ow <= 7, wide2 = p.stride == 2 && p.ow > 8;
  const bool aligned2 = p.pad_left == 1, shifted1 = p.stride == 1 && p.pad_left == 1;
  Narrow2 n2;
  if (narrow) narrow2_setup(p, n2);
  const bool flat7 = flat && p.h == 7 && p.w == 7 && p.pad_top == 1 && p.pad_left == 1;
  FlatMasks f;
  __mmask16 m[3 * 64];  // stride 1: per 16-column block, the load masks at kx = 0, 1, 2
  if (flat)
    flat_masks(p, f);
  else if (wide2 && aligned2)
    for (int64_t ox0 = 0, q = 0; ox0 < p.ow; ox0 += 16, ++q) {
      const int64_t c = 2 * ox0;
      m[3 * q] = row_mask(c, p.w), m[3 * q + 1] = row_mask(c + 16, p.w), m[3 * q + 2] = row_mask(c - 16, p.w) & 0x8000;
    }
  else if (wide2)
    for (int64_t ox0 = 0, q = 0; ox0 < p.ow; ox0 += 16, ++q) {
      const int64_t c = 2 * ox0 - p.pad_left;  // input column of lane 0, kx = 0
      m[3 * q] = row_mask(c, p.w), m[3 * q + 1] = row_mask(c + 16, p.w), m[3 * q + 2] = row_mask(c + 32, p.w) & 1;
    }
  else if (shifted1)
    for (int64_t ox0 = 0, q = 0; ox0 < p.ow; ox0 += 16, ++q) {
      m[3 * q] = row_mask(ox0 - 16, p.w) & 0x8000, m[3 * q + 1] = row_mask(ox0, p.w);
      m[3 * q + 2] = row_mask(ox0 + 16, p.w) & 1;
    }
  else
    for (int64_t ox0 = 0, q = 0; ox0 < p.ow; ox0 += 16, ++q)
      for (int kx = 0; kx < 3; ++kx) m[3 * q + kx] = row_mask(ox0 - p.pad_left + kx, p.w);
  for (int64_t c = 0; c < planes; ++c) {
    pl.x = x + c * p.in_plane(), pl.y = y + c * p.out_plane();
    for (int t = 0; t < 9; ++t) pl.wv[t] = _mm512_set1_ps(w[9 * c + t]);
    pl.bias = _mm512_set1_ps(bias ? bias[c] : 0.0f);
    if (flat7)
      plane_flat7<A>(pl, f);
    else if (flat)
      plane_flat<A>(pl, f);
    else if (narrow)
      plane_s2_narrow<A>(pl, n2);
    else if (wide2 && aligned2)
      plane_s2a<A>(pl, m);
    else if (wide2)
      plane_s2<A>(pl, m);
    else if (shifted1)
      plane_s1<A, true>(pl, m);
    else
      plane_s1<A, false>(pl, m);
    if (A == 4 || A == 7)
      for (int64_t i = 0; i < p.oh * p.ow; ++i) pl.y[i] = gemm_activate(p.act, pl.y[i], p.alpha, p.beta);
  }
}

}  // namespace

void ds_f32_dwconv3x3__avx512(const DwConv3x3Params& p, int64_t planes, const float* x, const float* w,
                              const float* bias, float* y) {
  // Left to AVX2: stride-1 rows of at most 8 outputs outside the flat path, stride 2 at exactly 8
  // outputs, rows of more than 64 blocks.
  if ((p.stride == 1 && p.ow <= 8 && !flat_fits(p)) || (p.stride == 2 && p.ow == 8) || p.ow > 16 * 64) {
    ds_f32_dwconv3x3__avx2(p, planes, x, w, bias, y);
    return;
  }
  switch (p.act) {
    case 1: run_planes<1>(p, planes, x, w, bias, y); break;
    case 2: run_planes<2>(p, planes, x, w, bias, y); break;
    case 3: run_planes<3>(p, planes, x, w, bias, y); break;
    case 4: run_planes<4>(p, planes, x, w, bias, y); break;
    case 5: run_planes<5>(p, planes, x, w, bias, y); break;
    case 6: run_planes<6>(p, planes, x, w, bias, y); break;
    case 7: run_planes<7>(p, planes, x, w, bias, y); break;
    default: run_planes<0>(p, planes, x, w, bias, y); break;
  }
}

}  // namespace ds
