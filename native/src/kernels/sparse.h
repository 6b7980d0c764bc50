// Sparse (CSR) weights for dense layers that pruning left mostly zero. Row r of the (M, K) weight
// keeps its nonzeros values[row_start[r] .. row_start[r+1]) at columns col[...] (ascending).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernels.h"

namespace ds {

struct CsrWeights {
  int64_t rows = 0, cols = 0;
  std::vector<int32_t> row_start;  // rows + 1 entries
  std::vector<int32_t> col;
  std::vector<float> values;
};

// The nonzeros of a dense row-major (rows, cols) matrix.
CsrWeights csr_from_dense(const float* w, int64_t rows, int64_t cols);

// y (n, m) = act(x (n, k) . W^T + bias), W in CSR (m rows of k); bias may be null.
void ds_f32_spmm__scalar(const DenseParams& p, const float* x, const CsrWeights& w, const float* bias, float* y);

}  // namespace ds
