// qdense (op id 28): x u8 or i16 (..., K), weight i8 (M,K), bias/multiplier/shift i32 (M); output u8 or
// i16 (..., M). acc = bias + sum (x - x_zp) * w; y = clamp(y_zp + requant(acc, multiplier, shift),
// act_min, act_max). x or y i16 (docs/format.md, "int16 activations"): State::int16, chosen at
// prepare from the value dtypes; with i16 x on a level with Q16Kernels, the weights packed once as
// the GEMM's B panels (output features in the lanes) and the rows of x broadcast.
#include "core/thread_pool.h"
#include "ops/qcommon.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser a(attrs, node, "qdense");
  OpParams p;
  p.zp = q_zero_point(a, "x_zero_point");
  p.y_zp = q_zero_point(a, "y_zero_point");
  q_parse_act_range(a, p);
  a.finish();
  return p;
}

Shape infer_shape(const OpParams&, const std::vector<const Shape*>& in, const std::string& node) {
  const Shape& x = *in[0];
  const Shape& w = *in[1];
  if (x.empty()) fail(DS_ERR_SHAPE, node_where(node, "qdense"), ": input ", shape_str(x), " has no axis to contract");
  if (w.size() != 2 || w[1] != x.back())
    fail(DS_ERR_SHAPE, node_where(node, "qdense"), ": weight ", shape_str(w), " is not [M, ", x.back(),
         "] for input ", shape_str(x));
  Shape out = x;
  out.back() = w[0];
  return out;
}

uint8_t check_dtypes(OpParams& p, const std::vector<ValueInfo>& in, const std::string& who) {
  return q_check_linear(p, in, who, 2);
}

// The bias with the zero-point term folded in (bias - x_zp * sum w), when every accumulator of
// the raw-x dot product then stays exact in int32; empty otherwise (the reference kernel runs).
struct State {
  bool int16 = false;  // x or y i16: run_int16
  const Q16Kernels* q16 = nullptr;  // int16 with i16 x: the GEMM over w16
  std::vector<int16_t> w16;         // B panels of kQ16Nr features, [panel][k2][kQ16Nr][2]
  int64_t k2 = 0;
  std::vector<int32_t> bias;
  std::vector<int8_t> packed;  // the weights for QKernels::dense_packed, when the level has it
};

std::shared_ptr<const void> prepare(const OpParams& p, const std::vector<ValueInfo>& in, const KernelTable& kt, int) {
  auto s = std::make_shared<State>();
  if (in[0].dtype != kDtypeU8 || p.y_dtype != kDtypeU8) {
    s->int16 = true;
    if (in[0].dtype == kDtypeI16 && kt.q16) {
      const int64_t m = (*in[1].dims)[0], k = (*in[1].dims)[1];
      const int8_t* w = static_cast<const int8_t*>(in[1].data);
      s->q16 = kt.q16;
      s->k2 = (k + 1) / 2;
      const int64_t panels = (m + kQ16Nr - 1) / kQ16Nr;
      s->w16.assign(size_t(panels * s->k2 * kQ16Nr * 2), 0);
      for (int64_t j = 0; j < m; ++j)
        for (int64_t t = 0; t < k; ++t)
          s->w16[size_t(((j / kQ16Nr * s->k2 + t / 2) * kQ16Nr + j % kQ16Nr) * 2 + t % 2)] = w[j * k + t];
    }
    return s;
  }
  const Shape& wd = *in[1].dims;
  const int64_t m = wd[0], k = wd[1];
  const int8_t* w = static_cast<const int8_t*>(in[1].data);
  const int32_t* bias = static_cast<const int32_t*>(in[2].data);
  const int64_t limit = (int64_t(1) << 31) - 1 - k * 255 * 128;
  for (int64_t j = 0; j < m; ++j) {
    int64_t sum = 0;
    for (int64_t t = 0; t < k; ++t) sum += w[j * k + t];
    const int64_t b = int64_t(bias[j]) - int64_t(p.zp) * sum;
    if (b > limit || b < -limit) {
      s->bias.clear();
      break;
    }
    s->bias.push_back(int32_t(b));
  }
  if (!s->bias.empty() && kt.q && kt.q->dense_packed) {
    s->packed.resize(size_t(kt.q->dense_packed_bytes(m, k)));
    kt.q->dense_pack(m, k, w, s->packed.data());
  }
  return s;
}

// State::q16: per panel of kQ16Nr output features, blocks of kQ16Mr rows of x. The pairs stop
// before an odd K's last element, whose product the epilogue adds (x has no element past it).
template <typename Y>
void run_int16_gemm(const State& s, const int16_t* x, const int8_t* w, const QChannelParams& ch, const QuantOut& q,
                    int64_t n, int64_t k, int64_t m, Y* y, ThreadPool* pool) {
  const int64_t panels = (m + kQ16Nr - 1) / kQ16Nr, full_pairs = k / 2;
  parallel_range(pool, panels, 2, 1, [&](int64_t t0, int64_t t1) {
    int64_t acc[kQ16Mr * kQ16Nr];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t m0 = t * kQ16Nr, cols = std::min<int64_t>(kQ16Nr, m - m0);
      for (int64_t i0 = 0; i0 < n; i0 += kQ16Mr) {
        const int rows = int(std::min<int64_t>(kQ16Mr, n - i0));
        const int16_t* a[kQ16Mr];
        for (int r = 0; r < rows; ++r) a[r] = x + (i0 + r) * k;
        s.q16->gemm(full_pairs, rows, a, s.w16.data() + t * s.k2 * kQ16Nr * 2, acc);
        for (int r = 0; r < rows; ++r)
          for (int64_t j = 0; j < cols; ++j) {
            int64_t v = ch.bias[m0 + j] + acc[r * kQ16Nr + j];
            if (k % 2) v += int64_t(a[r][k - 1]) * w[(m0 + j) * k + k - 1];
            y[(i0 + r) * m + m0 + j] = q16_output<Y>(v, ch, m0 + j, q);
          }
      }
    }
  });
}

// State::int16: the GEMM (State::q16), or the reference kernel with the output columns split
// between the threads.
void run_int16(const State& s, const OpParams& p, const std::vector<OpInput>& in, int64_t n, int64_t k, int64_t m,
               void* out, ThreadPool* pool) {
  const QChannelParams ch{in[2].as<int32_t>(), in[3].as<int32_t>(), in[4].as<int32_t>()};
  const QuantOut q{p.y_zp, p.act_min, p.act_max};
  const int8_t* w = in[1].as<int8_t>();
  q_with_types(in[0].dtype, in[0].data, p.y_dtype, out, [&](auto* x, auto* y) {
    if constexpr (sizeof(*x) == 2) {
      if (s.q16) {
        run_int16_gemm(s, x, w, ch, q, n, k, m, y, pool);
        return;
      }
    }
    parallel_range(pool, m, 2, 1, [&](int64_t m0, int64_t m1) { ds_q16_dense__scalar(n, k, m, p.zp, q, x, w, ch, y, m0, m1); });
  });
}

void run(const OpParams& p, const RunContext& ctx, const std::vector<OpInput>& in, void* out, const Shape& os,
         const KernelTable& kt) {
  const State& s = *static_cast<const State*>(ctx.state);
  const Shape& x = *in[0].shape;
  const int64_t n = product(x, 0, x.size() - 1), k = x.back(), m = os.back();
  if (s.int16) {
    run_int16(s, p, in, n, k, m, out, ctx.pool);
    return;
  }
  const uint8_t* xd = in[0].as<uint8_t>();
  const int8_t* w = in[1].as<int8_t>();
  uint8_t* y = static_cast<uint8_t*>(out);
  const QuantOut q{p.y_zp, p.act_min, p.act_max};
  if (!kt.q || !kt.q->dense || s.bias.empty()) {
    const QChannelParams ch{in[2].as<int32_t>(), in[3].as<int32_t>(), in[4].as<int32_t>()};
    ds_qu8_dense__scalar(n, k, m, p.zp, q, xd, w, ch, y);
    return;
  }
  const QChannelParams ch{s.bias.data(), in[3].as<int32_t>(), in[4].as<int32_t>()};
  if (s.packed.empty()) {
    for (int64_t i = 0; i < n; ++i) kt.q->dense(k, xd + i * k, w, 0, m, ch, q, y + i * m);
    return;
  }
  // Row blocks of the packed weights split between the threads (the weights stream from memory:
  // each thread reads its part once for all rows of x).
  const int64_t rows = kt.q->dense_rows, blocks = (m + rows - 1) / rows;
  const int threads = threads_of(ctx.pool);
  const int64_t tasks = threads > 1 && m * k >= 65536 ? std::min<int64_t>(blocks, 2 * threads) : 1;
  const int64_t per = (blocks + tasks - 1) / tasks * rows;
  auto task = [&](int64_t t) {
    const int64_t m0 = t * per, m1 = std::min(m, m0 + per);
    for (int64_t i = 0; i < n && m0 < m1; ++i) kt.q->dense_packed(k, xd + i * k, s.packed.data(), m0, m1, ch, q, y + i * m);
  };
  if (tasks == 1) task(0);
  else ctx.pool->parallel_for(tasks, [&](int64_t t, int) { task(t); });
}

}  // namespace

extern const OpDef kQDenseOp = {28, "qdense", 5, 5, parse, infer_shape, nullptr, false, check_dtypes, prepare, run};

}  // namespace ds
