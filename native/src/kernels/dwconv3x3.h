// Depthwise 3x3 convolution of NCHW channel planes: y[oy][ox] = act(bias + sum over ky, kx of
// w[ky*3+kx] * x[oy*stride - pad_top + ky][ox*stride - pad_left + kx]), taps in the padding count
// as zero. A call runs `planes` planes (plane i: input x + i*x_plane, weights w + 9*i, bias[i],
// output y + i*y_plane), so per-shape setup (load masks) is paid once per call. Plane strides
// larger than the plane let a call run a band of rows of every channel (conv2d's fused
// depthwise -> 1x1).
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
  int64_t x_plane = 0, y_plane = 0;  // floats from one plane to the next; 0: h*w and oh*ow
  int64_t in_plane() const { return x_plane ? x_plane : h * w; }
  int64_t out_plane() const { return y_plane ? y_plane : oh * ow; }
};

// The call that computes output rows r0 .. r1 - 1 of p's planes: its input starts at the first
// row those outputs read (the rows above count as padding only at the plane's top), its planes
// keep p's strides. The band starts at x + *x_offset and y + *y_offset of each plane. Every output
// goes through the same operations as in the whole-plane call.
inline DwConv3x3Params dwconv3x3_rows(const DwConv3x3Params& p, int64_t r0, int64_t r1, int64_t* x_offset,
                                      int64_t* y_offset) {
  DwConv3x3Params q = p;
  const int64_t first = r0 * p.stride - p.pad_top, end = (r1 - 1) * p.stride - p.pad_top + 3;
  const int64_t start = first > 0 ? first : 0;
  q.h = (end < p.h ? end : p.h) - start;
  q.oh = r1 - r0;
  q.pad_top = start - first;
  q.x_plane = p.in_plane(), q.y_plane = p.out_plane();
  *x_offset = start * p.w;
  *y_offset = r0 * p.ow;
  return q;
}

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
