// GFLOP/s of the packed f32 GEMM per ISA level and thread count, on square sizes and on the GEMMs
// of typical CNN layers, against the measured FMA peak of one core (an FMA-throughput loop) and
// the nominal peak at the /proc/cpuinfo clock. A (the weights, conv convention) is packed once
// outside the timing; B is packed per call inside the GEMM, as a conv op would run it.
// Columns: median ms and GFLOP/s of the median round; GFLOP/s of the best round; %peak = the
// median over rounds of (GEMM speed / single-core FMA-loop speed measured just before the round)
// divided by the thread count, which cancels most of the slowdown other work on the machine causes.
// Usage: bench_gemm [max_threads (default: hardware threads)] [repeats (default 5)] [label filter]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <immintrin.h>

// The FMA loops below carry their own target attributes; nothing passes vectors across calls.
#pragma GCC diagnostic ignored "-Wpsabi"

#include "bench_data.h"
#include "core/cpu_features.h"
#include "core/dispatch.h"

namespace {

using Clock = std::chrono::steady_clock;

using bench::random_vec;

struct Timing {
  double median, best;  // seconds per call
  double ratio = 0;     // median over rounds of (GFLOP/s / FMA-loop GFLOP/s just before it)
};

// Seconds per call over `repeats` rounds of >= 40 ms each: the median round and the best one (on a
// machine shared with other work the best round is the closest to the kernel's own speed).
template <typename Fn>
Timing time_rounds(Fn fn, int repeats, double (*reference)() = nullptr, double flop = 0) {
  fn();  // warm caches and pages
  std::vector<double> t, ratios;
  for (int r = 0; r < repeats; ++r) {
    const double ref_gflops = reference ? reference() : 0;
    int calls = 0;
    const auto start = Clock::now();
    double elapsed = 0;
    do {
      fn();
      ++calls;
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < 0.04);
    t.push_back(elapsed / calls);
    if (reference) ratios.push_back(flop / t.back() * 1e-9 / ref_gflops);
  }
  std::sort(t.begin(), t.end());
  std::sort(ratios.begin(), ratios.end());
  return {t[t.size() / 2], t[0], ratios.empty() ? 0.0 : ratios[ratios.size() / 2]};
}

// 12 independent FMA chains (latency 4 x 2 ports needs >= 8): the core's FMA throughput.
__attribute__((target("avx512f"))) void fma_loop_avx512(int64_t iters) {
  __m512 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(float(i));
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (int64_t n = 0; n < iters; ++n) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_ps(a[i], x, y);
  }
  __m512 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
  float out[16];
  _mm512_storeu_ps(out, s);
  volatile float sink = out[0];
  (void)sink;
}

__attribute__((target("avx2,fma"))) void fma_loop_avx2(int64_t iters) {
  __m256 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(float(i));
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  for (int64_t n = 0; n < iters; ++n) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], x, y);
  }
  __m256 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, a[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  volatile float sink = out[0];
  (void)sink;
}

// GFLOP/s of an avx512 (else avx2) FMA loop run for as long as a timed round (>= 40 ms) before
// each round, so that %peak compares speeds measured at nearly the same time and over the same
// kind of time slice on a shared machine.
constexpr int64_t kRefIters = 200000;
void (*g_ref_loop)(int64_t) = nullptr;
double g_ref_lanes = 0;
double reference_gflops() {
  const auto start = Clock::now();
  int64_t calls = 0;
  double elapsed = 0;
  do {
    g_ref_loop(kRefIters);
    ++calls;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < 0.04);
  return double(calls * kRefIters) * 12 * g_ref_lanes * 2 / elapsed * 1e-9;
}

// GFLOP/s of one of the loops above with `lanes` floats per FMA.
double fma_peak(void (*loop)(int64_t), int lanes, int repeats) {
  const int64_t iters = 4000000;
  const Timing t = time_rounds([&] { loop(iters); }, repeats);
  return double(iters) * 12 * lanes * 2 / t.best * 1e-9;
}

double cpuinfo_mhz(std::string* model) {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  double mhz = 0;
  while (std::getline(f, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    if (line.rfind("cpu MHz", 0) == 0 && mhz == 0) mhz = std::atof(line.c_str() + colon + 1);
    if (line.rfind("model name", 0) == 0 && model->empty()) *model = line.substr(colon + 2);
  }
  return mhz;
}

struct Shape {
  const char* label;
  int64_t m, n, k;
  bool pack_b;  // dense form: B (weights^T) packed, A = activations
  bool pack_a_too = false;  // conv "pixels" form: A = packed im2col^T, B = packed weights^T
};

}  // namespace

int main(int argc, char** argv) {
  const int max_threads = argc > 1 ? std::atoi(argv[1]) : int(std::max(1u, std::thread::hardware_concurrency()));
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  const char* only = argc > 3 ? argv[3] : nullptr;  // run shapes whose label contains this
  std::string model;
  const double mhz = cpuinfo_mhz(&model);
  const ds::CpuFeatures& f = ds::cpu_features();
  std::printf("CPU: %s, %.0f MHz (/proc/cpuinfo), %d threads max, median of %d\n", model.c_str(), mhz,
              max_threads, repeats);
  double peak1 = 0;
  if (ds::isa_available(ds::Isa::kAvx512)) {
    peak1 = fma_peak(fma_loop_avx512, 16, repeats);
    g_ref_loop = fma_loop_avx512, g_ref_lanes = 16;
    std::printf("measured FMA peak (best round), 1 core: avx512 %.1f GFLOP/s (%.1f FLOP/cycle at %.0f MHz; nominal 2 x 512-bit FMA = 64 FLOP/cycle = %.1f GFLOP/s)\n",
                peak1, peak1 * 1e3 / mhz, mhz, 64 * mhz * 1e-3);
  }
  if (ds::isa_available(ds::Isa::kAvx2)) {
    const double p2 = fma_peak(fma_loop_avx2, 8, repeats);
    std::printf("measured FMA peak (best round), 1 core: avx2 %.1f GFLOP/s (%.1f FLOP/cycle)\n", p2, p2 * 1e3 / mhz);
    if (peak1 == 0) peak1 = p2, g_ref_loop = fma_loop_avx2, g_ref_lanes = 8;
  }
  (void)f;

  const Shape shapes[] = {
      {"square 256", 256, 256, 256, false},
      {"square 512", 512, 512, 512, false},
      {"square 1024", 1024, 1024, 1024, false},
      {"conv 3x3 56x56 64->64 (M=64 K=576 N=3136)", 64, 3136, 576, false},
      {"conv 3x3 14x14 256->256 (M=256 K=2304 N=196)", 256, 196, 2304, false},
      {"conv 3x3 14x14 256->256 as pixels (M=196 K=2304 N=256)", 196, 256, 2304, true, true},
      {"conv 3x3 7x7 512->512 as pixels (M=49 K=4608 N=512)", 49, 512, 4608, true, true},
      {"conv 1x1 28x28 128->256 (M=256 K=128 N=784)", 256, 784, 128, false},
      {"conv 1x1 13x13 512->1000 as pixels (M=169 K=512 N=1000)", 169, 1000, 512, true, true},
      {"conv 6x6 36x36 16->48 (M=48 K=576 N=1296)", 48, 1296, 576, false},
      {"conv 1x1 7x7 960->320 as pixels (M=49 K=960 N=320)", 49, 320, 960, true, true},
      {"conv 1x1 7x7 960->320 as pixels, 48 rows (M=48 K=960 N=320)", 48, 320, 960, true, true},
      {"conv 1x1 7x7 320->1280 as pixels (M=49 K=320 N=1280)", 49, 1280, 320, true, true},
      {"edge rows (M=1 K=960 N=320, A and B packed)", 1, 320, 960, true, true},
      {"edge rows (M=3 K=960 N=320, A and B packed)", 3, 320, 960, true, true},
      {"fc 1280->1000 as W.x (M=1000 K=1280 N=1)", 1000, 1, 1280, false},
      {"fc 1280->1000 as x.W^T (M=1 K=1280 N=1000, B packed)", 1, 1000, 1280, true},
  };
  std::printf("\n%-54s %-7s %3s %9s %9s %9s %7s\n", "shape", "isa", "thr", "median ms", "GFLOP/s", "best", "%peak");
  for (const Shape& s : shapes) {
    if (only && !std::strstr(s.label, only)) continue;
    const std::vector<float> a = random_vec(size_t(s.m * s.k), 1), b = random_vec(size_t(s.k * s.n), 2);
    const std::vector<float> bias = random_vec(size_t(s.m), 3);
    std::vector<float> c(size_t(s.m * s.n));
    for (ds::Isa isa : {ds::Isa::kScalar, ds::Isa::kAvx2, ds::Isa::kAvx512}) {
      if (!ds::isa_available(isa)) continue;
      if (isa == ds::Isa::kScalar && s.m * s.n * s.k > 300 * 300 * 300) continue;  // too slow to matter
      const ds::GemmKernels& g = *ds::kernels_for(isa).gemm;
      std::vector<float> ap, bp;
      ds::GemmParams p;
      p.m = s.m, p.n = s.n, p.k = s.k;
      if (s.pack_b) {
        p.a = {a.data(), s.k, 1, false};
        if (s.pack_a_too) {
          ap.resize(size_t(ds::gemm_packed_a_size(g, s.m, s.k)));
          ds::gemm_pack_a(g, s.m, s.k, a.data(), s.k, 1, ap.data());
          p.a = {ap.data(), 0, 0, true};
        }
        bp.resize(size_t(ds::gemm_packed_b_size(g, s.k, s.n)));
        ds::gemm_pack_b(g, s.k, s.n, b.data(), s.n, 1, bp.data());
        p.b = {bp.data(), 0, 0, true};
      } else {
        ap.resize(size_t(ds::gemm_packed_a_size(g, s.m, s.k)));
        ds::gemm_pack_a(g, s.m, s.k, a.data(), s.k, 1, ap.data());
        p.a = {ap.data(), 0, 0, true};
        p.b = {b.data(), s.n, 1, false};
      }
      p.c = c.data(), p.c_row_stride = s.n;
      p.bias = bias.data(), p.bias_kind = ds::kGemmBiasPerRow;
      p.act = 1;
      for (int threads = 1; threads <= max_threads; ++threads) {
        if (isa == ds::Isa::kScalar && threads > 1) break;
        ds::ThreadPool pool(threads);
        std::vector<float> ws(size_t(ds::gemm_workspace_floats(g, threads)) + 16);
        float* wsa = bench::align64(ws.data());
        const double flop = 2.0 * double(s.m) * double(s.n) * double(s.k) * 1e-9;
        const Timing t = time_rounds([&] { ds::gemm(g, p, wsa, pool); }, repeats,
                                     g_ref_loop ? reference_gflops : nullptr, flop * 1e9);
        std::printf("%-54s %-7s %3d %9.3f %9.1f %9.1f %6.1f%%\n", s.label, ds::isa_name(isa), threads,
                    t.median * 1e3, flop / t.median, flop / t.best,
                    100.0 * t.ratio / threads);
      }
    }
  }
  return 0;
}
