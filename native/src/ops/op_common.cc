#include "common/error.h"
#include "ops/op.h"

namespace ds {

extern const OpDef kConv2dOp, kDenseOp, kMaxPool2dOp, kAvgPool2dOp, kReluOp, kFlattenOp, kSoftmaxOp,
    kBatchNormOp, kActivationOp, kAddOp, kSubOp, kMulOp, kDivOp, kConcatOp, kConvTranspose2dOp, kLrnOp,
    kChannelShuffleOp, kReshapeOp, kTransposeOp, kPadOp, kResizeOp, kGlobalAvgPoolOp, kGlobalMaxPoolOp,
    kSliceOp, kQuantizeOp, kDequantizeOp, kQConv2dOp, kQDenseOp, kQAddOp, kQConcatOp, kQLutOp,
    kQGlobalAvgPoolOp, kRequantizeOp;

const OpDef* find_op(uint16_t id) {
  static const OpDef* const ops[] = {
      &kConv2dOp,    &kDenseOp,       &kMaxPool2dOp,       &kAvgPool2dOp,       &kReluOp,
      &kFlattenOp,   &kSoftmaxOp,     &kBatchNormOp,       &kActivationOp,      &kAddOp,
      &kSubOp,       &kMulOp,         &kDivOp,             &kConcatOp,          &kConvTranspose2dOp,
      &kLrnOp,       &kChannelShuffleOp, &kReshapeOp,      &kTransposeOp,       &kPadOp,
      &kResizeOp,    &kGlobalAvgPoolOp, &kGlobalMaxPoolOp, &kSliceOp,     &kQuantizeOp,
      &kDequantizeOp, &kQConv2dOp,    &kQDenseOp,          &kQAddOp,            &kQConcatOp,
      &kQLutOp,      &kQGlobalAvgPoolOp, &kRequantizeOp};
  for (const OpDef* op : ops)
    if (op->id == id) return op;
  return nullptr;
}

AttrParser::AttrParser(const std::vector<Attr>& attrs, const std::string& node, const char* op)
    : attrs_(attrs), used_(attrs.size(), false), node_(node), op_(op) {}

std::string AttrParser::where() const { return node_where(node_, op_); }

std::string node_where(const std::string& node, const char* op) { return cat("node '", node, "' (", op, ")"); }

namespace {
const char* type_name(uint8_t type) {
  switch (type) {
    case kAttrInt: return "int";
    case kAttrFloat: return "float";
    case kAttrInts: return "ints";
    case kAttrFloats: return "floats";
    case kAttrString: return "string";
  }
  return "?";
}
}  // namespace

const Attr* AttrParser::find(const char* key, uint8_t type) {
  for (size_t i = 0; i < attrs_.size(); ++i) {
    if (attrs_[i].key != key) continue;
    used_[i] = true;
    if (attrs_[i].type != type)
      fail(DS_ERR_FORMAT, where(), ": attribute '", key, "' has type ", unsigned(attrs_[i].type), " (",
           type_name(attrs_[i].type), "), expected ", unsigned(type), " (", type_name(type), ")");
    return &attrs_[i];
  }
  return nullptr;
}

bool AttrParser::has(const char* key) const {
  for (const Attr& a : attrs_)
    if (a.key == key) return true;
  return false;
}

int64_t AttrParser::get_int(const char* key, int64_t def) {
  const Attr* a = find(key, kAttrInt);
  return a ? a->i : def;
}

float AttrParser::get_float(const char* key, float def) {
  const Attr* a = find(key, kAttrFloat);
  return a ? a->f : def;
}

std::string AttrParser::get_string(const char* key, const char* def) {
  const Attr* a = find(key, kAttrString);
  return a ? a->s : std::string(def);
}

bool AttrParser::get_ints(const char* key, size_t n, int64_t* out) {
  const Attr* a = find(key, kAttrInts);
  if (!a) return false;
  if (a->ints.size() != n)
    fail(DS_ERR_FORMAT, where(), ": attribute '", key, "' has ", a->ints.size(), " values, expected ", n);
  for (size_t i = 0; i < n; ++i) out[i] = a->ints[i];
  return true;
}

bool AttrParser::get_int_list(const char* key, size_t max_n, std::vector<int64_t>* out) {
  const Attr* a = find(key, kAttrInts);
  if (!a) return false;
  if (a->ints.size() > max_n)
    fail(DS_ERR_FORMAT, where(), ": attribute '", key, "' has ", a->ints.size(), " values, more than ", max_n);
  *out = a->ints;
  return true;
}

void AttrParser::finish() const {
  for (size_t i = 0; i < attrs_.size(); ++i)
    if (!used_[i])
      fail(DS_ERR_UNSUPPORTED_OP, where(), ": unknown attribute '", attrs_[i].key, "'");
}

void check_activation_kind(int64_t kind, const AttrParser& a, const char* key) {
  if (kind < 0 || kind > kActLast)
    fail(DS_ERR_FORMAT, a.where(), ": attribute '", key, "' is ", kind,
         ", not an activation code 0..7 (none, relu, clip, leaky_relu, sigmoid, hard_sigmoid, hard_swish, tanh)");
}

Activation parse_epilogue(AttrParser& a) {
  const int64_t kind = a.get_int("activation", 0);
  check_activation_kind(kind, a, "activation");
  Activation act;
  act.kind = int32_t(kind);
  act.alpha = a.get_float("act_alpha", 0.0f);
  act.beta = a.get_float("act_beta", 0.0f);
  return act;
}

void parse_conv_window(AttrParser& a, OpParams& p) {
  a.get_ints("strides", 2, p.strides);
  a.get_ints("pads", 4, p.pads);
  a.get_ints("dilations", 2, p.dilations);
  p.group = a.get_int("group", 1);
  for (int64_t v : p.strides)
    if (v < 1 || v > kMaxWindowParam) fail(DS_ERR_FORMAT, a.where(), ": stride ", v, " is outside 1..2^20");
  for (int64_t v : p.dilations)
    if (v < 1 || v > kMaxWindowParam) fail(DS_ERR_FORMAT, a.where(), ": dilation ", v, " is outside 1..2^20");
  for (int64_t v : p.pads)
    if (v < 0 || v > kMaxWindowParam) fail(DS_ERR_FORMAT, a.where(), ": pad ", v, " is outside 0..2^20");
  if (p.group < 1 || p.group > kMaxElements) fail(DS_ERR_FORMAT, a.where(), ": group ", p.group, " is < 1");
}

namespace {

uint8_t same_dtype(const std::vector<ValueInfo>& in, const std::string& who, bool takes_i16) {
  const uint8_t d = in[0].dtype;
  if (d != kDtypeF32 && d != kDtypeU8 && !(takes_i16 && d == kDtypeI16))
    fail(DS_ERR_FORMAT, who, ": input 0 is ", dtype_name(d), takes_i16 ? "; the op takes f32, u8 or i16" : "; the op takes f32 or u8");
  for (size_t i = 1; i < in.size(); ++i)
    if (in[i].dims && in[i].dtype != d)
      fail(DS_ERR_FORMAT, who, ": input ", i, " is ", dtype_name(in[i].dtype), " but input 0 is ", dtype_name(d),
           " (a ", dtype_name(d), " input needs every input to be ", dtype_name(d), ")");
  return d;
}

}  // namespace

uint8_t same_dtype_f32_or_u8(OpParams&, const std::vector<ValueInfo>& in, const std::string& who) {
  return same_dtype(in, who, false);
}

uint8_t same_dtype_f32_u8_or_i16(OpParams&, const std::vector<ValueInfo>& in, const std::string& who) {
  return same_dtype(in, who, true);
}

int64_t window_output_size(int64_t in, int64_t pad_begin, int64_t pad_end, int64_t kernel,
                           int64_t stride, int64_t dilation, bool ceil_mode) {
  const int64_t span = in + pad_begin + pad_end - dilation * (kernel - 1) - 1;
  if (span < 0) return 0;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  // PyTorch: the last window must start inside the input or the left padding.
  if (ceil_mode && (out - 1) * stride >= in + pad_begin) --out;
  return out;
}

}  // namespace ds
