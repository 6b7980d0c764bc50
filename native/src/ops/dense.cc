// dense (op id 2): x (..., K), weight (M,K), optional bias (M); output (..., M). Fused activation.
// With a constant weight the session packs W^T once as the GEMM's B operand (docs/kernels.md) and
// runs y = x . W^T as one GEMM (batch rows, M columns, bias per column), split across threads by
// ds::gemm, or for up to 3 rows the level's GEMV kernel over the same packed weight; a pruned weight
// (<= 25% nonzero) runs batch-1 rows through the CSR kernel when that measured faster at session
// creation. Without a constant weight the scalar reference kernel runs.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>


#include "common/error.h"
#include "core/dispatch.h"
#include "kernels/sparse.h"
#include "ops/op.h"
#include "ops/parallel.h"
#include "common/huge_page_buffer.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser a(attrs, node, "dense");
  OpParams p;
  p.act = parse_epilogue(a);
  a.finish();
  return p;
}

Shape infer_shape(const OpParams&, const std::vector<const Shape*>& in, const std::string& node) {
  const Shape& x = *in[0];
  const Shape& w = *in[1];
  if (x.empty())
    fail(DS_ERR_SHAPE, node_where(node, "dense"), ": input ", shape_str(x), " has no axis to contract");
  if (w.size() != 2 || w[1] != x.back())
    fail(DS_ERR_SHAPE, node_where(node, "dense"), ": weight ", shape_str(w), " is not [M, ", x.back(),
         "] for input ", shape_str(x));
  if (in.size() > 2 && in[2] && (in[2]->size() != 1 || (*in[2])[0] != w[0]))
    fail(DS_ERR_SHAPE, node_where(node, "dense"), ": bias ", shape_str(*in[2]), " is not [", w[0], "]");
  Shape out = x;
  out.back() = w[0];
  return out;
}

void run(const OpParams& p, const std::vector<OpInput>& in, float* out, const Shape& os,
         const KernelTable& k) {
  const Shape& x = *in[0].shape;
  DenseParams d;
  d.n = product(x, 0, x.size() - 1);
  d.k = x.back();
  d.m = os.back();
  d.act = p.act;
  const float* bias = in.size() > 2 ? in[2].data : nullptr;
  k.dense(d, in[0].data, in[1].data, bias, out);
}

struct State {
  const GemmKernels* g;
  HugePageBuffer storage;     // the packed weights (common/huge_page_buffer.h), at `packed`
  const float* packed;
  std::unique_ptr<CsrWeights> csr;  // set when the CSR kernel measured faster at batch 1
};

// Weights at most this dense are candidates for the CSR kernel (bench_sparse: it wins below
// about 15% on LeNet-300-100's shapes and loses 2x at 30%).
constexpr double kMaxSparseDensity = 0.25;

// Median microseconds of 15 calls after 3 warm-up calls.
template <typename Fn>
double median_us(Fn&& fn) {
  for (int i = 0; i < 3; ++i) fn();
  double t[15];
  for (double& v : t) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    v = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  }
  std::nth_element(t, t + 7, t + 15);
  return t[7];
}

// For a pruned weight: the CSR form, kept only if it runs a batch-1 row faster than the dense
// GEMV on this CPU (timed once, at session creation, on zero inputs).
void choose_sparse(State& s, const float* w, int64_t m, int64_t k, const KernelTable& t) {
  int64_t nonzeros = 0;
  for (int64_t i = 0; i < m * k; ++i) nonzeros += w[i] != 0.0f;
  if (!t.gemv || double(nonzeros) > kMaxSparseDensity * double(m * k)) return;
  auto csr = std::make_unique<CsrWeights>(csr_from_dense(w, m, k));
  std::vector<float> x(static_cast<size_t>(k), 0.0f), y(static_cast<size_t>(m));
  DenseParams d;
  d.n = 1, d.k = k, d.m = m;
  const double dense_us = median_us([&] { t.gemv(k, m, s.packed, x.data(), nullptr, d.act, y.data()); });
  const double sparse_us = median_us([&] { ds_f32_spmm__scalar(d, x.data(), *csr, nullptr, y.data()); });
  if (sparse_us < dense_us) s.csr = std::move(csr);
}

std::shared_ptr<const void> prepare(const OpParams&, const std::vector<ValueInfo>& in, const KernelTable& t, int) {
  if (!in[1].data || !in[1].dims || in[1].dtype != kDtypeF32 || !t.gemm) return nullptr;
  const Shape& w = *in[1].dims;
  const int64_t m = w[0], k = w[1];
  auto s = std::make_shared<State>();
  s->g = t.gemm;
  float* base = s->storage.allocate(gemm_packed_b_size(*s->g, k, m));
  gemm_pack_b(*s->g, k, m, static_cast<const float*>(in[1].data), 1, k, base);
  s->packed = base;
  choose_sparse(*s, static_cast<const float*>(in[1].data), m, k, t);
  return s;
}

int64_t workspace_floats(const OpParams&, const void* state, const std::vector<const Shape*>&, const Shape&,
                         int threads) {
  return state ? gemm_workspace_floats(*static_cast<const State*>(state)->g, threads) : 0;
}

// Up to this many rows, the GEMV kernel (when the level has one) beats the GEMM's row tiles.
constexpr int64_t kMaxGemvRows = 3;
// Below these many multiply-adds a job on the pool costs more than the split saves (measured with
// the spinning pool: a hand-off is ~1-2 us when the workers are awake). A GEMV streams its weight
// from L3 or memory in a whole network: FaceNet-1M's 128 -> 848 (108K multiply-adds, 434 KB)
// took 8-9 us of caller CPU time inline, so the GEMV splits from 64K.
constexpr int64_t kMinParallelGemvMacs = 64 * 1024;
constexpr int64_t kMinParallelGemmMacs = 512 * 1024;

void run_prepared(const OpParams& p, const RunContext& ctx, const std::vector<OpInput>& in, void* out,
                  const Shape& os, const KernelTable& k) {
  const State* s = static_cast<const State*>(ctx.state);
  if (!s) {
    run(p, in, static_cast<float*>(out), os, k);
    return;
  }
  const Shape& x = *in[0].shape;
  GemmParams gp;
  gp.m = product(x, 0, x.size() - 1);
  gp.k = x.back();
  gp.n = os.back();
  gp.a = {in[0].data, gp.k, 1, false};
  gp.b = {s->packed, 0, 0, true};
  gp.c = static_cast<float*>(out);
  gp.c_row_stride = gp.n;
  if (in.size() > 2 && in[2].data) {
    gp.bias = in[2].data;
    gp.bias_kind = kGemmBiasPerCol;
  }
  gp.act = p.act.kind;
  gp.alpha = p.act.alpha;
  gp.beta = p.act.beta;
  const int64_t macs = gp.m * gp.n * gp.k;
  if (s->csr && gp.m == 1) {
    DenseParams d;
    d.n = 1, d.k = gp.k, d.m = gp.n;
    d.act = p.act;
    ds_f32_spmm__scalar(d, gp.a.data, *s->csr, gp.bias, gp.c);
    return;
  }
  if (k.gemv && gp.m <= kMaxGemvRows) {
    // Row by row over the packed weight; threads take ranges of whole panels, about
    // kPiecesPerThread each (ops/parallel.h: a late worker leaves its share to the caller), of an
    // even number of panels (the GEMV runs two at a time).
    const int64_t nr = s->g->nr, panels = (gp.n + nr - 1) / nr;
    const int threads = ctx.pool && macs >= kMinParallelGemvMacs ? ctx.pool->size() : 1;
    const int64_t pieces = threads > 1 ? kPiecesPerThread * threads : 1;
    const int64_t per_task = threads > 1 ? ((panels + pieces - 1) / pieces + 1) / 2 * 2 : panels;
    auto task = [&](int64_t t, int) {
      const int64_t j0 = t * per_task * nr, j1 = std::min(gp.n, j0 + per_task * nr);
      for (int64_t r = 0; r < gp.m; ++r)
        k.gemv(gp.k, j1 - j0, s->packed + j0 * gp.k, gp.a.data + r * gp.k, gp.bias ? gp.bias + j0 : nullptr, p.act,
               gp.c + r * gp.n + j0);
    };
    if (threads > 1) ctx.pool->parallel_for((panels + per_task - 1) / per_task, task);
    else task(0, 0);
    return;
  }
  if (ctx.pool && macs >= kMinParallelGemmMacs) gemm(*s->g, gp, ctx.workspace, *ctx.pool);
  else s->g->gemm(gp, ctx.workspace);
}

}  // namespace

extern const OpDef kDenseOp = {2,       "dense",      2,       3, parse, infer_shape, run, false, nullptr,
                               prepare, run_prepared, workspace_floats};

}  // namespace ds
