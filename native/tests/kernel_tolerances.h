// Float tolerances of the kernel tests, in one place. Errors are measured against the magnitude
// the result is built from (sum of |a*b| over K plus |bias| and |residual|), since a different
// summation order changes the result by a few ulps of that sum, not of the result itself.
#pragma once

namespace tol {

// f32 GEMM (any blocking, FMA or not) against the scalar reference: K <= ~1000 terms.
constexpr double kGemm = 2e-6;
// Plus this many float ulps of the result: the rounding of the activation (sigmoid, tanh) itself.
constexpr double kActivationUlps = 4;
// Depthwise 3x3 convolution against its scalar twin: 9 terms plus bias.
constexpr double kDwconv = 1e-6;
// Winograd F(4x4, 3x3) conv2d against the direct sum: the transforms scale terms by up to ~100
// before they cancel (measured worst 5e-6 of the magnitude).
constexpr double kWinograd = 2e-5;

}  // namespace tol
