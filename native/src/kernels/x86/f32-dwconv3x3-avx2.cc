// AVX2 depthwise 3x3 over a run of NCHW planes, 8 output columns per vector, the activation a
// template parameter (codes 4 and 7 by a scalar pass over each plane):
// - bands of output rows (6 at stride 1, 4 at stride 2), column blocks of 8 outputs left to right
//   (row-major: a band's input rows stay in L1 across its blocks). Per block each input row of the
//   band is loaded once and its taps added to the up to 3 outputs that use it.
// - loads: plain unaligned loads where the block's window lies inside the row. Edge blocks (the
//   window reaches outside the row) load at the nearest column inside it and move the lanes
//   (vpermps) and clear the outside ones; rows narrower than 8: masked loads.
// - stores: plain; the last block of a row of at least 8 outputs is moved left to end at the row's end
//   (recomputing a few outputs with the same operations, so the same values), rows narrower than
//   8 by stores of 4, 2 and 1 lanes: no masked stores (microcoded on AMD Zen).
// - stride 2: per input row the even and odd columns of 16 by shufps give the three taps;
//   shufps leaves the outputs in lane order 0 1 4 5 2 3 6 7 in every tap alike, so one vpermpd per
//   output vector (not per tap) puts them in order.
// - stride-1 planes 4 to 16 wide and at most 16 high, pad 1 on every side: copied into a
//   zero-bordered scratch, then every tap one plain load (plane_padded); planes at most 8 wide
//   (one vector per row) two at a time, their rows' chains interleaved (plane_padded_pair).
// - stride-2 planes with pad 1 up to 16 x 16 whose output rows are one vector: the same padded
//   scratch, two planes at a time (plane_padded_s2).
// - other small stride-1 planes (at most 8 vectors of output, rows narrower than 8, same size in
//   and out): the plane as a flat run of pixels, each tap one masked load per vector (masks
//   computed once per call).
// Against the column-major kernel with only masked loads and stores before it (bench_conv dw, 1
// thread, hot, medians of 5): 32x112x112 s1 0.73 -> 0.16 ms, 144x56x56 s1 0.58 -> 0.20,
// 96x112x112 s2 0.52 -> 0.23.
// The accumulators sum their taps in the reference's order (ky, kx), then the bias.
// Compiled with -mavx2 -mfma.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/dwconv3x3.h"
#include "kernels/gemm.h"
#include "kernels/unroll.h"
#include "kernels/x86/f32-store-avx2.h"

namespace ds {
namespace {

// Lanes of an 8-float load at column `col` that fall inside [0, w), as an all-ones/zero mask.
inline __m256i row_mask(int64_t col, int64_t w) {
  const __m256i e = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const int64_t a = col < 0 ? -col : 0;
  const int64_t b = w - col < 8 ? w - col : 8;
  const __m256i ge_a = _mm256_cmpgt_epi32(e, _mm256_set1_epi32(int(a > 8 ? 8 : a) - 1));
  const __m256i lt_b = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(b < 0 ? 0 : b)), e);
  return _mm256_and_si256(ge_a, lt_b);
}

DS_ALWAYS_INLINE __m256 activate(__m256 v, int32_t act, __m256 alpha, __m256 beta) {
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
  switch (act) {
    case 1: return _mm256_max_ps(v, zero);
    case 2: return _mm256_min_ps(_mm256_max_ps(v, alpha), beta);
    case 3: return _mm256_blendv_ps(v, _mm256_mul_ps(v, alpha), _mm256_cmp_ps(v, zero, _CMP_LT_OQ));
    case 5: return _mm256_max_ps(zero, _mm256_min_ps(one, _mm256_add_ps(_mm256_mul_ps(alpha, v), beta)));
    case 6: {
      const __m256 t = _mm256_add_ps(_mm256_div_ps(v, _mm256_set1_ps(6.0f)), _mm256_set1_ps(0.5f));
      return _mm256_mul_ps(v, _mm256_max_ps(zero, _mm256_min_ps(one, t)));
    }
    default: return v;  // 0; 4 and 7 by a scalar pass
  }
}

// Activation code A applied in registers (codes 4 and 7 by a scalar pass after the plane).
template <int A>
DS_ALWAYS_INLINE __m256 activate_t(__m256 v, __m256 alpha, __m256 beta) {
  return A == 4 || A == 7 ? v : activate(v, A, alpha, beta);
}

// How an edge block (one whose window reaches outside the row) loads the 8 floats at input column c
// of a row, zero outside [0, w). Rows at least 8 wide: a plain load at c clamped to [0, w - 8], its
// lanes moved by the difference (vpermps) and those outside the row cleared; narrower rows: a
// masked load. (vmaskmovps loads are slow on AMD Zen 3: 14x14 planes, all edge blocks, took
// ~1.3x as long with them.)
struct EdgeLoad {
  __m256i idx;    // lane j takes lane j + shift of the plain load
  __m256 keep;    // all ones on the lanes inside the row
  int64_t shift;  // c - the plain load's column
};

EdgeLoad edge_load(int64_t c, int64_t w) {
  EdgeLoad e;
  e.keep = _mm256_castsi256_ps(row_mask(c, w));
  const int64_t base = w < 8 ? c : c < 0 ? 0 : c > w - 8 ? w - 8 : c;
  e.shift = c - base;
  alignas(32) int32_t idx[8];
  for (int j = 0; j < 8; ++j) {
    const int64_t k = j + e.shift;
    idx[j] = int32_t(k < 0 ? 0 : k > 7 ? 7 : k);
  }
  e.idx = _mm256_load_si256(reinterpret_cast<const __m256i*>(idx));
  return e;
}

// The loads of the column block whose window starts at input column `first`: stride 1 at
// first + kx, stride 2 at first + 0, 8, 2, 10.
void edge_loads(const DwConv3x3Params& p, int64_t first, EdgeLoad* e) {
  if (p.stride == 1) {
    for (int kx = 0; kx < 3; ++kx) e[kx] = edge_load(first + kx, p.w);
    e[3] = e[2];
  } else {
    e[0] = edge_load(first, p.w), e[1] = edge_load(first + 8, p.w);
    e[2] = edge_load(first + 2, p.w), e[3] = edge_load(first + 10, p.w);
  }
}

// Load slot k (row offset `off` from the window's first column) of a block: kEdge 0 plain, 1
// shifted, 2 masked.
template <int kEdge>
DS_ALWAYS_INLINE __m256 load8(const float* row, int64_t off, const EdgeLoad& e) {
  if constexpr (kEdge == 0)
    return _mm256_loadu_ps(row + off);
  else if constexpr (kEdge == 1)
    return _mm256_and_ps(_mm256_permutevar8x32_ps(_mm256_loadu_ps(row + off - e.shift), e.idx), e.keep);
  else
    return _mm256_maskload_ps(row + off, _mm256_castps_si256(e.keep));
}

// What a call shares across its planes: weights and bias change per plane, the rest per call.
struct Plane {
  const DwConv3x3Params* p;
  const float* x;
  float* y;
  __m256 wv[9], bias, alpha, beta;
  // The loads of the first and the last column block (the usual edge blocks; any other edge block
  // computes its own).
  EdgeLoad first_loads[4], last_loads[4];
  int64_t last_ox0;
};

// Bias + activation on one output vector, stored at dst: all 8 lanes, or the first n < 8 by
// stores of 4, 2 and 1 lanes.
template <int A>
DS_ALWAYS_INLINE void store_out(const Plane& pl, float* dst, __m256 acc, int64_t n) {
  const __m256 v = activate_t<A>(_mm256_add_ps(acc, pl.bias), pl.alpha, pl.beta);
  if (n >= 8)
    _mm256_storeu_ps(dst, v);
  else
    x86::store_partial(dst, v, n);
}

// One input row's three taps (t0, t1, t2 = columns kx 0..2 of the outputs' windows) added to each
// of the R output rows that uses it: input row I of the band is tap row ky = I - STRIDE * r of
// output r.
template <int R, int I, int STRIDE>
DS_ALWAYS_INLINE void add_row_taps(__m256* acc, const __m256* wv, __m256 t0, __m256 t1, __m256 t2) {
  unroll<R>([&](auto rc) DS_ALWAYS_INLINE_LAMBDA {
    constexpr int ky = I - decltype(rc)::value * STRIDE;
    if constexpr (ky >= 0 && ky <= 2) {
      __m256& a = acc[decltype(rc)::value];
      a = _mm256_fmadd_ps(t0, wv[ky * 3], a);
      a = _mm256_fmadd_ps(t1, wv[ky * 3 + 1], a);
      a = _mm256_fmadd_ps(t2, wv[ky * 3 + 2], a);
    }
  });
}

// band(rows, oy) over output rows 0 .. oh - 1 in bands of kRows, the remainder in one band (rows
// is std::integral_constant<int, 1..kRows>: each band size its own register-blocked loop).
template <int kRows, class Band>
DS_ALWAYS_INLINE void for_bands(int64_t oh, Band&& band) {
  int64_t oy = 0;
  for (; oy + kRows <= oh; oy += kRows) band(std::integral_constant<int, kRows>{}, oy);
  const int64_t rest = oh - oy;
  unroll<kRows - 1>([&](auto i) DS_ALWAYS_INLINE_LAMBDA {
    if (rest == decltype(i)::value + 1) band(std::integral_constant<int, decltype(i)::value + 1>{}, oy);
  });
}

// block(ox0, edge) for the column blocks of a row of ow outputs, left to right: ox0 = 0, 8, ...,
// the last one at ow - 8 when ow >= 8 (overlapping the one before), a single block at 0 when
// ow < 8. A block reads input columns first .. first + 8 S + 1 (S = stride, first = ox0 S -
// pad_left - lead; at stride 2 the last one unused; lead: the plain loads of a stride-2 block
// start a column early at odd pad_left, see block); edge: some of them lie outside the row.
template <class Block>
DS_ALWAYS_INLINE void for_blocks(const DwConv3x3Params& p, int64_t lead, Block&& block) {
  const int64_t ow = p.ow, s = p.stride, last = ow < 8 ? 0 : ow - 8;
  for (int64_t ox0 = 0;; ox0 += 8) {
    if (ox0 > last) ox0 = last;
    const int64_t first = ox0 * s - p.pad_left - lead;
    block(ox0, first < 0 || first + 8 * s + 2 > p.w);
    if (ox0 == last) break;
  }
}

// The shape a band reads, as values (not through the params: the stores could alias them).
struct Geometry {
  int64_t h, w, ow, pad_top, pad_left;
};

// Output rows oy0 .. oy0 + R - 1, the 8-column block at ox0. Each of the band's (R - 1) * S + 3
// input rows is loaded once; kEdge as in load8 (1, 2: the window reaches outside the row), kAllRows:
// every input row lies inside the plane (no padding rows to skip).
// Stride 1: three loads at columns first + kx. Stride 2: four loads at first + 0, 8, 2, 10 (kOdd:
// from the even column before an odd first), even/odd columns by shufps, the accumulators in lane order 0 1 4 5 2 3 6 7 until the store.
template <int S, int R, int A, int kEdge, bool kAllRows, bool kOdd = false>
DS_ALWAYS_INLINE void block(const Plane& pl, const Geometry& g, const __m256* wv, int64_t oy0, int64_t ox0) {
  const int64_t first = S * ox0 - g.pad_left, iy0 = S * oy0 - g.pad_top;
  EdgeLoad own[4];
  const EdgeLoad* e = pl.first_loads;
  if constexpr (kEdge != 0) {
    if (ox0 == pl.last_ox0) {
      e = pl.last_loads;
    } else if (ox0 != 0) {
      edge_loads(*pl.p, first, own);
      e = own;
    }
  }
  const float* src = pl.x + first;
  __m256 acc[R];
  unroll<R>([&](auto r) DS_ALWAYS_INLINE_LAMBDA { acc[r] = _mm256_setzero_ps(); });
  unroll<(R - 1) * S + 3>([&](auto ic) DS_ALWAYS_INLINE_LAMBDA {
    constexpr int I = decltype(ic)::value;
    const int64_t iy = iy0 + I;
    if (kAllRows || (iy >= 0 && iy < g.h)) {
      const float* row = src + iy * g.w;
      if constexpr (S == 1) {
        add_row_taps<R, I, 1>(acc, wv, load8<kEdge>(row, 0, e[0]), load8<kEdge>(row, 1, e[1]),
                              load8<kEdge>(row, 2, e[2]));
      } else if constexpr (kOdd) {
        // first + 1 is even (64-byte aligned at block starts when the rows are): kx = 1 and 2
        // are the even and odd columns of the 16 from there, kx = 0 the odd ones of the 16 from
        // first - 1. Against loads at first + 0, 8, 2, 10: one load of the four crosses a cache
        // line instead of two (bench_conv dw, hot: 96x112x112 s2 0.328 -> 0.274 ms, 192x28x28
        // s2 0.087 -> 0.055).
        const __m256 lo = _mm256_loadu_ps(row + 1), hi = _mm256_loadu_ps(row + 9);
        const __m256 lo0 = _mm256_loadu_ps(row - 1), hi0 = _mm256_loadu_ps(row + 7);
        add_row_taps<R, I, 2>(acc, wv, _mm256_shuffle_ps(lo0, hi0, _MM_SHUFFLE(3, 1, 3, 1)),
                              _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)),
                              _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)));
      } else {
        const __m256 lo = load8<kEdge>(row, 0, e[0]), hi = load8<kEdge>(row, 8, e[1]);
        const __m256 lo2 = load8<kEdge>(row, 2, e[2]), hi2 = load8<kEdge>(row, 10, e[3]);
        add_row_taps<R, I, 2>(acc, wv, _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)),
                              _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)),
                              _mm256_shuffle_ps(lo2, hi2, _MM_SHUFFLE(2, 0, 2, 0)));
      }
    }
  });
  unroll<R>([&](auto r) DS_ALWAYS_INLINE_LAMBDA {
    __m256 o = acc[r];
    if constexpr (S == 2) o = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), _MM_SHUFFLE(3, 1, 2, 0)));
    store_out<A>(pl, pl.y + (oy0 + r) * g.ow + ox0, o, g.ow);
  });
}

// Output rows oy0 .. oy0 + R - 1 of the plane, column blocks left to right.
template <int S, int R, int A>
void band(const Plane& pl, int64_t oy0) {
  const DwConv3x3Params& p = *pl.p;
  const Geometry g{p.h, p.w, p.ow, p.pad_top, p.pad_left};
  __m256 wv[9];
  unroll<9>([&](auto t) DS_ALWAYS_INLINE_LAMBDA { wv[t] = pl.wv[t]; });
  const int64_t iy0 = S * oy0 - g.pad_top;
  const bool all_rows = iy0 >= 0 && iy0 + (R - 1) * S + 3 <= g.h;
  const bool narrow = g.w < 8, odd = S == 2 && (g.pad_left & 1);
  for_blocks(p, odd ? 1 : 0, [&](int64_t ox0, bool edge) DS_ALWAYS_INLINE_LAMBDA {
    if (!edge && odd) {
      if (all_rows)
        block<S, R, A, 0, true, true>(pl, g, wv, oy0, ox0);
      else
        block<S, R, A, 0, false, true>(pl, g, wv, oy0, ox0);
    } else if (!edge) {
      if (all_rows)
        block<S, R, A, 0, true>(pl, g, wv, oy0, ox0);
      else
        block<S, R, A, 0, false>(pl, g, wv, oy0, ox0);
    } else if (narrow) {
      block<S, R, A, 2, false>(pl, g, wv, oy0, ox0);
    } else if (all_rows) {
      block<S, R, A, 1, true>(pl, g, wv, oy0, ox0);
    } else {
      block<S, R, A, 1, false>(pl, g, wv, oy0, ox0);
    }
  });
}

// Small planes at stride 1 (at most kFlatVectors vectors of output, rows narrower than 8, same size
// in and out): output pixel i = 8 q + lane, its tap (ky, kx) one masked load at
// i + (ky - pad_top) * w + kx - pad_left. The masks keep the taps inside the plane and inside the
// pixel's row; they depend only on the shape, so a call computes them once for all its planes.
constexpr int kFlatVectors = 8;

struct FlatMasks {
  int nq;
  int64_t last;  // outputs in the last vector
  __m256i tap[kFlatVectors][9];
};

bool flat_fits(const DwConv3x3Params& p) {
  return p.stride == 1 && p.ow < 8 && p.oh == p.h && p.ow == p.w && p.oh * p.ow <= 8 * kFlatVectors;
}

void flat_masks(const DwConv3x3Params& p, FlatMasks& f) {
  const int64_t n = p.oh * p.ow;
  f.nq = int((n + 7) / 8);
  f.last = n - 8 * (f.nq - 1);
  alignas(32) int32_t m[8];
  for (int q = 0; q < f.nq; ++q)
    for (int ky = 0; ky < 3; ++ky)
      for (int kx = 0; kx < 3; ++kx) {
        for (int j = 0; j < 8; ++j) {
          const int64_t i = 8 * q + j, oy = i / p.ow, ox = i % p.ow;
          const int64_t iy = oy + ky - p.pad_top, ix = ox + kx - p.pad_left;
          m[j] = i < n && iy >= 0 && iy < p.h && ix >= 0 && ix < p.w ? -1 : 0;
        }
        f.tap[q][ky * 3 + kx] = _mm256_load_si256(reinterpret_cast<const __m256i*>(m));
      }
}

template <int A>
void plane_flat(const Plane& pl, const FlatMasks& f) {
  const DwConv3x3Params& p = *pl.p;
  for (int q = 0; q < f.nq; ++q) {
    const float* src = pl.x + 8 * q - p.pad_top * p.w - p.pad_left;
    __m256 a = _mm256_setzero_ps();
    unroll<9>([&](auto tc) DS_ALWAYS_INLINE_LAMBDA {
      constexpr int t = decltype(tc)::value;
      a = _mm256_fmadd_ps(_mm256_maskload_ps(src + (t / 3) * p.w + t % 3, f.tap[q][t]), pl.wv[t], a);
    });
    store_out<A>(pl, pl.y + 8 * q, a, q + 1 < f.nq ? 8 : f.last);
  }
}

// Stride-1 planes 4 to 16 wide and at most 16 high with a pad of 1 on every side (MobileNet V2's
// 14x14 and 7x7 layers): each plane is first copied into a zero-bordered scratch of pitch w + 2,
// so every tap of every output vector is one plain load (in the bands every block of such a row
// is an edge block; the flat path's loads are masked). A row's vectors sit at columns 0 and w - 8
// (overlapping below 16: those outputs are stored twice with the same value; below 8 one vector,
// its first w lanes stored). A padding tap adds 0 * w, which leaves the sum as it is (it
// starts at +0, so it is never -0): the same values as the bands.
constexpr int64_t kPaddedMax = 16;

bool padded_fits(const DwConv3x3Params& p) {
  return p.stride == 1 && p.pad_top == 1 && p.pad_left == 1 && p.oh == p.h && p.ow == p.w && p.w >= 4 &&
         p.w <= kPaddedMax && p.h <= kPaddedMax;
}

// + 8: the loads of the last rows of a plane narrower than 8 run past its bottom border.
struct PaddedScratch {
  alignas(32) float v[(kPaddedMax + 2) * (kPaddedMax + 2) + 8];
};

// Output rows oy0 .. oy0 + R - 1 from the scratch s (pitch w + 2), vectors at columns 0 and ox1.
template <int R, int A, bool kTwo>
DS_ALWAYS_INLINE void padded_rows(const Plane& pl, const float* s, int64_t w, int64_t oy0, int64_t ox1) {
  const int64_t pitch = w + 2;
  __m256 acc0[R], acc1[R];
  unroll<R>([&](auto r) DS_ALWAYS_INLINE_LAMBDA { acc0[r] = acc1[r] = _mm256_setzero_ps(); });
  unroll<R + 2>([&](auto ic) DS_ALWAYS_INLINE_LAMBDA {
    constexpr int I = decltype(ic)::value;
    const float* row = s + (oy0 + I) * pitch;
    add_row_taps<R, I, 1>(acc0, pl.wv, _mm256_loadu_ps(row), _mm256_loadu_ps(row + 1), _mm256_loadu_ps(row + 2));
    if constexpr (kTwo)
      add_row_taps<R, I, 1>(acc1, pl.wv, _mm256_loadu_ps(row + ox1), _mm256_loadu_ps(row + ox1 + 1),
                            _mm256_loadu_ps(row + ox1 + 2));
  });
  unroll<R>([&](auto r) DS_ALWAYS_INLINE_LAMBDA {
    float* y = pl.y + (oy0 + r) * w;
    store_out<A>(pl, y, acc0[r], w < 8 ? w : 8);
    if constexpr (kTwo) store_out<A>(pl, y + ox1, acc1[r], 8);
  });
}

void fill_padded(const Plane& pl, PaddedScratch& scratch) {
  const DwConv3x3Params& p = *pl.p;
  const int64_t w = p.w, pitch = w + 2;
  // The interior, row by row; the border stays zero. A row narrower than 8 is one masked load
  // whose lanes past it are zero: stored whole, they land on the border and on the next row's
  // first columns (written after) or the bottom border.
  const __m256i narrow = row_mask(0, w);
  for (int64_t iy = 0; iy < p.h; ++iy) {
    const float* src = pl.x + iy * w;
    float* dst = scratch.v + (iy + 1) * pitch + 1;
    if (w < 8) {
      _mm256_storeu_ps(dst, _mm256_maskload_ps(src, narrow));
    } else {
      const __m256 lo = _mm256_loadu_ps(src), hi = _mm256_loadu_ps(src + w - 8);
      _mm256_storeu_ps(dst, lo);
      _mm256_storeu_ps(dst + w - 8, hi);
    }
  }
}

template <int A>
void plane_padded(const Plane& pl, PaddedScratch& scratch) {
  fill_padded(pl, scratch);
  const int64_t w = pl.p->w, ox1 = w - 8;
  for_bands<4>(pl.p->oh, [&](auto rows, int64_t oy) {
    if (ox1 > 0)
      padded_rows<decltype(rows)::value, A, true>(pl, scratch.v, w, oy, ox1);
    else
      padded_rows<decltype(rows)::value, A, false>(pl, scratch.v, w, oy, ox1);
  });
}

// Two planes narrower than 9 (7x7: one vector per output row) through their own scratches:
// each output's nine taps are one chain of dependent multiply-adds (the reference's order), so
// one plane's few rows left the FMA units waiting on their latency; two planes' rows interleave.
template <int R, int A>
DS_ALWAYS_INLINE void padded_rows_pair(const Plane& pa, const Plane& pb, const float* sa, const float* sb, int64_t w,
                                       int64_t oy0) {
  const int64_t pitch = w + 2;
  __m256 acca[R], accb[R];
  unroll<R>([&](auto r) DS_ALWAYS_INLINE_LAMBDA { acca[r] = accb[r] = _mm256_setzero_ps(); });
  unroll<R + 2>([&](auto ic) DS_ALWAYS_INLINE_LAMBDA {
    constexpr int I = decltype(ic)::value;
    const float* ra = sa + (oy0 + I) * pitch;
    const float* rb = sb + (oy0 + I) * pitch;
    add_row_taps<R, I, 1>(acca, pa.wv, _mm256_loadu_ps(ra), _mm256_loadu_ps(ra + 1), _mm256_loadu_ps(ra + 2));
    add_row_taps<R, I, 1>(accb, pb.wv, _mm256_loadu_ps(rb), _mm256_loadu_ps(rb + 1), _mm256_loadu_ps(rb + 2));
  });
  unroll<R>([&](auto r) DS_ALWAYS_INLINE_LAMBDA {
    store_out<A>(pa, pa.y + (oy0 + r) * w, acca[r], w);
    store_out<A>(pb, pb.y + (oy0 + r) * w, accb[r], w);
  });
}

template <int A>
void plane_padded_pair(const Plane& pa, const Plane& pb, PaddedScratch* scratch) {
  fill_padded(pa, scratch[0]);
  fill_padded(pb, scratch[1]);
  for_bands<4>(pa.p->oh, [&](auto rows, int64_t oy) {
    padded_rows_pair<decltype(rows)::value, A>(pa, pb, scratch[0].v, scratch[1].v, pa.p->w, oy);
  });
}

// Stride-2 planes with pad 1, at most kPaddedMax each way, whose output rows are one vector
// (MobileNet V2's 576x14x14 -> 7x7) and whose windows stay inside the scratch's zero border:
// NP planes (1 or 2) at a time from their padded scratches, as plane_padded_pair does at stride 1
// (each output row one chain of nine multiply-adds; the general stride-2 band took 2.4x the
// time of the padded stride-1 path per output).
bool padded_s2_fits(const DwConv3x3Params& p) {
  return p.stride == 2 && p.pad_top == 1 && p.pad_left == 1 && p.w <= kPaddedMax && p.h <= kPaddedMax && p.ow <= 8 &&
         2 * p.oh <= p.h + 1 && 2 * p.ow <= p.w + 1;
}

// Output rows oy0 .. oy0 + R - 1 of NP planes; scratch row 2 oy + ky holds input row 2 oy + ky - 1.
// Per input row: columns 0..15 and 2..17 of the scratch row, their even and odd columns by
// shufps (lanes in the order 0 1 4 5 2 3 6 7 until the store, as in block). Lanes past ow read
// the row's border or the next row's first columns and are not stored.
template <int R, int A, int NP>
DS_ALWAYS_INLINE void padded_s2_rows(const Plane* const* pl, const float* const* s, int64_t pitch, int64_t ow,
                                     int64_t oy0) {
  __m256 acc[NP][R];
  unroll<NP>([&](auto q) DS_ALWAYS_INLINE_LAMBDA {
    unroll<R>([&](auto r) DS_ALWAYS_INLINE_LAMBDA { acc[q][r] = _mm256_setzero_ps(); });
  });
  unroll<(R - 1) * 2 + 3>([&](auto ic) DS_ALWAYS_INLINE_LAMBDA {
    constexpr int I = decltype(ic)::value;
    unroll<NP>([&](auto q) DS_ALWAYS_INLINE_LAMBDA {
      const float* row = s[q] + (2 * oy0 + I) * pitch;
      const __m256 lo = _mm256_loadu_ps(row), hi = _mm256_loadu_ps(row + 8);
      const __m256 lo2 = _mm256_loadu_ps(row + 2), hi2 = _mm256_loadu_ps(row + 10);
      add_row_taps<R, I, 2>(acc[q], pl[q]->wv, _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)),
                            _mm256_shuffle_ps(lo2, hi2, _MM_SHUFFLE(2, 0, 2, 0)));
    });
  });
  unroll<R>([&](auto r) DS_ALWAYS_INLINE_LAMBDA {
    unroll<NP>([&](auto q) DS_ALWAYS_INLINE_LAMBDA {
      const __m256 o = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(acc[q][r]), _MM_SHUFFLE(3, 1, 2, 0)));
      store_out<A>(*pl[q], pl[q]->y + (oy0 + r) * ow, o, ow);
    });
  });
}

template <int A, int NP>
void plane_padded_s2(const Plane* const* pl, PaddedScratch* scratch) {
  const DwConv3x3Params& p = *pl[0]->p;
  const float* s[NP];
  for (int q = 0; q < NP; ++q) {
    fill_padded(*pl[q], scratch[q]);
    s[q] = scratch[q].v;
  }
  for_bands<4>(p.oh, [&](auto rows, int64_t oy) {
    padded_s2_rows<decltype(rows)::value, A, NP>(pl, s, p.w + 2, p.ow, oy);
  });
}

// Codes 4 and 7 (sigmoid, tanh) on a plane's outputs after its vector pass.
template <int A>
void scalar_activation(const DwConv3x3Params& p, float* y) {
  if (A == 4 || A == 7)
    for (int64_t i = 0; i < p.oh * p.ow; ++i) y[i] = gemm_activate(p.act, y[i], p.alpha, p.beta);
}

template <int A>
void run_planes(const DwConv3x3Params& p, int64_t planes, const float* x, const float* w, const float* bias,
                float* y) {
  Plane pl;
  pl.p = &p;
  pl.alpha = _mm256_set1_ps(p.alpha), pl.beta = _mm256_set1_ps(p.beta);
  const bool padded = padded_fits(p), flat = !padded && flat_fits(p), padded_s2 = padded_s2_fits(p);
  FlatMasks f;
  if (flat) flat_masks(p, f);
  PaddedScratch scratch[2];
  if (padded || padded_s2) std::memset(scratch, 0, sizeof(scratch));
  const bool pairs = padded && p.w <= 8;
  Plane next = pl;  // the second plane of a pair
  pl.last_ox0 = p.ow < 8 ? 0 : p.ow - 8;
  edge_loads(p, -p.pad_left, pl.first_loads);
  edge_loads(p, pl.last_ox0 * p.stride - p.pad_left, pl.last_loads);
  auto set_plane = [&](Plane& q, int64_t c) {
    q.x = x + c * p.in_plane(), q.y = y + c * p.out_plane();
    for (int t = 0; t < 9; ++t) q.wv[t] = _mm256_set1_ps(w[9 * c + t]);
    q.bias = _mm256_set1_ps(bias ? bias[c] : 0.0f);
  };
  for (int64_t c = 0; c < planes; ++c) {
    set_plane(pl, c);
    if (padded_s2) {
      const int np = c + 1 < planes ? 2 : 1;
      if (np == 2) set_plane(next, c + 1);
      const Plane* two[2] = {&pl, &next};
      if (np == 2) plane_padded_s2<A, 2>(two, scratch);
      else plane_padded_s2<A, 1>(two, scratch);
      for (int q = 0; q < np; ++q) scalar_activation<A>(p, two[q]->y);
      c += np - 1;
      continue;
    }
    if (pairs && c + 1 < planes) {
      set_plane(next, c + 1);
      plane_padded_pair<A>(pl, next, scratch);
      scalar_activation<A>(p, pl.y);
      scalar_activation<A>(p, next.y);
      ++c;
      continue;
    }
    if (flat)
      plane_flat<A>(pl, f);
    else if (padded)
      plane_padded<A>(pl, scratch[0]);
    else if (p.stride == 1)
      for_bands<6>(p.oh, [&](auto rows, int64_t oy) { band<1, decltype(rows)::value, A>(pl, oy); });
    else
      for_bands<4>(p.oh, [&](auto rows, int64_t oy) { band<2, decltype(rows)::value, A>(pl, oy); });
    scalar_activation<A>(p, pl.y);
  }
}

}  // namespace

void ds_f32_dwconv3x3__avx2(const DwConv3x3Params& p, int64_t planes, const float* x, const float* w,
                            const float* bias, float* y) {
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
