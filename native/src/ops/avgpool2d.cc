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

void run_prepared(const OpParams& p, const RunContext& ctx, const std::vector<OpInput>& in, void* out,
                  const Shape& os, const KernelTable& k) {
  pool2d_run_planes(ctx.pool, pool2d_kernel_params(p, *in[0].shape, os), in[0].data, static_cast<float*>(out),
                    k.avgpool2d);
}

}  // namespace

extern const OpDef kAvgPool2dOp = {4, "avgpool2d", 1, 1, parse, infer_shape, nullptr, false, nullptr, nullptr, run_prepared};

}  // namespace ds
