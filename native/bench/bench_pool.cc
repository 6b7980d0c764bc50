// Times the session's max pooling kernel (the best level, or DS_FORCE_ISA) on one plane shape or on
// the max pools of the zoo, at one thread; ms per call over all planes, 10th percentile of single
// calls over 0.3 s (robust on a busy machine). With BENCH_COLD=1 the caches are flushed (64 MB
// written) before each call and the median of 50 calls is printed, as for an input that a large
// layer before the pool pushed out of the caches. Inputs are random; the results are not checked.
//
//   bench_pool                              (the zoo's max pools)
//   bench_pool C H W K STRIDE PAD [CEIL]    (one shape; CEIL 1 = ceil mode)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/dispatch.h"
#include "kernels/kernels.h"

namespace {

int64_t out_size(int64_t in, int64_t pad, int64_t k, int64_t s, bool ceil) {
  const int64_t span = in + 2 * pad - k;
  int64_t out = (ceil ? (span + s - 1) / s : span / s) + 1;
  if (ceil && (out - 1) * s >= in + pad) --out;  // the last window must start inside the input or left pad
  return out;
}

double time_maxpool(int64_t c, int64_t h, int64_t w, int64_t k, int64_t s, int64_t pad, bool ceil) {
  ds::Pool2dParams p{};
  p.n = 1, p.c = c, p.h = h, p.w = w, p.kh = p.kw = k, p.stride_h = p.stride_w = s;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = pad;
  p.oh = out_size(h, pad, k, s, ceil), p.ow = out_size(w, pad, k, s, ceil);
  std::vector<float> x(size_t(c * h * w)), y(size_t(c * p.oh * p.ow));
  uint32_t seed = 1;
  for (float& v : x) {
    seed = seed * 1664525u + 1013904223u;
    v = float(seed >> 8) / float(1 << 24) - 0.5f;
  }
  const ds::Pool2dKernel kernel = ds::select_kernels().maxpool2d;
  std::vector<double> ms;
  if (std::getenv("BENCH_COLD")) {
    std::vector<float> flush(size_t(16) << 20);
    for (int i = 0; i < 50; ++i) {
      for (size_t j = 0; j < flush.size(); j += 16) flush[j] += 1.0f;
      const auto t0 = std::chrono::steady_clock::now();
      kernel(p, x.data(), y.data());
      ms.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 0.3 || ms.size() < 20) {
    const auto t0 = std::chrono::steady_clock::now();
    kernel(p, x.data(), y.data());
    ms.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 10];
}

void print(int64_t c, int64_t h, int64_t w, int64_t k, int64_t s, int64_t pad, bool ceil, const char* model) {
  const double ms = time_maxpool(c, h, w, k, s, pad, ceil);
  char shape[96];
  std::snprintf(shape, sizeof shape, "%ldx%ldx%ld %ldx%ld s%ld p%ld%s", long(c), long(h), long(w), long(k), long(k),
                long(s), long(pad), ceil ? " ceil" : "");
  std::printf("%-32s %-12s %8.4f ms\n", shape, model, ms);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 7) {
    int64_t a[6];
    for (int i = 0; i < 6; ++i) a[i] = std::atoll(argv[1 + i]);
    print(a[0], a[1], a[2], a[3], a[4], a[5], argc > 7 && std::atoi(argv[7]) != 0, "");
    return 0;
  }
  std::printf("max pooling (%s), 1 thread, p10 ms per call\n", ds::select_kernels().isa);
  print(64, 112, 112, 3, 2, 1, false, "resnet18");
  print(24, 112, 112, 3, 2, 1, false, "shufflenet");
  print(64, 111, 111, 3, 2, 0, true, "squeezenet");
  print(128, 55, 55, 3, 2, 0, true, "squeezenet");
  print(256, 27, 27, 3, 2, 0, true, "squeezenet");
  print(16, 82, 82, 2, 2, 0, false, "facenet1m");
  print(48, 36, 36, 3, 3, 0, false, "facenet1m");
  print(20, 24, 24, 2, 2, 0, false, "lenet5");
  print(50, 8, 8, 2, 2, 0, false, "lenet5");
  return 0;
}
