// add (op id 10): a + b with numpy broadcasting, fused activation.
#include "ops/binary.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser a(attrs, node, "add");
  OpParams p;
  p.act = parse_epilogue(a);
  a.finish();
  return p;
}

Shape infer_shape(const OpParams&, const std::vector<const Shape*>& in, const std::string& node) {
  return binary_infer_shape(in, node, "add");
}

void run(const OpParams& p, const std::vector<OpInput>& in, float* out, const Shape& os,
         const KernelTable& k) {
  k.add(binary_params(*in[0].shape, *in[1].shape, os, p.act), in[0].data, in[1].data, out);
}

}  // namespace

extern const OpDef kAddOp = {10, "add", 2, 2, parse, infer_shape, run};

}  // namespace ds
