// Dense layer at batch 1-4 through the packed GEMM (the prepared dense path) against the CSR
// kernel, over weight densities: where the sparse kernel starts to pay. LeNet-300-100's layers
// (784x300, 300x100) and a larger FC (1024x1000). Median microseconds of 201 calls.
// Usage: bench_sparse
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "core/dispatch.h"
#include "kernels/sparse.h"

namespace {

using Clock = std::chrono::steady_clock;

template <typename Fn>
double median_us(Fn&& fn) {
  for (int i = 0; i < 20; ++i) fn();
  std::vector<double> t;
  for (int i = 0; i < 201; ++i) {
    const auto t0 = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::nth_element(t.begin(), t.begin() + 100, t.end());
  return t[100];
}

}  // namespace

int main() {
  const ds::KernelTable& kt = ds::select_kernels();
  const ds::GemmKernels& g = *kt.gemm;
  std::printf("level %s; dense = packed GEMM (%s)\n", kt.isa, g.name);
  std::printf("%5s %5s %5s %7s %10s %10s %8s\n", "n", "k", "m", "density", "dense us", "csr us", "csr/dense");
  uint32_t seed = 1;
  auto rnd = [&] {
    seed = seed * 1664525u + 1013904223u;
    return float(seed >> 8) / float(1 << 24);
  };
  const int64_t shapes[][2] = {{784, 300}, {300, 100}, {1024, 1000}};
  for (const auto& sh : shapes)
    for (int64_t n : {1, 4})
      for (double density : {1.0, 0.3, 0.1, 0.05}) {
        const int64_t k = sh[0], m = sh[1];
        std::vector<float> w(size_t(m * k)), x(size_t(n * k), 0.5f), y(size_t(n * m));
        for (float& v : w) v = rnd() < density ? rnd() - 0.5f : 0.0f;
        std::vector<float> packed(size_t(ds::gemm_packed_b_size(g, k, m)) + 16);
        float* pb = packed.data() + (16 - (reinterpret_cast<uintptr_t>(packed.data()) / 4) % 16) % 16;
        ds::gemm_pack_b(g, k, m, w.data(), 1, k, pb);
        std::vector<float> ws(size_t(g.workspace_floats) + 16);
        float* wsp = ws.data() + (16 - (reinterpret_cast<uintptr_t>(ws.data()) / 4) % 16) % 16;
        ds::GemmParams gp;
        gp.m = n, gp.n = m, gp.k = k;
        gp.a = {x.data(), k, 1, false};
        gp.b = {pb, 0, 0, true};
        gp.c = y.data();
        gp.c_row_stride = m;
        const double dense = median_us([&] { g.gemm(gp, wsp); });
        const ds::CsrWeights csr = ds::csr_from_dense(w.data(), m, k);
        ds::DenseParams p;
        p.n = n, p.k = k, p.m = m;
        const double sparse = median_us([&] { ds::ds_f32_spmm__scalar(p, x.data(), csr, nullptr, y.data()); });
        std::printf("%5lld %5lld %5lld %7.2f %10.2f %10.2f %8.2f\n", (long long)n, (long long)k, (long long)m, density,
                    dense, sparse, sparse / dense);
      }
  return 0;
}
