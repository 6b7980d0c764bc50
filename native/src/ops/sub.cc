// sub (op id 11): a - b with numpy broadcasting.
#include "ops/binary.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser(attrs, node, "sub").finish();
  return OpParams();
}

Shape infer_shape(const OpParams&, const std::vector<const Shape*>& in, const std::string& node) {
  return binary_infer_shape(in, node, "sub");
}

void run(const OpParams& p, const std::vector<OpInput>& in, float* out, const Shape& os,
         const KernelTable& k) {
  k.sub(binary_params(*in[0].shape, *in[1].shape, os, p.act), in[0].data, in[1].data, out);
}

}  // namespace

extern const OpDef kSubOp = {11, "sub", 2, 2, parse, infer_shape, run};

}  // namespace ds
