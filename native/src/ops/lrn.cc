// lrn (op id 16): local response normalization across channels (ONNX LRN) of x (N,C,H,W).
#include <cmath>

#include "common/error.h"
#include "ops/op.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser a(attrs, node, "lrn");
  OpParams p;
  if (!a.has("size")) fail(DS_ERR_FORMAT, a.where(), ": attribute 'size' is missing");
  p.size = a.get_int("size", 1);
  p.alpha = a.get_float("alpha", 1e-4f);
  p.beta = a.get_float("beta", 0.75f);
  p.bias = a.get_float("bias", 1.0f);
  a.finish();
  if (p.size < 1 || p.size > kMaxWindowParam) fail(DS_ERR_FORMAT, a.where(), ": size ", p.size, " is outside 1..2^20");
  if (!std::isfinite(p.alpha) || !std::isfinite(p.beta) || !std::isfinite(p.bias))
    fail(DS_ERR_FORMAT, a.where(), ": alpha, beta and bias must be finite");
  return p;
}

Shape infer_shape(const OpParams&, const std::vector<const Shape*>& in, const std::string& node) {
  const Shape& x = *in[0];
  if (x.size() != 4) fail(DS_ERR_SHAPE, node_where(node, "lrn"), ": input ", shape_str(x), " is not rank 4 (N,C,H,W)");
  return x;
}

void run(const OpParams& p, const std::vector<OpInput>& in, float* out, const Shape& os,
         const KernelTable& k) {
  const LrnParams l{os[0], os[1], product(os, 2), p.size, p.alpha, p.beta, p.bias};
  k.lrn(l, in[0].data, out);
}

}  // namespace

extern const OpDef kLrnOp = {16, "lrn", 1, 1, parse, infer_shape, run};

}  // namespace ds
