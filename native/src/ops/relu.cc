// relu (op id 5): elementwise max(x, 0), any shape.
#include "ops/op.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser(attrs, node, "relu").finish();
  return OpParams();
}

Shape infer_shape(const OpParams&, const std::vector<const Shape*>& in, const std::string&) {
  return *in[0];
}

void run(const OpParams&, const std::vector<OpInput>& in, float* out, const Shape& os,
         const KernelTable& k) {
  int64_t n = 1;
  for (int64_t d : os) n *= d;
  k.relu(n, in[0].data, out);
}

}  // namespace

extern const OpDef kReluOp = {5, "relu", 1, 1, parse, infer_shape, run};

}  // namespace ds
