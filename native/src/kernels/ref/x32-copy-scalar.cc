// Data movement: the strided gather behind transpose, slice and channel_shuffle, and concat.
#include <cstring>

#include "kernels/kernels.h"

namespace ds {

void ds_x32_copy_nd__scalar(const CopyNdParams& p, const float* x, float* y) {
  const int last = p.rank - 1;
  const int64_t n = p.dims[last], s = p.strides[last];
  int64_t index[kMaxRank] = {0};
  int64_t rows = 1;
  for (int k = 0; k < last; ++k) rows *= p.dims[k];
  for (int64_t r = 0; r < rows; ++r) {
    int64_t base = p.offset;
    for (int k = 0; k < last; ++k) base += index[k] * p.strides[k];
    for (int64_t i = 0; i < n; ++i) y[i] = x[base + i * s];
    y += n;
    for (int k = last - 1; k >= 0; --k) {
      if (++index[k] < p.dims[k]) break;
      index[k] = 0;
    }
  }
}

void ds_x32_concat__scalar(const ConcatParams& p, const float* const* xs, float* y) {
  for (int64_t o = 0; o < p.outer; ++o) {
    for (int32_t i = 0; i < p.count; ++i) {
      std::memcpy(y, xs[i] + o * p.sizes[i], size_t(p.sizes[i]) * sizeof(float));
      y += p.sizes[i];
    }
  }
}

}  // namespace ds
