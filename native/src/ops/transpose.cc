// transpose (op id 19): output axis k is input axis perm[k]. Without `perm`, the axes are
// reversed (ONNX Transpose's default).
#include "common/error.h"
#include "kernels/qu8.h"
#include "ops/op.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser a(attrs, node, "transpose");
  OpParams p;
  const bool given = a.get_int_list("perm", kMaxRank, &p.list);
  a.finish();
  if (!given) {
    p.axis = -1;  // marks "reverse"
    return p;
  }
  bool seen[kMaxRank] = {false};
  for (int64_t v : p.list) {
    if (v < 0 || v >= int64_t(p.list.size()) || seen[v])
      fail(DS_ERR_FORMAT, a.where(), ": perm ", shape_str(p.list), " is not a permutation of 0..",
           p.list.size() - 1);
    seen[v] = true;
  }
  return p;
}

// perm[k] for this input's rank.
int64_t perm_at(const OpParams& p, size_t rank, size_t k) {
  return p.axis == -1 ? int64_t(rank - 1 - k) : p.list[k];
}

Shape infer_shape(const OpParams& p, const std::vector<const Shape*>& in, const std::string& node) {
  const Shape& x = *in[0];
  if (p.axis != -1 && p.list.size() != x.size())
    fail(DS_ERR_SHAPE, node_where(node, "transpose"), ": perm ", shape_str(p.list), " has ", p.list.size(),
         " axes, input ", shape_str(x), " has ", x.size());
  Shape out(x.size());
  for (size_t k = 0; k < x.size(); ++k) out[k] = x[size_t(perm_at(p, x.size(), k))];
  return out;
}

void run(const OpParams& p, const std::vector<OpInput>& in, float* out, const Shape& os,
         const KernelTable& k) {
  const Shape& x = *in[0].shape;
  if (x.empty()) {  // a scalar
    out[0] = in[0].data[0];
    return;
  }
  int64_t in_strides[kMaxRank];
  for (size_t i = x.size(); i-- > 0;) in_strides[i] = i + 1 == x.size() ? 1 : in_strides[i + 1] * x[i + 1];
  CopyNdParams c;
  c.rank = int32_t(x.size());
  c.offset = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    c.dims[i] = os[i];
    c.strides[i] = in_strides[perm_at(p, x.size(), i)];
  }
  if (in[0].dtype == kDtypeU8)
    ds_x8_copy_nd__scalar(c, in[0].as<uint8_t>(), reinterpret_cast<uint8_t*>(out));
  else
    k.copy_nd(c, in[0].data, out);
}

}  // namespace

extern const OpDef kTransposeOp = {19, "transpose", 1, 1, parse, infer_shape, run, false, same_dtype_f32_or_u8};

}  // namespace ds
