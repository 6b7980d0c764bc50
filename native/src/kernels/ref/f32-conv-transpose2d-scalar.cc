#include "kernels/ref/activation.h"

namespace ds {

// Gather form: output pixel (oy, ox) of channel oc sums, over the group's input channels and the
// taps (ky, kx), x[ic][iy][ix] * w[ic][oc % og][ky][kx] where oy + pad_top = iy*stride + ky*dil.
void ds_f32_conv_transpose2d__scalar(const ConvTranspose2dParams& p, const float* x, const float* w,
                                     const float* bias, float* y) {
  const int64_t cg = p.c / p.group;  // input channels per group
  const int64_t og = p.o / p.group;  // output channels per group
  for (int64_t b = 0; b < p.n; ++b) {
    for (int64_t oc = 0; oc < p.o; ++oc) {
      const int64_t g = oc / og, ocl = oc % og;
      float* yo = y + (b * p.o + oc) * p.oh * p.ow;
      for (int64_t oy = 0; oy < p.oh; ++oy) {
        for (int64_t ox = 0; ox < p.ow; ++ox) {
          float acc = bias ? bias[oc] : 0.0f;
          for (int64_t icl = 0; icl < cg; ++icl) {
            const int64_t ic = g * cg + icl;
            const float* xc = x + (b * p.c + ic) * p.h * p.w;
            const float* wc = w + (ic * og + ocl) * p.kh * p.kw;
            for (int64_t ky = 0; ky < p.kh; ++ky) {
              const int64_t ty = oy + p.pad_top - ky * p.dil_h;
              if (ty < 0 || ty % p.stride_h != 0 || ty / p.stride_h >= p.h) continue;
              const int64_t iy = ty / p.stride_h;
              for (int64_t kx = 0; kx < p.kw; ++kx) {
                const int64_t tx = ox + p.pad_left - kx * p.dil_w;
                if (tx < 0 || tx % p.stride_w != 0 || tx / p.stride_w >= p.w) continue;
                acc += xc[iy * p.w + tx / p.stride_w] * wc[ky * p.kw + kx];
              }
            }
          }
          yo[oy * p.ow + ox] = ref_activate(p.act, acc);
        }
      }
    }
  }
}

}  // namespace ds
