// The i16-input GEMM at the avx512vnni level: vpdpwssd in place of vpmaddwd + vpaddd, 12% faster
// on this machine's Zen 4 (256 -> 256 3x3 at 14x14: 0.63 vs 0.71 ms, bench_qconv op16)
// (q16-gemm-avx512-impl.h).
#include "kernels/x86/q16-gemm-avx512-impl.h"

namespace ds {

extern const Q16Kernels ds_q16_kernels__avx512vnni = q16_kernels<true>("avx512vnni");

}  // namespace ds
