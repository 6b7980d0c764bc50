// Winograd F(m x m, 3x3) transforms for 3x3 stride-1 convolutions (docs/kernels.md, "conv2d"),
// m = 4 (F(4x4, 3x3)) or 2 (F(2x2, 3x3)). An m x m output tile comes from an (m + 2) x (m + 2)
// input window d and a 3x3 filter g as
//   y = A^T [(G g G^T) .* (B^T d B)] A
// summed over input channels; the elementwise product over channels is (m + 2)^2 GEMMs (36 or
// 16), one per position xi of the transformed tile. The kernels here transform `count` tiles that
// sit side by side in one tile row, one tile per vector lane.
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
  int64_t rows = 4, cols = 4;       // rows <= m and cols <= m * count of the patch are written
};

// Input transform: tile k's (m + 2) x (m + 2) window starts at x + m k (rows x_stride apart);
// V = B^T d B goes to v[xi * v_stride + k] for xi < (m + 2)^2 (v_stride >= lanes). Reads up to
// m * lanes + 2 floats of each of the m + 2 rows whatever `count` (<= lanes) is: the caller keeps
// them readable.
using WinogradInputFn = void (*)(const float* x, int64_t x_stride, int64_t count, float* v, int64_t v_stride);
// Output transform: M of tile k at m[xi * m_stride + k] (reads `lanes` values of each xi row);
// writes the m x m*count patch y (row stride y_stride), clipped to o.rows x o.cols.
using WinogradOutputFn = void (*)(const float* m, int64_t m_stride, int64_t count, const WinogradOutput& o,
                                  float* y, int64_t y_stride);
// Filter transform U = G g G^T of one 3x3 filter into u[xi * u_stride], in double (once per session).
using WinogradFilterFn = void (*)(const float* g, float* u, int64_t u_stride);

struct WinogradKernels {
  const char* name;
  int32_t tile;   // m, the output tile's side
  int32_t lanes;  // tiles per call, at most
  WinogradInputFn input;
  WinogradOutputFn output;
  WinogradFilterFn filter;
  int32_t window() const { return tile + 2; }
  int32_t positions() const { return window() * window(); }  // the GEMMs per tile block
};

void ds_f32_winograd43_filter(const float* g, float* u, int64_t u_stride);
void ds_f32_winograd23_filter(const float* g, float* u, int64_t u_stride);

extern const WinogradKernels ds_f32_winograd43_kernels__scalar;
extern const WinogradKernels ds_f32_winograd43_kernels__avx2;
extern const WinogradKernels ds_f32_winograd43_kernels__avx512;
extern const WinogradKernels ds_f32_winograd23_kernels__scalar;
extern const WinogradKernels ds_f32_winograd23_kernels__avx2;

}  // namespace ds
