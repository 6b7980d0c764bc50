// avgpool2d (op id 4): x (N,C,H,W).
#include "ops/pool2d.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  return pool2d_parse(attrs, node, "avgpool2d", true);
}

Shape infer_shape(const OpParams& p, const std::vector<const Shape*>& in, const std::string& node) {
  return pool2d_infer_shape(p, *in[0], node, "avgpool2d");
}

void run(const OpParams& p, const std::vector<OpInput>& in, float* out, const Shape& os,
         const KernelTable& k) {
  k.avgpool2d(pool2d_kernel_params(p, *in[0].shape, os), in[0].data, out);
}

}  // namespace

extern const OpDef kAvgPool2dOp = {4, "avgpool2d", 1, 1, parse, infer_shape, run};

}  // namespace ds
