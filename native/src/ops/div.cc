// div (op id 13): a / b with numpy broadcasting (x / 0 is inf or NaN, as in IEEE 754).
#include "ops/binary.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser(attrs, node, "div").finish();
  return OpParams();
}

Shape infer_shape(const OpParams&, const std::vector<const Shape*>& in, const std::string& node) {
  return binary_infer_shape(in, node, "div");
}

void run(const OpParams& p, const std::vector<OpInput>& in, float* out, const Shape& os,
         const KernelTable& k) {
  k.div(binary_params(*in[0].shape, *in[1].shape, os, p.act), in[0].data, in[1].data, out);
}

}  // namespace

extern const OpDef kDivOp = {13, "div", 2, 2, parse, infer_shape, run};

}  // namespace ds
