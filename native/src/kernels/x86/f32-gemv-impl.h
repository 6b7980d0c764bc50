// Dense at batch 1: y[cols] = act(x[k] . B + bias) with B (k x cols) in the GEMM's packed-B panels
// of NR columns (gemm_pack_b of the same level), so dense keeps one packed copy of its weight for
// both paths. A GEMM at one row is bound by the FMA latency of its two accumulators; here two
// panels at a time with two K phases each give 4 * NR / W independent accumulators (the odd last
// panel: 2 * NR / W), summed at the end. Two panels read two weight streams at once, which
// the weight, streamed from memory in a whole network, needs: MobileNet V2's 1280 -> 1000 (5.1 MB)
// with 40 MB evicted between calls, 155-165 -> 130-134 us against one panel with four phases
// (four panels at once were 1.6x slower: the streams, 160 KB apart, share L1 sets).
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
  int64_t j = 0;
  for (; j + 2 * NR <= cols; j += 2 * NR, b += 2 * NR * k) {
    T acc[2][2][NV];
    for (int pnl = 0; pnl < 2; ++pnl)
      for (int u = 0; u < 2; ++u)
        for (int v = 0; v < NV; ++v) acc[pnl][u][v] = V::set1(0.0f);
    const float* bp0 = b;
    const float* bp1 = b + NR * k;
    int64_t q = 0;
    for (; q + 2 <= k; q += 2, bp0 += 2 * NR, bp1 += 2 * NR) {
      for (int u = 0; u < 2; ++u) {
        const T xv = V::set1(x[q + u]);
        for (int v = 0; v < NV; ++v) acc[0][u][v] = V::fma(xv, V::load(bp0 + u * NR + v * W), acc[0][u][v]);
        for (int v = 0; v < NV; ++v) acc[1][u][v] = V::fma(xv, V::load(bp1 + u * NR + v * W), acc[1][u][v]);
      }
    }
    for (; q < k; ++q, bp0 += NR, bp1 += NR) {
      const T xv = V::set1(x[q]);
      for (int v = 0; v < NV; ++v) acc[0][0][v] = V::fma(xv, V::load(bp0 + v * W), acc[0][0][v]);
      for (int v = 0; v < NV; ++v) acc[1][0][v] = V::fma(xv, V::load(bp1 + v * W), acc[1][0][v]);
    }
    for (int pnl = 0; pnl < 2; ++pnl)
      for (int v = 0; v < NV; ++v) {
        T s = V::add(acc[pnl][0][v], acc[pnl][1][v]);
        const int64_t c = j + pnl * NR + v * W;
        if (bias) s = V::add(s, V::load(bias + c));
        V::store(y + c, act(s));
      }
  }
  // The odd last panel alone, in the same two K phases (its sums must not depend on whether it is
  // paired: the threads of dense take panel ranges, and results stay the same at any thread count).
  for (; j < cols; j += NR, b += NR * k) {
    T acc[2][NV];
    for (int u = 0; u < 2; ++u)
      for (int v = 0; v < NV; ++v) acc[u][v] = V::set1(0.0f);
    const float* bp = b;
    int64_t q = 0;
    for (; q + 2 <= k; q += 2, bp += 2 * NR) {
      for (int u = 0; u < 2; ++u) {
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
      T s = V::add(acc[0][v], acc[1][v]);
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
