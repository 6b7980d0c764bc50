// Dense layer with CSR weights: one dot product per (image, output) over the row's nonzeros only,
// gathering the input at their columns. Four partial sums hide the add latency; the work is the
// nonzero count, so at the densities pruning leaves in FC layers (5-10%) it streams far fewer bytes
// than the dense weight.
#include "kernels/ref/activation.h"
#include "kernels/sparse.h"

namespace ds {

CsrWeights csr_from_dense(const float* w, int64_t rows, int64_t cols) {
  CsrWeights s;
  s.rows = rows;
  s.cols = cols;
  s.row_start.reserve(size_t(rows + 1));
  s.row_start.push_back(0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const float v = w[r * cols + c];
      if (v != 0.0f) {
        s.col.push_back(int32_t(c));
        s.values.push_back(v);
      }
    }
    s.row_start.push_back(int32_t(s.values.size()));
  }
  return s;
}

void ds_f32_spmm__scalar(const DenseParams& p, const float* x, const CsrWeights& w, const float* bias, float* y) {
  const int32_t* col = w.col.data();
  const float* val = w.values.data();
  for (int64_t b = 0; b < p.n; ++b) {
    const float* xb = x + b * p.k;
    float* yb = y + b * p.m;
    for (int64_t r = 0; r < p.m; ++r) {
      int32_t j = w.row_start[size_t(r)];
      const int32_t end = w.row_start[size_t(r) + 1];
      float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
      for (; j + 4 <= end; j += 4) {
        s0 += val[j] * xb[col[j]];
        s1 += val[j + 1] * xb[col[j + 1]];
        s2 += val[j + 2] * xb[col[j + 2]];
        s3 += val[j + 3] * xb[col[j + 3]];
      }
      for (; j < end; ++j) s0 += val[j] * xb[col[j]];
      const float acc = (bias ? bias[r] : 0.0f) + ((s0 + s1) + (s2 + s3));
      yb[r] = ref_activate(p.act, acc);
    }
  }
}

}  // namespace ds
