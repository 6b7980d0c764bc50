// Broadcasting elementwise add, sub, mul, div: an odometer over the outer output axes, a strided
// loop over the last one.
#include "kernels/ref/activation.h"

namespace ds {
namespace {

template <typename Op>
void binary(const BinaryParams& p, const float* a, const float* b, float* y, Op op) {
  const int last = p.rank - 1;
  const int64_t n = p.dims[last], sa = p.a_strides[last], sb = p.b_strides[last];
  int64_t index[kMaxRank] = {0};
  int64_t rows = 1;
  for (int k = 0; k < last; ++k) rows *= p.dims[k];
  for (int64_t r = 0; r < rows; ++r) {
    int64_t ia = 0, ib = 0;
    for (int k = 0; k < last; ++k) ia += index[k] * p.a_strides[k], ib += index[k] * p.b_strides[k];
    for (int64_t i = 0; i < n; ++i) y[i] = ref_activate(p.act, op(a[ia + i * sa], b[ib + i * sb]));
    y += n;
    for (int k = last - 1; k >= 0; --k) {  // next row
      if (++index[k] < p.dims[k]) break;
      index[k] = 0;
    }
  }
}

}  // namespace

void ds_f32_vadd__scalar(const BinaryParams& p, const float* a, const float* b, float* y) {
  binary(p, a, b, y, [](float u, float v) { return u + v; });
}
void ds_f32_vsub__scalar(const BinaryParams& p, const float* a, const float* b, float* y) {
  binary(p, a, b, y, [](float u, float v) { return u - v; });
}
void ds_f32_vmul__scalar(const BinaryParams& p, const float* a, const float* b, float* y) {
  binary(p, a, b, y, [](float u, float v) { return u * v; });
}
void ds_f32_vdiv__scalar(const BinaryParams& p, const float* a, const float* b, float* y) {
  binary(p, a, b, y, [](float u, float v) { return u / v; });
}

}  // namespace ds
