#include "kernels/ref/activation.h"

namespace ds {

void ds_f32_dense__scalar(const DenseParams& p, const float* x, const float* w, const float* bias,
                          float* y) {
  for (int64_t b = 0; b < p.n; ++b) {
    const float* xb = x + b * p.k;
    for (int64_t j = 0; j < p.m; ++j) {
      const float* wj = w + j * p.k;
      float acc = bias ? bias[j] : 0.0f;
      for (int64_t i = 0; i < p.k; ++i) acc += xb[i] * wj[i];
      y[b * p.m + j] = ref_activate(p.act, acc);
    }
  }
}

}  // namespace ds
