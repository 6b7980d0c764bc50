// Depthwise 3x3 convolution of NCHW channel planes: y[oy][ox] = act(bias + sum over ky, kx of
// w[ky*3+kx] * x[oy*stride - pad_top + ky][ox*stride - pad_left + kx]), taps in the padding count
// as zero. A call runs `planes` consecutive planes (plane i: input x + i*h*w, weights w + 9*i,
// bias[i], output y + i*oh*ow), so per-shape setup (load masks) is paid once per call.
#pragma once

#include <cstdint>

namespace ds {

struct DwConv3x3Params {
  int64_t h, w;          // input plane
  int64_t oh, ow;        // output plane
  int64_t stride;        // 1 or 2 (both axes)
  int64_t pad_top, pad_left;
  int32_t act = 0;       // activation code 0-7 (docs/format.md)
  float alpha = 0.0f, beta = 0.0f;
};

// bias: one per plane, or null for none.
using DwConv3x3Fn = void (*)(const DwConv3x3Params& p, int64_t planes, const float* x, const float* w,
                             const float* bias, float* y);

void ds_f32_dwconv3x3__scalar(const DwConv3x3Params& p, int64_t planes, const float* x, const float* w,
                              const float* bias, float* y);
void ds_f32_dwconv3x3__avx2(const DwConv3x3Params& p, int64_t planes, const float* x, const float* w,
                            const float* bias, float* y);
void ds_f32_dwconv3x3__avx512(const DwConv3x3Params& p, int64_t planes, const float* x, const float* w,
                              const float* bias, float* y);

}  // namespace ds
