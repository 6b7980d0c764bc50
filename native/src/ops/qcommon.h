// Shared by the quantized ops (ids 25-32): attribute ranges and constant-input checks
// (docs/format.md, "Quantized inference (int8)"). Every failure is DS_ERR_FORMAT naming the node
// and the attribute or input.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "ops/parallel.h"
#include "kernels/qi16.h"
#include "ops/op.h"

namespace ds {

constexpr int64_t kQMultMax = (int64_t(1) << 31) - 1;
constexpr int32_t kQShiftMin = -30, kQShiftMax = 30;
// qconv2d/qdense accumulate exactly in int32 when K * 255 * 128 < 2^31.
constexpr int64_t kQMaxK = ((int64_t(1) << 31) - 1) / (255 * 128);
// With i16 input they accumulate in int64: K * 32768 * 128 < 2^46 keeps |acc| < 2^47, so that
// acc * (multiplier >> 16) (< 2^15) stays inside int64 (docs/format.md, "int16 activations").
constexpr int64_t kQ16MaxK = ((int64_t(1) << 46) - 1) / (32768 * 128);
constexpr int32_t kI16Min = -32768, kI16Max = 32767;

inline int64_t q_required_int(AttrParser& a, const char* key) {
  if (!a.has(key)) fail(DS_ERR_FORMAT, a.where(), ": attribute '", key, "' is missing");
  return a.get_int(key, 0);
}

inline void q_check_range(const AttrParser& a, const char* key, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) fail(DS_ERR_FORMAT, a.where(), ": attribute '", key, "' is ", v, ", outside ", lo, "..", hi);
}

inline int32_t q_zero_point(AttrParser& a, const char* key) {
  const int64_t v = q_required_int(a, key);
  q_check_range(a, key, v, 0, 255);
  return int32_t(v);
}

inline int64_t q_multiplier(AttrParser& a, const char* key) {
  const int64_t v = q_required_int(a, key);
  q_check_range(a, key, v, 0, kQMultMax);
  return v;
}

inline int32_t q_shift(AttrParser& a, const char* key) {
  const int64_t v = q_required_int(a, key);
  q_check_range(a, key, v, kQShiftMin, kQShiftMax);
  return int32_t(v);
}

inline float q_scale(AttrParser& a) {
  if (!a.has("scale")) fail(DS_ERR_FORMAT, a.where(), ": attribute 'scale' is missing");
  const float s = a.get_float("scale", 1.0f);
  if (!(std::isfinite(s) && s > 0.0f))
    fail(DS_ERR_FORMAT, a.where(), ": attribute 'scale' is ", s, "; a scale must be finite and > 0");
  return s;
}

// The attributes of quantize and dequantize: `scale` and `zero_point`, nothing else.
inline OpParams q_parse_scale_zero_point(const std::vector<Attr>& attrs, const std::string& node, const char* op) {
  AttrParser a(attrs, node, op);
  OpParams p;
  p.scale = q_scale(a);
  p.zp = q_zero_point(a, "zero_point");
  a.finish();
  return p;
}

// The attributes of qglobal_avgpool and requantize: `x_zero_point`, `y_zero_point`, `multiplier`,
// `shift`, all required, nothing else.
inline OpParams q_parse_rescale(const std::vector<Attr>& attrs, const std::string& node, const char* op) {
  AttrParser a(attrs, node, op);
  OpParams p;
  p.zp = q_zero_point(a, "x_zero_point");
  p.y_zp = q_zero_point(a, "y_zero_point");
  p.mult = q_multiplier(a, "multiplier");
  p.shift = q_shift(a, "shift");
  a.finish();
  return p;
}

// act_min / act_max (defaults 0, 255), each in 0..255, act_min <= act_max.
inline void q_act_range(AttrParser& a, OpParams& p) {
  const int64_t lo = a.get_int("act_min", 0), hi = a.get_int("act_max", 255);
  q_check_range(a, "act_min", lo, 0, 255);
  q_check_range(a, "act_max", hi, 0, 255);
  if (lo > hi) fail(DS_ERR_FORMAT, a.where(), ": act_min ", lo, " is greater than act_max ", hi);
  p.act_min = int32_t(lo);
  p.act_max = int32_t(hi);
}

// act_min / act_max of qconv2d/qdense, whose output may be u8 or i16: at parse each must lie in
// the i16 range; q_check_output checks them against the output's dtype and fills in the absent
// ones (that dtype's full range).
inline void q_parse_act_range(AttrParser& a, OpParams& p) {
  p.act_min_given = a.has("act_min");
  p.act_max_given = a.has("act_max");
  const int64_t lo = a.get_int("act_min", 0), hi = a.get_int("act_max", 255);
  q_check_range(a, "act_min", lo, kI16Min, kI16Max);
  q_check_range(a, "act_max", hi, kI16Min, kI16Max);
  p.act_min = int32_t(lo);
  p.act_max = int32_t(hi);
}

inline int32_t q_dtype_min(uint8_t dtype) { return dtype == kDtypeI16 ? kI16Min : 0; }
inline int32_t q_dtype_max(uint8_t dtype) { return dtype == kDtypeI16 ? kI16Max : 255; }

// An i16 value is symmetric: its zero point (attribute `key`) must be 0.
inline void q_check_zero_point(int32_t zp, uint8_t dtype, const std::string& who, const char* key) {
  if (dtype == kDtypeI16 && zp != 0)
    fail(DS_ERR_FORMAT, who, ": attribute '", key, "' is ", zp, ", must be 0 for an i16 value");
}

// The output of an op that gives u8 or i16 (the declared p.y_dtype); returns it.
inline uint8_t q_output_dtype(const OpParams& p, const std::string& who) {
  if (!dtype_quantized_activation(p.y_dtype))
    fail(DS_ERR_FORMAT, who, ": output is declared ", dtype_name(p.y_dtype), "; the op gives u8 or i16");
  return p.y_dtype;
}

// The output side of qconv2d/qdense: y u8 or i16, y_zero_point 0 for i16, act_min / act_max
// inside y's range (absent: its ends), act_min <= act_max.
inline uint8_t q_check_output(OpParams& p, const std::string& who) {
  const uint8_t y = q_output_dtype(p, who);
  q_check_zero_point(p.y_zp, y, who, "y_zero_point");
  const int32_t lo = q_dtype_min(y), hi = q_dtype_max(y);
  if (!p.act_min_given) p.act_min = lo;
  if (!p.act_max_given) p.act_max = hi;
  for (const auto& [key, v] : {std::pair<const char*, int32_t>{"act_min", p.act_min}, {"act_max", p.act_max}})
    if (v < lo || v > hi)
      fail(DS_ERR_FORMAT, who, ": attribute '", key, "' is ", v, ", outside ", lo, "..", hi, " (output ",
           dtype_name(y), ")");
  if (p.act_min > p.act_max) fail(DS_ERR_FORMAT, who, ": act_min ", p.act_min, " is greater than act_max ", p.act_max);
  return y;
}

inline void q_need_dtype(const std::vector<ValueInfo>& in, size_t i, uint8_t dtype, const std::string& who,
                         const char* what) {
  if (in[i].dtype != dtype)
    fail(DS_ERR_FORMAT, who, ": input ", i, " (", what, ") is ", dtype_name(in[i].dtype), ", must be ",
         dtype_name(dtype));
}

// A constant input of the given dtype; with len >= 0 its shape must be [len].
inline const void* q_need_constant(const std::vector<ValueInfo>& in, size_t i, uint8_t dtype, int64_t len,
                                   const std::string& who, const char* what) {
  q_need_dtype(in, i, dtype, who, what);
  if (!in[i].data) fail(DS_ERR_FORMAT, who, ": input ", i, " (", what, ") must be a constant");
  if (len >= 0 && (in[i].dims->size() != 1 || (*in[i].dims)[0] != len))
    fail(DS_ERR_FORMAT, who, ": ", what, " has shape ", shape_str(*in[i].dims), ", must be [", len, "]");
  return in[i].data;
}

// qconv2d/qdense: x u8 or i16, weight i8 (rows = dims[0], K = the rest), bias/multiplier/shift
// i32 [rows] with multipliers in 0..2^31-1 and shifts in -30..30, K within the exact
// accumulation bound; with i16 x: x_zero_point 0, multipliers multiples of 2^16, 15 + shift >= 1.
// Then the output side (q_check_output); returns y's dtype.
inline uint8_t q_check_linear(OpParams& p, const std::vector<ValueInfo>& in, const std::string& who,
                              size_t weight_rank) {
  const uint8_t x = in[0].dtype;
  if (!dtype_quantized_activation(x))
    fail(DS_ERR_FORMAT, who, ": input 0 (x) is ", dtype_name(x), ", must be u8 or i16");
  q_check_zero_point(p.zp, x, who, "x_zero_point");
  q_need_constant(in, 1, kDtypeI8, -1, who, "weight");
  const Shape& w = *in[1].dims;
  if (w.size() != weight_rank)
    fail(DS_ERR_FORMAT, who, ": weight has shape ", shape_str(w), ", must have rank ", weight_rank);
  const int64_t rows = w[0];
  const int64_t k = product(w, 1);
  if (x == kDtypeU8 && k > kQMaxK)
    fail(DS_ERR_FORMAT, who, ": weight ", shape_str(w), " sums ", k, " products per output, more than ", kQMaxK,
         " (K * 255 * 128 must be < 2^31 for exact int32 accumulation)");
  if (x == kDtypeI16 && k > kQ16MaxK)
    fail(DS_ERR_FORMAT, who, ": weight ", shape_str(w), " sums ", k, " products per output, more than ", kQ16MaxK,
         " (K * 32768 * 128 must be < 2^46 with i16 input)");
  q_need_constant(in, 2, kDtypeI32, rows, who, "bias");
  const int32_t* m = static_cast<const int32_t*>(q_need_constant(in, 3, kDtypeI32, rows, who, "multiplier"));
  const int32_t* s = static_cast<const int32_t*>(q_need_constant(in, 4, kDtypeI32, rows, who, "shift"));
  for (int64_t i = 0; i < rows; ++i) {
    if (m[i] < 0) fail(DS_ERR_FORMAT, who, ": multiplier[", i, "] is ", m[i], ", outside 0..2147483647");
    if (s[i] < kQShiftMin || s[i] > kQShiftMax)
      fail(DS_ERR_FORMAT, who, ": shift[", i, "] is ", s[i], ", outside -30..30");
    if (x == kDtypeI16 && m[i] % 65536 != 0)
      fail(DS_ERR_FORMAT, who, ": multiplier[", i, "] is ", m[i], ", not a multiple of 2^16 (required with i16 input)");
    if (x == kDtypeI16 && 15 + s[i] < 1)
      fail(DS_ERR_FORMAT, who, ": shift[", i, "] is ", s[i], "; with i16 input 15 + shift must be >= 1");
  }
  return q_check_output(p, who);
}

// Calls fn(x, y) with x and y as pointers to the element types of their dtypes (u8: uint8_t,
// i16: int16_t): one generic lambda for the four combinations of the int16 paths.
template <typename Fn>
void q_with_types(uint8_t x_dtype, const void* x, uint8_t y_dtype, void* y, Fn&& fn) {
  auto with_y = [&](auto* xt) {
    if (y_dtype == kDtypeI16) fn(xt, static_cast<int16_t*>(y));
    else fn(xt, static_cast<uint8_t*>(y));
  };
  if (x_dtype == kDtypeI16) with_y(static_cast<const int16_t*>(x));
  else with_y(static_cast<const uint8_t*>(x));
}

// Elementwise work on [0, n) in pieces: one per thread from 32K elements (below that the hand-off
// costs more than it saves), whole 64-element blocks each.
template <typename Fn>
void q_parallel_range(ThreadPool* pool, int64_t n, Fn&& fn) {
  parallel_range(pool, n, 32768, 64, fn);
}

}  // namespace ds
