// quantize (op id 25): x f32 -> u8, q = clamp(rint(x / scale) + zero_point, 0, 255), or -> i16
// (the output value's dtype says which), q = clamp(rint(x / scale), -32768, 32767), zero_point 0.
#include "core/thread_pool.h"
#include "kernels/qi16.h"
#include "ops/qcommon.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  return q_parse_scale_zero_point(attrs, node, "quantize");
}

Shape infer_shape(const OpParams&, const std::vector<const Shape*>& in, const std::string&) { return *in[0]; }

uint8_t check_dtypes(OpParams& p, const std::vector<ValueInfo>& in, const std::string& who) {
  q_need_dtype(in, 0, kDtypeF32, who, "x");
  const uint8_t y = q_output_dtype(p, who);
  q_check_zero_point(p.zp, y, who, "zero_point");
  return y;
}

std::shared_ptr<const void> prepare(const OpParams&, const std::vector<ValueInfo>&, const KernelTable&, int) {
  return std::make_shared<int>(0);
}

void run(const OpParams& p, const RunContext& ctx, const std::vector<OpInput>& in, void* out, const Shape& os,
         const KernelTable& kt) {
  const int64_t n = product(os);
  if (p.y_dtype == kDtypeI16) {
    int16_t* y = static_cast<int16_t*>(out);
    q_parallel_range(ctx.pool, n, [&](int64_t i0, int64_t i1) {
      ds_q16_quantize__scalar(i1 - i0, p.scale, in[0].data + i0, y + i0);
    });
    return;
  }
  uint8_t* y = static_cast<uint8_t*>(out);
  const QuantizeKernel k = kt.q && kt.q->quantize ? kt.q->quantize : ds_qu8_quantize__scalar;
  q_parallel_range(ctx.pool, n, [&](int64_t i0, int64_t i1) { k(i1 - i0, p.scale, p.zp, in[0].data + i0, y + i0); });
}

}  // namespace

extern const OpDef kQuantizeOp = {25, "quantize", 1, 1, parse, infer_shape, nullptr, false, check_dtypes, prepare, run};

}  // namespace ds
