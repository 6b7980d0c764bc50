#include <cmath>

#include "kernels/kernels.h"

namespace ds {

// (x - mean) / sqrt(var + epsilon) * scale + bias, per channel of an (n, c, inner) view.
void ds_f32_batchnorm__scalar(const BatchNormParams& p, const float* x, const float* scale,
                              const float* bias, const float* mean, const float* var, float* y) {
  for (int64_t b = 0; b < p.n; ++b) {
    for (int64_t c = 0; c < p.c; ++c) {
      const float k = scale[c] / std::sqrt(var[c] + p.epsilon);
      const float* xc = x + (b * p.c + c) * p.inner;
      float* yc = y + (b * p.c + c) * p.inner;
      for (int64_t i = 0; i < p.inner; ++i) yc[i] = (xc[i] - mean[c]) * k + bias[c];
    }
  }
}

}  // namespace ds
