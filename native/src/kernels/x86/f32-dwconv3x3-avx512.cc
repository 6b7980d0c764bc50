// AVX-512 depthwise 3x3 on one plane. Stride 1: 16 output columns per vector, each tap one load at
// its column offset, masked to the row (zero fill = the padding), so borders need no separate
// code; the output store is masked to the row's end. Up to 8 output rows of a column block are
// computed together: each input row is loaded once for all the outputs it feeds, and the 8
// independent accumulators hide the FMA latency (one row at a time is a chain of 9 dependent
// FMAs: 1.3-1.6x slower on MobileNet V2's layers). Each accumulator still sums its taps in the
// reference's order (ky, kx), then bias, then the activation.
// Stride 2 has its own loop (below). Planes at most 8 output columns wide go to the AVX2 kernel,
// measured faster there (8-lane vectors waste fewer lanes on narrow rows: 14x14 -> 7x7 x 576
// channels 26 vs 30-37 us). Compiled with the AVX-512 flags.
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

// One column block (16 lanes from input column `base`) of what does not change from row to row.
struct Block {
  const DwConv3x3Params* p;
  const float* x;
  float* y;
  int64_t ox0, n, base;
  __mmask16 m[3], out_mask;
  __m512 wv[9], bias, alpha, beta;
};

// Input row I of the group (from the first row of output oy0's window): load its taps once and
// add them to every output they feed. Rows go in increasing order, so each accumulator adds its
// taps in the order ky = 0, 1, 2. The recursion is resolved at compile time: the accumulators
// stay in registers at any optimisation level.
template <int S, int I, int R>
DS_ALWAYS_INLINE void input_rows(const Block& b, int64_t iy0, __m512 (&acc)[R], const __m512 (&wv)[9]) {
  constexpr int kRows = (R - 1) * S + 3;
  if constexpr (I < kRows) {
    const DwConv3x3Params& p = *b.p;
    const int64_t iy = iy0 + I;
    if (iy >= 0 && iy < p.h) {
      const float* row = b.x + iy * p.w + b.base;
      const __m512 t0 = _mm512_maskz_loadu_ps(b.m[0], row);
      const __m512 t1 = _mm512_maskz_loadu_ps(b.m[1], row + 1);
      const __m512 t2 = _mm512_maskz_loadu_ps(b.m[2], row + 2);
      // Output r uses this row as its tap row ky = I - r * S when that is 0..2.
      unroll<R>([&](auto rc) {
        constexpr int ky = I - decltype(rc)::value * S;
        if constexpr (ky >= 0 && ky <= 2) {
          __m512& a = acc[decltype(rc)::value];
          a = _mm512_fmadd_ps(t0, wv[ky * 3], a);
          a = _mm512_fmadd_ps(t1, wv[ky * 3 + 1], a);
          a = _mm512_fmadd_ps(t2, wv[ky * 3 + 2], a);
        }
      });
    }
    input_rows<S, I + 1, R>(b, iy0, acc, wv);
  }
}

// Output rows oy0 .. oy0 + R - 1 of the block.
template <int R, int S>
void block_rows(const Block& b, int64_t oy0) {
  const DwConv3x3Params& p = *b.p;
  __m512 wv[9];
  unroll<9>([&](auto t) { wv[t] = b.wv[t]; });
  __m512 acc[R];
  unroll<R>([&](auto r) { acc[r] = _mm512_setzero_ps(); });
  input_rows<S, 0, R>(b, oy0 * S - p.pad_top, acc, wv);
  unroll<R>([&](auto r) {
    float* yr = b.y + (oy0 + r) * p.ow + b.ox0;
    _mm512_mask_storeu_ps(yr, b.out_mask, activate(_mm512_add_ps(acc[r], b.bias), p.act, b.alpha, b.beta));
  });
  if (p.act == 4 || p.act == 7)
    for (int r = 0; r < R; ++r)
      for (int64_t j = 0; j < b.n; ++j) {
        float* yr = b.y + (oy0 + r) * p.ow + b.ox0;
        yr[j] = gemm_activate(p.act, yr[j], p.alpha, p.beta);
      }
}

// All rows of the block: groups of 8, then the remainder in one group.
template <int S>
void block(const Block& b) {
  const int64_t oh = b.p->oh;
  int64_t oy = 0;
  for (; oy + 8 <= oh; oy += 8) block_rows<8, S>(b, oy);
  switch (oh - oy) {
    case 7: block_rows<7, S>(b, oy); break;
    case 6: block_rows<6, S>(b, oy); break;
    case 5: block_rows<5, S>(b, oy); break;
    case 4: block_rows<4, S>(b, oy); break;
    case 3: block_rows<3, S>(b, oy); break;
    case 2: block_rows<2, S>(b, oy); break;
    case 1: block_rows<1, S>(b, oy); break;
    default: break;
  }
}

// Stride 2: 16 output columns per vector, bands of up to 8 output rows. Per input row of a band and
// column block, two loads of the 32 columns from the window start give the kx = 0 and kx = 1 taps
// by one vpermt2ps each (even / odd columns), and kx = 2 is the even vector moved down one lane
// with the 33rd column (a third, one-lane load) shifted in: 3 loads and 3 permutes per input row,
// shared by the up to two output rows the row feeds. While a band runs, the same columns of the
// next band's rows are prefetched (past the plane's end: the next plane's first rows, which the
// op's next call reads), so the input streams from memory ahead of use: the 112x112 x 96 layer is
// memory-bound (4.8 MB in). Blocks run along a band's row (rows of output columns), in strips of
// kStripCols outputs so the per-block load masks are computed once per strip.
constexpr int kStripCols = 128;

struct Strip2 {
  const DwConv3x3Params* p;
  const float* x;
  float* y;
  int64_t s0, n;  // first output column, output columns in the strip
  // Per 16-column block: load masks of the columns from the window start (0..15, 16..31, 32).
  __mmask16 mlo[kStripCols / 16], mhi[kStripCols / 16], m32[kStripCols / 16];
  __m512 wv[9], bias, alpha, beta;
};

// Output rows oy0 .. oy0 + R - 1 of the strip.
template <int R>
void band_s2(const Strip2& s, int64_t oy0) {
  constexpr int kRows = 2 * R + 1;
  const DwConv3x3Params& p = *s.p;
  const int64_t iy0 = oy0 * 2 - p.pad_top;
  const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512i i2 = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
  __m512 wv[9];
  unroll<9>([&](auto t) { wv[t] = s.wv[t]; });
  for (int64_t j = 0; j < s.n; j += 16) {
    const int q = int(j / 16);
    const __mmask16 mlo = s.mlo[q], mhi = s.mhi[q], m32 = s.m32[q];
    const float* src = s.x + 2 * (s.s0 + j) - p.pad_left;
    __m512 acc[R];
    unroll<R>([&](auto r) { acc[r] = _mm512_setzero_ps(); });
    unroll<kRows>([&](auto ic) {
      constexpr int I = decltype(ic)::value;
      const int64_t iy = iy0 + I;
      if (iy >= 0 && iy < p.h) {
        const float* row = src + iy * p.w;
        // The same columns of the next band's rows; past the plane's last row, the next plane's
        // first rows (NCHW: the op's next call). A prefetch never faults.
        const char* next = reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(row) +
                                                         uintptr_t(2 * R * p.w) * sizeof(float));
        _mm_prefetch(next, _MM_HINT_T0);
        _mm_prefetch(next + 64, _MM_HINT_T0);
        _mm_prefetch(next + 128, _MM_HINT_T0);
        const __m512 lo = _mm512_maskz_loadu_ps(mlo, row), hi = _mm512_maskz_loadu_ps(mhi, row + 16);
        const __m512 t0 = _mm512_permutex2var_ps(lo, ie, hi);
        const __m512 t1 = _mm512_permutex2var_ps(lo, io, hi);
        const __m512 t2 = _mm512_permutex2var_ps(t0, i2, _mm512_maskz_loadu_ps(m32, row + 32));
        unroll<R>([&](auto rc) {
          constexpr int ky = I - decltype(rc)::value * 2;
          if constexpr (ky >= 0 && ky <= 2) {
            __m512& a = acc[decltype(rc)::value];
            a = _mm512_fmadd_ps(t0, wv[ky * 3], a);
            a = _mm512_fmadd_ps(t1, wv[ky * 3 + 1], a);
            a = _mm512_fmadd_ps(t2, wv[ky * 3 + 2], a);
          }
        });
      }
    });
    const int64_t m = s.n - j;
    const __mmask16 out_mask = m >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << m) - 1);
    unroll<R>([&](auto r) {
      float* yr = s.y + (oy0 + r) * p.ow + s.s0 + j;
      _mm512_mask_storeu_ps(yr, out_mask, activate(_mm512_add_ps(acc[r], s.bias), p.act, s.alpha, s.beta));
    });
  }
  if (p.act == 4 || p.act == 7)
    for (int r = 0; r < R; ++r) {
      float* yr = s.y + (oy0 + r) * p.ow + s.s0;
      for (int64_t j = 0; j < s.n; ++j) yr[j] = gemm_activate(p.act, yr[j], p.alpha, p.beta);
    }
}

void stride2(const DwConv3x3Params& p, const float* x, const float* w, float bias, float* y) {
  Strip2 s;
  s.p = &p, s.x = x, s.y = y;
  s.bias = _mm512_set1_ps(bias);
  s.alpha = _mm512_set1_ps(p.alpha), s.beta = _mm512_set1_ps(p.beta);
  for (int t = 0; t < 9; ++t) s.wv[t] = _mm512_set1_ps(w[t]);
  for (int64_t s0 = 0; s0 < p.ow; s0 += kStripCols) {
    s.s0 = s0;
    s.n = p.ow - s0 < kStripCols ? p.ow - s0 : kStripCols;
    for (int q = 0; q < int((s.n + 15) / 16); ++q) {
      const int64_t c = 2 * (s0 + 16 * q) - p.pad_left;  // input column of block q's lane 0, kx = 0
      s.mlo[q] = row_mask(c, p.w);
      s.mhi[q] = row_mask(c + 16, p.w);
      s.m32[q] = row_mask(c + 32, p.w) & 1;
    }
    const int64_t oh = p.oh;
    int64_t oy = 0;
    for (; oy + 8 <= oh; oy += 8) band_s2<8>(s, oy);
    switch (oh - oy) {
      case 7: band_s2<7>(s, oy); break;
      case 6: band_s2<6>(s, oy); break;
      case 5: band_s2<5>(s, oy); break;
      case 4: band_s2<4>(s, oy); break;
      case 3: band_s2<3>(s, oy); break;
      case 2: band_s2<2>(s, oy); break;
      case 1: band_s2<1>(s, oy); break;
      default: break;
    }
  }
}

}  // namespace

void ds_f32_dwconv3x3__avx512(const DwConv3x3Params& p, const float* x, const float* w, float bias, float* y) {
  if (p.stride == 2 && p.ow > 8) {
    stride2(p, x, w, bias, y);
    return;
  }
  if (p.stride != 1 || p.ow <= 8) {
    ds_f32_dwconv3x3__avx2(p, x, w, bias, y);
    return;
  }
  Block b;
  b.p = &p, b.x = x, b.y = y;
  b.bias = _mm512_set1_ps(bias);
  b.alpha = _mm512_set1_ps(p.alpha), b.beta = _mm512_set1_ps(p.beta);
  for (int t = 0; t < 9; ++t) b.wv[t] = _mm512_set1_ps(w[t]);
  for (int64_t ox0 = 0; ox0 < p.ow; ox0 += 16) {
    b.ox0 = ox0;
    b.n = p.ow - ox0 < 16 ? p.ow - ox0 : 16;
    b.out_mask = __mmask16((1u << b.n) - 1);
    b.base = ox0 - p.pad_left;  // input column of lane 0, tap kx = 0
    // The load masks at base + kx, the same for every row.
    for (int kx = 0; kx < 3; ++kx) b.m[kx] = row_mask(b.base + kx, p.w);
    block<1>(b);
  }
}

}  // namespace ds
