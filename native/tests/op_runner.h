// Helpers for op tests through the C API: build small graphs with dsw, run them, and index
// tensors in plain loops.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepslim/deepslim.h"
#include "dsm_writer.h"
#include "tiny_net.h"

namespace opt {

using Dims = std::vector<int64_t>;

struct Result {
  ds_status status = DS_OK;
  std::string error;
  Dims shape;
  std::vector<float> y;
  size_t arena_bytes = 0, sum_bytes = 0;
};

inline size_t count(const Dims& d) {
  size_t n = 1;
  for (int64_t v : d) n *= size_t(v);
  return n;
}

// Loads the file, binds inputs xs[i] with shapes[i], runs on `threads` threads, and reads output 0.
inline Result run(const dsw::File& f, const std::vector<std::vector<float>>& xs, const std::vector<Dims>& shapes,
                  int threads = 1) {
  Result r;
  const dsw::Bytes bytes = dsw::serialize(f);
  ds_model* m = nullptr;
  ds_session* s = nullptr;
  ds_session_options o = DS_SESSION_OPTIONS_INIT;
  o.threads = threads;
  r.status = ds_model_load_memory(bytes.data(), bytes.size(), &m);
  if (r.status == DS_OK) r.status = ds_session_create(m, &o, &s);
  for (size_t i = 0; r.status == DS_OK && i < xs.size(); ++i)
    r.status = ds_session_set_input(s, i, xs[i].data(), shapes[i].data(), shapes[i].size());
  if (r.status == DS_OK) r.status = ds_session_run(s);
  size_t rank = 0;
  const int64_t* dims = nullptr;
  if (r.status == DS_OK) r.status = ds_session_output_shape(s, 0, &rank, &dims);
  if (r.status == DS_OK) {
    r.shape.assign(dims, dims + rank);
    r.y.resize(count(r.shape));
    r.status = ds_session_get_output(s, 0, r.y.data(), r.y.size());
  }
  if (r.status == DS_OK) r.status = ds_session_memory_info(s, &r.arena_bytes, &r.sum_bytes);
  if (r.status != DS_OK) r.error = ds_last_error();
  ds_session_free(s);
  ds_model_free(m);
  return r;
}

inline Result run(const dsw::File& f, const std::vector<float>& x, const Dims& xs, int threads = 1) {
  return run(f, std::vector<std::vector<float>>{x}, std::vector<Dims>{xs}, threads);
}

// Loads only: for files that the loader refuses (attribute and shape errors are found at load).
inline Result load(const dsw::File& f) {
  Result r;
  const dsw::Bytes bytes = dsw::serialize(f);
  ds_model* m = nullptr;
  r.status = ds_model_load_memory(bytes.data(), bytes.size(), &m);
  if (r.status != DS_OK) r.error = ds_last_error();
  ds_model_free(m);
  return r;
}

// One node: graph inputs with the given declared shapes (batch -1 where wanted), then constants,
// in that order as the node's inputs.
inline dsw::File one_node(uint16_t op, const std::vector<Dims>& inputs, std::vector<dsw::Tensor> consts,
                          std::vector<dsw::Attr> attrs) {
  dsw::File f;
  std::vector<uint32_t> in;
  for (size_t i = 0; i < inputs.size(); ++i) {
    in.push_back(f.add_value("x" + std::to_string(i), inputs[i]));
    f.inputs.push_back(in.back());
  }
  for (dsw::Tensor& t : consts) in.push_back(f.add_constant(std::move(t)));
  const uint32_t y = f.add_value("y", {1});
  f.outputs = {y};
  f.add_node(op, "op", in, y, std::move(attrs));
  return f;
}

inline std::vector<float> random_vec(tiny::Rng& rng, size_t n, float lo = -1, float hi = 1) {
  std::vector<float> v(n);
  for (float& x : v) x = rng.uniform(lo, hi);
  return v;
}

inline std::vector<uint64_t> udims(const Dims& d) { return std::vector<uint64_t>(d.begin(), d.end()); }

// C-order strides of dims.
inline Dims strides(const Dims& d) {
  Dims s(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;) s[i - 1] = s[i] * d[i];
  return s;
}

// The multi-index of flat position `flat` in dims.
inline Dims unravel(size_t flat, const Dims& d) {
  Dims idx(d.size());
  for (size_t i = d.size(); i-- > 0;) {
    idx[i] = int64_t(flat % size_t(d[i]));
    flat /= size_t(d[i]);
  }
  return idx;
}

inline dsw::Attr attr_float(const std::string& k, float v) {
  dsw::Attr a;
  a.key = k, a.type = 2, a.f = v;
  return a;
}
inline dsw::Attr attr_str(const std::string& k, const std::string& v) {
  dsw::Attr a;
  a.key = k, a.type = 5, a.s = v;
  return a;
}

// Plain-double versions of the activation codes (docs/format.md).
inline double activate(int kind, double x, double alpha, double beta) {
  switch (kind) {
    case 1: return x > 0 ? x : 0;
    case 2: return std::min(std::max(x, alpha), beta);
    case 3: return x >= 0 ? x : alpha * x;
    case 4: return 1.0 / (1.0 + std::exp(-x));
    case 5: return std::max(0.0, std::min(1.0, alpha * x + beta));
    case 6: return x * std::max(0.0, std::min(1.0, x / 6.0 + 0.5));
    case 7: return std::tanh(x);
    default: return x;
  }
}

// Float tolerance of float32 results against a double reference (one place, as STYLE.md asks).
constexpr double kTol = 1e-5;
constexpr double kTolAccum = 1e-4;  // long accumulations (conv_transpose2d, lrn)

}  // namespace opt
