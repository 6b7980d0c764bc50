// quantize (op id 25): x f32 -> u8, q = clamp(rint(x / scale) + zero_point, 0, 255).
#include "ops/qcommon.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  return q_parse_scale_zero_point(attrs, node, "quantize");
}

Shape infer_shape(const OpParams&, const std::vector<const Shape*>& in, const std::string&) { return *in[0]; }

uint8_t check_dtypes(const OpParams&, const std::vector<ValueInfo>& in, const std::string& who) {
  q_need_dtype(in, 0, kDtypeF32, who, "x");
  return kDtypeU8;
}

void run(const OpParams& p, const std::vector<OpInput>& in, float* out, const Shape& os, const KernelTable& kt) {
  if (kt.q && kt.q->quantize) {
    kt.q->quantize(product(os), p.scale, p.zp, in[0].data, reinterpret_cast<uint8_t*>(out));
    return;
  }
  ds_qu8_quantize__scalar(product(os), p.scale, p.zp, in[0].data, reinterpret_cast<uint8_t*>(out));
}

}  // namespace

extern const OpDef kQuantizeOp = {25, "quantize", 1, 1, parse, infer_shape, run, false, check_dtypes};

}  // namespace ds
