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
#include "kernels/qu8.h"
#include "ops/op.h"

namespace ds {

constexpr int64_t kQMultMax = (int64_t(1) << 31) - 1;
constexpr int32_t kQShiftMin = -30, kQShiftMax = 30;
// qconv2d/qdense accumulate exactly in int32 when K * 255 * 128 < 2^31.
constexpr int64_t kQMaxK = ((int64_t(1) << 31) - 1) / (255 * 128);

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

// act_min / act_max (defaults 0, 255), each in 0..255, act_min <= act_max.
inline void q_act_range(AttrParser& a, OpParams& p) {
  const int64_t lo = a.get_int("act_min", 0), hi = a.get_int("act_max", 255);
  q_check_range(a, "act_min", lo, 0, 255);
  q_check_range(a, "act_max", hi, 0, 255);
  if (lo > hi) fail(DS_ERR_FORMAT, a.where(), ": act_min ", lo, " is greater than act_max ", hi);
  p.act_min = int32_t(lo);
  p.act_max = int32_t(hi);
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

// qconv2d/qdense: weight i8 (rows = dims[0], K = the rest), bias/multiplier/shift i32 [rows] with
// multipliers in 0..2^31-1 and shifts in -30..30, K within the exact int32 accumulation bound.
inline void q_check_linear(const std::vector<ValueInfo>& in, const std::string& who, size_t weight_rank) {
  q_need_dtype(in, 0, kDtypeU8, who, "x");
  q_need_constant(in, 1, kDtypeI8, -1, who, "weight");
  const Shape& w = *in[1].dims;
  if (w.size() != weight_rank)
    fail(DS_ERR_FORMAT, who, ": weight has shape ", shape_str(w), ", must have rank ", weight_rank);
  const int64_t rows = w[0];
  const int64_t k = product(w, 1);
  if (k > kQMaxK)
    fail(DS_ERR_FORMAT, who, ": weight ", shape_str(w), " sums ", k, " products per output, more than ", kQMaxK,
         " (K * 255 * 128 must be < 2^31 for exact int32 accumulation)");
  q_need_constant(in, 2, kDtypeI32, rows, who, "bias");
  const int32_t* m = static_cast<const int32_t*>(q_need_constant(in, 3, kDtypeI32, rows, who, "multiplier"));
  const int32_t* s = static_cast<const int32_t*>(q_need_constant(in, 4, kDtypeI32, rows, who, "shift"));
  for (int64_t i = 0; i < rows; ++i) {
    if (m[i] < 0) fail(DS_ERR_FORMAT, who, ": multiplier[", i, "] is ", m[i], ", outside 0..2147483647");
    if (s[i] < kQShiftMin || s[i] > kQShiftMax)
      fail(DS_ERR_FORMAT, who, ": shift[", i, "] is ", s[i], ", outside -30..30");
  }
}

// Elementwise work on [0, n) in pieces: one per thread from 32K elements (below that the hand-off
// costs more than it saves), whole 64-element blocks each.
template <typename Fn>
void q_parallel_range(ThreadPool* pool, int64_t n, Fn&& fn) {
  parallel_range(pool, n, 32768, 64, fn);
}

}  // namespace ds
