// NCHW (the runtime's layout) against blocked NCHWc16 on the layers that dominate the zoo
// models: the prepared conv2d op as a session runs it (its own choice of path, bias + relu)
// against the prototypes of nchwc16.h on the same data, and the cost of converting a tensor
// between the two layouts at a graph's edges. AVX-512 only.
//
//   bench_layout [dw|1x1|3x3|convert|all] [SECONDS]
//
// Each layer is timed at 1 and 2 threads (both layouts threaded by the same ThreadPool):
// bursts of 5 single calls of one layout then of the other, alternating, the first call of a
// burst dropped (caches warm: the same input every call), for SECONDS (default 1) of each
// layout; printed are the 10th percentile and the median of single calls in ms, the NCHW / c16
// ratio of the p10s, and the largest |difference| of the c16 output (converted back) from NCHW.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "bench_data.h"
#include "core/dispatch.h"
#include "core/thread_pool.h"
#include "nchwc16.h"
#include "ops/op.h"

namespace ds {
extern const OpDef kConv2dOp;
}

namespace {

using bench::random_vec;

// A 64-byte aligned float buffer (the blocked tensors are vectors).
struct Buffer {
  explicit Buffer(size_t n) : data(static_cast<float*>(std::aligned_alloc(64, (n * 4 + 63) / 64 * 64))), size(n) {
    std::memset(data, 0, n * 4);
  }
  ~Buffer() { std::free(data); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  float* data;
  size_t size;
};

// A conv2d node (square kernel k, pads k / 2, bias, relu) prepared as a session prepares it, its
// input and output 64-byte aligned as in the session's arena.
struct NchwConv {
  NchwConv(int64_t c, int64_t h, int64_t w, int64_t o, int64_t k, int64_t stride, int64_t group, const float* x,
           const float* wt, const float* b, ds::ThreadPool* pool)
      : table(ds::select_kernels()),
        oh((h + 2 * (k / 2) - k) / stride + 1),
        ow((w + 2 * (k / 2) - k) / stride + 1),
        xs{1, c, h, w},
        ws{o, c / group, k, k},
        bs{o},
        os{1, o, oh, ow},
        x_aligned(size_t(c * h * w)),
        y(size_t(o * oh * ow)),
        in{{x_aligned.data, &xs}, {wt, &ws}, {b, &bs}} {
    std::copy(x, x + x_aligned.size, x_aligned.data);
    p.pads[0] = p.pads[1] = p.pads[2] = p.pads[3] = k / 2;
    p.strides[0] = p.strides[1] = stride;
    p.act.kind = ds::kActRelu;
    p.group = group;
    const std::vector<ds::ValueInfo> info = {
        {ds::kDtypeF32, &xs, nullptr}, {ds::kDtypeF32, &ws, wt}, {ds::kDtypeF32, &bs, b}};
    const int threads = pool ? pool->size() : 1;
    state = ds::kConv2dOp.prepare(p, info, table, threads);
    const std::vector<const ds::Shape*> shapes = {&xs, &ws, &bs};
    workspace = std::make_unique<Buffer>(size_t(ds::kConv2dOp.workspace_floats(p, state.get(), shapes, os, threads)));
    ctx = {state.get(), pool, workspace->data};
  }
  void run() { ds::kConv2dOp.run_prepared(p, ctx, in, y.data, os, table); }

  const ds::KernelTable& table;
  int64_t oh, ow;
  ds::OpParams p;
  ds::Shape xs, ws, bs, os;
  Buffer x_aligned, y;
  std::vector<ds::OpInput> in;
  std::shared_ptr<const void> state;
  std::unique_ptr<Buffer> workspace;
  ds::RunContext ctx{};
};

struct Stats {
  double p10, median;
};

Stats stats_of(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 10], ms[ms.size() / 2]};
}

// Times a and b in alternating bursts (see the header comment); ms per single call.
template <typename A, typename B>
std::pair<Stats, Stats> alternate(A&& a, B&& b, double seconds) {
  std::vector<double> ta, tb;
  double spent_a = 0, spent_b = 0;
  auto burst = [](auto& fn, std::vector<double>& out, double& spent) {
    fn();
    for (int i = 0; i < 4; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      fn();
      const double ms = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3;
      out.push_back(ms);
      spent += ms * 1e-3;
    }
  };
  while ((spent_a < seconds || spent_b < seconds || ta.size() < 40) && ta.size() < 200000) {
    burst(a, ta, spent_a);
    burst(b, tb, spent_b);
  }
  return {stats_of(ta), stats_of(tb)};
}

float max_abs_diff(const std::vector<float>& a, const float* b) {
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

void print_header(const char* what) {
  std::printf("\n%s (%s), ms per call: p10 / median of single calls\n", what, ds::select_kernels().isa);
  std::printf("%-34s %2s %8s %8s %8s %8s %6s %9s\n", "layer", "t", "nchw p10", "med", "c16 p10", "med", "ratio",
              "max|diff|");
}

void print_row(const char* name, int threads, const std::pair<Stats, Stats>& s, float diff) {
  std::printf("%-34s %2d %8.4f %8.4f %8.4f %8.4f %6.2f %9.2e\n", name, threads, s.first.p10, s.first.median,
              s.second.p10, s.second.median, s.first.p10 / s.second.p10, double(diff));
  std::fflush(stdout);
}

// kind: 0 depthwise 3x3, 1 1x1, 3 dense 3x3.
void bench_layer(const char* name, int kind, int64_t c, int64_t hw, int64_t o, int64_t stride, double seconds) {
  const int64_t k = kind == 1 ? 1 : 3, group = kind == 0 ? c : 1, taps = k * k;
  const std::vector<float> x = random_vec(size_t(c * hw * hw), 1), w = random_vec(size_t(o * c / group * taps), 2),
                           b = random_vec(size_t(o), 3);
  const int64_t oh = (hw + 2 * (k / 2) - k) / stride + 1, ohw = oh * oh;
  Buffer xb(size_t(nchwc::blocks(c) * 16 * hw * hw)), yb(size_t(nchwc::blocks(o) * 16 * ohw)), y_back(size_t(o * ohw));
  Buffer padded(size_t(nchwc::blocks(c) * 16 * (hw + 2) * (hw + 2)));
  nchwc::to_nchwc16(x.data(), c, hw * hw, xb.data, nullptr);
  // The depthwise weights as [C/16][9][16], the dense ones packed by pack_conv_weights.
  std::vector<float> dw_w(size_t(nchwc::blocks(c) * 9 * 16), 0.0f), dw_b(size_t(nchwc::blocks(c) * 16), 0.0f);
  nchwc::ConvWeights dense;
  if (kind == 0) {
    for (int64_t ch = 0; ch < c; ++ch) {
      dw_b[size_t(ch)] = b[size_t(ch)];
      for (int t = 0; t < 9; ++t) dw_w[size_t(((ch / 16) * 9 + t) * 16 + ch % 16)] = w[size_t(ch * 9 + t)];
    }
  } else {
    dense = nchwc::pack_conv_weights(w.data(), b.data(), o, c, taps);
  }
  for (int threads : {1, 2}) {
    std::unique_ptr<ds::ThreadPool> pool;
    if (threads > 1) pool = std::make_unique<ds::ThreadPool>(threads);
    NchwConv ref(c, hw, hw, o, k, stride, group, x.data(), w.data(), b.data(), pool.get());
    auto blocked = [&] {
      if (kind == 0 && stride == 1)
        nchwc::dwconv3x3_nchwc16<1>(xb.data, c, hw, hw, dw_w.data(), dw_b.data(), yb.data, true, pool.get());
      else if (kind == 0)
        nchwc::dwconv3x3_nchwc16<2>(xb.data, c, hw, hw, dw_w.data(), dw_b.data(), yb.data, true, pool.get());
      else if (kind == 1)
        nchwc::conv1x1_nchwc16(xb.data, hw * hw, dense, yb.data, true, pool.get());
      else
        nchwc::conv3x3_nchwc16(xb.data, hw, hw, dense, padded.data, yb.data, true, pool.get());
    };
    auto nchw = [&] { ref.run(); };
    ref.run();
    blocked();
    nchwc::from_nchwc16(yb.data, o, ohw, y_back.data, nullptr);
    print_row(name, threads, alternate(nchw, blocked, seconds), max_abs_diff(std::vector<float>(ref.y.data, ref.y.data + ref.y.size), y_back.data));
  }
}

void bench_depthwise(double seconds) {
  print_header("depthwise 3x3 p1 + bias + relu (MobileNet V2)");
  struct Layer {
    int64_t c, hw, stride;
  };
  const Layer layers[] = {{32, 112, 1}, {96, 112, 2}, {144, 56, 1}, {144, 56, 2}, {192, 28, 1},
                          {192, 28, 2}, {384, 14, 1}, {576, 14, 1}, {576, 14, 2}, {960, 7, 1}};
  for (const Layer& l : layers) {
    char name[64];
    std::snprintf(name, sizeof name, "dw %ldx%ldx%ld s%ld", long(l.c), long(l.hw), long(l.hw), long(l.stride));
    bench_layer(name, 0, l.c, l.hw, l.c, l.stride, seconds);
  }
}

struct Dense {
  const char* model;
  int64_t c, hw, o;
};

void bench_dense(const char* title, int kind, const Dense* layers, size_t n, double seconds) {
  print_header(title);
  for (size_t i = 0; i < n; ++i) {
    const Dense& l = layers[i];
    char name[64];
    std::snprintf(name, sizeof name, "%s %ld->%ld @%ld", l.model, long(l.c), long(l.o), long(l.hw));
    bench_layer(name, kind, l.c, l.hw, l.o, 1, seconds);
  }
}

void bench_1x1(double seconds) {
  const Dense layers[] = {{"mbv2", 16, 112, 96},  {"mbv2", 24, 56, 144},  {"mbv2", 144, 56, 24},
                          {"mbv2", 32, 28, 192},  {"mbv2", 192, 28, 32},  {"mbv2", 96, 14, 576},
                          {"mbv2", 576, 14, 96},  {"mbv2", 960, 7, 160},  {"mbv2", 320, 7, 1280},
                          {"sqz", 64, 55, 16},    {"sqz", 16, 55, 64},    {"sqz", 128, 27, 32},
                          {"sqz", 64, 13, 256}};
  bench_dense("1x1 s1 + bias + relu", 1, layers, sizeof layers / sizeof layers[0], seconds);
}

void bench_3x3(double seconds) {
  const Dense layers[] = {{"r18", 64, 56, 64},   {"r18", 128, 28, 128}, {"r18", 256, 14, 256},
                          {"r18", 512, 7, 512},  {"sqz", 16, 55, 64},   {"sqz", 32, 27, 128},
                          {"sqz", 64, 13, 256}};
  bench_dense("dense 3x3 s1 p1 + bias + relu", 3, layers, sizeof layers / sizeof layers[0], seconds);
}

// One tensor converted NCHW -> NCHWc16 and back, 1 and 2 threads (checked: the round trip is exact).
void bench_convert(double seconds) {
  std::printf("\nNCHW <-> NCHWc16 conversion, ms per call: p10 / median of single calls\n");
  std::printf("%-26s %2s %8s %8s %8s %8s %6s\n", "tensor", "t", "to p10", "med", "from p10", "med", "exact");
  struct Tensor {
    const char* what;
    int64_t c, h, w;
  };
  const Tensor tensors[] = {{"input 3x224x224", 3, 224, 224},      {"mbv2 32x112x112", 32, 112, 112},
                            {"mbv2 24x56x56", 24, 56, 56},         {"r18 64x56x56", 64, 56, 56},
                            {"sqz 128x55x55", 128, 55, 55},        {"r18 512x7x7", 512, 7, 7},
                            {"mbv2 1280x7x7", 1280, 7, 7},         {"sqz 1000x13x13", 1000, 13, 13}};
  for (const Tensor& t : tensors) {
    const int64_t hw = t.h * t.w;
    const std::vector<float> x = random_vec(size_t(t.c * hw), 1);
    Buffer blocked(size_t(nchwc::blocks(t.c) * 16 * hw)), back(size_t(t.c * hw));
    for (int threads : {1, 2}) {
      std::unique_ptr<ds::ThreadPool> pool;
      if (threads > 1) pool = std::make_unique<ds::ThreadPool>(threads);
      auto to = [&] { nchwc::to_nchwc16(x.data(), t.c, hw, blocked.data, pool.get()); };
      auto from = [&] { nchwc::from_nchwc16(blocked.data, t.c, hw, back.data, pool.get()); };
      to();
      from();
      const bool exact = max_abs_diff(x, back.data) == 0.0f;
      const auto s = alternate(to, from, seconds);
      std::printf("%-26s %2d %8.4f %8.4f %8.4f %8.4f %6s\n", t.what, threads, s.first.p10, s.first.median,
                  s.second.p10, s.second.median, exact ? "yes" : "NO");
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (!__builtin_cpu_supports("avx512f")) {
    std::printf("bench_layout needs AVX-512\n");
    return 1;
  }
  const char* what = argc > 1 ? argv[1] : "all";
  const double seconds = argc > 2 ? std::atof(argv[2]) : 1.0;
  const bool all = std::strcmp(what, "all") == 0;
  if (all || std::strcmp(what, "dw") == 0) bench_depthwise(seconds);
  if (all || std::strcmp(what, "1x1") == 0) bench_1x1(seconds);
  if (all || std::strcmp(what, "3x3") == 0) bench_3x3(seconds);
  if (all || std::strcmp(what, "convert") == 0) bench_convert(seconds);
  return 0;
}
