// The op interface: each op (one file in src/ops) parses and validates its attributes, infers its
// output shape and runs a kernel. Ops are registered by their stable id from docs/format.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/dtype.h"
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
  // Quantized ops (25-32): zero points, fixed-point multipliers and shifts, output clamp.
  float scale = 1.0f;                  // quantize, dequantize
  int32_t zp = 0;                      // quantize/dequantize zero_point; x_zero_point; a_zero_point
  int32_t zp_b = 0;                    // qadd b_zero_point
  int32_t y_zp = 0;                    // y_zero_point
  int32_t act_min = 0, act_max = 255;
  // qconv2d/qdense: whether act_min / act_max were given (absent: the full range of y's dtype,
  // filled in by check_dtypes).
  bool act_min_given = false, act_max_given = false;
  // Not an attribute: the declared dtype of the node's output value, set by the loader before
  // check_dtypes (the quantized ops whose output may be u8 or i16 read it).
  uint8_t y_dtype = kDtypeF32;
  int64_t mult = 0, mult_b = 0;        // qadd a/b multipliers; qglobal_avgpool multiplier
  int32_t shift = 0;                   // qadd, qglobal_avgpool
  std::vector<int64_t> zps, mults, shifts;  // qconcat, per input
  // Not an attribute: a qadd the session runs in this qconv2d's epilogue (its residual input),
  // with that add's parameters; conv_side tells which of its operands the conv's output is
  // (0: a, 1: b). The conv's own y_zp, act_min, act_max above still give its u8 output first.
  struct FusedQAdd {
    bool on = false;
    int conv_side = 0;
    int32_t a_zp = 0, b_zp = 0, y_zp = 0, act_min = 0, act_max = 255, shift = 0;
    int64_t a_mult = 0, b_mult = 0;
  } qadd;
  // Not an attribute: a depthwise 3x3 conv2d the session runs inside this 1x1 conv2d band by band
  // (OpDef::fuse_producer): its output, read by this node alone, is never materialized. Its
  // input, weight and bias come at OpDef::producer_input, its window, input size and activation
  // here. `expand`: the prepared state of a 1x1 conv2d before the depthwise that runs band by band
  // too (its output never materialized either; its inputs follow the depthwise node's, at
  // producer_input + max_inputs), with its activation.
  struct FusedDepthwise {
    bool on = false;
    int64_t stride = 1, pad_top = 0, pad_left = 0;
    int64_t in_h = 0, in_w = 0;
    Activation act;
    // The depthwise's producer, a conv whose output the fused node computes band by band too
    // (a 1x1 expansion, or a stem such as MobileNet V2's 3x3 stride 2): its state, activation,
    // strides and top/left pads (its kernel comes from its weight's shape), and the floats of one
    // image's phases of its input (0: read in place).
    const void* expand = nullptr;
    Activation expand_act;
    int64_t expand_strides[2] = {1, 1}, expand_pads[2] = {0, 0};
    int64_t expand_phase_floats = 0;
  } depthwise;
  // Not an attribute: a quantize the session runs in this qconv2d (OpDef::takes_f32_input): input
  // 0 is that quantize's f32 input, quantized with its scale and zero point (the conv's x_zp).
  struct FusedQuantize {
    bool on = false;
    float scale = 1.0f;
    int32_t zp = 0;
  } quantize;
  // Not an attribute: the kernel the session was asked to prepare this node with (one of its
  // OpDef::kernels; empty: the op's own rule). Set by the session from the per-node kernel
  // choices (ds_session_options.kernels), read by prepare only.
  std::string kernel_choice;
};

// A node input as the loader knows it: dtype, declared dims, and the data of a constant (null for
// an activation).
struct ValueInfo {
  uint8_t dtype;
  const Shape* dims;  // null for an absent optional input
  const void* data;
};

class ThreadPool;

// An op input at run time: data is null for an absent optional input. `data` points at elements
// of `dtype` (u8 activations of the quantized ops are passed through the same pointer).
struct OpInput {
  const float* data;
  const Shape* shape;
  uint8_t dtype = kDtypeF32;
  template <typename T>
  const T* as() const { return reinterpret_cast<const T*>(data); }
};

// What a prepared op gets at run time besides its inputs: the state its `prepare` built once per
// session (packed weights), and the session's thread pool.
struct RunContext {
  const void* state;
  ThreadPool* pool;
  float* workspace = nullptr;  // OpDef::workspace_floats() floats, 64-byte aligned, this node's during its run
  int64_t session_workspace_floats = 0;  // the session's whole workspace (at least the node's), 0: unknown
  // Thread `thread`'s part (per_thread elements of T) of the workspace from `base` on, for a job
  // on `threads` threads. Parts are packed at base + t * per_thread unless the session's size is
  // known: then thread t >= 1 starts at t / threads of the session workspace when its packed part
  // would start before that, so its part is at the same address in every node and it rewrites
  // lines it wrote itself. Packed, a node whose per_thread differs from the node before gave one
  // thread lines another core had written, each write a cross-core miss (MobileNet V2's fused
  // blocks at 2 threads: the worker's half 11-13% slower than the caller's).
  // Requires base inside the workspace, head + threads * per_thread within the session's
  // workspace, and nothing the op still needs after the parts. The parts are 64-byte aligned when
  // base and per_thread * sizeof(T) are.
  template <typename T>
  T* thread_part(T* base, int64_t per_thread, int thread, int threads) const {
    const int64_t per = per_thread * int64_t(sizeof(T));
    char* b = reinterpret_cast<char*>(base);
    if (session_workspace_floats <= 0 || threads <= 1) return reinterpret_cast<T*>(b + thread * per);
    char* w = reinterpret_cast<char*>(workspace);
    const int64_t bytes = session_workspace_floats * int64_t(sizeof(float)), head = b - w;
    int64_t at = head + thread * per;
    const int64_t anchor = thread * (bytes / threads / 64 * 64);
    if (anchor > at) at = anchor;
    return reinterpret_cast<T*>(w + at);
  }
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
  // Must not allocate: the session runs the graph without allocating. Null when the op has
  // run_prepared.
  void (*run)(const OpParams& p, const std::vector<OpInput>& inputs, float* out, const Shape& out_shape,
              const KernelTable& kernels);
  // Every input is required (concat); otherwise inputs from min_inputs on are optional.
  bool variadic = false;
  // Input dtypes (and the contents of constant inputs of quantized ops) at load: returns the
  // output dtype or throws DS_ERR_FORMAT naming `who` and the input or attribute. May complete p
  // with what depends on the dtypes (p.y_dtype is the declared output dtype). Null: the op takes
  // f32 only and gives f32.
  uint8_t (*check_dtypes)(OpParams& p, const std::vector<ValueInfo>& in, const std::string& who) = nullptr;
  // Optional, once per session: state built from the constant inputs (packed weights) for the
  // session's kernels. run_prepared, when set, is called instead of run, with this state (null
  // without prepare) and the session's thread pool.
  std::shared_ptr<const void> (*prepare)(const OpParams& p, const std::vector<ValueInfo>& in,
                                         const KernelTable& kernels, int threads) = nullptr;
  void (*run_prepared)(const OpParams& p, const RunContext& ctx, const std::vector<OpInput>& inputs, void* out,
                       const Shape& out_shape, const KernelTable& kernels) = nullptr;
  // Optional, with prepare: floats of scratch run_prepared needs for these shapes and thread count
  // (im2col blocks, GEMM packing). The session keeps one workspace, the largest any node asks for.
  int64_t (*workspace_floats)(const OpParams& p, const void* state, const std::vector<const Shape*>& inputs,
                              const Shape& out_shape, int threads) = nullptr;
  // Optional, with prepare: the kernels a node of this op can be asked to use (OpParams::kernel_choice),
  // null-terminated, and the name of the one a prepared state runs. A choice that does not apply
  // to a node's shapes (e.g. Winograd for a 1x1 conv) leaves the op's own rule in charge;
  // kernel_of tells which kernel won. Tuning (deepslim tune) times every choice per node.
  const char* const* kernels = nullptr;
  const char* (*kernel_of)(const void* state) = nullptr;
  // Optional, with run_prepared: the input index at which the session may pass a residual of the
  // output's shape, added before the op's activation (the session then runs a following add in
  // this op's epilogue; absent optional inputs before it are passed as null). Never an input of a
  // graph node: inputs up to max_inputs only. -1: the op takes none.
  int residual_input = -1;
  // Optional, with run_prepared: whether this prepared node (p, state; `fused` is its params so far)
  // can run the node before it, of the same op (producer_p, producer_state, producer_in: that node's
  // input shapes), within its own run, when that node's output is read by this node alone. If so it
  // records the producer in *fused and returns true; the session then passes the producer's inputs
  // at producer_input (absent optional inputs before it as null), skips the producer, and the
  // producer's output is never allocated (input 0 arrives with its shape and null data). Called
  // again with the producer's own producer while it returns true (a chain; the inputs of the k-th
  // producer come at producer_input + k * max_inputs).
  bool (*fuse_producer)(const OpParams& p, const void* state, const OpParams& producer_p, const void* producer_state,
                        const std::vector<const Shape*>& producer_in, OpParams* fused) = nullptr;
  int producer_input = -1;
  // Optional, with run_prepared: true when this prepared state takes its input 0 as the f32 input
  // of a quantize node (OpParams::quantize) and quantizes it itself (the session then skips a
  // quantize whose u8 output only this node reads).
  bool (*takes_f32_input)(const void* state) = nullptr;
};

// The op with this id, or null.
const OpDef* find_op(uint16_t id);
// The largest op id this runtime knows (ids 1..kMaxOpId).
constexpr uint16_t kMaxOpId = 33;

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

// check_dtypes of the ops that take u8 activations unchanged (docs/format.md): every input of one
// dtype, f32 or u8; the output has it.
uint8_t same_dtype_f32_or_u8(OpParams& p, const std::vector<ValueInfo>& in, const std::string& who);
// The same for the movement ops that also take i16 activations unchanged (flatten, reshape,
// maxpool2d, global_maxpool): f32, u8 or i16.
uint8_t same_dtype_f32_u8_or_i16(OpParams& p, const std::vector<ValueInfo>& in, const std::string& who);

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
