#include "core/session.h"

#include <cstring>

#include "common/error.h"
#include "core/dispatch.h"

namespace ds {

Session::Session(const Model& model, int threads)
    : model_(model), kernels_(select_kernels()), threads_(threads) {
  if (threads < 1) fail(DS_ERR_INVALID_ARG, "threads is ", threads, ", must be >= 1");
  input_data_.assign(model.inputs.size(), nullptr);
  input_shapes_.resize(model.inputs.size());
  input_bound_.assign(model.inputs.size(), false);
}

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
  plan();
}

// Plain per-value buffers; reusing memory by liveness is a later step.
void Session::plan() {
  std::vector<Shape> shapes = infer_shapes(model_, input_shapes_);
  std::vector<std::vector<float>> buffers(model_.values.size());
  for (const Node& node : model_.nodes) {
    const uint32_t id = node.outputs[0];
    int64_t n = 1;
    for (int64_t d : shapes[id]) n *= d;  // bounded by infer_shapes
    buffers[id].resize(size_t(n));
  }
  shapes_ = std::move(shapes);
  buffers_ = std::move(buffers);
  planned_ = true;
}

const float* Session::value_data(uint32_t id) const {
  const Value& v = model_.values[id];
  if (v.tensor_index >= 0) return model_.tensors[size_t(v.tensor_index)].data.data();
  for (size_t i = 0; i < model_.inputs.size(); ++i)
    if (model_.inputs[i] == id) return input_data_[i];
  return buffers_[id].data();
}

void Session::run() {
  for (size_t i = 0; i < input_bound_.size(); ++i)
    if (!input_bound_[i])
      fail(DS_ERR_INVALID_ARG, "input ", i, " ('", model_.values[model_.inputs[i]].name,
           "') is not set: call ds_session_set_input first");
  if (!planned_) plan();
  std::vector<OpInput> in;
  for (const Node& node : model_.nodes) {
    in.clear();
    for (uint32_t id : node.inputs) {
      if (id == kAbsentInput) in.push_back({nullptr, nullptr});
      else in.push_back({value_data(id), &shapes_[id]});
    }
    const uint32_t out = node.outputs[0];
    node.op->run(node.params, in, buffers_[out].data(), shapes_[out], kernels_);
  }
  ran_ = true;
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
  std::memcpy(dst, value_data(model_.outputs[index]), size_t(n) * sizeof(float));
}

}  // namespace ds
