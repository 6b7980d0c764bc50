// dense (op id 2): x (..., K), weight (M,K), optional bias (M); output (..., M). Fused activation.
#include "common/error.h"
#include "ops/op.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser a(attrs, node, "dense");
  OpParams p;
  p.act = parse_epilogue(a);
  a.finish();
  return p;
}

Shape infer_shape(const OpParams&, const std::vector<const Shape*>& in, const std::string& node) {
  const Shape& x = *in[0];
  const Shape& w = *in[1];
  if (x.empty())
    fail(DS_ERR_SHAPE, node_where(node, "dense"), ": input ", shape_str(x), " has no axis to contract");
  if (w.size() != 2 || w[1] != x.back())
    fail(DS_ERR_SHAPE, node_where(node, "dense"), ": weight ", shape_str(w), " is not [M, ", x.back(),
         "] for input ", shape_str(x));
  if (in.size() > 2 && in[2] && (in[2]->size() != 1 || (*in[2])[0] != w[0]))
    fail(DS_ERR_SHAPE, node_where(node, "dense"), ": bias ", shape_str(*in[2]), " is not [", w[0], "]");
  Shape out = x;
  out.back() = w[0];
  return out;
}

void run(const OpParams& p, const std::vector<OpInput>& in, float* out, const Shape& os,
         const KernelTable& k) {
  const Shape& x = *in[0].shape;
  DenseParams d;
  d.n = product(x, 0, x.size() - 1);
  d.k = x.back();
  d.m = os.back();
  d.act = p.act;
  const float* bias = in.size() > 2 ? in[2].data : nullptr;
  k.dense(d, in[0].data, in[1].data, bias, out);
}

}  // namespace

extern const OpDef kDenseOp = {2, "dense", 2, 3, parse, infer_shape, run};

}  // namespace ds
