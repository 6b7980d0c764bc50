#include "core/session.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "core/dispatch.h"

namespace ds {

namespace {
constexpr size_t kAlign = 64;
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Bytes of value v at the given shapes.
size_t value_bytes(const Model& model, const std::vector<Shape>& shapes, uint32_t v) {
  return size_t(element_count(shapes[v], model.values[v].name)) * dtype_size(model.values[v].dtype);
}
}  // namespace

size_t assign_offsets(std::vector<BufferPlan>& buffers) {
  std::vector<size_t> order(buffers.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].bytes != buffers[b].bytes) return buffers[a].bytes > buffers[b].bytes;
    return buffers[a].first < buffers[b].first;
  });
  std::vector<size_t> placed;  // indices into buffers, in placement order
  std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of live-overlapping placed buffers
  size_t arena = 0;
  for (size_t i : order) {
    BufferPlan& b = buffers[i];
    busy.clear();
    for (size_t j : placed) {
      const BufferPlan& o = buffers[j];
      if (o.first <= b.last && b.first <= o.last) busy.push_back({o.offset, o.offset + align_up(o.bytes)});
    }
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    const size_t need = align_up(b.bytes);
    for (const auto& [start, end] : busy) {
      if (offset + need <= start) break;  // fits in the gap before this one
      offset = std::max(offset, end);
    }
    b.offset = offset;
    arena = std::max(arena, offset + b.bytes);
    placed.push_back(i);
  }
  return arena;
}

KernelChoices parse_kernel_choices(const char* text) {
  KernelChoices out;
  if (!text) return out;
  std::string entry;
  for (const char* c = text;; ++c) {
    if (*c && *c != '\n' && *c != ';') {
      entry.push_back(*c);
      continue;
    }
    const size_t a = entry.find_first_not_of(" \t\r"), b = entry.find_last_not_of(" \t\r");
    entry = a == std::string::npos ? std::string() : entry.substr(a, b - a + 1);
    if (!entry.empty()) {
      const size_t eq = entry.rfind('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == entry.size())
        fail(DS_ERR_INVALID_ARG, "kernel choice '", entry, "' is not of the form node=kernel");
      out.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
    }
    entry.clear();
    if (!*c) break;
  }
  return out;
}

namespace {

std::string join_kernels(const OpDef& op) {
  std::string s;
  for (const char* const* k = op.kernels; k && *k; ++k) s += (s.empty() ? "" : ",") + std::string(*k);
  return s;
}

// Per node index: the kernel asked for it, after checking every choice names a node of the
// model and one of its op's kernels.
std::vector<std::string> resolve_kernel_choices(const Model& model, const KernelChoices& choices) {
  std::vector<std::string> per_node(model.nodes.size());
  for (const auto& [node_name, kernel] : choices) {
    size_t i = 0;
    while (i < model.nodes.size() && model.nodes[i].name != node_name) ++i;
    if (i == model.nodes.size())
      fail(DS_ERR_INVALID_ARG, "kernel choice for node '", node_name, "': the model has no node of that name");
    const OpDef& op = *model.nodes[i].op;
    bool known = false;
    for (const char* const* k = op.kernels; k && *k; ++k) known = known || kernel == *k;
    if (!known) {
      if (!op.kernels) fail(DS_ERR_INVALID_ARG, "kernel choice for node '", node_name, "': ", op.name, " has no kernel choices");
      fail(DS_ERR_INVALID_ARG, "kernel choice for node '", node_name, "': ", op.name, " has no kernel '", kernel,
           "' (its kernels: ", join_kernels(op), ")");
    }
    per_node[i] = kernel;
  }
  return per_node;
}

}  // namespace

Session::Session(const Model& model, int threads, const KernelChoices& kernels)
    : model_(model), kernels_(select_kernels()), threads_(threads) {
  if (threads < 1) fail(DS_ERR_INVALID_ARG, "threads is ", threads, ", must be >= 1");
  const std::vector<std::string> chosen = resolve_kernel_choices(model, kernels);
  kernel_choices_.resize(model.nodes.size());
  for (size_t i = 0; i < model.nodes.size(); ++i) kernel_choices_[i] = join_kernels(*model.nodes[i].op);
  input_data_.assign(model.inputs.size(), nullptr);
  input_shapes_.resize(model.inputs.size());
  input_bound_.assign(model.inputs.size(), false);
  if (threads > 1) pool_ = std::make_unique<ThreadPool>(threads);
  // Per-session op state (packed weights for the chosen kernels), built once.
  states_.resize(model.nodes.size());
  std::vector<ValueInfo> info;
  for (size_t i = 0; i < model.nodes.size(); ++i) {
    const Node& node = model.nodes[i];
    if (!node.op->prepare) continue;
    info.clear();
    for (uint32_t id : node.inputs) {
      if (id == kAbsentInput) {
        info.push_back({0, nullptr, nullptr});
        continue;
      }
      const Value& v = model.values[id];
      info.push_back({v.dtype, &v.dims, v.tensor_index >= 0 ? model.tensors[size_t(v.tensor_index)].ptr() : nullptr});
    }
    if (chosen[i].empty()) {
      states_[i] = node.op->prepare(node.params, info, kernels_, threads);
    } else {
      OpParams params = node.params;
      params.kernel_choice = chosen[i];
      states_[i] = node.op->prepare(params, info, kernels_, threads);
    }
  }
}

const char* Session::node_kernel(size_t index) const {
  const OpDef& op = *model_.nodes.at(index).op;
  return op.kernel_of && states_[index] ? op.kernel_of(states_[index].get()) : "";
}

const char* Session::node_kernel_choices(size_t index) const { return kernel_choices_.at(index).c_str(); }

void Session::set_input(size_t index, const float* data, const Shape& shape) {
  if (index >= model_.inputs.size())
    fail(DS_ERR_INVALID_ARG, "input index ", index, " is out of range (the model has ", model_.inputs.size(), " inputs)");
  if (!data) fail(DS_ERR_INVALID_ARG, "input ", index, ": data is NULL");
  check_input_shape(model_, index, shape);
  input_data_[index] = data;
  ran_ = false;
  if (input_bound_[index] && input_shapes_[index] == shape) return;
  input_shapes_[index] = shape;
  input_bound_[index] = true;
  planned_ = false;
  for (bool b : input_bound_)
    if (!b) return;
  if (model_.inputs.size() == 1) {
    plan();
    return;
  }
  // With several inputs a new batch is bound one input at a time, and the shapes may disagree
  // until the last one is set: a shape conflict is then reported by run(), which plans again.
  try {
    plan();
  } catch (const Error& e) {
    if (e.status() != DS_ERR_SHAPE) throw;
  }
}

bool Session::rebind_input(size_t index, const float* data, const int64_t* dims, size_t rank) {
  if (index >= model_.inputs.size() || !data || !input_bound_[index]) return false;
  const Shape& bound = input_shapes_[index];
  if (bound.size() != rank || !std::equal(bound.begin(), bound.end(), dims)) return false;
  input_data_[index] = data;
  ran_ = false;
  return true;
}

// A node whose op takes a residual (OpDef::residual_input: conv2d) and has no activation, whose
// output only an add (op 10) reads, where the add's other operand has the same shape and is ready
// before the node runs (a graph input, a constant or an earlier node's output): the node gets that
// operand as its residual (added before the activation in its epilogue) and the add's activation,
// and writes the add's output; the add is skipped. Its own output is never materialized.
// The int8 form: a qconv2d whose u8 output only a qadd (op 29) reads, same conditions (no
// broadcast); the conv computes its own clamped u8 output, then the qadd formula with the other
// operand, bit for bit what the two nodes give (OpParams::qadd).
void Session::plan_fusion(const std::vector<Shape>& shapes) {
  const size_t node_count = model_.nodes.size();
  fused_residual_.assign(node_count, kAbsentInput);
  fused_out_.assign(node_count, kAbsentInput);
  fused_producer_.assign(node_count, SIZE_MAX);
  fused_input_.assign(node_count, kAbsentInput);
  fused_params_.assign(node_count, OpParams{});
  skipped_.assign(node_count, false);
  std::vector<size_t> producer(model_.values.size(), SIZE_MAX), readers(model_.values.size(), 0);
  for (size_t i = 0; i < node_count; ++i) {
    producer[model_.nodes[i].outputs[0]] = i;
    for (uint32_t id : model_.nodes[i].inputs)
      if (id != kAbsentInput) ++readers[id];
  }
  for (uint32_t id : model_.outputs) ++readers[id];
  for (size_t j = 0; j < node_count; ++j) {
    const Node& add = model_.nodes[j];
    const bool quantized = add.op->id == 29;
    if ((add.op->id != 10 && !quantized) || add.inputs.size() != 2 || add.inputs[0] == add.inputs[1]) continue;
    const uint32_t out = add.outputs[0];
    for (int side = 0; side < 2; ++side) {
      const uint32_t conv_out = add.inputs[size_t(side)], other = add.inputs[size_t(1 - side)];
      const size_t i = producer[conv_out];
      if (i == SIZE_MAX || readers[conv_out] != 1) continue;
      const Node& conv = model_.nodes[i];
      if (conv.op->residual_input < 0 || !conv.op->run_prepared) continue;
      if (!quantized && conv.params.act.kind != kActNone) continue;
      if (producer[other] != SIZE_MAX && producer[other] >= i) continue;  // not ready when the conv runs
      const uint8_t dtype = quantized ? kDtypeU8 : kDtypeF32;
      if (model_.values[conv_out].dtype != dtype || model_.values[other].dtype != dtype ||
          model_.values[out].dtype != dtype)
        continue;
      if (shapes[conv_out] != shapes[out] || shapes[other] != shapes[out]) continue;
      fused_residual_[i] = other;
      fused_out_[i] = out;
      fused_params_[i] = conv.params;
      if (quantized) {
        OpParams::FusedQAdd& q = fused_params_[i].qadd;
        q.on = true;
        q.conv_side = side;
        q.a_zp = add.params.zp, q.b_zp = add.params.zp_b, q.y_zp = add.params.y_zp;
        q.a_mult = add.params.mult, q.b_mult = add.params.mult_b, q.shift = add.params.shift;
        q.act_min = add.params.act_min, q.act_max = add.params.act_max;
      } else {
        fused_params_[i].act = add.params.act;
      }
      skipped_[j] = true;
      break;
    }
  }
  std::vector<size_t> reader(model_.values.size(), SIZE_MAX);  // the last node reading each value
  for (size_t i = 0; i < node_count; ++i)
    for (uint32_t id : model_.nodes[i].inputs)
      if (id != kAbsentInput) reader[id] = i;
  for (size_t j = 0; j < node_count; ++j) {
    const Node& quant = model_.nodes[j];
    if (quant.op->id != 25) continue;
    const uint32_t src = quant.inputs[0], u8 = quant.outputs[0];
    const size_t i = reader[u8];
    if (readers[u8] != 1 || i == SIZE_MAX || std::find(model_.inputs.begin(), model_.inputs.end(), src) == model_.inputs.end())
      continue;
    const Node& conv = model_.nodes[i];
    if (conv.inputs[0] != u8 || !conv.op->takes_f32_input || !states_[i] || !conv.op->takes_f32_input(states_[i].get()) ||
        conv.params.zp != quant.params.zp)
      continue;
    if (!fused(i)) fused_params_[i] = conv.params;
    fused_params_[i].quantize = {true, quant.params.scale, quant.params.zp};
    fused_input_[i] = src;
    skipped_[j] = true;
  }
  plan_producer_fusion(shapes, producer, readers);
}

// A prepared node whose first input is the output of an earlier node of the same op, read by it
// alone, runs that node's work too when its op says it can (OpDef::fuse_producer; conv2d: a
// depthwise 3x3 before a 1x1, computed in bands of rows that stay in cache); the producer is
// skipped. Both keep their other fusions: the consumer may still run a following add.
void Session::plan_producer_fusion(const std::vector<Shape>& shapes, const std::vector<size_t>& producer,
                                   const std::vector<size_t>& readers) {
  std::vector<const Shape*> in_shapes;
  for (size_t i = 0; i < model_.nodes.size(); ++i) {
    const Node& node = model_.nodes[i];
    if (!node.op->fuse_producer || !states_[i] || skipped_[i]) continue;
    OpParams params = fused(i) ? fused_params_[i] : node.params;
    // A chain: node i runs d, then d's producer, ...; fused_producer_ links each to the next.
    for (size_t reader = i;;) {
      const Node& r = model_.nodes[reader];
      if (r.inputs.empty() || r.inputs[0] == kAbsentInput) break;
      const uint32_t x = r.inputs[0];
      const size_t d = producer[x];
      if (d == SIZE_MAX || readers[x] != 1 || skipped_[d] || fused(d) || !states_[d]) break;
      const Node& prev = model_.nodes[d];
      if (prev.op != node.op || model_.values[x].dtype != kDtypeF32) break;
      in_shapes.clear();
      for (uint32_t id : prev.inputs) in_shapes.push_back(id == kAbsentInput ? nullptr : &shapes[id]);
      if (!node.op->fuse_producer(node.params, states_[i].get(), prev.params, states_[d].get(), in_shapes, &params))
        break;
      fused_params_[i] = params;
      fused_producer_[reader] = d;
      skipped_[d] = true;
      reader = d;
    }
  }
}

// A concat (op 14) along an axis with only 1s before it (batch 1 NCHW along channels: every input
// is one contiguous piece of the output) whose inputs are each written by a node of the graph
// (not a graph input or constant, not another concat placed this way) and read by nothing else:
// those nodes write their outputs straight into the concat's output, at their slice, and the
// concat is skipped. SqueezeNet's fire modules and ShuffleNet's units no longer copy their
// outputs. Each slice must start on a 64-byte boundary (kernels may store aligned vectors).
std::vector<Session::ConcatSlice> Session::plan_concat_in_place(const std::vector<Shape>& shapes) {
  const size_t node_count = model_.nodes.size();
  std::vector<ConcatSlice> slices(model_.values.size());
  std::vector<size_t> writer(model_.values.size(), SIZE_MAX), readers(model_.values.size(), 0);
  for (size_t i = 0; i < node_count; ++i) {
    for (uint32_t id : model_.nodes[i].inputs)
      if (id != kAbsentInput) ++readers[id];
    if (!skipped_[i]) writer[written_value(i)] = i;
  }
  for (uint32_t id : model_.outputs) ++readers[id];
  for (size_t j = 0; j < node_count; ++j) {
    const Node& cat = model_.nodes[j];
    if (cat.op->id != 14 || skipped_[j]) continue;
    const uint32_t out = cat.outputs[0];
    const Shape& os = shapes[out];
    const int64_t axis = cat.params.axis < 0 ? cat.params.axis + int64_t(os.size()) : cat.params.axis;
    if (product(os, 0, size_t(axis)) != 1) continue;
    bool ok = true;  // each input read by this concat alone (so no other concat has placed it)
    size_t offset = 0;
    for (size_t k = 0; ok && k < cat.inputs.size(); ++k) {
      const uint32_t v = cat.inputs[k];
      const size_t w = writer[v];
      ok = w != SIZE_MAX && w < j && readers[v] == 1 && !(model_.nodes[w].op->id == 14 && skipped_[w]) &&
           offset % kAlign == 0;
      offset += value_bytes(model_, shapes, v);
    }
    if (!ok) continue;
    offset = 0;
    for (uint32_t v : cat.inputs) {
      slices[v] = {out, offset};
      offset += value_bytes(model_, shapes, v);
    }
    skipped_[j] = true;
  }
  return slices;
}

// Lifetimes in node indices; every node output gets an arena slot that no buffer live at the same
// time overlaps. A node's output never shares memory with its inputs (their lifetimes meet at the
// node), and graph inputs and constants live outside the arena. A fused conv2d reads the residual
// and writes the add's output at its own index, so the two never share memory either.
template <typename Place, typename Reads>
size_t Session::plan_arena(const std::vector<Shape>& shapes, const std::vector<ConcatSlice>& slices, const Place& place,
                           const Reads& reads, std::vector<BufferPlan>& plan, size_t& max_inputs) const {
  const size_t node_count = model_.nodes.size();
  std::vector<size_t> slot(model_.values.size(), SIZE_MAX);  // value -> index in plan
  for (size_t i = 0; i < node_count; ++i) {
    const Node& node = model_.nodes[i];
    if (skipped_[i]) continue;
    max_inputs = std::max(max_inputs, std::max<size_t>(node.inputs.size(), size_t(node.op->residual_input)) + 1);
    size_t at = size_t(node.op->producer_input);  // the producers' inputs are read at this node
    for (size_t d = fused_producer_[i]; d != SIZE_MAX; d = fused_producer_[d], at += size_t(node.op->max_inputs))
      max_inputs = std::max(max_inputs, at + model_.nodes[d].inputs.size());
    if (reads(i))
      for_each_read(i, [&](uint32_t id) {
        if (slot[id] != SIZE_MAX) plan[slot[id]].last = i;
      });
    if (!place(i)) continue;
    const uint32_t written = written_value(i);
    const uint32_t out = slices[written].concat != kAbsentInput ? slices[written].concat : written;
    if (slot[out] == SIZE_MAX) {  // a concat's output placed in place gets its slot at its first writer
      slot[out] = plan.size();
      plan.push_back({out, 0, value_bytes(model_, shapes, out), i, i});
    }
    slot[written] = slot[out];
  }
  for (uint32_t id : model_.outputs)
    if (slot[id] != SIZE_MAX) plan[slot[id]].last = node_count;
  return assign_offsets(plan);
}

// One workspace for the prepared ops of nodes [begin, end): the largest any of them needs.
size_t Session::workspace_for(const std::vector<Shape>& shapes, size_t begin, size_t end, int threads) const {
  size_t workspace = 0;
  std::vector<const Shape*> in_shapes;
  for (size_t i = begin; i < end; ++i) {
    const Node& node = model_.nodes[i];
    if (!node.op->workspace_floats || !states_[i] || skipped_[i]) continue;
    in_shapes.clear();
    for (uint32_t id : node.inputs) in_shapes.push_back(id == kAbsentInput ? nullptr : &shapes[id]);
    const OpParams& params = fused(i) ? fused_params_[i] : node.params;
    const int64_t n = node.op->workspace_floats(params, states_[i].get(), in_shapes, shapes[node.outputs[0]], threads);
    workspace = std::max(workspace, size_t(n));
  }
  return workspace;
}

namespace {
// add, sub, mul, div: numpy broadcasting.
bool elementwise_op(uint16_t id) { return id >= 10 && id <= 13; }

// Ops whose output for image b reads only image b of their activation inputs: the image pass
// runs them (conv2d, maxpool2d, avgpool2d, relu, batchnorm, activation, global pools; the binary
// ops below elementwise).
bool image_op(uint16_t id) {
  switch (id) {
    case 1: case 3: case 4: case 5: case 8: case 9: case 22: case 23: return true;
    default: return elementwise_op(id);
  }
}
}  // namespace

// The image pass pays where the batch's tensors no longer stay in the caches: the nodes it runs
// write at least this many bytes per batch (FaceNet-1M at batch 64: 48 MB; per image 0.75 MB).
constexpr size_t kImagePassMinBytes = 1 << 20;
// ... and while the weights it reads for every image stay in L2 / L3 between images (FaceNet-1M's
// convs: 0.58 MB); larger ones (ResNet-18: 45 MB) would stream from memory once per image instead
// of once per batch, so the pass stops before the node that would pass this.
constexpr size_t kImagePassMaxWeightBytes = 2 << 20;

size_t Session::plan_image_pass(const std::vector<Shape>& shapes, const std::vector<ConcatSlice>& slices) {
  image_nodes_ = 0;
  image_out_.assign(model_.values.size(), 0);
  image_outs_.clear();
  image_storage_ = HugePageBuffer();  // an earlier plan's; allocated again below if the pass runs
  const char* force = std::getenv("DS_SESSION_IMAGES");
  if (force && force[0] == '0') return 0;
  const bool forced = force && force[0] == '1';
  const int64_t batch = input_shapes_[0].empty() ? 0 : input_shapes_[0][0];
  if (batch < 2 || batch < threads_) return 0;
  for (const Shape& s : input_shapes_)
    if (s.empty() || s[0] != batch) return 0;
  for (const ConcatSlice& c : slices)
    if (c.concat != kAbsentInput) return 0;
  // The longest run of first nodes that each read only their own image: constants other than an
  // elementwise op's operands are weights, and those operands broadcast along the batch.
  const size_t node_count = model_.nodes.size();
  size_t end = 0, bytes = 0, weights = 0;
  bool conv = false;
  for (; end < node_count; ++end) {
    const Node& node = model_.nodes[end];
    for (uint32_t id : node.inputs)  // a skipped node's too: a fused producer's weights
      if (id != kAbsentInput && model_.values[id].tensor_index >= 0) weights += value_bytes(model_, shapes, id);
    if (weights > kImagePassMaxWeightBytes && !forced) break;
    if (skipped_[end]) continue;
    const Shape& out = shapes[written_value(end)];
    bool ok = image_op(node.op->id) && !out.empty() && out[0] == batch;
    for (size_t k = 0; ok && k < node.inputs.size(); ++k) {
      const uint32_t id = node.inputs[k];
      if (id == kAbsentInput) continue;
      const bool constant = model_.values[id].tensor_index >= 0;
      if (elementwise_op(node.op->id))
        ok = constant ? shapes[id].size() < out.size() || shapes[id][0] == 1 : shapes[id] == out;
      else
        ok = k == 0 ? !constant : constant;
    }
    if (!ok) break;
    conv = conv || node.op->id == 1;
    bytes += value_bytes(model_, shapes, written_value(end));
  }
  if (end == 0 || (!forced && (!conv || bytes < kImagePassMinBytes))) return 0;
  std::vector<Shape> one = input_shapes_;
  for (Shape& s : one) s[0] = 1;
  std::vector<Shape> image_shapes;
  try {
    image_shapes = infer_shapes(model_, one);
  } catch (const Error&) {
    return 0;
  }
  // The values the pass writes and later nodes (or the caller) read: their batch buffers.
  std::vector<bool> read_after(model_.values.size(), false);
  for (size_t i = end; i < node_count; ++i)
    if (!skipped_[i]) for_each_read(i, [&](uint32_t id) { read_after[id] = true; });
  for (uint32_t id : model_.outputs) read_after[id] = true;
  for (size_t i = 0; i < end; ++i) {
    if (skipped_[i]) continue;
    const uint32_t v = written_value(i);
    Shape want = shapes[v];
    want[0] = 1;
    if (image_shapes[v] != want) return 0;
    if (!read_after[v]) continue;
    image_out_[v] = int64_t(value_bytes(model_, image_shapes, v));
    image_outs_.push_back(v);
  }
  image_nodes_ = end;
  image_shapes_ = std::move(image_shapes);
  // Per thread: the pass's arena for one image, then its workspace (one thread per image).
  std::vector<BufferPlan> plan;
  size_t max_inputs = 0;
  const size_t arena = plan_arena(image_shapes_, slices,
                                  [&](size_t i) { return i < end && image_out_[written_value(i)] == 0; },
                                  [&](size_t i) { return i < end; }, plan, max_inputs);
  const size_t arena_floats = align_up(arena) / sizeof(float);
  const size_t per_thread = arena_floats + align_up(workspace_for(image_shapes_, 0, end, 1) * sizeof(float)) / sizeof(float);
  float* base = image_storage_.allocate(int64_t(per_thread) * threads_);
  image_threads_.resize(size_t(threads_));
  for (int t = 0; t < threads_; ++t) {
    ImageThread& it = image_threads_[size_t(t)];
    float* mine = base + size_t(t) * per_thread;
    it.buffers.assign(model_.values.size(), nullptr);
    for (const BufferPlan& b : plan) it.buffers[b.value] = mine + b.offset / sizeof(float);
    it.workspace = mine + arena_floats;
    it.inputs.assign(model_.inputs.size(), nullptr);
    it.scratch.reserve(max_inputs);
    it.profile_ns.assign(node_count, 0);
  }
  return arena_floats * threads_ * sizeof(float);  // activations only, as the batch arena
}

void Session::plan() {
  planned_ = false;
  std::vector<Shape> shapes = infer_shapes(model_, input_shapes_);
  plan_fusion(shapes);
  const std::vector<ConcatSlice> slices = plan_concat_in_place(shapes);
  const size_t node_count = model_.nodes.size();
  size_t activation = 0;
  for (size_t i = 0; i < node_count; ++i) activation += value_bytes(model_, shapes, model_.nodes[i].outputs[0]);
  const size_t image_bytes = plan_image_pass(shapes, slices);
  // The batch's arena: the nodes after the image pass, and the values the pass passes on.
  const size_t first = image_nodes_;
  std::vector<BufferPlan> plan;
  size_t max_inputs = 0;
  const size_t arena = plan_arena(shapes, slices,
                                  [&](size_t i) { return i >= first || image_out_[written_value(i)] > 0; },
                                  [&](size_t i) { return i >= first; }, plan, max_inputs);

  HugePageBuffer storage;
  float* base = storage.allocate(int64_t(align_up(arena) / sizeof(float)));
  std::vector<float*> buffers(model_.values.size(), nullptr);
  for (const BufferPlan& b : plan) buffers[b.value] = base + b.offset / sizeof(float);
  for (size_t v = 0; v < buffers.size(); ++v)
    if (slices[v].concat != kAbsentInput)
      buffers[v] = reinterpret_cast<float*>(reinterpret_cast<char*>(buffers[slices[v].concat]) + slices[v].offset);
  scratch_.reserve(max_inputs);

  const size_t workspace = workspace_for(shapes, first, node_count, threads_);
  if (workspace > workspace_floats_) {
    workspace_ = workspace_storage_.allocate(int64_t(workspace));
    workspace_floats_ = workspace;
  }

  shapes_ = std::move(shapes);
  plan_ = std::move(plan);
  buffers_ = std::move(buffers);
  arena_storage_ = std::move(storage);  // moving keeps its heap block, so `base` stays valid
  arena_bytes_ = arena + image_bytes;
  activation_bytes_ = activation;
  planned_ = true;
}

const float* Session::value_data(uint32_t id, const Frame& f) const {
  const Value& v = model_.values[id];
  if (v.tensor_index >= 0) return static_cast<const float*>(model_.tensors[size_t(v.tensor_index)].ptr());
  for (size_t i = 0; i < model_.inputs.size(); ++i)
    if (model_.inputs[i] == id) return (*f.inputs)[i];
  return (*f.buffers)[id];
}

void Session::require_bound() const {
  for (size_t i = 0; i < input_bound_.size(); ++i)
    if (!input_bound_[i])
      fail(DS_ERR_INVALID_ARG, "input ", i, " ('", model_.values[model_.inputs[i]].name,
           "') is not set: call ds_session_set_input first");
}

void Session::run_nodes(size_t begin, size_t end, const Frame& f) {
  std::vector<OpInput>& scratch = *f.scratch;
  const std::vector<Shape>& shapes = *f.shapes;
  for (size_t i = begin; i < end; ++i) {
    if (skipped_[i]) continue;  // an add run by the conv2d before it, a producer or a quantize run by its reader
    const Node& node = model_.nodes[i];
    scratch.clear();  // capacity reserved by plan(): no allocation
    for (uint32_t id : node.inputs) {
      if (id == kAbsentInput) scratch.push_back({nullptr, nullptr});
      else scratch.push_back({value_data(id, f), &shapes[id], model_.values[id].dtype});
    }
    const uint32_t res = fused_residual_[i];
    if (res != kAbsentInput) {  // at the op's residual slot, absent optional inputs before it
      while (scratch.size() < size_t(node.op->residual_input)) scratch.push_back({nullptr, nullptr});
      scratch.push_back({value_data(res, f), &shapes[res], model_.values[res].dtype});
    }
    size_t at = size_t(node.op->producer_input);  // each producer's inputs at its slot, after the residual's
    for (size_t d = fused_producer_[i]; d != SIZE_MAX; d = fused_producer_[d], at += size_t(node.op->max_inputs)) {
      while (scratch.size() < at) scratch.push_back({nullptr, nullptr});
      for (uint32_t id : model_.nodes[d].inputs) {
        if (id == kAbsentInput) scratch.push_back({nullptr, nullptr});
        else scratch.push_back({value_data(id, f), &shapes[id], model_.values[id].dtype});
      }
    }
    const uint32_t f32_in = fused_input_[i];
    if (f32_in != kAbsentInput) scratch[0] = {value_data(f32_in, f), &shapes[f32_in], model_.values[f32_in].dtype};
    const uint32_t out = written_value(i);
    const OpParams& params = fused(i) ? fused_params_[i] : node.params;
    const auto t0 = f.profile_ns ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    if (node.op->run_prepared)
      node.op->run_prepared(params, {states_[i].get(), f.pool, f.workspace, int64_t(f.workspace_floats)}, scratch,
                            (*f.buffers)[out], shapes[out], kernels_);
    else
      node.op->run(node.params, scratch, (*f.buffers)[out], shapes[out], kernels_);
    if (f.profile_ns)
      f.profile_ns[i] += uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
  }
}

void Session::run() {
  require_bound();
  if (!planned_) plan();
  uint64_t* profile = profile_ns_.empty() ? nullptr : profile_ns_.data();
  if (image_nodes_ > 0) {
    const int64_t batch = input_shapes_[0][0];
    auto image = [&](int64_t b, int thread) {
      ImageThread& t = image_threads_[size_t(thread)];
      for (size_t k = 0; k < model_.inputs.size(); ++k) t.inputs[k] = input_data_[k] + b * product(input_shapes_[k], 1);
      for (uint32_t v : image_outs_)
        t.buffers[v] = reinterpret_cast<float*>(reinterpret_cast<char*>(buffers_[v]) + b * image_out_[v]);
      run_nodes(0, image_nodes_, {&image_shapes_, &t.buffers, &t.inputs, nullptr, t.workspace, 0, &t.scratch,
                                  profile ? t.profile_ns.data() : nullptr});
    };
    if (pool_) pool_->parallel_for(batch, image);
    else
      for (int64_t b = 0; b < batch; ++b) image(b, 0);
    if (profile)  // the threads ran side by side: each node's wall time is about their mean
      for (ImageThread& t : image_threads_)
        for (size_t i = 0; i < image_nodes_; ++i) {
          profile[i] += t.profile_ns[i] / uint64_t(threads_);
          t.profile_ns[i] = 0;
        }
  }
  run_nodes(image_nodes_, model_.nodes.size(),
            {&shapes_, &buffers_, &input_data_, pool_.get(), workspace_, workspace_floats_, &scratch_, profile});
  if (profile) ++profiled_runs_;
  ran_ = true;
}

NodeProfile Session::node_profile(size_t index) const {
  const Node& node = model_.nodes[index];
  const bool on = !profile_ns_.empty();
  return {node.name.c_str(), node.op->name, on ? profiled_runs_ : 0, on ? profile_ns_[index] : 0};
}

size_t Session::arena_bytes() const {
  require_bound();
  return arena_bytes_;
}

size_t Session::activation_bytes() const {
  require_bound();
  return activation_bytes_;
}

const Shape& Session::output_shape(size_t index) const {
  if (index >= model_.outputs.size())
    fail(DS_ERR_INVALID_ARG, "output index ", index, " is out of range (the model has ", model_.outputs.size(), " outputs)");
  if (!ran_) fail(DS_ERR_INVALID_ARG, "no successful ds_session_run since the inputs were last set");
  return shapes_[model_.outputs[index]];
}

void Session::get_output(size_t index, float* dst, size_t capacity) const {
  const Shape& shape = output_shape(index);
  if (!dst) fail(DS_ERR_INVALID_ARG, "output ", index, ": dst is NULL");
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (capacity < size_t(n))
    fail(DS_ERR_INVALID_ARG, "output ", index, " ('", model_.values[model_.outputs[index]].name, "') has ", n,
         " elements ", shape_str(shape), ", more than the capacity ", capacity);
  std::memcpy(dst, value_data(model_.outputs[index], {&shapes_, &buffers_, &input_data_, nullptr, nullptr, 0, nullptr, nullptr}),
              size_t(n) * sizeof(float));
}

}  // namespace ds
