// Winograd F(4x4, 3x3) transforms for 3x3 stride-1 convolutions (docs/kernels.md, "conv2d").
// A 4x4 output tile comes from a 6x6 input window d and a 3x3 filter g as
//   y = A^T [(G g G^T) .* (B^T d B)] A
// summed over input channels; the elementwise product over channels is 36 GEMMs, one per
// position xi of the 6x6 transformed tile. The kernels here transform `count` tiles that sit side
// by side in one tile row, one tile per vector lane.
#pragma once

#include <cstdint>

namespace ds {

// What the output transform adds and applies per output element: act(y + bias + residual).
struct WinogradOutput {
  float bias = 0.0f;
  const float* residual = nullptr;  // same layout as y (row stride residual_stride), or null
  int64_t residual_stride = 0;
  int32_t act = 0;                  // activation code 0-7 (docs/format.md)
  float alpha = 0.0f, beta = 0.0f;
  int64_t rows = 4, cols = 4;       // rows <= 4 and cols <= 4 * count of the patch are written
};

// Input transform: tile k's 6x6 window starts at x + 4k (rows x_stride apart); V = B^T d B goes to
// v[xi * v_stride + k] for xi = 0..35 (v_stride >= lanes). Reads up to 4 * lanes + 2 floats of each
// of the 6 rows whatever `count` (<= lanes) is: the caller keeps them readable.
using WinogradInputFn = void (*)(const float* x, int64_t x_stride, int64_t count, float* v, int64_t v_stride);
// Output transform: M of tile k at m[xi * m_stride + k] (reads `lanes` values of each xi row);
// writes the 4 x 4*count patch y (row stride y_stride), clipped to o.rows x o.cols.
using WinogradOutputFn = void (*)(const float* m, int64_t m_stride, int64_t count, const WinogradOutput& o,
                                  float* y, int64_t y_stride);

struct WinogradKernels {
  const char* name;
  int32_t lanes;  // tiles per call, at most
  WinogradInputFn input;
  WinogradOutputFn output;
};

// Filter transform U = G g G^T of one 3x3 filter into u[xi * u_stride], in double (once per session).
void ds_f32_winograd43_filter(const float* g, float* u, int64_t u_stride);

extern const WinogradKernels ds_f32_winograd43_kernels__scalar;
extern const WinogradKernels ds_f32_winograd43_kernels__avx2;
extern const WinogradKernels ds_f32_winograd43_kernels__avx512;

}  // namespace ds
