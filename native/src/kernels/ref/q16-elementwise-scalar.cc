// Reference requantize, quantize/dequantize to and from i16, and i16 max pooling
// (docs/format.md, "int16 activations").
#include <algorithm>
#include <cmath>

#include "kernels/qi16.h"
#include "kernels/ref/window_taps.h"

namespace ds {

template <typename X, typename Y>
void ds_q16_requantize__scalar(int64_t n, const QRequantParams& q, const X* x, Y* y) {
  constexpr int32_t lo = sizeof(Y) == 1 ? 0 : -32768, hi = sizeof(Y) == 1 ? 255 : 32767;
  for (int64_t i = 0; i < n; ++i)
    y[i] = q_clamp<Y>(q.y_zp + qu8_requant(int64_t(x[i]) - q.x_zp, q.multiplier, q.shift), lo, hi);
}

template void ds_q16_requantize__scalar<uint8_t, uint8_t>(int64_t, const QRequantParams&, const uint8_t*, uint8_t*);
template void ds_q16_requantize__scalar<uint8_t, int16_t>(int64_t, const QRequantParams&, const uint8_t*, int16_t*);
template void ds_q16_requantize__scalar<int16_t, uint8_t>(int64_t, const QRequantParams&, const int16_t*, uint8_t*);
template void ds_q16_requantize__scalar<int16_t, int16_t>(int64_t, const QRequantParams&, const int16_t*, int16_t*);

void ds_q16_quantize__scalar(int64_t n, float scale, const float* x, int16_t* y) {
  for (int64_t i = 0; i < n; ++i) {
    const float q = std::nearbyint(x[i] / scale);
    y[i] = q != q ? int16_t(0) : q <= -32768.0f ? int16_t(-32768) : q >= 32767.0f ? int16_t(32767) : int16_t(q);
  }
}

void ds_q16_dequantize__scalar(int64_t n, float scale, const int16_t* x, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = float(x[i]) * scale;
}

// One output at a time; padded taps take no part (a window with no tap inside gives -32768, the
// lowest value, as the f32 kernel gives -inf).
void ds_i16_maxpool2d__scalar(const Pool2dParams& p, const int16_t* x, int16_t* y) {
  for (int64_t plane = 0; plane < p.n * p.c; ++plane)
    for (int64_t oy = 0; oy < p.oh; ++oy)
      for (int64_t ox = 0; ox < p.ow; ++ox) {
        int16_t m = -32768;
        const int16_t* xp = x + plane * p.h * p.w;
        for_each_tap_in_input(p, oy, ox, [&](int64_t, int64_t, int64_t i) { m = std::max(m, xp[i]); });
        y[(plane * p.oh + oy) * p.ow + ox] = m;
      }
}

void ds_i16_global_maxpool__scalar(int64_t planes, int64_t size, const int16_t* x, int16_t* y) {
  for (int64_t p = 0; p < planes; ++p) {
    int16_t m = -32768;
    for (int64_t i = 0; i < size; ++i) m = std::max(m, x[p * size + i]);
    y[p] = m;
  }
}

}  // namespace ds
