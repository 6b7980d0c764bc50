// GEMM operand packing shared by every ISA level (the layout is described in kernels/gemm.h).
#include <cstring>

#include "kernels/gemm.h"

namespace ds {

int64_t ds_f32_gemm_packed_size(int64_t tile, int64_t rows, int64_t depth) {
  return (rows + tile - 1) / tile * tile * depth;
}

void ds_f32_gemm_pack(int64_t tile, int64_t rows, int64_t depth, const float* src, int64_t row_stride,
                      int64_t depth_stride, float* dst) {
  for (int64_t r0 = 0; r0 < rows; r0 += tile) {
    const int64_t n = rows - r0 < tile ? rows - r0 : tile;
    const float* s = src + r0 * row_stride;
    if (row_stride == 1 && n == tile && (tile == 32 || tile == 16)) {
      // Whole panels of the x86 tiles: copies of a constant size, which the compiler inlines
      // (a memcpy call per 32 floats was a third of a small 1x1 layer's time).
      for (int64_t d = 0; d < depth; ++d, dst += tile) {
        if (tile == 32) std::memcpy(dst, s + d * depth_stride, 32 * sizeof(float));
        else std::memcpy(dst, s + d * depth_stride, 16 * sizeof(float));
      }
    } else if (row_stride == 1) {
      // A panel's rows are adjacent in memory (B row-major): copy n floats per depth step.
      for (int64_t d = 0; d < depth; ++d, dst += tile) {
        std::memcpy(dst, s + d * depth_stride, size_t(n) * sizeof(float));
        for (int64_t r = n; r < tile; ++r) dst[r] = 0.0f;
      }
    } else {
      for (int64_t d = 0; d < depth; ++d, dst += tile) {
        const float* sd = s + d * depth_stride;
        for (int64_t r = 0; r < n; ++r) dst[r] = sd[r * row_stride];
        for (int64_t r = n; r < tile; ++r) dst[r] = 0.0f;
      }
    }
  }
}

}  // namespace ds
