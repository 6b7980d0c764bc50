// Kernel signatures and the dispatch table. Kernels are pure functions on pointers: no allocation,
// no threads, no CPU-feature checks. Names follow ds_<dtype>_<kernel>[_<activation>]__<isa>; `x32`
// marks pure data movement of 32-bit elements.
// src/kernels/ref holds the scalar reference kernels, the oracle for any per-ISA kernel added
// later under src/kernels/x86 or src/kernels/arm.
#pragma once

#include <cstdint>

#include "kernels/dwconv3x3.h"
#include "kernels/gemm.h"
#include "kernels/winograd.h"

namespace ds {

// Largest rank of any tensor (docs/format.md).
constexpr int kMaxRank = 8;

// The activation codes of docs/format.md ("Fused activation epilogue").
enum ActivationKind : int32_t {
  kActNone = 0,
  kActRelu = 1,
  kActClip = 2,         // min(max(x, alpha), beta)
  kActLeakyRelu = 3,    // x >= 0 ? x : alpha * x
  kActSigmoid = 4,
  kActHardSigmoid = 5,  // max(0, min(1, alpha * x + beta))
  kActHardSwish = 6,    // x * max(0, min(1, x / 6 + 1/2))
  kActTanh = 7,
};
constexpr int32_t kActLast = kActTanh;

struct Activation {
  int32_t kind = kActNone;
  float alpha = 0.0f, beta = 0.0f;
};

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
  Activation act;             // fused epilogue
};

// NCHW transposed convolution: weight (C, O/group, kh, kw); bias (O) may be null. Output pixel
// (oy, ox) gathers input pixel (iy, ix) through tap (ky, kx) when oy + pad_top = iy*stride + ky*dil.
struct ConvTranspose2dParams {
  int64_t n, c, h, w;         // input
  int64_t o, oh, ow;          // output
  int64_t kh, kw;
  int64_t stride_h, stride_w;
  int64_t pad_top, pad_left;
  int64_t dil_h, dil_w;
  int64_t group;
  Activation act;
};

// y (n, m) = x (n, k) . w(m, k)^T + bias (m, may be null).
struct DenseParams {
  int64_t n, k, m;
  Activation act;
};

// NCHW pooling. pad_bottom/pad_right bound the window for count_include_pad (as in PyTorch).
struct Pool2dParams {
  int64_t n, c, h, w, oh, ow;
  int64_t kh, kw, stride_h, stride_w;
  int64_t pad_top, pad_left, pad_bottom, pad_right;
  int64_t dil_h = 1, dil_w = 1;  // maxpool only
  bool count_include_pad;        // avgpool only
};

// Softmax over the middle dimension of an (outer, axis, inner) view.
struct SoftmaxParams {
  int64_t outer, axis, inner;
};

// Per-channel batch normalization on an (n, c, inner) view.
struct BatchNormParams {
  int64_t n, c, inner;
  float epsilon;
};

// Elementwise a (op) b over `rank` output dims; a_strides/b_strides are element strides of the
// inputs in the output's index space, 0 along a broadcast axis. rank >= 1 (a scalar is [1]).
struct BinaryParams {
  int32_t rank;
  int64_t dims[kMaxRank];
  int64_t a_strides[kMaxRank];
  int64_t b_strides[kMaxRank];
  Activation act;  // add only; none for the others
};

// A strided gather: y, in C order over `dims`, takes x[offset + sum(index[k] * strides[k])].
// Transpose, slice and channel_shuffle are all this copy.
struct CopyNdParams {
  int32_t rank;
  int64_t dims[kMaxRank];
  int64_t strides[kMaxRank];
  int64_t offset;
};

// The same copy with size-1 dimensions dropped and adjacent dimensions that step through x
// contiguously (strides[k] == dims[k+1] * strides[k+1]) merged into one; rank >= 1 (a zero-size
// copy keeps one dimension of size 0).
CopyNdParams merge_copy_dims(const CopyNdParams& p);

// Concatenation of `count` inputs viewed as (outer, axis_i * inner): input i contributes a block
// of sizes[i] = axis_i * inner elements to each of the `outer` rows of y.
struct ConcatParams {
  int64_t outer;
  int32_t count;
  const int64_t* sizes;  // count entries
};

enum PadMode : int32_t { kPadConstant = 0, kPadReflect = 1, kPadEdge = 2 };

// y (dims) from x (in_dims) with `begin[k]` elements added before axis k (the rest after).
// Reflect requires begin/end < in_dims (the op checks).
struct PadParams {
  int32_t rank;
  int64_t in_dims[kMaxRank];
  int64_t dims[kMaxRank];
  int64_t begin[kMaxRank];
  int32_t mode;
  float value;
};

// Across-channel local response normalization (ONNX LRN) on NCHW viewed as (n, c, inner).
struct LrnParams {
  int64_t n, c, inner;
  int64_t size;
  float alpha, beta, bias;
};

enum ResizeCoord : int32_t {
  kCoordHalfPixel = 0,
  kCoordPytorchHalfPixel = 1,
  kCoordAlignCorners = 2,
  kCoordAsymmetric = 3,
};
enum ResizeNearest : int32_t {
  kNearestRoundPreferFloor = 0,
  kNearestRoundPreferCeil = 1,
  kNearestFloor = 2,
  kNearestCeil = 3,
};

// ONNX Resize of the last two axes of NCHW.
struct ResizeParams {
  int64_t planes, h, w, oh, ow;
  int32_t coord;    // ResizeCoord
  int32_t nearest;  // ResizeNearest (nearest only)
};

using Conv2dKernel = void (*)(const Conv2dParams& p, const float* x, const float* w, const float* bias,
                              float* y);
using ConvTranspose2dKernel = void (*)(const ConvTranspose2dParams& p, const float* x, const float* w,
                                       const float* bias, float* y);
using DenseKernel = void (*)(const DenseParams& p, const float* x, const float* w, const float* bias,
                             float* y);
using Pool2dKernel = void (*)(const Pool2dParams& p, const float* x, float* y);
using GlobalPoolKernel = void (*)(int64_t planes, int64_t size, const float* x, float* y);
using ReluKernel = void (*)(int64_t n, const float* x, float* y);
using ActivationKernel = void (*)(int64_t n, const Activation& act, const float* x, float* y);
using SoftmaxKernel = void (*)(const SoftmaxParams& p, const float* x, float* y);
using BatchNormKernel = void (*)(const BatchNormParams& p, const float* x, const float* scale,
                                 const float* bias, const float* mean, const float* var, float* y);
using BinaryKernel = void (*)(const BinaryParams& p, const float* a, const float* b, float* y);
using CopyNdKernel = void (*)(const CopyNdParams& p, const float* x, float* y);
using ConcatKernel = void (*)(const ConcatParams& p, const float* const* xs, float* y);
using PadKernel = void (*)(const PadParams& p, const float* x, float* y);
using LrnKernel = void (*)(const LrnParams& p, const float* x, float* y);
using ResizeKernel = void (*)(const ResizeParams& p, const float* x, float* y);

// Dense at batch 1: y[cols] = act(x[k] . B + bias), B packed as the level's GEMM B operand
// (gemm_pack_b: panels of GemmKernels::nr columns); bias may be null.
using GemvKernel = void (*)(int64_t k, int64_t cols, const float* b_packed, const float* x, const float* bias,
                           const Activation& act, float* y);

// One implementation of each kernel, chosen once per session (src/core/dispatch.cc).
struct KernelTable {
  const char* isa;
  Conv2dKernel conv2d;
  DenseKernel dense;
  Pool2dKernel maxpool2d;
  Pool2dKernel avgpool2d;
  ReluKernel relu;
  SoftmaxKernel softmax;
  BatchNormKernel batchnorm;
  ActivationKernel activation;
  BinaryKernel add, sub, mul, div;
  ConcatKernel concat;
  ConvTranspose2dKernel conv_transpose2d;
  LrnKernel lrn;
  CopyNdKernel copy_nd;  // transpose, slice, channel_shuffle
  PadKernel pad;
  ResizeKernel resize_nearest;
  ResizeKernel resize_linear;
  GlobalPoolKernel global_avgpool;
  GlobalPoolKernel global_maxpool;
  // Per-ISA kernels (src/kernels/x86); set by src/core/dispatch.cc for every level.
  const GemmKernels* gemm = nullptr;
  DwConv3x3Fn dwconv3x3 = nullptr;  // one NCHW plane, stride 1 or 2 (kernels/dwconv3x3.h)
  GemvKernel gemv = nullptr;  // over gemm's packed B; null: dense runs the GEMM
  const WinogradKernels* winograd43 = nullptr;  // F(4x4, 3x3) tile transforms (kernels/winograd.h)
  const WinogradKernels* winograd23 = nullptr;  // F(2x2, 3x3) tile transforms
  const struct QKernels* q = nullptr;  // int8 kernels of the level (kernels/qu8.h)
  const struct Q16Kernels* q16 = nullptr;  // i16-input qconv2d/qdense GEMM (kernels/qi16.h); null: scalar
};

// Scalar reference kernels (src/kernels/ref).
void ds_f32_conv2d__scalar(const Conv2dParams& p, const float* x, const float* w, const float* bias,
                           float* y);
void ds_f32_conv_transpose2d__scalar(const ConvTranspose2dParams& p, const float* x, const float* w,
                                     const float* bias, float* y);
void ds_f32_dense__scalar(const DenseParams& p, const float* x, const float* w, const float* bias,
                          float* y);
void ds_f32_maxpool2d__scalar(const Pool2dParams& p, const float* x, float* y);
// Per-ISA (src/kernels/x86/f32-maxpool2d-impl.h): 2x2 s2, 3x3 s2 and 3x3 s3 by bands of output rows
// in registers, every other shape by a two-pass row-buffer kernel.
void ds_f32_maxpool2d__avx2(const Pool2dParams& p, const float* x, float* y);
void ds_f32_maxpool2d__avx512(const Pool2dParams& p, const float* x, float* y);
void ds_f32_avgpool2d__scalar(const Pool2dParams& p, const float* x, float* y);
void ds_f32_global_avgpool__scalar(int64_t planes, int64_t size, const float* x, float* y);
void ds_f32_global_avgpool__avx2(int64_t planes, int64_t size, const float* x, float* y);
void ds_f32_global_avgpool__avx512(int64_t planes, int64_t size, const float* x, float* y);
void ds_f32_softmax__avx512(const SoftmaxParams& p, const float* x, float* y);
void ds_f32_global_maxpool__scalar(int64_t planes, int64_t size, const float* x, float* y);
void ds_f32_relu__scalar(int64_t n, const float* x, float* y);
void ds_f32_activation__scalar(int64_t n, const Activation& act, const float* x, float* y);
void ds_f32_softmax__scalar(const SoftmaxParams& p, const float* x, float* y);
void ds_f32_batchnorm__scalar(const BatchNormParams& p, const float* x, const float* scale,
                              const float* bias, const float* mean, const float* var, float* y);
void ds_f32_vadd__scalar(const BinaryParams& p, const float* a, const float* b, float* y);
void ds_f32_vsub__scalar(const BinaryParams& p, const float* a, const float* b, float* y);
void ds_f32_vmul__scalar(const BinaryParams& p, const float* a, const float* b, float* y);
void ds_f32_vdiv__scalar(const BinaryParams& p, const float* a, const float* b, float* y);
// Per-ISA (src/kernels/x86/f32-vbinary-*, f32-activation-*): bit-identical to the scalar ones.
void ds_f32_vadd__avx2(const BinaryParams& p, const float* a, const float* b, float* y);
void ds_f32_vsub__avx2(const BinaryParams& p, const float* a, const float* b, float* y);
void ds_f32_vmul__avx2(const BinaryParams& p, const float* a, const float* b, float* y);
void ds_f32_vdiv__avx2(const BinaryParams& p, const float* a, const float* b, float* y);
void ds_f32_vadd__avx512(const BinaryParams& p, const float* a, const float* b, float* y);
void ds_f32_vsub__avx512(const BinaryParams& p, const float* a, const float* b, float* y);
void ds_f32_vmul__avx512(const BinaryParams& p, const float* a, const float* b, float* y);
void ds_f32_vdiv__avx512(const BinaryParams& p, const float* a, const float* b, float* y);
void ds_f32_relu__avx2(int64_t n, const float* x, float* y);
void ds_f32_relu__avx512(int64_t n, const float* x, float* y);
void ds_f32_activation__avx2(int64_t n, const Activation& act, const float* x, float* y);
void ds_f32_activation__avx512(int64_t n, const Activation& act, const float* x, float* y);
void ds_f32_gemv__avx2(int64_t k, int64_t cols, const float* b_packed, const float* x, const float* bias,
                       const Activation& act, float* y);
void ds_f32_gemv__avx512(int64_t k, int64_t cols, const float* b_packed, const float* x, const float* bias,
                         const Activation& act, float* y);
void ds_x32_copy_nd__scalar(const CopyNdParams& p, const float* x, float* y);
void ds_x32_concat__scalar(const ConcatParams& p, const float* const* xs, float* y);
void ds_f32_pad__scalar(const PadParams& p, const float* x, float* y);
void ds_f32_lrn__scalar(const LrnParams& p, const float* x, float* y);
void ds_f32_resize_nearest__scalar(const ResizeParams& p, const float* x, float* y);
void ds_f32_resize_linear__scalar(const ResizeParams& p, const float* x, float* y);

}  // namespace ds
