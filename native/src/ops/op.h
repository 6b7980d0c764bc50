// The op interface: each op (one file in src/ops) parses and validates its attributes, infers its
// output shape and runs a kernel. Ops are registered by their stable id from docs/format.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/shape.h"
#include "kernels/kernels.h"

namespace ds {

enum AttrType : uint8_t { kAttrInt = 1, kAttrFloat = 2, kAttrInts = 3, kAttrFloats = 4, kAttrString = 5 };

struct Attr {
  std::string key;
  uint8_t type = 0;
  int64_t i = 0;
  float f = 0.0f;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::string s;
};

// Validated attributes of any v1 op; each op fills the fields it uses.
struct OpParams {
  int64_t strides[2] = {1, 1};
  int64_t pads[4] = {0, 0, 0, 0};  // top, left, bottom, right
  int64_t dilations[2] = {1, 1};
  int64_t kernel[2] = {0, 0};
  int64_t group = 1;
  int64_t activation = 0;  // 0 none, 1 relu
  int64_t ceil_mode = 0;
  int64_t count_include_pad = 0;
  int64_t axis = 0;
};

// An op input at run time: data is null for an absent optional input.
struct OpInput {
  const float* data;
  const Shape* shape;
};

struct OpDef {
  uint16_t id;
  const char* name;
  int min_inputs, max_inputs;  // every v1 op has exactly one output
  // Throws DS_ERR_UNSUPPORTED_OP for an unknown attribute key, DS_ERR_FORMAT for a bad value.
  OpParams (*parse)(const std::vector<Attr>& attrs, const std::string& node);
  // inputs[i] is null for an absent optional input. Throws DS_ERR_SHAPE naming node and shapes.
  Shape (*infer_shape)(const OpParams& p, const std::vector<const Shape*>& inputs,
                       const std::string& node);
  void (*run)(const OpParams& p, const std::vector<OpInput>& inputs, float* out, const Shape& out_shape,
              const KernelTable& kernels);
};

// The op with this id, or null.
const OpDef* find_op(uint16_t id);

// Attribute access with defaults, type checks and a check that no unknown key is left over.
class AttrParser {
 public:
  AttrParser(const std::vector<Attr>& attrs, const std::string& node, const char* op);
  int64_t get_int(const char* key, int64_t def);
  // Reads an ints attribute of exactly n values into out; leaves out unchanged when absent.
  bool get_ints(const char* key, size_t n, int64_t* out);
  // Throws DS_ERR_UNSUPPORTED_OP naming the first key that no get_* asked for.
  void finish() const;
  std::string where() const;  // "node 'conv1' (conv2d)"

 private:
  const Attr* find(const char* key, uint8_t type);
  const std::vector<Attr>& attrs_;
  std::vector<bool> used_;
  const std::string& node_;
  const char* op_;
};

// Output size of one spatial dimension of a conv/pool window (docs/format.md, "Output sizes").
// Returns < 1 when the window does not fit.
int64_t window_output_size(int64_t in, int64_t pad_begin, int64_t pad_end, int64_t kernel,
                           int64_t stride, int64_t dilation, bool ceil_mode);

// Limit on kernel sizes, strides, dilations and pads: keeps every size computation far from
// int64 overflow.
constexpr int64_t kMaxWindowParam = 1 << 20;

}  // namespace ds
