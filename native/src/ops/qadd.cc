// qadd (op id 29): a u8, b u8 (broadcast), y = clamp(y_zp + round_shift((a - a_zp) * a_multiplier +
// (b - b_zp) * b_multiplier, 31 + shift), act_min, act_max).
#include "core/thread_pool.h"
#include "ops/binary.h"
#include "ops/qcommon.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser a(attrs, node, "qadd");
  OpParams p;
  p.zp = q_zero_point(a, "a_zero_point");
  p.zp_b = q_zero_point(a, "b_zero_point");
  p.y_zp = q_zero_point(a, "y_zero_point");
  p.mult = q_multiplier(a, "a_multiplier");
  p.mult_b = q_multiplier(a, "b_multiplier");
  p.shift = q_shift(a, "shift");
  q_act_range(a, p);
  a.finish();
  return p;
}

Shape infer_shape(const OpParams&, const std::vector<const Shape*>& in, const std::string& node) {
  return binary_infer_shape(in, node, "qadd");
}

uint8_t check_dtypes(OpParams&, const std::vector<ValueInfo>& in, const std::string& who) {
  q_need_dtype(in, 0, kDtypeU8, who, "a");
  q_need_dtype(in, 1, kDtypeU8, who, "b");
  return kDtypeU8;
}

std::shared_ptr<const void> prepare(const OpParams&, const std::vector<ValueInfo>&, const KernelTable&, int) {
  return std::make_shared<int>(0);
}

void run(const OpParams& p, const RunContext& ctx, const std::vector<OpInput>& in, void* out, const Shape& os,
         const KernelTable& kt) {
  const BinaryParams b = binary_params(*in[0].shape, *in[1].shape, os, Activation());
  QAddParams q;
  q.a_zp = p.zp, q.b_zp = p.zp_b;
  q.a_mult = p.mult, q.b_mult = p.mult_b;
  q.shift = p.shift;
  q.out = {p.y_zp, p.act_min, p.act_max};
  const int64_t n = product(os);
  if (kt.q && kt.q->vadd && product(*in[0].shape) == n && product(*in[1].shape) == n) {
    const uint8_t *a = in[0].as<uint8_t>(), *b = in[1].as<uint8_t>();
    uint8_t* y = static_cast<uint8_t*>(out);
    q_parallel_range(ctx.pool, n, [&](int64_t i0, int64_t i1) { kt.q->vadd(i1 - i0, q, a + i0, b + i0, y + i0); });
    return;
  }
  ds_qu8_vadd__scalar(b, q, in[0].as<uint8_t>(), in[1].as<uint8_t>(), static_cast<uint8_t*>(out));
}

}  // namespace

extern const OpDef kQAddOp = {29, "qadd", 2, 2, parse, infer_shape, nullptr, false, check_dtypes, prepare, run};

}  // namespace ds
