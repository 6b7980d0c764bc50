// The i16-input GEMM with vpdpwssd (kernels/x86/q16-gemm-impl.h).
#include "kernels/x86/q16-gemm-impl.h"

namespace ds {

extern const Q16Kernels ds_q16_kernels__avx512vnni = {"avx512vnni", q16_gemm<true>};

}  // namespace ds
