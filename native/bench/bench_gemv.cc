// Dense at batch 1 (the GEMV kernels over the GEMM's packed weight) per ISA level: 1 thread, and 2
// threads splitting the columns on a ThreadPool as dense does; GB/s of weight streamed.
// Usage: bench_gemv [repeats (default 7)]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/dispatch.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Shape {
  const char* label;
  int64_t k, cols;
};

// Median seconds per call over `repeats` rounds of >= 20 ms.
template <typename Fn>
double time_median(Fn fn, int repeats) {
  for (int i = 0; i < 10; ++i) fn();
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    int64_t calls = 0;
    const Clock::time_point t0 = Clock::now();
    double el = 0;
    do {
      fn();
      ++calls;
      el = std::chrono::duration<double>(Clock::now() - t0).count();
    } while (el < 0.02);
    t.push_back(el / double(calls));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 7;
  const Shape shapes[] = {{"LeNet-300 fc1 784->300", 784, 300},   {"LeNet-5 fc1 800->500", 800, 500},
                          {"FaceNet fc1 6144->128", 6144, 128},   {"MobileNet V2 fc 1280->1000", 1280, 1000},
                          {"ResNet-18 fc 512->1000", 512, 1000}};
  std::printf("%-28s %-7s %3s %10s %8s\n", "shape", "isa", "thr", "median us", "GB/s");
  for (const Shape& s : shapes) {
    std::vector<float> w(size_t(s.k * s.cols)), x(size_t(s.k)), bias(size_t(s.cols)), y(size_t(s.cols));
    for (size_t i = 0; i < w.size(); ++i) w[i] = float(i % 7) * 0.1f - 0.3f;
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 5) * 0.2f;
    for (ds::Isa isa : {ds::Isa::kAvx2, ds::Isa::kAvx512}) {
      if (!ds::isa_available(isa)) continue;
      const ds::KernelTable& t = ds::kernels_for(isa);
      std::vector<float> packed(size_t(ds::gemm_packed_b_size(*t.gemm, s.k, s.cols)));
      ds::gemm_pack_b(*t.gemm, s.k, s.cols, w.data(), 1, s.k, packed.data());
      ds::Activation act;
      act.kind = 1;
      for (int threads : {1, 2}) {
        ds::ThreadPool pool(threads);
        const int64_t nr = t.gemm->nr, panels = (s.cols + nr - 1) / nr, per_task = (panels + threads - 1) / threads;
        const auto task = [&](int64_t task, int) {
          const int64_t j0 = task * per_task * nr, j1 = std::min(s.cols, j0 + per_task * nr);
          t.gemv(s.k, j1 - j0, packed.data() + j0 * s.k, x.data(), bias.data() + j0, act, y.data() + j0);
        };
        const double sec = time_median([&] { pool.parallel_for((panels + per_task - 1) / per_task, task); }, repeats);
        std::printf("%-28s %-7s %3d %10.2f %8.1f\n", s.label, ds::isa_name(isa), threads, sec * 1e6,
                    double(packed.size()) * 4 / sec * 1e-9);
      }
    }
  }
  return 0;
}
