// The activation codes of docs/format.md on one float: shared by the activation kernel and the
// fused epilogues of the reference conv2d, conv_transpose2d, dense and add kernels.
#pragma once

#include <cmath>

#include "kernels/kernels.h"

namespace ds {

inline float ref_activate(const Activation& a, float x) {
  switch (a.kind) {
    case kActRelu: return x > 0.0f ? x : 0.0f;
    case kActClip: return std::fmin(std::fmax(x, a.alpha), a.beta);
    case kActLeakyRelu: return x >= 0.0f ? x : a.alpha * x;
    case kActSigmoid: return 1.0f / (1.0f + std::exp(-x));  // exp overflow gives 0, not NaN
    case kActHardSigmoid: return std::fmax(0.0f, std::fmin(1.0f, a.alpha * x + a.beta));
    case kActHardSwish: return x * std::fmax(0.0f, std::fmin(1.0f, x / 6.0f + 0.5f));
    case kActTanh: return std::tanh(x);
    default: return x;  // kActNone
  }
}

}  // namespace ds
