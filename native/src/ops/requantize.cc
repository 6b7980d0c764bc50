// requantize (op id 33): x u8 or i16 -> y u8 or i16 (the value dtypes say which),
// y = clamp(y_zero_point + requant(x - x_zero_point, multiplier, shift), lo, hi) with lo..hi the
// range of y's dtype, in int64 (docs/format.md, "int16 activations"). i16 zero points are 0.
#include "ops/qcommon.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  return q_parse_rescale(attrs, node, "requantize");
}

Shape infer_shape(const OpParams&, const std::vector<const Shape*>& in, const std::string&) { return *in[0]; }

uint8_t check_dtypes(OpParams& p, const std::vector<ValueInfo>& in, const std::string& who) {
  if (!dtype_quantized_activation(in[0].dtype))
    fail(DS_ERR_FORMAT, who, ": input 0 (x) is ", dtype_name(in[0].dtype), ", must be u8 or i16");
  q_check_zero_point(p.zp, in[0].dtype, who, "x_zero_point");
  const uint8_t y = q_output_dtype(p, who);
  q_check_zero_point(p.y_zp, y, who, "y_zero_point");
  return y;
}

void run(const OpParams& p, const RunContext& ctx, const std::vector<OpInput>& in, void* out, const Shape& os,
         const KernelTable&) {
  const QRequantParams q{p.zp, p.y_zp, int32_t(p.mult), p.shift};
  q_with_types(in[0].dtype, in[0].data, p.y_dtype, out, [&](auto* x, auto* y) {
    q_parallel_range(ctx.pool, product(os), [&](int64_t i0, int64_t i1) {
      ds_q16_requantize__scalar(i1 - i0, q, x + i0, y + i0);
    });
  });
}

}  // namespace

extern const OpDef kRequantizeOp = {33, "requantize", 1, 1, parse, infer_shape, nullptr, false, check_dtypes, nullptr, run};

}  // namespace ds
