// Dense at batch 1: y[cols] = act(x[k] . B + bias) with B (k x cols) in the GEMM's packed-B panels
// of NR columns (gemm_pack_b of the same level), so dense keeps one packed copy of its weight for
// both paths. A GEMM at one row is bound by the FMA latency of its two accumulators; here four
// K phases per panel give 4 * NR / W independent accumulators, summed at the end.
#pragma once

#include "kernels/x86/f32-vbinary-impl.h"

namespace ds {
namespace x86 {

template <class V, int NR>
void gemv_packed(int64_t k, int64_t cols, const float* b, const float* x, const float* bias, const Activation& a,
                 float* y) {
  constexpr int W = V::kWidth, NV = NR / W;
  static_assert(NR % W == 0, "panels are whole vectors");
  using T = typename V::T;
  const VAct<V> act(a);
  for (int64_t j = 0; j < cols; j += NR, b += NR * k) {
    T acc[4][NV];
    for (int u = 0; u < 4; ++u)
      for (int v = 0; v < NV; ++v) acc[u][v] = V::set1(0.0f);
    const float* bp = b;
    int64_t q = 0;
    for (; q + 4 <= k; q += 4, bp += 4 * NR) {
      for (int u = 0; u < 4; ++u) {
        const T xv = V::set1(x[q + u]);
        for (int v = 0; v < NV; ++v) acc[u][v] = V::fma(xv, V::load(bp + u * NR + v * W), acc[u][v]);
      }
    }
    for (; q < k; ++q, bp += NR) {
      const T xv = V::set1(x[q]);
      for (int v = 0; v < NV; ++v) acc[0][v] = V::fma(xv, V::load(bp + v * W), acc[0][v]);
    }
    const int64_t n = cols - j < NR ? cols - j : NR;
    for (int v = 0; v < NV && v * W < n; ++v) {
      T s = V::add(V::add(acc[0][v], acc[1][v]), V::add(acc[2][v], acc[3][v]));
      const int64_t m = n - v * W;  // columns left in this vector
      if (bias) s = V::add(s, m >= W ? V::load(bias + j + v * W) : V::load_n(bias + j + v * W, m));
      s = act(s);
      if (m >= W) V::store(y + j + v * W, s);
      else V::store_n(y + j + v * W, m, s);
    }
  }
  if (act.scalar_pass())
    for (int64_t j = 0; j < cols; ++j) y[j] = ref_activate(a, y[j]);
}

}  // namespace x86
}  // namespace ds
