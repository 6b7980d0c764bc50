// Times the int8 kernels of the best level on the layer shapes of MobileNet V2 and ResNet-18
// (batch 1, one thread): the depthwise 3x3 kernel, and for 1x1 / GEMM layers the activation
// packing and the GEMM with its requantization epilogue apart. Prints microseconds per call and
// nanoseconds per output. Inputs are random; the results are not checked here.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/dispatch.h"
#include "core/thread_pool.h"
#include "kernels/qu8.h"
#include "ops/op.h"

namespace ds {
extern const OpDef kQConv2dOp;
}

namespace {

// Times single calls for at least 0.3 s; returns seconds per call, the 10th percentile (the
// machine may be shared: a percentile of single calls drops the ones another process slowed).
template <typename Fn>
double time_per_call(Fn fn) {
  // BENCH_QCONV_CALLS=N: exactly N calls, their mean (a fixed amount of work, for `perf stat`).
  if (const char* calls = std::getenv("BENCH_QCONV_CALLS")) {
    const int n = std::max(1, std::atoi(calls));
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) fn();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / n;
  }
  fn();  // warm-up
  std::vector<double> times;
  const auto start = std::chrono::steady_clock::now();
  for (auto t0 = start; t0 - start < std::chrono::milliseconds(300) || times.size() < 10;) {
    fn();
    const auto t1 = std::chrono::steady_clock::now();
    times.push_back(std::chrono::duration<double>(t1 - t0).count());
    t0 = t1;
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 10, times.end());
  return times[times.size() / 10];
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
    std::printf("   channels in lanes %8.1f us  rows %8.1f us  planes %8.1f us", time(ds::ds_qu8_dwconv3x3_cl__avx512vnni) * 1e6,
                time(ds::ds_qu8_dwconv3x3_rows__avx512vnni) * 1e6, time(ds::ds_qu8_dwconv3x3_planes__avx512vnni) * 1e6);
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


// A 3x3 stride-1 pad-1 convolution c -> m on an h x h plane as the session runs it with
// interleave4: the GEMM reads the padded plane's channel quads in place (x_offsets), over the
// grid of (h - 1) * (h + 2) + h pixels, in blocks of `chunk` pixels; gemm_t for small planes.
void bench_implicit(const ds::QGemmKernels& g, int64_t c, int64_t m, int64_t h) {
  const int64_t wq = h + 2, plane = wq * wq, k = c * 9, grid = (h - 1) * wq + h;
  const auto x = random_bytes(size_t(c * plane + 4 * (wq + 64) + 256), 5);
  const auto w = random_bytes(size_t(m * k), 6);
  const Channels ch(m);
  std::vector<int64_t> offsets;
  for (int64_t q = 0; q < c / 4; ++q)
    for (int64_t ky = 0; ky < 3; ++ky)
      for (int64_t kx = 0; kx < 3; ++kx) offsets.push_back((q * plane + ky * wq + kx) * 4);
  std::vector<uint8_t> pw(size_t(g.packed_w_bytes(m, k))), y(size_t(m * grid));
  g.pack_w(m, k, reinterpret_cast<const int8_t*>(w.data()), pw.data());
  const int64_t chunk = std::max<int64_t>(g.nr, (384 * 1024 / k) / g.nr * g.nr);
  const double gemm = time_per_call([&] {
    for (int64_t p0 = 0; p0 < grid; p0 += chunk) {
      ds::QGemmParams p;
      p.m = m, p.n = std::min(chunk, grid - p0), p.k = k, p.w = pw.data(), p.x = x.data() + 4 * p0;
      p.x_offsets = offsets.data(), p.y = y.data() + m * p0, p.y_row_stride = p.n;
      p.ch = ch.params();
      g.gemm(p);
    }
  });
  const double macs = double(m * k * h * h);
  std::printf("implicit 3x3 %4lld -> %-4lld %3lldx%-3lld  gemm %7.1f us  %5.1f MAC/ns", (long long)c, (long long)m,
              (long long)h, (long long)h, gemm * 1e6, macs / (gemm * 1e9));
  if (g.gemm_t && h * h <= 196) {
    std::vector<uint8_t> pwt(size_t(g.packed_wt_bytes(m, k)));
    g.pack_wt(m, k, reinterpret_cast<const int8_t*>(w.data()), pwt.data());
    std::vector<int32_t> pix;
    for (int64_t t = 0; t < h * h; ++t) pix.push_back(int32_t(t / h * wq + t % h));
    const double t = time_per_call([&] {
      ds::QGemmTParams p;
      p.m0 = 0, p.m1 = m, p.n = h * h, p.k = k, p.w = pwt.data(), p.x = x.data(), p.x_offsets = offsets.data();
      p.pix = pix.data(), p.y = y.data(), p.y_row_stride = h * h, p.ch = ch.params();
      g.gemm_t(p);
    });
    std::printf("  gemm_t %7.1f us  %5.1f MAC/ns", t * 1e6, macs / (t * 1e9));
  }
  std::printf("\n");
}

// The prepared qconv2d op (c -> o, k x k, stride, pad, one thread) as the session runs it: phase
// planes, GEMM and the copy to the output included; BENCH_THREADS threads (default 1). act: the dtype of x and y (u8, or i16 for
// the int16 path); y_act: y's when it differs (u8 x with i16 y). Microseconds per call, warm and cold (caches flushed before each call by writing 64 MB, the median of 30).
void bench_op(int64_t c, int64_t h, int64_t o, int64_t kk, int64_t stride, int64_t pad, uint8_t act = ds::kDtypeU8,
              uint8_t y_act = 0) {
  const ds::KernelTable& kt = ds::select_kernels();
  const bool i16 = act == ds::kDtypeI16, i16_y = (y_act ? y_act : act) == ds::kDtypeI16;
  ds::OpParams p;
  p.pads[0] = p.pads[1] = p.pads[2] = p.pads[3] = pad;
  p.strides[0] = p.strides[1] = stride;
  p.zp = i16 ? 0 : 3, p.y_zp = i16_y ? 0 : 5;
  p.y_dtype = i16_y ? ds::kDtypeI16 : ds::kDtypeU8;
  if (i16_y) p.act_min = -32768, p.act_max = 32767;
  const int64_t oh = (h + 2 * pad - kk) / stride + 1;
  const ds::Shape xs = {1, c, h, h}, ws = {o, c, kk, kk}, cs = {o}, os = {1, o, oh, oh};
  const auto x = random_bytes(size_t(c * h * h) * (i16 ? 2 : 1), 7);
  auto w = random_bytes(size_t(o * c * kk * kk), 8);
  for (auto& v : w) v = uint8_t(int8_t(v) / 2);  // |w| <= 64: the folded bias stays in range
  const Channels ch(o);
  const std::vector<ds::ValueInfo> info = {{act, &xs, nullptr},
                                           {ds::kDtypeI8, &ws, w.data()},
                                           {ds::kDtypeI32, &cs, ch.bias.data()},
                                           {ds::kDtypeI32, &cs, ch.mult.data()},
                                           {ds::kDtypeI32, &cs, ch.shift.data()}};
  const int threads = std::getenv("BENCH_THREADS") ? std::atoi(std::getenv("BENCH_THREADS")) : 1;
  std::unique_ptr<ds::ThreadPool> pool;
  if (threads > 1) pool = std::make_unique<ds::ThreadPool>(threads);
  const std::shared_ptr<const void> state = ds::kQConv2dOp.prepare(p, info, kt, threads);
  auto f = [](const void* v) { return static_cast<const float*>(v); };
  const std::vector<ds::OpInput> in = {{f(x.data()), &xs, act},
                                       {f(w.data()), &ws, ds::kDtypeI8},
                                       {f(ch.bias.data()), &cs, ds::kDtypeI32},
                                       {f(ch.mult.data()), &cs, ds::kDtypeI32},
                                       {f(ch.shift.data()), &cs, ds::kDtypeI32}};
  std::vector<uint8_t> y(size_t(o * oh * oh) * (i16_y ? 2 : 1));
  const std::vector<const ds::Shape*> in_shapes = {&xs, &ws, &cs, &cs, &cs};
  std::vector<float> workspace(size_t(ds::kQConv2dOp.workspace_floats(p, state.get(), in_shapes, os, threads) + 16));
  float* ws_aligned = workspace.data() + (16 - (reinterpret_cast<uintptr_t>(workspace.data()) / 4) % 16) % 16;
  const ds::RunContext ctx{state.get(), pool.get(), ws_aligned};
  auto run = [&] { ds::kQConv2dOp.run_prepared(p, ctx, in, y.data(), os, kt); };
  // Warm: each call timed alone for 0.5 s, the 10th percentile (a loaded machine's descheduled or
  // evicted calls dropped rather than averaged in).
  std::vector<double> calls;
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 0.5 || calls.size() < 20) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    calls.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(calls.begin(), calls.end());
  const double warm = calls[calls.size() / 10];
  std::vector<uint8_t> flush(size_t(64) << 20);
  std::vector<double> cold;
  for (int i = 0; i < 30; ++i) {
    for (size_t j = 0; j < flush.size(); j += 64) flush[j] += 1;
    const auto start = std::chrono::steady_clock::now();
    run();
    cold.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(cold.begin(), cold.end());
  const double macs = double(o * c * kk * kk * oh * oh);
  std::printf("op %s %4lld -> %-4lld %3lldx%-3lld %lldx%lld s%lld  warm %7.1f us %5.1f MAC/ns  cold %7.1f us\n",
              i16 ? "i16" : i16_y ? "u8>i16" : "u8 ", (long long)c, (long long)o, (long long)h, (long long)h, (long long)kk, (long long)kk, (long long)stride,
              warm * 1e6, macs / (warm * 1e9), cold[cold.size() / 2] * 1e6);
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
  if (argc == 8 && std::string(argv[1]) == "op") {  // `op C H O K STRIDE PAD`: that layer only
    bench_op(std::atoll(argv[2]), std::atoll(argv[3]), std::atoll(argv[4]), std::atoll(argv[5]), std::atoll(argv[6]),
             std::atoll(argv[7]));
    return 0;
  }
  if (argc == 8 && std::string(argv[1]) == "op16") {  // `op16 C H O K STRIDE PAD`: that layer, u8, i16, u8 -> i16
    for (const auto& [act, y_act] : {std::pair<uint8_t, uint8_t>{ds::kDtypeU8, 0}, {ds::kDtypeI16, 0},
                                     {ds::kDtypeU8, ds::kDtypeI16}})
      bench_op(std::atoll(argv[2]), std::atoll(argv[3]), std::atoll(argv[4]), std::atoll(argv[5]),
               std::atoll(argv[6]), std::atoll(argv[7]), act, y_act);
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "op") {  // ResNet-18's int8 convolutions as whole ops
    const int64_t layers[][6] = {{64, 56, 64, 3, 1, 1},   {64, 56, 128, 3, 2, 1},  {64, 56, 128, 1, 2, 0},
                                 {128, 28, 128, 3, 1, 1}, {128, 28, 256, 3, 2, 1}, {128, 28, 256, 1, 2, 0},
                                 {256, 14, 256, 3, 1, 1}, {256, 14, 512, 3, 2, 1}, {256, 14, 512, 1, 2, 0},
                                 {512, 7, 512, 3, 1, 1}};
    for (const auto& l : layers) bench_op(l[0], l[1], l[2], l[3], l[4], l[5]);
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "implicit") {  // ResNet-18's 3x3 stride-1 layers, read in place
    if (!k.gemm->interleave4) return 0;
    for (int64_t c : {64, 128, 256, 512}) bench_implicit(*k.gemm, c, c, 56 * 64 / c);
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
