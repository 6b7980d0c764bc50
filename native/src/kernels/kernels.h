// Kernel signatures and the dispatch table. Kernels are pure functions on pointers: no allocation,
// no threads, no CPU-feature checks. Names follow ds_<dtype>_<kernel>[_<activation>]__<isa>.
// src/kernels/ref holds the scalar reference kernels, the oracle for any per-ISA kernel added
// later under src/kernels/x86 or src/kernels/arm.
#pragma once

#include <cstdint>

namespace ds {

// NCHW convolution. Pads are [top, left] here; bottom/right only shape the output size, which the
// op computes. Weight is (O, C/group, kh, kw); bias (O) may be null.
struct Conv2dParams {
  int64_t n, c, h, w;         // input
  int64_t o, oh, ow;          // output
  int64_t kh, kw;             // kernel
  int64_t stride_h, stride_w;
  int64_t pad_top, pad_left;
  int64_t dil_h, dil_w;
  int64_t group;
  bool relu;                  // fused ReLU epilogue
};

// y (n, m) = x (n, k) . w(m, k)^T + bias (m, may be null).
struct DenseParams {
  int64_t n, k, m;
  bool relu;
};

// NCHW pooling. pad_bottom/pad_right bound the window for count_include_pad (as in PyTorch).
struct Pool2dParams {
  int64_t n, c, h, w, oh, ow;
  int64_t kh, kw, stride_h, stride_w;
  int64_t pad_top, pad_left, pad_bottom, pad_right;
  bool count_include_pad;  // avgpool only
};

// Softmax over the middle dimension of an (outer, axis, inner) view.
struct SoftmaxParams {
  int64_t outer, axis, inner;
};

using Conv2dKernel = void (*)(const Conv2dParams& p, const float* x, const float* w, const float* bias,
                              float* y);
using DenseKernel = void (*)(const DenseParams& p, const float* x, const float* w, const float* bias,
                             float* y);
using Pool2dKernel = void (*)(const Pool2dParams& p, const float* x, float* y);
using ReluKernel = void (*)(int64_t n, const float* x, float* y);
using SoftmaxKernel = void (*)(const SoftmaxParams& p, const float* x, float* y);

// One implementation of each kernel, chosen once per session (src/core/dispatch.cc).
struct KernelTable {
  const char* isa;
  Conv2dKernel conv2d;
  DenseKernel dense;
  Pool2dKernel maxpool2d;
  Pool2dKernel avgpool2d;
  ReluKernel relu;
  SoftmaxKernel softmax;
};

// Scalar reference kernels (src/kernels/ref).
void ds_f32_conv2d__scalar(const Conv2dParams& p, const float* x, const float* w, const float* bias,
                           float* y);
void ds_f32_dense__scalar(const DenseParams& p, const float* x, const float* w, const float* bias,
                          float* y);
void ds_f32_maxpool2d__scalar(const Pool2dParams& p, const float* x, float* y);
void ds_f32_avgpool2d__scalar(const Pool2dParams& p, const float* x, float* y);
void ds_f32_relu__scalar(int64_t n, const float* x, float* y);
void ds_f32_softmax__scalar(const SoftmaxParams& p, const float* x, float* y);

}  // namespace ds
