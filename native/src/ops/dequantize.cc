// dequantize (op id 26): x u8 -> f32, (q - zero_point) * scale; or x i16 (zero_point 0) -> q * scale.
#include "kernels/qi16.h"
#include "ops/qcommon.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  return q_parse_scale_zero_point(attrs, node, "dequantize");
}

Shape infer_shape(const OpParams&, const std::vector<const Shape*>& in, const std::string&) { return *in[0]; }

uint8_t check_dtypes(OpParams& p, const std::vector<ValueInfo>& in, const std::string& who) {
  if (!dtype_quantized_activation(in[0].dtype))
    fail(DS_ERR_FORMAT, who, ": input 0 (x) is ", dtype_name(in[0].dtype), ", must be u8 or i16");
  q_check_zero_point(p.zp, in[0].dtype, who, "zero_point");
  return kDtypeF32;
}

void run(const OpParams& p, const std::vector<OpInput>& in, float* out, const Shape& os, const KernelTable& kt) {
  if (in[0].dtype == kDtypeI16) {
    ds_q16_dequantize__scalar(product(os), p.scale, in[0].as<int16_t>(), out);
    return;
  }
  if (kt.q && kt.q->dequantize) {
    kt.q->dequantize(product(os), p.scale, p.zp, in[0].as<uint8_t>(), out);
    return;
  }
  ds_qu8_dequantize__scalar(product(os), p.scale, p.zp, in[0].as<uint8_t>(), out);
}

}  // namespace

extern const OpDef kDequantizeOp = {26, "dequantize", 1, 1, parse, infer_shape, run, false, check_dtypes};

}  // namespace ds
