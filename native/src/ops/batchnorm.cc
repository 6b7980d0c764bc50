// batchnorm (op id 8): x (N,C,...), scale, bias, mean, var (C); per channel (axis 1).
#include <cmath>

#include "common/error.h"
#include "ops/op.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser a(attrs, node, "batchnorm");
  OpParams p;
  p.epsilon = a.get_float("epsilon", 1e-5f);
  a.finish();
  if (!std::isfinite(p.epsilon) || p.epsilon < 0.0f)
    fail(DS_ERR_FORMAT, a.where(), ": epsilon ", p.epsilon, " is not a finite value >= 0");
  return p;
}

Shape infer_shape(const OpParams&, const std::vector<const Shape*>& in, const std::string& node) {
  const Shape& x = *in[0];
  if (x.size() < 2)
    fail(DS_ERR_SHAPE, node_where(node, "batchnorm"), ": input ", shape_str(x), " has no channel axis (rank < 2)");
  static const char* const names[] = {"scale", "bias", "mean", "var"};
  for (size_t i = 1; i < 5; ++i)
    if (in[i]->size() != 1 || (*in[i])[0] != x[1])
      fail(DS_ERR_SHAPE, node_where(node, "batchnorm"), ": ", names[i - 1], " ", shape_str(*in[i]), " is not [",
           x[1], "] for input ", shape_str(x));
  return x;
}

void run(const OpParams& p, const std::vector<OpInput>& in, float* out, const Shape& os,
         const KernelTable& k) {
  const BatchNormParams b{os[0], os[1], product(os, 2), p.epsilon};
  k.batchnorm(b, in[0].data, in[1].data, in[2].data, in[3].data, in[4].data, out);
}

}  // namespace

extern const OpDef kBatchNormOp = {8, "batchnorm", 5, 5, parse, infer_shape, run};

}  // namespace ds
