#include "kernels/ref/activation.h"

namespace ds {

void ds_f32_activation__scalar(int64_t n, const Activation& act, const float* x, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = ref_activate(act, x[i]);
}

}  // namespace ds
