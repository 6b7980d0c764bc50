// Prototype f32 kernels on the blocked NCHWc16 activation layout, for bench_layout only (the
// runtime keeps NCHW; docs/kernels.md "Activation layout"). A tensor of C channels and H x W
// pixels is [ceil(C/16)][H][W][16]: one 64-byte vector holds 16 channels of one pixel, the
// channels past C are zero. AVX-512 only (the file that includes this is built with -mavx512f).
//
// - to_nchwc16 / from_nchwc16: the conversions at a graph's edges, 16 x 16 transposes in registers.
// - dwconv3x3_nchwc16: depthwise 3x3, pad 1, stride 1 or 2; per channel block the 9 tap vectors
//   stay in registers, each output row in tiles of up to 14 pixels (14 accumulators), every input
//   vector loaded once per tile and row and fed to the outputs whose window holds it. No permutes
//   at stride 2: a pixel is a vector, so the stride only changes the addresses.
// - conv1x1_nchwc16 / conv3x3_nchwc16: dense conv (group 1) as 1x1, or 3x3 pad 1, stride 1, on a
//   register tile of 2 output channel blocks x 14 pixels (28 accumulators): per input channel 2
//   weight vectors and 14 broadcast input scalars (the oneDNN "direct" scheme), a 3x3's input
//   channels in slices of 128 so that a slice's weights stay in L2. The 3x3 input is first
//   copied into a zero-padded blocked plane, counted in its time.
#pragma once

#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 on the undefined vectors in the intrinsics
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "core/thread_pool.h"

namespace nchwc {

constexpr int64_t kBlock = 16;
inline int64_t blocks(int64_t c) { return (c + kBlock - 1) / kBlock; }

// Runs fn(task) for task in [0, count) on the pool, or inline without one.
template <typename Fn>
void for_tasks(ds::ThreadPool* pool, int64_t count, Fn fn) {
  if (pool && count > 1) {
    pool->parallel_for(count, [&](int64_t task, int) { fn(task); });
  } else {
    for (int64_t t = 0; t < count; ++t) fn(t);
  }
}

// In-register transpose of 16 vectors: r[i][j] -> r[j][i].
inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int h = 0; h < 16; h += 8) {
    for (int i = 0; i < 4; ++i) {
      t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
      t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xdd);
    }
  }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
  }
}

inline __mmask16 first_lanes(int64_t n) { return __mmask16((1u << std::min<int64_t>(n, 16)) - 1u); }

// Both conversions, per block of 16 channels (at the same offset in both layouts) and 16 pixels:
// 16 loads (channel planes, or pixel vectors), a transpose in registers, up to 16 stores (pixel
// vectors, or the real channels' planes), masked at the last pixels.
template <bool ToBlocked>
void convert16(const float* x, int64_t c, int64_t hw, float* y, ds::ThreadPool* pool) {
  for_tasks(pool, blocks(c), [&](int64_t cb) {
    const int64_t nc = std::min(kBlock, c - cb * kBlock);
    const float* xb = x + cb * kBlock * hw;
    float* yb = y + cb * kBlock * hw;
    for (int64_t p = 0; p < hw; p += 16) {
      const int64_t np = std::min<int64_t>(16, hw - p), rows_in = ToBlocked ? nc : np, rows_out = ToBlocked ? np : nc;
      const __mmask16 m = first_lanes(np);
      __m512 r[16];
      for (int i = 0; i < 16; ++i)
        r[i] = i >= rows_in ? _mm512_setzero_ps()
               : ToBlocked  ? _mm512_maskz_loadu_ps(m, xb + i * hw + p)
                            : _mm512_loadu_ps(xb + (p + i) * kBlock);
      transpose16(r);
      for (int64_t i = 0; i < rows_out; ++i) {
        if (ToBlocked)
          _mm512_storeu_ps(yb + (p + i) * kBlock, r[i]);
        else
          _mm512_mask_storeu_ps(yb + i * hw + p, m, r[i]);
      }
    }
  });
}

// NCHW [C][HW] -> NCHWc16.
inline void to_nchwc16(const float* x, int64_t c, int64_t hw, float* y, ds::ThreadPool* pool) {
  convert16<true>(x, c, hw, y, pool);
}

// NCHWc16 -> NCHW [C][HW] (the channels past C dropped).
inline void from_nchwc16(const float* x, int64_t c, int64_t hw, float* y, ds::ThreadPool* pool) {
  convert16<false>(x, c, hw, y, pool);
}

// Calls f(std::integral_constant<int, N>) for the run-time n in [1, Max].
template <int Max, typename F, int... I>
void with_count(int n, F&& f, std::integer_sequence<int, I...>) {
  ((n == I + 1 ? (f(std::integral_constant<int, I + 1>()), 0) : 0), ...);
}
template <int Max, typename F>
void with_count(int n, F&& f) {
  with_count<Max>(n, f, std::make_integer_sequence<int, Max>());
}

inline __m512 relu_if(__m512 v, bool relu) { return relu ? _mm512_max_ps(v, _mm512_setzero_ps()) : v; }

// ---- depthwise 3x3, pad 1 ----

// T outputs of one row at output columns ox0 .. ox0 + T - 1, all their input columns inside the row.
template <int S, int T>
inline void dw_tile(const float* x, int64_t h, int64_t w, int64_t oy, int64_t ox0, const __m512 wt[9], __m512 bias,
                    float* y, bool relu) {
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = bias;
  for (int ky = 0; ky < 3; ++ky) {
    const int64_t iy = oy * S + ky - 1;
    if (iy < 0 || iy >= h) continue;
    const float* row = x + (iy * w + ox0 * S - 1) * kBlock;
#pragma GCC unroll 32
    for (int j = 0; j < (T - 1) * S + 3; ++j) {
      const __m512 v = _mm512_loadu_ps(row + j * kBlock);
#pragma GCC unroll 3
      for (int kx = 0; kx < 3; ++kx) {
        const int d = j - kx;
        if (d >= 0 && d % S == 0 && d / S < T) acc[d / S] = _mm512_fmadd_ps(v, wt[ky * 3 + kx], acc[d / S]);
      }
    }
  }
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + t * kBlock, relu_if(acc[t], relu));
}

// One output pixel with every tap checked (the columns at the edges of a row).
template <int S>
inline void dw_edge(const float* x, int64_t h, int64_t w, int64_t oy, int64_t ox, const __m512 wt[9], __m512 bias,
                    float* y, bool relu) {
  __m512 acc = bias;
  for (int ky = 0; ky < 3; ++ky) {
    const int64_t iy = oy * S + ky - 1;
    if (iy < 0 || iy >= h) continue;
    for (int kx = 0; kx < 3; ++kx) {
      const int64_t ix = ox * S + kx - 1;
      if (ix < 0 || ix >= w) continue;
      acc = _mm512_fmadd_ps(_mm512_loadu_ps(x + (iy * w + ix) * kBlock), wt[ky * 3 + kx], acc);
    }
  }
  _mm512_storeu_ps(y, relu_if(acc, relu));
}

// Weights [C/16][9][16], bias [C/16][16]; tasks are (channel block, band of output rows).
template <int S>
void dwconv3x3_nchwc16(const float* x, int64_t c, int64_t h, int64_t w, const float* wts, const float* bias, float* y,
                       bool relu, ds::ThreadPool* pool) {
  constexpr int kTile = 14;
  const int64_t oh = (h - 1) / S + 1, ow = (w - 1) / S + 1;
  // Interior columns: every input column of the window inside the row.
  const int64_t in_lo = 1, in_hi = std::max<int64_t>(in_lo, std::min(ow, (w - 2) / S + 1));
  const int64_t bands = std::max<int64_t>(1, oh / 8);
  for_tasks(pool, blocks(c) * bands, [&](int64_t task) {
    const int64_t cb = task / bands, band = task % bands;
    const float* xb = x + cb * h * w * kBlock;
    float* yb = y + cb * oh * ow * kBlock;
    __m512 wt[9];
    for (int i = 0; i < 9; ++i) wt[i] = _mm512_loadu_ps(wts + (cb * 9 + i) * kBlock);
    const __m512 b = _mm512_loadu_ps(bias + cb * kBlock);
    const int64_t oy0 = band * oh / bands, oy1 = (band + 1) * oh / bands;
    for (int64_t oy = oy0; oy < oy1; ++oy) {
      float* yr = yb + oy * ow * kBlock;
      dw_edge<S>(xb, h, w, oy, 0, wt, b, yr, relu);
      int64_t ox = in_lo;
      for (; ox + kTile <= in_hi; ox += kTile) dw_tile<S, kTile>(xb, h, w, oy, ox, wt, b, yr + ox * kBlock, relu);
      if (ox < in_hi)
        with_count<kTile>(int(in_hi - ox), [&](auto n) {
          dw_tile<S, decltype(n)::value>(xb, h, w, oy, ox, wt, b, yr + ox * kBlock, relu);
        });
      for (ox = in_hi; ox < ow; ++ox) dw_edge<S>(xb, h, w, oy, ox, wt, b, yr + ox * kBlock, relu);
    }
  });
}

// ---- dense conv: 1x1, or 3x3 pad 1, stride 1 ----

// Packed weights [O/16][C/16][taps][16 in][16 out], zero past O and C; bias [O/16][16].
struct ConvWeights {
  int64_t o = 0, c = 0, taps = 0;
  std::vector<float> w, bias;
};

inline ConvWeights pack_conv_weights(const float* oihw, const float* bias, int64_t o, int64_t c, int64_t taps) {
  ConvWeights p{o, c, taps, std::vector<float>(size_t(blocks(o) * blocks(c) * taps * 256), 0.0f),
                std::vector<float>(size_t(blocks(o) * kBlock), 0.0f)};
  for (int64_t oc = 0; oc < o; ++oc) {
    p.bias[size_t(oc)] = bias[oc];
    for (int64_t ic = 0; ic < c; ++ic)
      for (int64_t t = 0; t < taps; ++t)
        p.w[size_t((((oc / 16) * blocks(c) + ic / 16) * taps + t) * 256 + (ic % 16) * 16 + oc % 16)] =
            oihw[(oc * c + ic) * taps + t];
  }
  return p;
}

// NB output blocks x P pixels: pixel p of the tile is read at x + p * 16 (+ the tap's offset) in
// each input block (x_cb floats apart) and written at y + p * 16 in each output block (y_ob apart).
// A slice of the input channel blocks: the first starts from the bias, the others add to y, the
// last applies the activation.
struct Slice {
  int64_t cbs, last_ic;
  bool first, last;
};

// Where a run's pixels go: pixel q of the run (its input at x + q * 16) is output pixel
// (q / wp) * w + q % wp, and only when q % wp < w. A 3x3 runs over the zero-padded plane's flat
// rows (wp = W + 2) so that its tiles cross rows: the 2 columns past each row are computed and
// dropped. A 1x1 has wp = w = the run's length.
struct Rows {
  int64_t wp, w;
};

// NB output blocks x P pixels from pixel q0 of a run, each input block x_cb floats apart, each
// output block y_ob floats apart. Without Wrap the outputs are the run's pixels in order (1x1).
template <bool Wrap, int NB, int P>
inline void conv_tile(const float* x, int64_t q0, int64_t x_cb, const int64_t* tap_off, int64_t taps, Slice sl,
                      const float* w, int64_t w_ob, const float* bias, float* y, int64_t y_ob, Rows rows, bool relu) {
  int64_t yo[P];  // output offsets, -1 for the dropped columns (one division per tile, not per pixel)
  int64_t row = Wrap ? q0 / rows.wp : 0, col = Wrap ? q0 % rows.wp : q0;
  for (int p = 0; p < P; ++p) {
    yo[p] = !Wrap || col < rows.w ? (row * rows.w + col) * kBlock : -1;
    if (++col == rows.wp && Wrap) col = 0, ++row;
  }
  __m512 acc[NB][P];
  for (int n = 0; n < NB; ++n) {
    const __m512 b = _mm512_loadu_ps(bias + n * kBlock);
    for (int p = 0; p < P; ++p) acc[n][p] = sl.first || (Wrap && yo[p] < 0) ? b : _mm512_loadu_ps(y + n * y_ob + yo[p]);
  }
  const float* xq = x + q0 * kBlock;
  for (int64_t cb = 0; cb < sl.cbs; ++cb) {
    const int64_t nic = cb + 1 == sl.cbs ? sl.last_ic : kBlock;
    for (int64_t t = 0; t < taps; ++t) {
      const float* xp = xq + cb * x_cb + tap_off[t];
      const float* wp = w + (cb * taps + t) * 256;
      for (int64_t ic = 0; ic < nic; ++ic) {
        __m512 wv[NB];
        for (int n = 0; n < NB; ++n) wv[n] = _mm512_loadu_ps(wp + n * w_ob + ic * kBlock);
#pragma GCC unroll 28
        for (int p = 0; p < P; ++p) {
          const __m512 xv = _mm512_set1_ps(xp[p * kBlock + ic]);
          for (int n = 0; n < NB; ++n) acc[n][p] = _mm512_fmadd_ps(wv[n], xv, acc[n][p]);
        }
      }
    }
  }
  for (int p = 0; p < P; ++p)
    if (!Wrap || yo[p] >= 0)
      for (int n = 0; n < NB; ++n) _mm512_storeu_ps(y + n * y_ob + yo[p], relu_if(acc[n][p], relu && sl.last));
}

// The widest tile at NB blocks: NB x P accumulators + NB weights + 1 broadcast within the 32
// registers (4 blocks x 7 pixels spilled: 512 x 7 x 7 -> 512 ran at 30 GFLOP/s).
template <int NB>
constexpr int max_pixels() {
  return NB == 1 ? 24 : 14;
}

// Input channel blocks per slice: 8 blocks x 9 taps, the weights of a slice for 2 output blocks
// of a 3x3 (147 KB), stay in L2 while the task's pixels are computed (512 x 7 x 7 -> 512 took 10x
// longer with the whole slab of 4 blocks, 1.2 MB, re-read from L3 for each row). A 1x1 takes 72
// blocks (every layer of the zoo in one slice).
inline int64_t slice_blocks(int64_t taps) { return 72 / taps; }

// Output blocks [ob0, ob0 + nb) (in pairs, then one) x the slice of input blocks from cb0, on a
// run of n pixels.
inline void conv_blocks(int64_t ob0, int64_t nb, int64_t cb0, int64_t n, const float* x, int64_t x_cb,
                        const int64_t* tap_off, const ConvWeights& wt, float* y, int64_t y_ob, Rows rows, bool relu) {
  const int64_t cbs = blocks(wt.c), w_ob = cbs * wt.taps * 256, n_cb = std::min(slice_blocks(wt.taps), cbs - cb0);
  const Slice sl{n_cb, cb0 + n_cb == cbs ? wt.c - (cbs - 1) * kBlock : kBlock, cb0 == 0, cb0 + n_cb == cbs};
  const float* xs = x + cb0 * x_cb;
  const float* ws = wt.w.data() + cb0 * wt.taps * 256;
  const bool wrap = rows.wp != rows.w;
  auto run = [&](auto nbc, int64_t ob) {
    constexpr int NB = decltype(nbc)::value, kP = max_pixels<NB>();
    const float* wo = ws + ob * w_ob;
    const float* bo = wt.bias.data() + ob * kBlock;
    float* yo = y + ob * y_ob;
    int64_t q = 0;
    auto tile = [&](auto np) {
      constexpr int P = decltype(np)::value;
      if (wrap)
        conv_tile<true, NB, P>(xs, q, x_cb, tap_off, wt.taps, sl, wo, w_ob, bo, yo, y_ob, rows, relu);
      else
        conv_tile<false, NB, P>(xs, q, x_cb, tap_off, wt.taps, sl, wo, w_ob, bo, yo, y_ob, rows, relu);
    };
    for (; q + kP <= n; q += kP) tile(std::integral_constant<int, kP>());
    if (q < n) with_count<kP>(int(n - q), tile);
  };
  int64_t ob = ob0;
  for (; ob + 2 <= ob0 + nb; ob += 2) run(std::integral_constant<int, 2>(), ob);
  if (ob < ob0 + nb) run(std::integral_constant<int, 1>(), ob);
}

// 1x1 stride 1: the pixels of a plane are one run. Tasks: (pair of output blocks, pixel chunk).
inline void conv1x1_nchwc16(const float* x, int64_t hw, const ConvWeights& wt, float* y, bool relu,
                            ds::ThreadPool* pool) {
  const int64_t obs = blocks(wt.o), groups = (obs + 1) / 2;
  const int64_t chunk = 8 * max_pixels<2>(), chunks = (hw + chunk - 1) / chunk;
  const int64_t off0 = 0;
  for_tasks(pool, groups * chunks, [&](int64_t task) {
    const int64_t g = task / chunks, p0 = (task % chunks) * chunk, np = std::min(chunk, hw - p0);
    for (int64_t cb0 = 0; cb0 < blocks(wt.c); cb0 += slice_blocks(1))
      conv_blocks(g * 2, std::min<int64_t>(2, obs - g * 2), cb0, np, x + p0 * kBlock, hw * kBlock, &off0, wt,
                  y + p0 * kBlock, hw * kBlock, Rows{np, np}, relu);
  });
}

// 3x3 pad 1 stride 1: x copied into the zero-padded blocked plane xp ([C/16][H+2][W+2][16]),
// then per task a pair of output blocks x a band of rows, as one run over the band's padded rows.
inline void conv3x3_nchwc16(const float* x, int64_t h, int64_t w, const ConvWeights& wt, float* xp, float* y,
                            bool relu, ds::ThreadPool* pool) {
  const int64_t hp = h + 2, wp = w + 2, cbs = blocks(wt.c);
  for_tasks(pool, cbs, [&](int64_t cb) {
    float* d = xp + cb * hp * wp * kBlock;
    std::memset(d, 0, size_t(wp * kBlock) * sizeof(float));
    for (int64_t iy = 0; iy < h; ++iy) {
      float* r = d + (iy + 1) * wp * kBlock;
      std::memset(r, 0, kBlock * sizeof(float));
      std::memcpy(r + kBlock, x + (cb * h + iy) * w * kBlock, size_t(w * kBlock) * sizeof(float));
      std::memset(r + (w + 1) * kBlock, 0, kBlock * sizeof(float));
    }
    std::memset(d + (hp - 1) * wp * kBlock, 0, size_t(wp * kBlock) * sizeof(float));
  });
  int64_t tap_off[9];
  for (int ky = 0; ky < 3; ++ky)
    for (int kx = 0; kx < 3; ++kx) tap_off[ky * 3 + kx] = (ky * wp + kx) * kBlock;
  // Bands of rows only when there are few pairs of output blocks: a run of a band of a 7x7 plane
  // is a tile and a ragged end (512 x 7 x 7 -> 512 1.66 -> 1.25 ms with whole planes).
  const int64_t obs = blocks(wt.o), groups = (obs + 1) / 2, bands = groups >= 8 ? 1 : std::min<int64_t>(h, 4);
  for_tasks(pool, groups * bands, [&](int64_t task) {
    const int64_t g = task / bands, band = task % bands;
    const int64_t oy0 = band * h / bands, oy1 = (band + 1) * h / bands, n = (oy1 - oy0 - 1) * wp + w;
    for (int64_t cb0 = 0; cb0 < cbs; cb0 += slice_blocks(9))
      conv_blocks(g * 2, std::min<int64_t>(2, obs - g * 2), cb0, n, xp + oy0 * wp * kBlock, hp * wp * kBlock, tap_off,
                  wt, y + oy0 * w * kBlock, h * w * kBlock, Rows{wp, w}, relu);
  });
}

}  // namespace nchwc
