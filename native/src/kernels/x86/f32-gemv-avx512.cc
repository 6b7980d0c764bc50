// AVX-512 dense at batch 1 over the 32-column packed B panels of the AVX-512 GEMM
// (kernels/x86/f32-gemv-impl.h).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 on the undefined vectors in max/min
#endif

#include "kernels/x86/f32-gemv-impl.h"

namespace ds {

void ds_f32_gemv__avx512(int64_t k, int64_t cols, const float* b_packed, const float* x, const float* bias,
                       const Activation& act, float* y) {
  x86::gemv_packed<x86::V512, 32>(k, cols, b_packed, x, bias, act, y);
}

}  // namespace ds
