// Shape inference over the whole graph, and graph input shape checks.
#include "common/error.h"
#include "core/model.h"

namespace ds {

void check_input_shape(const Model& model, size_t index, const Shape& given) {
  const Value& v = model.values[model.inputs[index]];
  bool ok = given.size() == v.dims.size();
  for (size_t i = 0; ok && i < given.size(); ++i)
    ok = v.dims[i] == -1 ? given[i] >= 1 : given[i] == v.dims[i];
  if (!ok)
    fail(DS_ERR_SHAPE, "input ", index, " ('", v.name, "'): expected shape ", shape_str(v.dims),
         " (-1: any batch >= 1), got ", shape_str(given));
  element_count(given, cat("input '", v.name, "'"));
}

std::vector<Shape> infer_shapes(const Model& model, const std::vector<Shape>& input_shapes) {
  std::vector<Shape> shapes(model.values.size());
  for (size_t v = 0; v < model.values.size(); ++v)
    if (model.values[v].tensor_index >= 0) shapes[v] = model.tensors.at(size_t(model.values[v].tensor_index)).dims;
  for (size_t i = 0; i < model.inputs.size(); ++i) {
    check_input_shape(model, i, input_shapes.at(i));
    shapes[model.inputs[i]] = input_shapes[i];
  }
  std::vector<const Shape*> in;
  for (const Node& node : model.nodes) {
    in.clear();
    for (uint32_t id : node.inputs) in.push_back(id == kAbsentInput ? nullptr : &shapes[id]);
    Shape out = node.op->infer_shape(node.params, in, node.name);
    const Value& ov = model.values[node.outputs[0]];
    element_count(out, cat("node '", node.name, "' (", node.op->name, ") output '", ov.name, "'"));
    shapes[node.outputs[0]] = std::move(out);
  }
  return shapes;
}

}  // namespace ds
