// The reference GEMM: one output element at a time, K summed in order, then bias, residual and
// the activation. It is the oracle for every SIMD GEMM and the scalar level's GEMM. Packed
// operands use a 1x1 tile here (packed A is A row-major, packed B is B transposed).
#include "kernels/gemm.h"

namespace ds {

void ds_f32_gemm__scalar(const GemmParams& p, float* /*workspace*/) {
  const int64_t a_rs = p.a.packed ? p.k : p.a.row_stride, a_cs = p.a.packed ? 1 : p.a.col_stride;
  const int64_t b_rs = p.b.packed ? 1 : p.b.row_stride, b_cs = p.b.packed ? p.k : p.b.col_stride;
  for (int64_t i = 0; i < p.m; ++i) {
    const float* a = p.a.data + i * a_rs;
    float* c = p.c + i * p.c_row_stride;
    for (int64_t j = 0; j < p.n; ++j) {
      const float* b = p.b.data + j * b_cs;
      float acc = 0.0f;
      for (int64_t q = 0; q < p.k; ++q) acc += a[q * a_cs] * b[q * b_rs];
      if (p.bias_kind == kGemmBiasPerRow) acc += p.bias[i];
      if (p.bias_kind == kGemmBiasPerCol) acc += p.bias[j];
      if (p.residual) acc += p.residual[i * p.residual_row_stride + j];
      c[j] = gemm_activate(p.act, acc, p.alpha, p.beta);
    }
  }
}

const GemmKernels ds_f32_gemm_kernels__scalar = {"ds_f32_gemm__scalar", 1, 1, 0, 0, 0, 0,
                                                 ds_f32_gemm__scalar};

}  // namespace ds
