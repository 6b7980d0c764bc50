// The i16-input GEMM at the avx512 level: vpmaddwd + vpaddd (q16-gemm-avx512-impl.h).
#include "kernels/x86/q16-gemm-avx512-impl.h"

namespace ds {

extern const Q16Kernels ds_q16_kernels__avx512 = q16_kernels<false>("avx512");

}  // namespace ds
