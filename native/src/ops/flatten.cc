// flatten (op id 6): dims before `axis` are kept, the rest multiplied into one. A copy.
#include <cstring>

#include "common/error.h"
#include "ops/op.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser a(attrs, node, "flatten");
  OpParams p;
  p.axis = a.get_int("axis", 1);
  a.finish();
  if (p.axis < -8 || p.axis > 8) fail(DS_ERR_FORMAT, a.where(), ": axis ", p.axis, " is outside -8..8");
  return p;
}

Shape infer_shape(const OpParams& p, const std::vector<const Shape*>& in, const std::string& node) {
  const Shape& x = *in[0];
  const int64_t rank = int64_t(x.size());
  const int64_t axis = p.axis < 0 ? p.axis + rank : p.axis;
  if (axis < 0 || axis >= rank)
    fail(DS_ERR_SHAPE, "node '", node, "' (flatten): axis ", p.axis, " is out of range for input ",
         shape_str(x));
  Shape out(x.begin(), x.begin() + axis);
  int64_t rest = 1;
  for (int64_t i = axis; i < rank; ++i) rest *= x[i];  // bounded: x passed element_count()
  out.push_back(rest);
  return out;
}

void run(const OpParams&, const std::vector<OpInput>& in, float* out, const Shape& os,
         const KernelTable&) {
  int64_t n = 1;
  for (int64_t d : os) n *= d;
  std::memcpy(out, in[0].data, size_t(n) * dtype_size(in[0].dtype));
}

}  // namespace

extern const OpDef kFlattenOp = {6, "flatten", 1, 1, parse, infer_shape, run, false, same_dtype_f32_u8_or_i16};

}  // namespace ds
