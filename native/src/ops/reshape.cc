// reshape (op id 18): `shape` ints; 0 copies the input's size at that axis, one -1 takes the rest.
// A copy (the memory plan gives the output its own buffer).
#include <cstring>

#include "common/error.h"
#include "ops/op.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser a(attrs, node, "reshape");
  OpParams p;
  if (!a.get_int_list("shape", kMaxRank, &p.list)) fail(DS_ERR_FORMAT, a.where(), ": attribute 'shape' is missing");
  a.finish();
  int minus_ones = 0;
  for (int64_t d : p.list) {
    if (d < -1 || d > kMaxElements)
      fail(DS_ERR_FORMAT, a.where(), ": shape ", shape_str(p.list), " has a size ", d, " (sizes are -1, 0 or >= 1)");
    minus_ones += d == -1;
  }
  if (minus_ones > 1) fail(DS_ERR_FORMAT, a.where(), ": shape ", shape_str(p.list), " has more than one -1");
  return p;
}

Shape infer_shape(const OpParams& p, const std::vector<const Shape*>& in, const std::string& node) {
  const Shape& x = *in[0];
  const int64_t total = product(x);
  Shape out = p.list;
  int64_t known = 1;  // product of the sizes other than -1, kept <= total
  bool fits = true;
  size_t infer_at = out.size();
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0) {
      if (i >= x.size())
        fail(DS_ERR_SHAPE, node_where(node, "reshape"), ": shape ", shape_str(p.list), " copies axis ", i,
             ", which input ", shape_str(x), " does not have");
      out[i] = x[i];
    }
    if (out[i] == -1) infer_at = i;
    else if (out[i] > total / known) fits = false;
    else known *= out[i];
  }
  if (fits && infer_at < out.size() && total % known == 0) out[infer_at] = total / known;
  else if (infer_at < out.size() || known != total) fits = false;
  if (!fits)
    fail(DS_ERR_SHAPE, node_where(node, "reshape"), ": input ", shape_str(x), " (", total,
         " elements) cannot take shape ", shape_str(p.list));
  return out;
}

void run(const OpParams&, const std::vector<OpInput>& in, float* out, const Shape& os, const KernelTable&) {
  std::memcpy(out, in[0].data, size_t(product(os)) * dtype_size(in[0].dtype));
}

}  // namespace

extern const OpDef kReshapeOp = {18, "reshape", 1, 1, parse, infer_shape, run, false, same_dtype_f32_u8_or_i16};

}  // namespace ds
