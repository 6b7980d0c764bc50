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

// Validated attributes of any op; each op fills the fields it uses.
struct OpParams {
  int64_t strides[2] = {1, 1};
  int64_t pads[4] = {0, 0, 0, 0};  // top, left, bottom, right
  int64_t dilations[2] = {1, 1};
  int64_t kernel[2] = {0, 0};
  int64_t output_padding[2] = {0, 0};  // conv_transpose2d
  int64_t group = 1;                   // conv2d, conv_transpose2d, channel_shuffle
  Activation act;                      // fused epilogue, or the activation op's function
  int64_t ceil_mode = 0;
  int64_t count_include_pad = 0;
  int64_t axis = 0;
  int64_t size = 0;                    // lrn
  int64_t sizes[2] = {0, 0};           // resize: output H, W
  float epsilon = 1e-5f;               // batchnorm
  float alpha = 0.0f, beta = 0.0f, bias = 0.0f;  // lrn
  float value = 0.0f;                  // pad (constant)
  int32_t mode = 0;                    // pad: PadMode; resize: 0 nearest, 1 linear
  int32_t coord = 0, nearest = 0;      // resize: ResizeCoord, ResizeNearest
  std::vector<int64_t> list;           // reshape `shape`, transpose `perm`, pad `pads`, slice `starts`
  std::vector<int64_t> axes, ends;     // slice
};

// An op input at run time: data is null for an absent optional input.
struct OpInput {
  const float* data;
  const Shape* shape;
};

struct OpDef {
  uint16_t id;
  const char* name;
  int min_inputs, max_inputs;  // every op has exactly one output
  // Throws DS_ERR_UNSUPPORTED_OP for an unknown attribute key, DS_ERR_FORMAT for a bad value.
  OpParams (*parse)(const std::vector<Attr>& attrs, const std::string& node);
  // inputs[i] is null for an absent optional input. Throws DS_ERR_SHAPE naming node and shapes.
  Shape (*infer_shape)(const OpParams& p, const std::vector<const Shape*>& inputs,
                       const std::string& node);
  // Must not allocate: the session runs the graph without allocating.
  void (*run)(const OpParams& p, const std::vector<OpInput>& inputs, float* out, const Shape& out_shape,
              const KernelTable& kernels);
  // Every input is required (concat); otherwise inputs from min_inputs on are optional.
  bool variadic = false;
};

// The op with this id, or null.
const OpDef* find_op(uint16_t id);
// The largest op id this runtime knows (ids 1..kMaxOpId).
constexpr uint16_t kMaxOpId = 24;

// Attribute access with defaults, type checks and a check that no unknown key is left over.
class AttrParser {
 public:
  AttrParser(const std::vector<Attr>& attrs, const std::string& node, const char* op);
  int64_t get_int(const char* key, int64_t def);
  float get_float(const char* key, float def);
  std::string get_string(const char* key, const char* def);
  // Reads an ints attribute of exactly n values into out; leaves out unchanged when absent.
  bool get_ints(const char* key, size_t n, int64_t* out);
  // Reads an ints attribute of at most max_n values; leaves out unchanged when absent.
  bool get_int_list(const char* key, size_t max_n, std::vector<int64_t>* out);
  // True when the attribute is present (any type); does not mark it used.
  bool has(const char* key) const;
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

// The fused activation epilogue: `activation` int = 0, `act_alpha` float = 0, `act_beta` float = 0.
Activation parse_epilogue(AttrParser& a);
// Throws DS_ERR_FORMAT unless kind is a code of docs/format.md (0..7).
void check_activation_kind(int64_t kind, const AttrParser& a, const char* key);
// conv2d and conv_transpose2d: `strides`, `pads`, `dilations`, `group`, with range checks.
void parse_conv_window(AttrParser& a, OpParams& p);

// "node 'add_3' (add)", for shape errors.
std::string node_where(const std::string& node, const char* op);

// Output size of one spatial dimension of a conv/pool window (docs/format.md, "Output sizes").
// Returns < 1 when the window does not fit.
int64_t window_output_size(int64_t in, int64_t pad_begin, int64_t pad_end, int64_t kernel,
                           int64_t stride, int64_t dilation, bool ceil_mode);

// Limit on kernel sizes, strides, dilations and pads: keeps every size computation far from
// int64 overflow.
constexpr int64_t kMaxWindowParam = 1 << 20;

// Product of dims (shapes reaching ops passed element_count(), so this cannot overflow).
inline int64_t product(const Shape& s, size_t begin = 0, size_t end = size_t(-1)) {
  int64_t n = 1;
  for (size_t i = begin; i < s.size() && i < end; ++i) n *= s[i];
  return n;
}

}  // namespace ds
