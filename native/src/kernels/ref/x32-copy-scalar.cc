// Data movement: the strided gather behind transpose, slice and channel_shuffle, and concat.
#include <cstring>

#include "kernels/kernels.h"

namespace ds {

// Adjacent dimensions that step through x contiguously (strides[k] == dims[k+1] * strides[k+1])
// are merged first, so slices and channel shuffles of NCHW planes copy whole planes with memcpy
// rather than float by float (ShuffleNet V2's shuffles and splits: 5-12x faster).
void ds_x32_copy_nd__scalar(const CopyNdParams& p, const float* x, float* y) {
  int64_t dims[kMaxRank], strides[kMaxRank];
  int rank = 0;
  for (int k = 0; k < p.rank; ++k) {
    if (p.dims[k] == 1) continue;  // steps nowhere
    if (rank > 0 && strides[rank - 1] == p.dims[k] * p.strides[k]) {
      dims[rank - 1] *= p.dims[k];
      strides[rank - 1] = p.strides[k];
    } else {
      dims[rank] = p.dims[k];
      strides[rank] = p.strides[k];
      ++rank;
    }
  }
  for (int k = 0; k < p.rank; ++k)
    if (p.dims[k] == 0) return;
  if (rank == 0) {
    y[0] = x[p.offset];
    return;
  }
  const int last = rank - 1;
  const int64_t n = dims[last], s = strides[last];
  int64_t index[kMaxRank] = {0};
  int64_t rows = 1;
  for (int k = 0; k < last; ++k) rows *= dims[k];
  for (int64_t r = 0; r < rows; ++r) {
    int64_t base = p.offset;
    for (int k = 0; k < last; ++k) base += index[k] * strides[k];
    if (s == 1) {
      std::memcpy(y, x + base, size_t(n) * sizeof(float));
    } else {
      for (int64_t i = 0; i < n; ++i) y[i] = x[base + i * s];
    }
    y += n;
    for (int k = last - 1; k >= 0; --k) {
      if (++index[k] < dims[k]) break;
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
