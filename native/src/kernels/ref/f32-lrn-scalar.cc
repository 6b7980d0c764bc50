#include <algorithm>
#include <cmath>

#include "kernels/kernels.h"

namespace ds {

// ONNX LRN: y = x / (bias + alpha / size * sum of x^2 over channels
// c - floor((size-1)/2) .. c + ceil((size-1)/2), clipped to the channels)^beta.
void ds_f32_lrn__scalar(const LrnParams& p, const float* x, float* y) {
  const int64_t before = (p.size - 1) / 2, after = p.size / 2;
  for (int64_t b = 0; b < p.n; ++b) {
    const float* xb = x + b * p.c * p.inner;
    float* yb = y + b * p.c * p.inner;
    for (int64_t c = 0; c < p.c; ++c) {
      const int64_t c0 = std::max<int64_t>(0, c - before), c1 = std::min<int64_t>(p.c - 1, c + after);
      for (int64_t i = 0; i < p.inner; ++i) {
        float sum = 0.0f;
        for (int64_t j = c0; j <= c1; ++j) sum += xb[j * p.inner + i] * xb[j * p.inner + i];
        const float v = xb[c * p.inner + i];
        yb[c * p.inner + i] = v / std::pow(p.bias + p.alpha / float(p.size) * sum, p.beta);
      }
    }
  }
}

}  // namespace ds
