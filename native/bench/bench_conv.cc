// Times the scalar reference conv2d and dense kernels on typical small-CNN shapes and prints
// GFLOP/s (2 flops per multiply-add), then the prepared conv2d op on the 3x3 stride-1 layers of
// ResNet-18 and SqueezeNet 1.1 with Winograd F(4x4, 3x3) against the GEMM paths (DS_CONV_WINOGRAD),
// at 1 and 2 threads. Inputs are random; the results are not checked here.
//
//   bench_conv [winograd]    (only the Winograd comparison)
//   bench_conv dw [THREADS]    (MobileNet V2's depthwise 3x3 layers, hot and cold)
//   bench_conv layer C H W O K STRIDE PAD [THREADS]   (one layer, the prepared op with bias + relu
//                                                       on the path conv2d chooses; ms per call)
// With BENCH_COLD=1 the layer mode flushes the caches (64 MB written) before each call and prints
// the median of 50 calls, as for the weights of a network larger than the L3. With BENCH_P10=1 it
// prints the 10th percentile of single calls over 0.5 s (robust on a busy machine). With
// BENCH_EVICT_MB=MB it reads MB megabytes of other data and then the input before each call (the
// weights in L3, the input in L2, as in a whole network; 12 is about MobileNet V2's weights) and
// prints the median of 200 calls; BENCH_COLD_INPUT=1 skips the input's read, so that it comes from
// L3 too (as when another core wrote it). With BENCH_CLEAN=1 it prints the median of the calls
// during which no thread was descheduled (process CPU time >= 0.95 x threads x wall: the thread
// scaling of a layer on a shared machine). DS_CONV_WINOGRAD and DS_CONV_PIXELS (0|1) force conv2d's choices
// in the layer mode; BENCH_GROUP=G makes its conv grouped (G = C = O: a depthwise layer).
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "bench_data.h"
#include "core/dispatch.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "ops/op.h"

namespace ds {
extern const OpDef kConv2dOp;
}

namespace {

using bench::random_vec;

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

// CPU time of the whole process (every thread), ms.
double process_cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

// The prepared conv2d op (k x k, bias, relu) as the session runs it; ms per call. winograd: -1
// leaves DS_CONV_WINOGRAD as it is.
double time_conv_op(int64_t c, int64_t h, int64_t wd, int64_t o, int64_t kk, int64_t stride, int64_t pad,
                    int winograd, ds::ThreadPool* pool, int64_t group = 1, bool cold = std::getenv("BENCH_COLD")) {
  if (winograd >= 0) setenv("DS_CONV_WINOGRAD", winograd ? "1" : "0", 1);
  const ds::KernelTable& k = ds::select_kernels();
  ds::OpParams p;
  p.pads[0] = p.pads[1] = p.pads[2] = p.pads[3] = pad;
  p.strides[0] = p.strides[1] = stride;
  p.act.kind = ds::kActRelu;
  p.group = group;
  const int64_t oh = (h + 2 * pad - kk) / stride + 1, ow = (wd + 2 * pad - kk) / stride + 1;
  const ds::Shape xs = {1, c, h, wd}, ws = {o, c / group, kk, kk}, bs = {o}, os = {1, o, oh, ow};
  const std::vector<float> x = random_vec(size_t(c * h * wd), 1), w = random_vec(size_t(o * c / group * kk * kk), 2),
                           b = random_vec(size_t(o), 3);
  const std::vector<ds::ValueInfo> info = {{ds::kDtypeF32, &xs, nullptr}, {ds::kDtypeF32, &ws, w.data()},
                                           {ds::kDtypeF32, &bs, b.data()}};
  const int threads = pool ? pool->size() : 1;
  std::shared_ptr<const void> state = ds::kConv2dOp.prepare(p, info, k, threads);
  if (winograd >= 0) unsetenv("DS_CONV_WINOGRAD");
  const std::vector<const ds::Shape*> in_shapes = {&xs, &ws, &bs};
  std::vector<float> workspace(size_t(ds::kConv2dOp.workspace_floats(p, state.get(), in_shapes, os, threads) + 16));
  float* ws_aligned = bench::align64(workspace.data());
  // Input and output 64-byte aligned, as the session's activation arena places them.
  std::vector<float> x_buf(x.size() + 16), y(size_t(o * oh * ow) + 16);
  float* const xa = bench::align64(x_buf.data());
  float* const ya = bench::align64(y.data());
  std::copy(x.begin(), x.end(), xa);
  const std::vector<ds::OpInput> in = {{xa, &xs}, {w.data(), &ws}, {b.data(), &bs}};
  const ds::RunContext ctx{state.get(), pool, ws_aligned};
  if (cold) {
    // Caches flushed before every call (64 MB written), as for the weights of a large network;
    // the median of 50 calls.
    std::vector<float> flush(size_t(16) << 20);
    std::vector<double> ms;
    for (int i = 0; i < 50; ++i) {
      for (size_t j = 0; j < flush.size(); j += 16) flush[j] += 1.0f;
      const auto start = std::chrono::steady_clock::now();
      ds::kConv2dOp.run_prepared(p, ctx, in, ya, os, k);
      ms.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() * 1e3);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }
  if (const char* mb = std::getenv("BENCH_EVICT_MB")) {
    // As inside a network: before each call, MB megabytes of other data read (the layer's weights
    // leave L2 for L3 when MB is below the L3 size), then the input read (the previous layer just
    // wrote it); the median of 200 calls.
    std::vector<float> other(size_t(std::atof(mb) * (1 << 20) / sizeof(float)) + 16);
    const bool cold_input = std::getenv("BENCH_COLD_INPUT") != nullptr;
    std::vector<double> ms;
    float sink = 0.0f;
    for (int i = 0; i < 200; ++i) {
      for (size_t j = 0; j < other.size(); j += 16) sink += other[j];
      if (!cold_input)
        for (size_t j = 0; j < x.size(); j += 16) sink += xa[j];
      const auto start = std::chrono::steady_clock::now();
      ds::kConv2dOp.run_prepared(p, ctx, in, ya, os, k);
      ms.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() * 1e3);
    }
    if (sink == 1.2345f) std::printf(" ");
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }
  if (std::getenv("BENCH_CLEAN")) {
    // Only the calls during which no thread of the pool was descheduled (the process's CPU time
    // at least 0.95 x threads x the wall time; the spinning workers count): the median of up to
    // 200 such calls within 10 s. On a shared machine this times the threads as if the cores were
    // free, which the wall clock of every call does not.
    std::vector<double> ms;
    const auto start = std::chrono::steady_clock::now();
    while (ms.size() < 200 && std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 10) {
      const double c0 = process_cpu_ms();
      const auto t0 = std::chrono::steady_clock::now();
      ds::kConv2dOp.run_prepared(p, ctx, in, ya, os, k);
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3;
      if (process_cpu_ms() - c0 >= 0.95 * threads * wall) ms.push_back(wall);
    }
    if (ms.empty()) return 0.0;
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }
  if (std::getenv("BENCH_P10")) {
    // Each call timed alone for 0.5 s, the 10th percentile: on a shared machine a call that was
    // descheduled or had its caches evicted is dropped rather than averaged in.
    std::vector<double> ms;
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 0.5 || ms.size() < 20) {
      const auto t0 = std::chrono::steady_clock::now();
      ds::kConv2dOp.run_prepared(p, ctx, in, ya, os, k);
      ms.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 10];
  }
  return time_per_call([&] { ds::kConv2dOp.run_prepared(p, ctx, in, ya, os, k); }) * 1e3;
}

void bench_winograd() {
  struct Layer {
    const char* name;
    int64_t c, hw, o;
  };
  const Layer layers[] = {
      {"resnet18 stage0 64x56x56 -> 64", 64, 56, 64},     {"resnet18 stage1 128x28x28 -> 128", 128, 28, 128},
      {"resnet18 stage2 256x14x14 -> 256", 256, 14, 256}, {"resnet18 stage3 512x7x7 -> 512", 512, 7, 512},
      {"squeezenet fire2 16x55x55 -> 64", 16, 55, 64},    {"squeezenet fire4 32x27x27 -> 128", 32, 27, 128},
      {"squeezenet fire6 48x13x13 -> 192", 48, 13, 192},  {"squeezenet fire8 64x13x13 -> 256", 64, 13, 256},
      {"vgg-like 64x112x112 -> 64", 64, 112, 64},         {"small 16x14x14 -> 16", 16, 14, 16},
      {"small 32x7x7 -> 32", 32, 7, 32},
  };
  ds::ThreadPool pool2(2);
  std::printf("\nconv2d op 3x3 s1 p1 (%s): GEMM path vs Winograd F(4,3), ms per call (best of 3 rounds)\n",
              ds::select_kernels().isa);
  std::printf("%-36s %9s %9s %6s   %9s %9s %6s\n", "layer", "gemm 1t", "wino 1t", "ratio", "gemm 2t", "wino 2t",
              "ratio");
  for (const Layer& l : layers) {
    const double g1 = time_conv_op(l.c, l.hw, l.hw, l.o, 3, 1, 1, 0, nullptr);
    const double w1 = time_conv_op(l.c, l.hw, l.hw, l.o, 3, 1, 1, 1, nullptr);
    const double g2 = time_conv_op(l.c, l.hw, l.hw, l.o, 3, 1, 1, 0, &pool2);
    const double w2 = time_conv_op(l.c, l.hw, l.hw, l.o, 3, 1, 1, 1, &pool2);
    std::printf("%-36s %9.3f %9.3f %6.2f   %9.3f %9.3f %6.2f\n", l.name, g1, w1, g1 / w1, g2, w2, g2 / w2);
  }
}

// The depthwise 3x3 layers of MobileNet V2 (bias + relu as the op runs them): hot (the same input
// call after call, best of 3 rounds) and cold (caches flushed before each call, median of 50).
void bench_depthwise(int threads) {
  struct Layer {
    int64_t c, hw, stride;
  };
  const Layer layers[] = {{32, 112, 1}, {96, 112, 2}, {144, 56, 1}, {144, 56, 2}, {192, 28, 1},
                          {192, 28, 2}, {384, 14, 1}, {576, 14, 1}, {576, 14, 2}, {960, 7, 1}};
  std::unique_ptr<ds::ThreadPool> pool;
  if (threads > 1) pool = std::make_unique<ds::ThreadPool>(threads);
  std::printf("depthwise 3x3 p1 (%s), %d thread(s), ms per call\n", ds::select_kernels().isa, threads);
  std::printf("%-24s %9s %9s\n", "layer", "hot", "cold");
  for (const Layer& l : layers) {
    const double hot = time_conv_op(l.c, l.hw, l.hw, l.c, 3, l.stride, 1, -1, pool.get(), l.c, false);
    const double cold = time_conv_op(l.c, l.hw, l.hw, l.c, 3, l.stride, 1, -1, pool.get(), l.c, true);
    char name[64];
    std::snprintf(name, sizeof name, "%ldx%ldx%ld s%ld", long(l.c), long(l.hw), long(l.hw), long(l.stride));
    std::printf("%-24s %9.4f %9.4f\n", name, hot, cold);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 9 && std::strcmp(argv[1], "layer") == 0) {
    int64_t a[7];
    for (int i = 0; i < 7; ++i) a[i] = std::atoll(argv[2 + i]);
    const int threads = argc > 9 ? std::atoi(argv[9]) : 1;
    std::unique_ptr<ds::ThreadPool> pool;
    if (threads > 1) pool = std::make_unique<ds::ThreadPool>(threads);
    const int64_t group = std::getenv("BENCH_GROUP") ? std::atoll(std::getenv("BENCH_GROUP")) : 1;
    const double ms = time_conv_op(a[0], a[1], a[2], a[3], a[4], a[5], a[6], -1, pool.get(), group);
    const int64_t oh = (a[1] + 2 * a[6] - a[4]) / a[5] + 1, ow = (a[2] + 2 * a[6] - a[4]) / a[5] + 1;
    const double flops = 2.0 * double(a[3] * oh * ow) * double(a[0] / group * a[4] * a[4]);
    std::printf("%ld x %ld x %ld -> %ld, %ldx%ld s%ld p%ld, %d thread(s): %.4f ms  %.1f GFLOP/s\n", long(a[0]),
                long(a[1]), long(a[2]), long(a[3]), long(a[4]), long(a[4]), long(a[5]), long(a[6]), threads, ms,
                flops / ms * 1e-6);
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "dw") == 0) {
    bench_depthwise(argc > 2 ? std::atoi(argv[2]) : 1);
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "winograd") == 0) {
    bench_winograd();
    return 0;
  }
  std::printf("scalar reference kernels, 1 thread\n");
  bench_conv("conv 1->6 28x28 k5 (LeNet-5 conv1)", 1, 28, 6, 5, 1, 1);
  bench_conv("conv 6->16 14x14 k5 (LeNet-5 conv2)", 6, 14, 16, 5, 1, 1);
  bench_conv("conv 64->64 28x28 k3", 64, 28, 64, 3, 1, 1);
  bench_conv("conv 32->32 56x56 k3 depthwise s2", 32, 56, 32, 3, 2, 32);
  bench_conv("conv 128->128 14x14 k1", 128, 14, 128, 1, 1, 1);
  bench_dense("dense 1x784 -> 300 (LeNet-300)", 1, 784, 300);
  bench_dense("dense 32x784 -> 300", 32, 784, 300);
  bench_winograd();
  return 0;
}
