#include <cmath>

#include "kernels/kernels.h"

namespace ds {

// Subtracting the maximum keeps exp() from overflowing; the result is mathematically unchanged.
void ds_f32_softmax__scalar(const SoftmaxParams& p, const float* x, float* y) {
  for (int64_t o = 0; o < p.outer; ++o) {
    for (int64_t i = 0; i < p.inner; ++i) {
      const float* xs = x + o * p.axis * p.inner + i;
      float* ys = y + o * p.axis * p.inner + i;
      float m = xs[0];
      for (int64_t a = 1; a < p.axis; ++a) m = std::fmax(m, xs[a * p.inner]);
      float sum = 0.0f;
      for (int64_t a = 0; a < p.axis; ++a) {
        const float e = std::exp(xs[a * p.inner] - m);
        ys[a * p.inner] = e;
        sum += e;
      }
      for (int64_t a = 0; a < p.axis; ++a) ys[a * p.inner] /= sum;
    }
  }
}

}  // namespace ds
