// conv_transpose2d (op id 15): x (N,C,H,W), weight (C,O/group,kh,kw), optional bias (O).
// out = (in-1)*stride - pad_begin - pad_end + dilation*(k-1) + output_padding + 1. Fused activation.
#include <algorithm>

#include "common/error.h"
#include "ops/op.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser a(attrs, node, "conv_transpose2d");
  OpParams p;
  parse_conv_window(a, p);
  a.get_ints("output_padding", 2, p.output_padding);
  p.act = parse_epilogue(a);
  a.finish();
  // As PyTorch: an output padding must be smaller than the stride or the dilation.
  for (int i = 0; i < 2; ++i)
    if (p.output_padding[i] < 0 || p.output_padding[i] >= std::max(p.strides[i], p.dilations[i]))
      fail(DS_ERR_FORMAT, a.where(), ": output_padding ", p.output_padding[i],
           " is outside 0..max(stride, dilation)-1 (", std::max(p.strides[i], p.dilations[i]) - 1, ")");
  return p;
}

Shape infer_shape(const OpParams& p, const std::vector<const Shape*>& in, const std::string& node) {
  const std::string who = node_where(node, "conv_transpose2d");
  const Shape& x = *in[0];
  const Shape& w = *in[1];
  if (x.size() != 4) fail(DS_ERR_SHAPE, who, ": input ", shape_str(x), " is not rank 4 (N,C,H,W)");
  if (w.size() != 4) fail(DS_ERR_SHAPE, who, ": weight ", shape_str(w), " is not rank 4 (C,O/group,kh,kw)");
  if (w[0] != x[1] || x[1] % p.group != 0)
    fail(DS_ERR_SHAPE, who, ": weight ", shape_str(w), " does not fit input ", shape_str(x), " with group ", p.group);
  if (w[1] > kMaxElements / p.group)
    fail(DS_ERR_SHAPE, who, ": weight ", shape_str(w), " with group ", p.group, " has too many output channels");
  const int64_t o = w[1] * p.group;
  if (in.size() > 2 && in[2] && (in[2]->size() != 1 || (*in[2])[0] != o))
    fail(DS_ERR_SHAPE, who, ": bias ", shape_str(*in[2]), " is not [", o, "]");
  if (w[2] > kMaxWindowParam || w[3] > kMaxWindowParam || x[2] > kMaxElements / p.strides[0] ||
      x[3] > kMaxElements / p.strides[1])
    fail(DS_ERR_SHAPE, who, ": kernel ", shape_str(w), " or input ", shape_str(x), " is too large");
  int64_t size[2];
  for (int i = 0; i < 2; ++i)
    size[i] = (x[size_t(2 + i)] - 1) * p.strides[i] - p.pads[i] - p.pads[i + 2] +
              p.dilations[i] * (w[size_t(2 + i)] - 1) + p.output_padding[i] + 1;
  if (size[0] < 1 || size[1] < 1)
    fail(DS_ERR_SHAPE, who, ": output ", size[0], "x", size[1], " of input ", shape_str(x),
         " is empty (pads too large)");
  return {x[0], o, size[0], size[1]};
}

void run(const OpParams& p, const std::vector<OpInput>& in, float* out, const Shape& os,
         const KernelTable& k) {
  const Shape& x = *in[0].shape;
  const Shape& w = *in[1].shape;
  ConvTranspose2dParams c;
  c.n = x[0], c.c = x[1], c.h = x[2], c.w = x[3];
  c.o = os[1], c.oh = os[2], c.ow = os[3];
  c.kh = w[2], c.kw = w[3];
  c.stride_h = p.strides[0], c.stride_w = p.strides[1];
  c.pad_top = p.pads[0], c.pad_left = p.pads[1];
  c.dil_h = p.dilations[0], c.dil_w = p.dilations[1];
  c.group = p.group;
  c.act = p.act;
  const float* bias = in.size() > 2 ? in[2].data : nullptr;
  k.conv_transpose2d(c, in[0].data, in[1].data, bias, out);
}

}  // namespace

extern const OpDef kConvTranspose2dOp = {15, "conv_transpose2d", 2, 3, parse, infer_shape, run};

}  // namespace ds
