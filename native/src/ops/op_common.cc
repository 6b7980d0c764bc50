#include "common/error.h"
#include "ops/op.h"

namespace ds {

extern const OpDef kConv2dOp, kDenseOp, kMaxPool2dOp, kAvgPool2dOp, kReluOp, kFlattenOp, kSoftmaxOp;

const OpDef* find_op(uint16_t id) {
  static const OpDef* const ops[] = {&kConv2dOp, &kDenseOp, &kMaxPool2dOp, &kAvgPool2dOp,
                                     &kReluOp,   &kFlattenOp, &kSoftmaxOp};
  for (const OpDef* op : ops)
    if (op->id == id) return op;
  return nullptr;
}

AttrParser::AttrParser(const std::vector<Attr>& attrs, const std::string& node, const char* op)
    : attrs_(attrs), used_(attrs.size(), false), node_(node), op_(op) {}

std::string AttrParser::where() const { return cat("node '", node_, "' (", op_, ")"); }

const Attr* AttrParser::find(const char* key, uint8_t type) {
  for (size_t i = 0; i < attrs_.size(); ++i) {
    if (attrs_[i].key != key) continue;
    used_[i] = true;
    if (attrs_[i].type != type)
      fail(DS_ERR_FORMAT, where(), ": attribute '", key, "' has type ", unsigned(attrs_[i].type),
           ", expected ", unsigned(type), type == kAttrInt ? " (int)" : " (ints)");
    return &attrs_[i];
  }
  return nullptr;
}

int64_t AttrParser::get_int(const char* key, int64_t def) {
  const Attr* a = find(key, kAttrInt);
  return a ? a->i : def;
}

bool AttrParser::get_ints(const char* key, size_t n, int64_t* out) {
  const Attr* a = find(key, kAttrInts);
  if (!a) return false;
  if (a->ints.size() != n)
    fail(DS_ERR_FORMAT, where(), ": attribute '", key, "' has ", a->ints.size(), " values, expected ", n);
  for (size_t i = 0; i < n; ++i) out[i] = a->ints[i];
  return true;
}

void AttrParser::finish() const {
  for (size_t i = 0; i < attrs_.size(); ++i)
    if (!used_[i])
      fail(DS_ERR_UNSUPPORTED_OP, where(), ": unknown attribute '", attrs_[i].key, "'");
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
