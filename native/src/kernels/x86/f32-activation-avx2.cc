// AVX2 relu and the activation op (kernels/x86/f32-vbinary-impl.h); bit-identical to the
// scalar kernels (sigmoid and tanh run the scalar function).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 on the undefined vectors in max/min
#endif

#include "kernels/x86/f32-vbinary-impl.h"

namespace ds {

DS_DEFINE_ACTIVATION_KERNELS(x86::V256, avx2)

}  // namespace ds
