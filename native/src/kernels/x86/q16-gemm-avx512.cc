// The i16-input GEMM with vpmaddwd + vpaddd (kernels/x86/q16-gemm-impl.h).
#include "kernels/x86/q16-gemm-impl.h"

namespace ds {

extern const Q16Kernels ds_q16_kernels__avx512 = {"avx512", q16_gemm<false>};

}  // namespace ds
