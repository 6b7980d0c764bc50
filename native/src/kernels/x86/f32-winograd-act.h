// The activation dispatch of the x86 Winograd output transforms (included by files compiled with
// their level's flags; internal linkage, so each keeps its own copy).
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/gemm.h"
#include "kernels/winograd.h"

namespace ds {
namespace x86 {
namespace {

// Calls output(std::integral_constant<int, Act>{}) with o.act for the codes the vector code
// applies (0, 1, 2, 3, 5, 6); for the others, output with 0 and then the activation in scalar code
// over the patch it wrote (min(o.rows, tile) x min(o.cols, tile * count)).
template <class Output>
void winograd_output_act(const WinogradOutput& o, int64_t tile, int64_t count, float* y, int64_t y_stride,
                         Output&& output) {
  switch (o.act) {
    case 0: return output(std::integral_constant<int, 0>{});
    case 1: return output(std::integral_constant<int, 1>{});
    case 2: return output(std::integral_constant<int, 2>{});
    case 3: return output(std::integral_constant<int, 3>{});
    case 5: return output(std::integral_constant<int, 5>{});
    case 6: return output(std::integral_constant<int, 6>{});
    default: break;
  }
  output(std::integral_constant<int, 0>{});
  const int64_t rows = o.rows < tile ? o.rows : tile, cols = o.cols < tile * count ? o.cols : tile * count;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) y[r * y_stride + c] = gemm_activate(o.act, y[r * y_stride + c], o.alpha, o.beta);
}

}  // namespace
}  // namespace x86
}  // namespace ds
