#include "kernels/ref/activation.h"
#include "kernels/ref/window_taps.h"

namespace ds {

// Direct convolution: one output element at a time, skipping taps that fall in the padding.
void ds_f32_conv2d__scalar(const Conv2dParams& p, const float* x, const float* w, const float* bias,
                           float* y) {
  const int64_t cg = p.c / p.group;  // input channels per group
  const int64_t og = p.o / p.group;  // output channels per group
  for (int64_t b = 0; b < p.n; ++b) {
    for (int64_t oc = 0; oc < p.o; ++oc) {
      const int64_t g = oc / og;
      const float* wo = w + oc * cg * p.kh * p.kw;
      float* yo = y + (b * p.o + oc) * p.oh * p.ow;
      for (int64_t oy = 0; oy < p.oh; ++oy) {
        for (int64_t ox = 0; ox < p.ow; ++ox) {
          float acc = bias ? bias[oc] : 0.0f;
          for (int64_t ic = 0; ic < cg; ++ic) {
            const float* xc = x + (b * p.c + g * cg + ic) * p.h * p.w;
            const float* wc = wo + ic * p.kh * p.kw;
            for_each_tap_in_input(p, oy, ox,
                                  [&](int64_t ky, int64_t kx, int64_t i) { acc += xc[i] * wc[ky * p.kw + kx]; });
          }
          yo[oy * p.ow + ox] = ref_activate(p.act, acc);
        }
      }
    }
  }
}

}  // namespace ds
