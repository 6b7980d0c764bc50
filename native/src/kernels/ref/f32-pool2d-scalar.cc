#include <algorithm>
#include <limits>

#include "kernels/kernels.h"
#include "kernels/ref/window_taps.h"

namespace ds {

// Window taps are start + j * dilation; taps outside the input are skipped (padding is -inf). The
// op guarantees every window holds at least one input element (pads < kernel and PyTorch's
// ceil_mode rule); a window without one would give -inf.
void ds_f32_maxpool2d__scalar(const Pool2dParams& p, const float* x, float* y) {
  for (int64_t plane = 0; plane < p.n * p.c; ++plane) {
    const float* xp = x + plane * p.h * p.w;
    float* yp = y + plane * p.oh * p.ow;
    for (int64_t oy = 0; oy < p.oh; ++oy) {
      for (int64_t ox = 0; ox < p.ow; ++ox) {
        float m = -std::numeric_limits<float>::infinity();
        for_each_tap_in_input(p, oy, ox, [&](int64_t, int64_t, int64_t i) { m = std::max(m, xp[i]); });
        yp[oy * p.ow + ox] = m;
      }
    }
  }
}

// The divisor follows PyTorch: with count_include_pad, the window clipped to the padded input
// (so a ceil_mode window hanging past the end padding counts only up to it); otherwise the number
// of real input elements in the window.
void ds_f32_avgpool2d__scalar(const Pool2dParams& p, const float* x, float* y) {
  for (int64_t plane = 0; plane < p.n * p.c; ++plane) {
    const float* xp = x + plane * p.h * p.w;
    float* yp = y + plane * p.oh * p.ow;
    for (int64_t oy = 0; oy < p.oh; ++oy) {
      const int64_t ys = oy * p.stride_h - p.pad_top;
      const int64_t ye = std::min<int64_t>(ys + p.kh, p.h + p.pad_bottom);
      const int64_t y0 = std::max<int64_t>(ys, 0), y1 = std::min<int64_t>(ye, p.h);
      for (int64_t ox = 0; ox < p.ow; ++ox) {
        const int64_t xs = ox * p.stride_w - p.pad_left;
        const int64_t xe = std::min<int64_t>(xs + p.kw, p.w + p.pad_right);
        const int64_t x0 = std::max<int64_t>(xs, 0), x1 = std::min<int64_t>(xe, p.w);
        float sum = 0.0f;
        for (int64_t iy = y0; iy < y1; ++iy)
          for (int64_t ix = x0; ix < x1; ++ix) sum += xp[iy * p.w + ix];
        const int64_t count = p.count_include_pad ? (ye - ys) * (xe - xs) : (y1 - y0) * (x1 - x0);
        yp[oy * p.ow + ox] = sum / float(count);
      }
    }
  }
}

}  // namespace ds

namespace ds {

void ds_f32_global_avgpool__scalar(int64_t planes, int64_t size, const float* x, float* y) {
  for (int64_t p = 0; p < planes; ++p) {
    double sum = 0.0;  // a plane can be large: accumulate in double
    for (int64_t i = 0; i < size; ++i) sum += x[p * size + i];
    y[p] = float(sum / double(size));
  }
}

void ds_f32_global_maxpool__scalar(int64_t planes, int64_t size, const float* x, float* y) {
  for (int64_t p = 0; p < planes; ++p) {
    float m = x[p * size];
    for (int64_t i = 1; i < size; ++i) m = std::max(m, x[p * size + i]);
    y[p] = m;
  }
}

}  // namespace ds
