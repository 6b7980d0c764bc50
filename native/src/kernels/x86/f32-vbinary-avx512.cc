// AVX-512 add, sub, mul, div with numpy broadcasting and the fused activation
// (kernels/x86/f32-vbinary-impl.h); bit-identical to the scalar kernels.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 on the undefined vectors in max/min
#endif

#include "kernels/x86/f32-vbinary-impl.h"

namespace ds {

DS_DEFINE_VBINARY_KERNELS(x86::V512, avx512)

}  // namespace ds
