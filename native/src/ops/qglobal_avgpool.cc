// qglobal_avgpool (op id 32): x u8 (N,C,H,W) -> (N,C,1,1),
// y = clamp(y_zp + requant(sum over H,W of (x - x_zp), multiplier, shift), 0, 255).
#include "ops/global_pool.h"
#include "ops/qcommon.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  return q_parse_rescale(attrs, node, "qglobal_avgpool");
}

Shape infer_shape(const OpParams&, const std::vector<const Shape*>& in, const std::string& node) {
  return global_pool_infer_shape(*in[0], node, "qglobal_avgpool");
}

uint8_t check_dtypes(OpParams&, const std::vector<ValueInfo>& in, const std::string& who) {
  q_need_dtype(in, 0, kDtypeU8, who, "x");
  return kDtypeU8;
}

void run(const OpParams& p, const std::vector<OpInput>& in, float* out, const Shape&, const KernelTable& kt) {
  const Shape& x = *in[0].shape;
  (kt.q && kt.q->global_avgpool ? kt.q->global_avgpool : ds_qu8_global_avgpool__scalar)(x[0] * x[1], product(x, 2), p.zp, p.y_zp, int32_t(p.mult), p.shift,
                                in[0].as<uint8_t>(), reinterpret_cast<uint8_t*>(out));
}

}  // namespace

extern const OpDef kQGlobalAvgPoolOp = {32, "qglobal_avgpool", 1, 1, parse, infer_shape, run, false, check_dtypes};

}  // namespace ds
