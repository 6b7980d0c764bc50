// Depthwise 3x3 convolution of one NCHW channel plane: y[oy][ox] = act(bias + sum over ky, kx of
// w[ky*3+kx] * x[oy*stride - pad_top + ky][ox*stride - pad_left + kx]), taps in the padding count
// as zero. An op loops over images and channels and calls the kernel per plane.
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

using DwConv3x3Fn = void (*)(const DwConv3x3Params& p, const float* x, const float* w, float bias, float* y);

void ds_f32_dwconv3x3__scalar(const DwConv3x3Params& p, const float* x, const float* w, float bias, float* y);
void ds_f32_dwconv3x3__avx2(const DwConv3x3Params& p, const float* x, const float* w, float bias, float* y);
void ds_f32_dwconv3x3__avx512(const DwConv3x3Params& p, const float* x, const float* w, float bias, float* y);

}  // namespace ds
