// Shared by the kernel benchmarks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace bench {

// n floats in [-0.5, 0.5) from a linear congruential generator: the same data on every run.
inline std::vector<float> random_vec(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = float(seed >> 8) / float(1 << 24) - 0.5f;
  }
  return v;
}

// The first 64-byte aligned float at or after p (vectors allocated 16 floats longer), as the
// session's arena and workspace are aligned.
inline float* align64(float* p) {
  return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t(63));
}

}  // namespace bench
