#include "kernels/kernels.h"

namespace ds {
namespace {

// The input index that output index `o` of one axis reads, or -1 for the constant.
int64_t source_index(int64_t o, int64_t begin, int64_t size, int32_t mode) {
  int64_t i = o - begin;
  if (i >= 0 && i < size) return i;
  switch (mode) {
    case kPadReflect:  // mirror without repeating the edge: -1 -> 1, size -> size - 2
      return i < 0 ? -i : 2 * (size - 1) - i;
    case kPadEdge:
      return i < 0 ? 0 : size - 1;
    default:
      return -1;
  }
}

}  // namespace

// One output element at a time: each axis maps its output index to an input index on its own.
void ds_f32_pad__scalar(const PadParams& p, const float* x, float* y) {
  int64_t in_strides[kMaxRank];
  int64_t total = 1;
  for (int k = p.rank - 1; k >= 0; --k) {
    in_strides[k] = k == p.rank - 1 ? 1 : in_strides[k + 1] * p.in_dims[k + 1];
    total *= p.dims[k];
  }
  int64_t index[kMaxRank] = {0};
  for (int64_t e = 0; e < total; ++e) {
    int64_t src = 0;
    bool inside = true;
    for (int k = 0; k < p.rank && inside; ++k) {
      const int64_t i = source_index(index[k], p.begin[k], p.in_dims[k], p.mode);
      if (i < 0) inside = false;
      else src += i * in_strides[k];
    }
    y[e] = inside ? x[src] : p.value;
    for (int k = p.rank - 1; k >= 0; --k) {
      if (++index[k] < p.dims[k]) break;
      index[k] = 0;
    }
  }
}

}  // namespace ds
