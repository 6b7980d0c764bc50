// Max pooling (NCHW) shared by the x86 levels, instantiated in each ISA's translation unit with its
// vector traits V (so it is compiled with that ISA's flags).
//
// K x K windows at stride S without dilation, (K, S) = (2, 2), (3, 2) or (3, 3) (every max pool of
// the zoo), run maxpool_strided: per band of R output rows and strip of L output columns, the
// vertical maxima of the strip's S L input columns stay in registers (each input row is loaded
// once per band; with K = 3, S = 2 the row two windows share serves both), then the horizontal max
// picks lanes with shuffles (S = 2: even and odd lanes, with K = 3 also the even lanes shifted by
// one, whose last is the next strip's first column; S = 3: every third lane from 0, 1 and 2) and
// is stored directly. Input rows outside the plane are replaced by the nearest row inside (max is
// idempotent and every window holds a row of the input); columns outside it are -inf lanes of
// masked loads.
//
// Every other stride, pad, dilation and kernel size runs maxpool2d_general: per output row and
// chunk of output columns, in two contiguous SIMD passes over a row buffer on the stack:
//   1. vertical: vrow[j] = max over the window's rows of input column c0 + j (-inf for columns
//      outside the row: the padding, and ceil-mode windows hanging past the end);
//   2. horizontal: y[ox] = max over kx of vrow[ox * stride_w + kx * dil_w]: stride 1 by plain
//      loads, stride 2 by loads of 2 vectors keeping the even lanes (a shuffle), larger strides
//      one float at a time.
// A window wider than half the buffer runs the scalar reference.
// The result equals the reference's: max is exact and, without NaNs, independent of order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/kernels.h"
#include "kernels/unroll.h"

namespace ds {
namespace x86 {

template <class V>
void maxpool2d_general(const Pool2dParams& p, const float* x, float* y) {
  using T = typename V::T;
  constexpr int L = V::kWidth;
  constexpr int64_t kBuf = 2048;
  alignas(64) float vrow[kBuf + 2 * L];
  const float ninf = -std::numeric_limits<float>::infinity();
  const T vninf = V::set1(ninf);
  const int64_t s = p.stride_w, d = p.dil_w;
  const int64_t win = (p.kw - 1) * d + 1;  // input columns one window covers
  if (win > kBuf / 2) {
    ds_f32_maxpool2d__scalar(p, x, y);
    return;
  }
  const int64_t chunk = std::min(p.ow, (kBuf - win) / s + 1);  // output columns per pass
  for (int64_t plane = 0; plane < p.n * p.c; ++plane) {
    const float* xp = x + plane * p.h * p.w;
    float* yp = y + plane * p.oh * p.ow;
    for (int64_t oy = 0; oy < p.oh; ++oy) {
      float* yr = yp + oy * p.ow;
      for (int64_t ox0 = 0; ox0 < p.ow; ox0 += chunk) {
        const int64_t n = std::min(chunk, p.ow - ox0);
        const int64_t c0 = ox0 * s - p.pad_left;  // input column of vrow[0]
        const int64_t span = (n - 1) * s + win;
        const int64_t lo = std::min(span, std::max<int64_t>(0, -c0));         // vrow[lo, hi): inside the row
        const int64_t hi = std::max(lo, std::min(span, p.w - c0));
        bool any_row = false;
        for (int64_t j = lo; j < hi; j += L) {
          const int64_t m = std::min<int64_t>(L, hi - j);
          T v = vninf;
          for (int64_t ky = 0; ky < p.kh; ++ky) {
            const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dil_h;
            if (iy < 0 || iy >= p.h) continue;
            const float* src = xp + iy * p.w + c0 + j;
            v = V::max(v, m == L ? V::load(src) : V::load_n(src, m));  // lanes past m: overwritten below
            any_row = true;
          }
          V::store(vrow + j, v);
        }
        if (!any_row)
          for (int64_t j = lo; j < hi; ++j) vrow[j] = ninf;
        for (int64_t j = 0; j < lo; ++j) vrow[j] = ninf;
        for (int64_t j = hi; j < span + L; j += L) V::store(vrow + j, vninf);  // vrow has 2 L of slack
        // Horizontal: y[ox0 + i] = max over kx of vrow[i * s + kx * d].
        if (s == 1) {
          for (int64_t i = 0; i < n; i += L) {
            T v = V::load(vrow + i);
            for (int64_t kx = 1; kx < p.kw; ++kx) v = V::max(v, V::load(vrow + i + kx * d));
            if (n - i < L) V::store_n(yr + ox0 + i, n - i, v);
            else V::store(yr + ox0 + i, v);
          }
        } else if (s == 2) {
          // The even lanes of the 2 L floats from 2 i + kx d; lanes past the row's last output read
          // vrow's slack and are not stored.
          for (int64_t i = 0; i < n; i += L) {
            const float* r = vrow + 2 * i;
            T v = V::even(V::load(r), V::load(r + L));
            for (int64_t kx = 1; kx < p.kw; ++kx) v = V::max(v, V::even(V::load(r + kx * d), V::load(r + kx * d + L)));
            if (n - i < L) V::store_n(yr + ox0 + i, n - i, v);
            else V::store(yr + ox0 + i, v);
          }
        } else {
          for (int64_t i = 0; i < n; ++i) {
            float v = vrow[i * s];
            for (int64_t kx = 1; kx < p.kw; ++kx) v = std::max(v, vrow[i * s + kx * d]);
            yr[ox0 + i] = v;
          }
        }
      }
    }
  }
}

// The strips of L output columns of a row and, per strip, the lanes of its S input column vectors
// (c0 + s L + [0, L)) inside the row; one more strip past the last (with K = S + 1 its first column
// is the last window's last). The same for every row and plane, so built once per call.
template <class V, int S>
struct MaxpoolStrips {
  static constexpr int64_t kMax = 128;  // wider rows run maxpool2d_general
  using Lanes = decltype(V::lanes(0, 0));
  int64_t count;
  bool inside[kMax + 1];  // all S vectors inside the row: plain loads
  Lanes lanes[kMax + 1][S];

  explicit MaxpoolStrips(const Pool2dParams& p) : count((p.ow + V::kWidth - 1) / V::kWidth) {
    constexpr int L = V::kWidth;
    for (int64_t j = 0; j <= std::min(count, kMax); ++j) {
      const int64_t c0 = S * j * L - p.pad_left;
      inside[j] = c0 >= 0 && c0 + S * L <= p.w;
      for (int v = 0; v < S; ++v) lanes[j][v] = V::lanes(-c0 - v * L, p.w - c0 - v * L);
    }
  }
};

// Vertical maxima of the R windows' rows (row[0 .. S (R - 1) + K - 1]) over strip j's input
// columns: col[r][v] covers c0 + v L + [0, L); lanes outside the row are -inf.
template <class V, int S, int K, int R>
DS_ALWAYS_INLINE void maxpool_vertical(const Pool2dParams& p, const MaxpoolStrips<V, S>& strips,
                                       const float* const* row, int64_t j, typename V::T (*col)[S]) {
  using T = typename V::T;
  constexpr int L = V::kWidth;
  constexpr int kRows = S * (R - 1) + K;
  const int64_t c0 = S * j * L - p.pad_left;
  T in[kRows][S];
  if (strips.inside[j]) {
    unroll<kRows>([&](auto i) { unroll<S>([&](auto v) { in[i][v] = V::load(row[i] + c0 + v * L); }); });
  } else {  // masked lanes are never read (row + c0 may point before the row)
    const T ninf = V::set1(-std::numeric_limits<float>::infinity());
    // Forced inline: GCC outlined this loop body for stride 3 (in[] then goes through memory).
    unroll<kRows>([&](auto i) DS_ALWAYS_INLINE_LAMBDA {
      unroll<S>([&](auto v) DS_ALWAYS_INLINE_LAMBDA {
        in[i][v] = V::load_or(row[i] + c0 + v * L, strips.lanes[j][v], ninf);
      });
    });
  }
  unroll<R>([&](auto r) {
    unroll<S>([&](auto v) {
      col[r][v] = V::max(in[S * r][v], in[S * r + 1][v]);
      if (K == 3) col[r][v] = V::max(col[r][v], in[S * r + 2][v]);
    });
  });
}

// Output strip j (columns j L ..) of the R rows from y: the horizontal max of the vertical maxima
// col (see the top); next[r][0] is the next strip's first column (used when K = S + 1).
template <class V, int S, int K, int R>
DS_ALWAYS_INLINE void maxpool_store(const Pool2dParams& p, float* y, int64_t j, const typename V::T (*col)[S],
                                    const typename V::T (*next)[S]) {
  constexpr int L = V::kWidth;
  const int64_t n = std::min<int64_t>(L, p.ow - j * L);
  unroll<R>([&](auto r) {
    typename V::T v;
    if constexpr (S == 2) {
      const typename V::T even = V::even(col[r][0], col[r][1]);
      v = V::max(even, V::odd(col[r][0], col[r][1]));
      if (K == 3) v = V::max(v, V::shift_in(even, next[r][0]));
    } else {
      static_assert(S == 3 && K == 3, "stride 3 takes 3x3 windows");
      v = V::max(V::template third<0>(col[r][0], col[r][1], col[r][2]),
                 V::template third<1>(col[r][0], col[r][1], col[r][2]));
      v = V::max(v, V::template third<2>(col[r][0], col[r][1], col[r][2]));
    }
    float* dst = y + r * p.ow + j * L;
    if (n == L) V::store(dst, v);
    else V::store_n(dst, n, v);
  });
}

// R output rows from oy0 of the plane xp -> yp (see the top).
template <class V, int S, int K, int R>
void maxpool_band(const Pool2dParams& p, const MaxpoolStrips<V, S>& strips, const float* xp, float* yp,
                  int64_t oy0) {
  using T = typename V::T;
  constexpr int kRows = S * (R - 1) + K;  // the input rows the R windows cover
  const int64_t iy0 = S * oy0 - p.pad_top;
  const float* row[kRows];
  if (iy0 >= 0 && iy0 + kRows <= p.h) {
    unroll<kRows>([&](auto i) { row[i] = xp + (iy0 + i) * p.w; });
  } else {
    unroll<kRows>([&](auto i) { row[i] = xp + std::min(std::max<int64_t>(iy0 + i, 0), p.h - 1) * p.w; });
  }
  float* y = yp + oy0 * p.ow;
  T col[R][S], next[R][S];
  maxpool_vertical<V, S, K, R>(p, strips, row, 0, col);
  for (int64_t j = 0;; ++j) {  // col: strip j
    const bool last = j + 1 == strips.count;
    if (K == S) {  // the windows end inside the strip
      maxpool_store<V, S, K, R>(p, y, j, col, col);
      if (last) break;
      maxpool_vertical<V, S, K, R>(p, strips, row, j + 1, col);
      continue;
    }
    if (!last || S * (j + 1) * V::kWidth - p.pad_left < p.w) {
      maxpool_vertical<V, S, K, R>(p, strips, row, j + 1, next);
    } else {  // past the row
      unroll<R>([&](auto r) { next[r][0] = V::set1(-std::numeric_limits<float>::infinity()); });
    }
    maxpool_store<V, S, K, R>(p, y, j, col, next);
    if (last) break;
    unroll<R>([&](auto r) { unroll<S>([&](auto v) { col[r][v] = next[r][v]; }); });
  }
}

template <class V, int S, int K>
void maxpool_strided(const Pool2dParams& p, const float* x, float* y) {
  constexpr int R = V::kPoolRows;
  const MaxpoolStrips<V, S> strips(p);
  for (int64_t plane = 0; plane < p.n * p.c; ++plane) {
    const float* xp = x + plane * p.h * p.w;
    float* yp = y + plane * p.oh * p.ow;
    int64_t oy = 0;
    for (; oy + R <= p.oh; oy += R) maxpool_band<V, S, K, R>(p, strips, xp, yp, oy);
    for (; oy + 2 <= p.oh; oy += 2) maxpool_band<V, S, K, 2>(p, strips, xp, yp, oy);
    if (oy < p.oh) maxpool_band<V, S, K, 1>(p, strips, xp, yp, oy);
  }
}

template <class V>
void maxpool2d(const Pool2dParams& p, const float* x, float* y) {
  const bool square = p.stride_h == p.stride_w && p.dil_h == 1 && p.dil_w == 1 && p.kh == p.kw;
  const int64_t s = p.stride_w, k = p.kw;
  if (square && p.ow <= MaxpoolStrips<V, 3>::kMax * V::kWidth) {
    if (s == 2 && k == 3) return maxpool_strided<V, 2, 3>(p, x, y);
    if (s == 2 && k == 2) return maxpool_strided<V, 2, 2>(p, x, y);
    if (s == 3 && k == 3) return maxpool_strided<V, 3, 3>(p, x, y);
  }
  maxpool2d_general<V>(p, x, y);
}

}  // namespace x86
}  // namespace ds
