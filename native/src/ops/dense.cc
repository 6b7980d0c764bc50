// dense (op id 2): x (N,K), weight (M,K), optional bias (M).
#include "common/error.h"
#include "ops/op.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser a(attrs, node, "dense");
  OpParams p;
  p.activation = a.get_int("activation", 0);
  a.finish();
  if (p.activation != 0 && p.activation != 1)
    fail(DS_ERR_FORMAT, a.where(), ": activation ", p.activation, " is not 0 (none) or 1 (relu)");
  return p;
}

Shape infer_shape(const OpParams&, const std::vector<const Shape*>& in, const std::string& node) {
  const Shape& x = *in[0];
  const Shape& w = *in[1];
  if (x.size() != 2)
    fail(DS_ERR_SHAPE, "node '", node, "' (dense): input ", shape_str(x), " is not rank 2 (N,K)");
  if (w.size() != 2 || w[1] != x[1])
    fail(DS_ERR_SHAPE, "node '", node, "' (dense): weight ", shape_str(w), " is not [M, ", x[1],
         "] for input ", shape_str(x));
  if (in.size() > 2 && in[2] && (in[2]->size() != 1 || (*in[2])[0] != w[0]))
    fail(DS_ERR_SHAPE, "node '", node, "' (dense): bias ", shape_str(*in[2]), " is not [", w[0], "]");
  return {x[0], w[0]};
}

void run(const OpParams& p, const std::vector<OpInput>& in, float* out, const Shape& os,
         const KernelTable& k) {
  DenseParams d;
  d.n = os[0], d.m = os[1], d.k = (*in[0].shape)[1];
  d.relu = p.activation == 1;
  const float* bias = in.size() > 2 ? in[2].data : nullptr;
  k.dense(d, in[0].data, in[1].data, bias, out);
}

}  // namespace

extern const OpDef kDenseOp = {2, "dense", 2, 3, parse, infer_shape, run};

}  // namespace ds
