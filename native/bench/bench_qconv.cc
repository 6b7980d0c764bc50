// Times the int8 kernels of the best level on the layer shapes of MobileNet V2 and ResNet-18
// (batch 1, one thread): the depthwise 3x3 kernel, and for 1x1 / GEMM layers the activation
// packing and the GEMM with its requantization epilogue apart. Prints microseconds per call and
// nanoseconds per output. Inputs are random; the results are not checked here.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "kernels/qu8.h"

namespace {

// Runs fn until at least 0.1 s have passed; returns seconds per call (the best of 3 rounds).
template <typename Fn>
double time_per_call(Fn fn) {
  // BENCH_QCONV_CALLS=N: exactly N calls, one round (a fixed amount of work, for `perf stat`).
  if (const char* calls = std::getenv("BENCH_QCONV_CALLS")) {
    const int n = std::max(1, std::atoi(calls));
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) fn();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / n;
  }
  double best = 1e30;
  for (int round = 0; round < 3; ++round) {
    int calls = 0;
    const auto start = std::chrono::steady_clock::now();
    double elapsed = 0;
    do {
      fn();
      ++calls;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    } while (elapsed < 0.1);
    best = std::min(best, elapsed / calls);
  }
  return best;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (auto& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = uint8_t(seed >> 24);
  }
  return v;
}

struct Channels {
  std::vector<int32_t> bias, mult, shift;
  explicit Channels(int64_t n) : bias(size_t(n), 1000), mult(size_t(n), 1 << 30), shift(size_t(n), 8) {}
  ds::QChannelParams params() const { return {bias.data(), mult.data(), shift.data()}; }
};

void bench_dw(const ds::QKernels& k, int64_t c, int64_t h, int64_t stride) {
  ds::QConv2dParams q;
  ds::Conv2dParams& p = q.conv;
  p.n = 1, p.c = c, p.h = h, p.w = h, p.o = c, p.kh = p.kw = 3;
  p.stride_h = p.stride_w = stride, p.pad_top = p.pad_left = 1, p.dil_h = p.dil_w = 1, p.group = c;
  p.oh = p.ow = (h + 2 - 3) / stride + 1;
  q.x_zp = 3;
  const auto x = random_bytes(size_t(c * h * h), 1);
  const auto w = random_bytes(size_t(c * 9), 2);
  const Channels ch(c);
  std::vector<uint8_t> ws(size_t(ds::ds_qu8_dwconv_workspace(p))), y(size_t(c * p.oh * p.ow));
  auto time = [&](ds::QDwConvKernel kernel) {
    return time_per_call([&] {
      kernel(q, x.data(), reinterpret_cast<const int8_t*>(w.data()), ch.params(), ws.data(), y.data(), 0, c);
    });
  };
  const double s = time(k.dwconv);
  std::printf("dw3x3 c=%-4lld %3lldx%-3lld s%lld  %8.1f us  %6.3f ns/output", (long long)c, (long long)h,
              (long long)h, (long long)stride, s * 1e6, s * 1e9 / double(y.size()));
  if (k.dwconv == ds::ds_qu8_dwconv3x3__avx512vnni)  // its two kernels apart
    std::printf("   channels in lanes %8.1f us  planes %8.1f us", time(ds::ds_qu8_dwconv3x3_cl__avx512vnni) * 1e6,
                time(ds::ds_qu8_dwconv3x3_planes__avx512vnni) * 1e6);
  if (k.dw_packed_bytes && k.dw_packed_bytes(q) > 0) {  // constants packed once, as a session runs it
    std::vector<uint8_t> packed(size_t(k.dw_packed_bytes(q)));
    k.dw_pack(q, reinterpret_cast<const int8_t*>(w.data()), ch.params(), packed.data());
    std::printf("   packed %8.1f us", time_per_call([&] {
                  k.dwconv_packed(q, x.data(), packed.data(), ws.data(), y.data(), 0, c);
                }) * 1e6);
  }
  std::printf("\n");
}

void bench_gemm(const ds::QGemmKernels& g, int64_t m, int64_t k, int64_t n) {
  const auto x = random_bytes(size_t(k * n), 3);
  const auto w = random_bytes(size_t(m * k), 4);
  const Channels ch(m);
  std::vector<uint8_t> pw(size_t(g.packed_w_bytes(m, k))), px(size_t(g.packed_x_bytes(k, n))), y(size_t(m * n));
  g.pack_w(m, k, reinterpret_cast<const int8_t*>(w.data()), pw.data());
  const double pack = time_per_call([&] { g.pack_x(k, n, x.data(), n, px.data()); });
  ds::QGemmParams p;
  p.m = m, p.n = n, p.k = k, p.w = pw.data(), p.x = px.data(), p.y = y.data(), p.y_row_stride = n;
  p.ch = ch.params();
  const double gemm = time_per_call([&] { g.gemm(p); });
  std::printf("gemm m=%-4lld k=%-4lld n=%-5lld  pack %7.1f us  gemm %7.1f us  %6.3f ns/output  %5.1f MAC/ns\n",
              (long long)m, (long long)k, (long long)n, pack * 1e6, gemm * 1e6, gemm * 1e9 / double(m * n),
              double(m * k * n) / (gemm * 1e9));
}

}  // namespace

int main(int argc, char** argv) {
  const bool dw_only = argc > 1 && std::string(argv[1]) == "dw";  // the depthwise layers only
  const ds::CpuFeatures& f = ds::cpu_features();
  const ds::QKernels& k = f.avx512vnni ? ds::ds_qkernels__avx512vnni : ds::ds_qkernels__avx2;
  std::printf("int8 kernels: %s\n", k.isa);
  if (dw_only && argc == 5) {  // `dw C H STRIDE`: that layer only (for perf)
    bench_dw(k, std::atoll(argv[2]), std::atoll(argv[3]), std::atoll(argv[4]));
    return 0;
  }
  if (argc == 5 && std::string(argv[1]) == "gemm") {  // `gemm M K N`: that GEMM only
    bench_gemm(*k.gemm, std::atoll(argv[2]), std::atoll(argv[3]), std::atoll(argv[4]));
    return 0;
  }
  // MobileNet V2 depthwise layers
  const int64_t dw[][3] = {{32, 112, 1}, {96, 112, 2}, {144, 56, 1}, {144, 56, 2}, {192, 28, 1},
                           {192, 28, 2}, {384, 14, 1}, {576, 14, 1}, {576, 14, 2}, {960, 7, 1}};
  for (const auto& s : dw) bench_dw(k, s[0], s[1], s[2]);
  if (dw_only) return 0;
  // MobileNet V2 1x1 layers (m, k, pixels) and ResNet-18 3x3 layers as GEMMs
  const int64_t gemms[][3] = {{16, 32, 12544}, {96, 16, 12544}, {24, 96, 3136}, {144, 24, 3136}, {32, 144, 784},
                              {192, 32, 784},  {64, 192, 784},  {384, 64, 196},  {960, 160, 49}, {1280, 320, 49},
                              {64, 576, 3136}, {128, 1152, 784}, {256, 2304, 196}, {512, 4608, 49}};
  for (const auto& s : gemms) bench_gemm(*k.gemm, s[0], s[1], s[2]);
  return 0;
}
