// softmax (op id 7) along `axis` (negative counts from the end).
#include "common/error.h"
#include "ops/op.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser a(attrs, node, "softmax");
  OpParams p;
  p.axis = a.get_int("axis", -1);
  a.finish();
  if (p.axis < -8 || p.axis > 8) fail(DS_ERR_FORMAT, a.where(), ": axis ", p.axis, " is outside -8..8");
  return p;
}

int64_t normalized_axis(const OpParams& p, const Shape& x) {
  return p.axis < 0 ? p.axis + int64_t(x.size()) : p.axis;
}

Shape infer_shape(const OpParams& p, const std::vector<const Shape*>& in, const std::string& node) {
  const Shape& x = *in[0];
  const int64_t axis = normalized_axis(p, x);
  if (axis < 0 || axis >= int64_t(x.size()))
    fail(DS_ERR_SHAPE, "node '", node, "' (softmax): axis ", p.axis, " is out of range for input ",
         shape_str(x));
  return x;
}

void run(const OpParams& p, const std::vector<OpInput>& in, float* out, const Shape& os,
         const KernelTable& k) {
  const int64_t axis = normalized_axis(p, os);
  SoftmaxParams s{1, os[size_t(axis)], 1};
  for (int64_t i = 0; i < axis; ++i) s.outer *= os[size_t(i)];
  for (size_t i = size_t(axis) + 1; i < os.size(); ++i) s.inner *= os[i];
  k.softmax(s, in[0].data, out);
}

}  // namespace

extern const OpDef kSoftmaxOp = {7, "softmax", 1, 1, parse, infer_shape, run};

}  // namespace ds
