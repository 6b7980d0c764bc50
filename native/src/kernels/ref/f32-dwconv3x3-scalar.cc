// Reference depthwise 3x3 per plane: taps in order ky, kx, then bias, then the activation.
#include "kernels/dwconv3x3.h"
#include "kernels/gemm.h"

namespace ds {

void ds_f32_dwconv3x3__scalar(const DwConv3x3Params& p, int64_t planes, const float* x, const float* w,
                              const float* bias, float* y) {
  for (int64_t c = 0; c < planes; ++c, x += p.in_plane(), w += 9, y += p.out_plane()) {
    const float b = bias ? bias[c] : 0.0f;
    for (int64_t oy = 0; oy < p.oh; ++oy)
      for (int64_t ox = 0; ox < p.ow; ++ox) {
        float acc = 0.0f;
        for (int64_t ky = 0; ky < 3; ++ky) {
          const int64_t iy = oy * p.stride - p.pad_top + ky;
          if (iy < 0 || iy >= p.h) continue;
          for (int64_t kx = 0; kx < 3; ++kx) {
            const int64_t ix = ox * p.stride - p.pad_left + kx;
            if (ix < 0 || ix >= p.w) continue;
            acc += x[iy * p.w + ix] * w[ky * 3 + kx];
          }
        }
        y[oy * p.ow + ox] = gemm_activate(p.act, acc + b, p.alpha, p.beta);
      }
  }
}

}  // namespace ds
