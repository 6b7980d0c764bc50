// Max pooling (NCHW) shared by the x86 levels, instantiated in each ISA's translation unit with its
// vector traits V (so it is compiled with that ISA's flags). Per output row and chunk of output
// columns, in two contiguous SIMD passes over a row buffer on the stack:
//   1. vertical: vrow[j] = max over the window's rows of input column c0 + j (-inf for columns
//      outside the row: the padding, and ceil-mode windows hanging past the end);
//   2. horizontal: y[ox] = max over kx of vrow[ox * stride_w + kx * dil_w]: stride 1 by plain
//      loads, stride 2 by loads of 2 vectors keeping the even lanes (a shuffle), larger strides
//      one float at a time.
// Every stride, pad, dilation and kernel size runs this way (a window wider than half the buffer
// runs the scalar reference).
// The result equals the reference's: max is exact and, without NaNs, independent of order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/kernels.h"

namespace ds {
namespace x86 {

template <class V>
void maxpool2d(const Pool2dParams& p, const float* x, float* y) {
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

}  // namespace x86
}  // namespace ds
