// channel_shuffle (op id 17): x (N,C,H,W); input channel g*(C/group) + i becomes output channel
// i*group + g. A strided copy: the output (N, C/group, group, H*W) reads the input's
// (N, group, C/group, H*W) with the middle axes swapped.
#include "common/error.h"
#include "kernels/qu8.h"
#include "ops/op.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser a(attrs, node, "channel_shuffle");
  OpParams p;
  if (!a.has("group")) fail(DS_ERR_FORMAT, a.where(), ": attribute 'group' is missing");
  p.group = a.get_int("group", 1);
  a.finish();
  if (p.group < 1 || p.group > kMaxElements) fail(DS_ERR_FORMAT, a.where(), ": group ", p.group, " is < 1");
  return p;
}

Shape infer_shape(const OpParams& p, const std::vector<const Shape*>& in, const std::string& node) {
  const Shape& x = *in[0];
  if (x.size() != 4)
    fail(DS_ERR_SHAPE, node_where(node, "channel_shuffle"), ": input ", shape_str(x), " is not rank 4 (N,C,H,W)");
  if (x[1] % p.group != 0)
    fail(DS_ERR_SHAPE, node_where(node, "channel_shuffle"), ": ", x[1], " channels of input ", shape_str(x),
         " do not split into ", p.group, " groups");
  return x;
}

void run(const OpParams& p, const std::vector<OpInput>& in, float* out, const Shape& os,
         const KernelTable& k) {
  const int64_t g = p.group, cg = os[1] / g, hw = os[2] * os[3];
  CopyNdParams c;
  c.rank = 4;
  c.offset = 0;
  const int64_t dims[4] = {os[0], cg, g, hw};
  const int64_t strides[4] = {os[1] * hw, hw, cg * hw, 1};  // input strides of (n, i, g, pixel)
  for (int i = 0; i < 4; ++i) c.dims[i] = dims[i], c.strides[i] = strides[i];
  if (in[0].dtype == kDtypeU8)
    ds_x8_copy_nd__scalar(c, in[0].as<uint8_t>(), reinterpret_cast<uint8_t*>(out));
  else
    k.copy_nd(c, in[0].data, out);
}

}  // namespace

extern const OpDef kChannelShuffleOp = {17, "channel_shuffle", 1, 1, parse, infer_shape, run, false, same_dtype_f32_or_u8};

}  // namespace ds
