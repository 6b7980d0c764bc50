// Times the scalar reference conv2d and dense kernels on typical small-CNN shapes and prints
// GFLOP/s (2 flops per multiply-add). Inputs are random; the results are not checked here.
#include <chrono>
#include <cstdio>
#include <vector>

#include "kernels/kernels.h"

namespace {

std::vector<float> random_vec(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = float(seed >> 8) / float(1 << 24) - 0.5f;
  }
  return v;
}

// Runs fn until at least 0.2 s have passed; returns seconds per call (the best of 3 rounds).
template <typename Fn>
double time_per_call(Fn fn) {
  double best = 1e30;
  for (int round = 0; round < 3; ++round) {
    int calls = 0;
    const auto start = std::chrono::steady_clock::now();
    double elapsed = 0;
    do {
      fn();
      ++calls;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    } while (elapsed < 0.2);
    best = std::min(best, elapsed / calls);
  }
  return best;
}

void bench_conv(const char* label, int64_t c, int64_t hw, int64_t o, int64_t k, int64_t stride, int64_t group) {
  ds::Conv2dParams p{};
  p.n = 1, p.c = c, p.h = hw, p.w = hw, p.o = o, p.kh = k, p.kw = k;
  p.stride_h = p.stride_w = stride, p.pad_top = p.pad_left = k / 2, p.dil_h = p.dil_w = 1, p.group = group;
  p.oh = (hw + 2 * (k / 2) - k) / stride + 1, p.ow = p.oh, p.act.kind = ds::kActRelu;
  const std::vector<float> x = random_vec(size_t(c * hw * hw), 1), w = random_vec(size_t(o * c / group * k * k), 2),
                           b = random_vec(size_t(o), 3);
  std::vector<float> y(size_t(o * p.oh * p.ow));
  const double secs = time_per_call([&] { ds::ds_f32_conv2d__scalar(p, x.data(), w.data(), b.data(), y.data()); });
  const double flops = 2.0 * double(o * p.oh * p.ow) * double(c / group * k * k);
  std::printf("%-36s %9.3f ms  %6.2f GFLOP/s\n", label, secs * 1e3, flops / secs * 1e-9);
}

void bench_dense(const char* label, int64_t n, int64_t k, int64_t m) {
  ds::DenseParams p{n, k, m, true};
  const std::vector<float> x = random_vec(size_t(n * k), 1), w = random_vec(size_t(m * k), 2), b = random_vec(size_t(m), 3);
  std::vector<float> y(size_t(n * m));
  const double secs = time_per_call([&] { ds::ds_f32_dense__scalar(p, x.data(), w.data(), b.data(), y.data()); });
  std::printf("%-36s %9.3f ms  %6.2f GFLOP/s\n", label, secs * 1e3, 2.0 * double(n * k * m) / secs * 1e-9);
}

}  // namespace

int main() {
  std::printf("scalar reference kernels, 1 thread\n");
  bench_conv("conv 1->6 28x28 k5 (LeNet-5 conv1)", 1, 28, 6, 5, 1, 1);
  bench_conv("conv 6->16 14x14 k5 (LeNet-5 conv2)", 6, 14, 16, 5, 1, 1);
  bench_conv("conv 64->64 28x28 k3", 64, 28, 64, 3, 1, 1);
  bench_conv("conv 32->32 56x56 k3 depthwise s2", 32, 56, 32, 3, 2, 32);
  bench_conv("conv 128->128 14x14 k1", 128, 14, 128, 1, 1, 1);
  bench_dense("dense 1x784 -> 300 (LeNet-300)", 1, 784, 300);
  bench_dense("dense 32x784 -> 300", 32, 784, 300);
  return 0;
}
