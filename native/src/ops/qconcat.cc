// qconcat (op id 30): u8 inputs joined along `axis`, each rescaled on the way:
// clamp(y_zp + requant(x - zero_points[i], multipliers[i], shifts[i]), 0, 255).
#include "ops/qcommon.h"

namespace ds {
namespace {

constexpr int kMaxInputs = 255;

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser a(attrs, node, "qconcat");
  OpParams p;
  p.axis = q_required_int(a, "axis");
  if (p.axis < -kMaxRank || p.axis >= kMaxRank) fail(DS_ERR_FORMAT, a.where(), ": axis ", p.axis, " is outside -8..7");
  for (const char* key : {"zero_points", "multipliers", "shifts"})
    if (!a.has(key)) fail(DS_ERR_FORMAT, a.where(), ": attribute '", key, "' is missing");
  a.get_int_list("zero_points", kMaxInputs, &p.zps);
  a.get_int_list("multipliers", kMaxInputs, &p.mults);
  a.get_int_list("shifts", kMaxInputs, &p.shifts);
  p.y_zp = q_zero_point(a, "y_zero_point");
  a.finish();
  if (p.mults.size() != p.zps.size() || p.shifts.size() != p.zps.size())
    fail(DS_ERR_FORMAT, a.where(), ": zero_points, multipliers and shifts have ", p.zps.size(), ", ", p.mults.size(),
         " and ", p.shifts.size(), " entries; they need one per input");
  for (size_t i = 0; i < p.zps.size(); ++i) {
    if (p.zps[i] < 0 || p.zps[i] > 255)
      fail(DS_ERR_FORMAT, a.where(), ": attribute 'zero_points' [", i, "] is ", p.zps[i], ", outside 0..255");
    if (p.mults[i] < 0 || p.mults[i] > kQMultMax)
      fail(DS_ERR_FORMAT, a.where(), ": attribute 'multipliers' [", i, "] is ", p.mults[i], ", outside 0..2147483647");
    if (p.shifts[i] < kQShiftMin || p.shifts[i] > kQShiftMax)
      fail(DS_ERR_FORMAT, a.where(), ": attribute 'shifts' [", i, "] is ", p.shifts[i], ", outside -30..30");
  }
  return p;
}

int64_t normalized_axis(const OpParams& p, size_t rank) { return p.axis < 0 ? p.axis + int64_t(rank) : p.axis; }

Shape infer_shape(const OpParams& p, const std::vector<const Shape*>& in, const std::string& node) {
  if (in.size() != p.zps.size())
    fail(DS_ERR_SHAPE, node_where(node, "qconcat"), ": ", in.size(), " inputs but ", p.zps.size(),
         " zero_points/multipliers/shifts");
  const Shape& x0 = *in[0];
  const int64_t axis = normalized_axis(p, x0.size());
  if (axis < 0 || axis >= int64_t(x0.size()))
    fail(DS_ERR_SHAPE, node_where(node, "qconcat"), ": axis ", p.axis, " is out of range for input 0 ", shape_str(x0));
  Shape out = x0;
  for (size_t i = 1; i < in.size(); ++i) {
    const Shape& x = *in[i];
    bool ok = x.size() == x0.size();
    for (size_t k = 0; ok && k < x.size(); ++k) ok = int64_t(k) == axis || x[k] == x0[k];
    if (!ok)
      fail(DS_ERR_SHAPE, node_where(node, "qconcat"), ": input ", i, " ", shape_str(x), " does not match input 0 ",
           shape_str(x0), " outside axis ", axis);
    out[size_t(axis)] += x[size_t(axis)];
  }
  return out;
}

uint8_t check_dtypes(OpParams& p, const std::vector<ValueInfo>& in, const std::string& who) {
  if (in.size() != p.zps.size())
    fail(DS_ERR_FORMAT, who, ": ", in.size(), " inputs but ", p.zps.size(), " zero_points/multipliers/shifts");
  for (size_t i = 0; i < in.size(); ++i) q_need_dtype(in, i, kDtypeU8, who, "x");
  return kDtypeU8;
}

void run(const OpParams& p, const std::vector<OpInput>& in, float* out, const Shape& os, const KernelTable&) {
  const size_t axis = size_t(normalized_axis(p, os.size()));
  const int64_t inner = product(os, axis + 1);
  const uint8_t* xs[kMaxInputs];
  const uint8_t* tables[kMaxInputs];
  uint8_t storage[kMaxInputs][256];  // on the stack: run allocates nothing
  int64_t sizes[kMaxInputs];
  for (size_t i = 0; i < in.size(); ++i) {
    xs[i] = in[i].as<uint8_t>();
    sizes[i] = (*in[i].shape)[axis] * inner;
    ds_qu8_requant_table__scalar(int32_t(p.zps[i]), int32_t(p.mults[i]), int32_t(p.shifts[i]), p.y_zp, storage[i]);
    tables[i] = storage[i];
  }
  const ConcatParams c{product(os, 0, axis), int32_t(in.size()), sizes};
  ds_x8_concat__scalar(c, xs, tables, reinterpret_cast<uint8_t*>(out));
}

}  // namespace

extern const OpDef kQConcatOp = {30, "qconcat", 1, kMaxInputs, parse, infer_shape, run, true, check_dtypes};

}  // namespace ds
