// dequantize (op id 26): x u8 -> f32, (q - zero_point) * scale.
#include "ops/qcommon.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  return q_parse_scale_zero_point(attrs, node, "dequantize");
}

Shape infer_shape(const OpParams&, const std::vector<const Shape*>& in, const std::string&) { return *in[0]; }

uint8_t check_dtypes(const OpParams&, const std::vector<ValueInfo>& in, const std::string& who) {
  q_need_dtype(in, 0, kDtypeU8, who, "x");
  return kDtypeF32;
}

void run(const OpParams& p, const std::vector<OpInput>& in, float* out, const Shape& os, const KernelTable& kt) {
  if (kt.q && kt.q->dequantize) {
    kt.q->dequantize(product(os), p.scale, p.zp, in[0].as<uint8_t>(), out);
    return;
  }
  ds_qu8_dequantize__scalar(product(os), p.scale, p.zp, in[0].as<uint8_t>(), out);
}

}  // namespace

extern const OpDef kDequantizeOp = {26, "dequantize", 1, 1, parse, infer_shape, run, false, check_dtypes};

}  // namespace ds
