#include "kernels/kernels.h"

namespace ds {

void ds_f32_relu__scalar(int64_t n, const float* x, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

}  // namespace ds
