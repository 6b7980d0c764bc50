// qlut (op id 31): x u8, table u8 (256): y = table[x].
#include "ops/qcommon.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser(attrs, node, "qlut").finish();
  return OpParams();
}

Shape infer_shape(const OpParams&, const std::vector<const Shape*>& in, const std::string&) { return *in[0]; }

uint8_t check_dtypes(OpParams&, const std::vector<ValueInfo>& in, const std::string& who) {
  q_need_dtype(in, 0, kDtypeU8, who, "x");
  q_need_constant(in, 1, kDtypeU8, 256, who, "table");
  return kDtypeU8;
}

void run(const OpParams&, const std::vector<OpInput>& in, float* out, const Shape& os, const KernelTable&) {
  ds_u8_lut__scalar(product(os), in[0].as<uint8_t>(), in[1].as<uint8_t>(), reinterpret_cast<uint8_t*>(out));
}

}  // namespace

extern const OpDef kQLutOp = {31, "qlut", 2, 2, parse, infer_shape, run, false, check_dtypes};

}  // namespace ds
