// activation (op id 9): elementwise function `kind` (the epilogue codes) with `alpha`, `beta`.
#include "common/error.h"
#include "ops/op.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser a(attrs, node, "activation");
  OpParams p;
  if (!a.has("kind")) fail(DS_ERR_FORMAT, a.where(), ": attribute 'kind' is missing");
  const int64_t kind = a.get_int("kind", 0);
  check_activation_kind(kind, a, "kind");
  p.act.kind = int32_t(kind);
  p.act.alpha = a.get_float("alpha", 0.0f);
  p.act.beta = a.get_float("beta", 0.0f);
  a.finish();
  return p;
}

Shape infer_shape(const OpParams&, const std::vector<const Shape*>& in, const std::string&) {
  return *in[0];
}

void run(const OpParams& p, const std::vector<OpInput>& in, float* out, const Shape& os,
         const KernelTable& k) {
  k.activation(product(os), p.act, in[0].data, out);
}

}  // namespace

extern const OpDef kActivationOp = {9, "activation", 1, 1, parse, infer_shape, run};

}  // namespace ds
