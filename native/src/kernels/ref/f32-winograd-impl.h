// The Winograd tile transforms written once over L lanes (one tile per lane), for F(4x4, 3x3)
// (F43) and F(2x2, 3x3) (F23): each kind gives its tile, its window and its 1-D transforms, and
// input<Kind, L> / output<Kind, L> apply them along both axes. The scalar level runs them with
// L = 1 and is the oracle of test_winograd.cc; the x86 levels have their own intrinsics versions
// (x86/f32-winograd-*.cc, docs/kernels.md "Winograd transforms"; F(2x2, 3x3) one AVX2 version for
// both).
//
// F(4x4, 3x3):
//
//   B^T = [4  0 -5  0  1  0]    A^T = [1  1  1  1  1  0]
//         [0 -4 -4  1  1  0]          [0  1 -1  2 -2  0]
//         [0  4 -4 -1  1  0]          [0  1  1  4  4  0]
//         [0 -2 -1  2  1  0]          [0  1 -1  8 -8  1]
//         [0  2 -1 -2  1  0]
//         [0  4  0 -5  0  1]
//
// F(2x2, 3x3):
//
//   B^T = [1  0 -1  0]    A^T = [1  1  1  0]    G = [  1     0     0 ]
//         [0  1  1  0]          [0  1 -1 -1]        [ 1/2   1/2   1/2]
//         [0 -1  1  0]                              [ 1/2  -1/2   1/2]
//         [0  1  0 -1]                              [  0     0     1 ]
#pragma once

#include <cstdint>

#include "kernels/gemm.h"
#include "kernels/winograd.h"

namespace ds {
namespace winograd {
// Internal linkage: a translation unit that includes these (each kernel level compiles with its
// own -m flags) keeps its own copy; with external linkage the linker keeps one copy for all of them
// (AVX-512 instructions could then run at a lower level).
namespace {

struct F43 {
  static constexpr int kTile = 4, kWindow = 6;

  // t = B^T d for one column of 6 lane vectors.
  template <int L>
  static void input_1d(const float (*d)[L], float (*t)[L]) {
    for (int k = 0; k < L; ++k) {
      const float d0 = d[0][k], d1 = d[1][k], d2 = d[2][k], d3 = d[3][k], d4 = d[4][k], d5 = d[5][k];
      t[0][k] = 4.0f * d0 - 5.0f * d2 + d4;
      t[1][k] = d3 + d4 - 4.0f * (d1 + d2);
      t[2][k] = d4 - d3 + 4.0f * (d1 - d2);
      t[3][k] = d4 - d2 + 2.0f * (d3 - d1);
      t[4][k] = d4 - d2 - 2.0f * (d3 - d1);
      t[5][k] = 4.0f * d1 - 5.0f * d3 + d5;
    }
  }

  // o = A^T m for one column of 6 lane vectors.
  template <int L>
  static void output_1d(const float (*m)[L], float (*o)[L]) {
    for (int k = 0; k < L; ++k) {
      const float a = m[1][k] + m[2][k], b = m[1][k] - m[2][k];
      const float c = m[3][k] + m[4][k], d = m[3][k] - m[4][k];
      o[0][k] = m[0][k] + a + c;
      o[1][k] = b + 2.0f * d;
      o[2][k] = a + 4.0f * c;
      o[3][k] = b + 8.0f * d + m[5][k];
    }
  }
};

struct F23 {
  static constexpr int kTile = 2, kWindow = 4;

  // t = B^T d for one column of 4 lane vectors.
  template <int L>
  static void input_1d(const float (*d)[L], float (*t)[L]) {
    for (int k = 0; k < L; ++k) {
      t[0][k] = d[0][k] - d[2][k];
      t[1][k] = d[1][k] + d[2][k];
      t[2][k] = d[2][k] - d[1][k];
      t[3][k] = d[1][k] - d[3][k];
    }
  }

  // o = A^T m for one column of 4 lane vectors.
  template <int L>
  static void output_1d(const float (*m)[L], float (*o)[L]) {
    for (int k = 0; k < L; ++k) {
      o[0][k] = m[0][k] + m[1][k] + m[2][k];
      o[1][k] = m[1][k] - m[2][k] - m[3][k];
    }
  }
};

// V = B^T d B of `count` windows side by side (see WinogradInputFn).
template <class F, int L>
void input(const float* x, int64_t x_stride, int64_t count, float* v, int64_t v_stride) {
  constexpr int M = F::kTile, W = F::kWindow;
  float rows[W][W][L];  // rows[i] = B^T applied along x to input row i: rows[i][b][lane]
  for (int i = 0; i < W; ++i) {
    const float* r = x + i * x_stride;
    float d[W][L];
    for (int j = 0; j < W; ++j)
      for (int k = 0; k < L; ++k) d[j][k] = r[M * k + j];
    F::template input_1d<L>(d, rows[i]);
  }
  for (int b = 0; b < W; ++b) {
    float col[W][L], t[W][L];
    for (int i = 0; i < W; ++i)
      for (int k = 0; k < L; ++k) col[i][k] = rows[i][b][k];
    F::template input_1d<L>(col, t);
    for (int a = 0; a < W; ++a) {
      float* dst = v + (a * W + b) * v_stride;
      if (count == L) {
        for (int k = 0; k < L; ++k) dst[k] = t[a][k];
      } else {
        for (int64_t k = 0; k < count; ++k) dst[k] = t[a][k];
      }
    }
  }
}

// Stores an m x m*count output patch (tiles interleaved: patch[r][m * lane + c]) to y, clipped
// to o.rows x o.cols: + residual, then the activation.
template <int M, int L>
void store_patch(const float (*patch)[M * L], int64_t count, const WinogradOutput& o, float* y, int64_t y_stride) {
  const int64_t cols = o.cols < M * count ? o.cols : M * count;
  for (int64_t r = 0; r < o.rows; ++r) {
    float* yr = y + r * y_stride;
    const float* pr = patch[r];
    if (o.residual) {
      const float* res = o.residual + r * o.residual_stride;
      for (int64_t q = 0; q < cols; ++q) yr[q] = pr[q] + res[q];
      pr = yr;
    }
    if (o.act == 0) {
      for (int64_t q = 0; q < cols; ++q) yr[q] = pr[q];
    } else if (o.act == 1) {
      for (int64_t q = 0; q < cols; ++q) yr[q] = pr[q] > 0.0f ? pr[q] : 0.0f;
    } else {
      for (int64_t q = 0; q < cols; ++q) yr[q] = gemm_activate(o.act, pr[q], o.alpha, o.beta);
    }
  }
}

// y = A^T M A + bias (+ residual), activated, of `count` tiles (see WinogradOutputFn).
template <class F, int L>
void output(const float* m, int64_t m_stride, int64_t count, const WinogradOutput& o, float* y, int64_t y_stride) {
  constexpr int M = F::kTile, W = F::kWindow;
  float s[M][W][L];  // s[r][b] = sum over a of A^T[r][a] M[a][b]
  for (int b = 0; b < W; ++b) {
    float col[W][L], t[M][L];
    for (int a = 0; a < W; ++a)
      for (int k = 0; k < L; ++k) col[a][k] = m[(a * W + b) * m_stride + k];
    F::template output_1d<L>(col, t);
    for (int r = 0; r < M; ++r)
      for (int k = 0; k < L; ++k) s[r][b][k] = t[r][k];
  }
  float patch[M][M * L];  // the output rows, tiles interleaved: patch[r][M * lane + c]
  for (int r = 0; r < M; ++r) {
    float t[M][L];
    F::template output_1d<L>(s[r], t);
    for (int k = 0; k < L; ++k)
      for (int c = 0; c < M; ++c) patch[r][M * k + c] = t[c][k] + o.bias;
  }
  store_patch<M, L>(patch, count, o, y, y_stride);
}

}  // namespace
}  // namespace winograd
}  // namespace ds
