// The F(4x4, 3x3) tile transforms written once over L lanes (one tile per lane). The scalar level
// runs them with L = 1 and is the oracle of test_winograd.cc; the AVX2 and AVX-512 levels have
// their own intrinsics versions (x86/f32-winograd-*.cc, docs/kernels.md "Winograd transforms") and
// include this header only for the shared declarations.
//
//   B^T = [4  0 -5  0  1  0]    A^T = [1  1  1  1  1  0]
//         [0 -4 -4  1  1  0]          [0  1 -1  2 -2  0]
//         [0  4 -4 -1  1  0]          [0  1  1  4  4  0]
//         [0 -2 -1  2  1  0]          [0  1 -1  8 -8  1]
//         [0  2 -1 -2  1  0]
//         [0  4  0 -5  0  1]
#pragma once

#include <cstdint>

#include "kernels/gemm.h"
#include "kernels/winograd.h"

namespace ds {
namespace winograd {

// t = B^T d for one column of 6 lane vectors.
template <int L>
inline void input_1d(const float (*d)[L], float (*t)[L]) {
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
inline void output_1d(const float (*m)[L], float (*o)[L]) {
  for (int k = 0; k < L; ++k) {
    const float a = m[1][k] + m[2][k], b = m[1][k] - m[2][k];
    const float c = m[3][k] + m[4][k], d = m[3][k] - m[4][k];
    o[0][k] = m[0][k] + a + c;
    o[1][k] = b + 2.0f * d;
    o[2][k] = a + 4.0f * c;
    o[3][k] = b + 8.0f * d + m[5][k];
  }
}

template <int L>
void input(const float* x, int64_t x_stride, int64_t count, float* v, int64_t v_stride) {
  float rows[6][6][L];  // rows[i] = B^T applied along x to input row i: rows[i][b][lane]
  for (int i = 0; i < 6; ++i) {
    const float* r = x + i * x_stride;
    float d[6][L];
    for (int j = 0; j < 6; ++j)
      for (int k = 0; k < L; ++k) d[j][k] = r[4 * k + j];
    input_1d<L>(d, rows[i]);
  }
  for (int b = 0; b < 6; ++b) {
    float col[6][L], t[6][L];
    for (int i = 0; i < 6; ++i)
      for (int k = 0; k < L; ++k) col[i][k] = rows[i][b][k];
    input_1d<L>(col, t);
    for (int a = 0; a < 6; ++a) {
      float* dst = v + (a * 6 + b) * v_stride;
      if (count == L) {
        for (int k = 0; k < L; ++k) dst[k] = t[a][k];
      } else {
        for (int64_t k = 0; k < count; ++k) dst[k] = t[a][k];
      }
    }
  }
}

template <int L>
void output(const float* m, int64_t m_stride, int64_t count, const WinogradOutput& o, float* y, int64_t y_stride) {
  float s[4][6][L];  // s[r][b] = sum over a of A^T[r][a] M[a][b]
  for (int b = 0; b < 6; ++b) {
    float col[6][L], t[4][L];
    for (int a = 0; a < 6; ++a)
      for (int k = 0; k < L; ++k) col[a][k] = m[(a * 6 + b) * m_stride + k];
    output_1d<L>(col, t);
    for (int r = 0; r < 4; ++r)
      for (int k = 0; k < L; ++k) s[r][b][k] = t[r][k];
  }
  float patch[4][4 * L];  // the output rows, tiles interleaved: patch[r][4 * lane + c]
  for (int r = 0; r < 4; ++r) {
    float t[4][L];
    output_1d<L>(s[r], t);
    for (int k = 0; k < L; ++k)
      for (int c = 0; c < 4; ++c) patch[r][4 * k + c] = t[c][k] + o.bias;
  }
  const int64_t cols = o.cols < 4 * count ? o.cols : 4 * count;
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

}  // namespace winograd
}  // namespace ds
