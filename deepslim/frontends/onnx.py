"""ONNX front end: an ONNX model (file, bytes or ModelProto) becomes an IR `Graph`.

Needs numpy and the onnx package only (no torch, no onnxruntime).

Opsets 11 to 21 are read as they are; a model with opset 7 to 10 is first converted to opset 13 by
`onnx.version_converter`. Initializers become float32 constants; integer tensors that only feed
shapes, axes, pads or sizes are consumed at convert time. Shape arithmetic (Shape, Gather, Slice,
Concat, Cast, Unsqueeze, Range, Where, ...) is folded with numpy (deepslim/frontends/onnx_fold.py).
Activation shapes are computed here, op by op; `onnx.shape_inference` then cross-checks them.
The op mappings live in deepslim/frontends/onnx_ops.py, the folding in onnx_fold.py.

A dynamic dim 0 of a graph input is the batch and stays dynamic (-1); shape arithmetic on it folds
with a placeholder and a reshape keeps it as 0 (copy) or -1. Any other dynamic input dimension must
be fixed with `input_shapes` (`deepslim convert --input-shape NAME=1,3,640,640`).

Mapping (everything else raises `UnsupportedModelError` naming the node, its index and op):
    Conv -> conv2d; ConvTranspose -> conv_transpose2d; Gemm, MatMul (constant 2-D weight,
    a following Add of a bias merged) -> dense; MaxPool, AveragePool -> maxpool2d, avgpool2d;
    GlobalAveragePool, GlobalMaxPool, ReduceMean/ReduceMax over H, W -> global_avgpool,
    global_maxpool; BatchNormalization -> batchnorm; Relu -> relu; Clip, LeakyRelu, PRelu (one
    slope), Sigmoid, HardSigmoid, HardSwish, Tanh -> activation; Add, Sub, Mul, Div, Sum -> add,
    sub, mul, div; Concat -> concat; LRN -> lrn; Slice (step 1), Split -> slice; Flatten ->
    flatten or reshape; Reshape, Squeeze, Unsqueeze -> reshape; Transpose -> transpose;
    Pad -> pad; Resize -> resize; Softmax -> softmax; Dropout, Identity, Cast to float -> removed.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from deepslim.frontends.errors import UnsupportedModelError
from deepslim.frontends.onnx_fold import BATCH, FOLDS, Const, FoldError, fold, shape_of
from deepslim.frontends.onnx_ops import _FLOAT, HANDLERS, SUPPORTED, OpMappings, _type_name
from deepslim.ir.graph import Graph, Value
from deepslim.ir.ops import check_node

__all__ = ["from_onnx", "UnsupportedModelError", "MIN_OPSET", "MAX_OPSET", "NATIVE_OPSET", "CONVERT_TO_OPSET"]

MIN_OPSET = 7  # oldest default-domain opset accepted
NATIVE_OPSET = 11  # oldest opset read without conversion
CONVERT_TO_OPSET = 13  # older models are converted to this opset first
MAX_OPSET = 21  # newest opset accepted



def from_onnx(model_or_path: Any, *, input_shapes: dict[str, list[int]] | None = None) -> Graph:
    """Convert an ONNX model (a path, the file's bytes or an onnx.ModelProto) into a Graph.

    input_shapes: {graph input name: full shape} fixing dynamic dimensions, e.g.
        {"images": [1, 3, 640, 640]}. Dim 0 of an input whose batch is dynamic stays -1 whatever
        value is given for it; a given dimension that the model fixes must agree with the model.

    Raises UnsupportedModelError (a ValueError) naming the node and why; ValueError for a file that
    is not an ONNX model or bad input_shapes; FileNotFoundError for a missing file.
    """
    model = _load(model_or_path)
    model = _upgrade(model)
    return _Converter(model, dict(input_shapes or {})).run()


# --------------------------------------------------------------------------------------------------
# Loading


def _load(model_or_path: Any):
    import onnx

    if isinstance(model_or_path, onnx.ModelProto):
        model, what = model_or_path, "the model"
    elif isinstance(model_or_path, (bytes, bytearray)):
        what = "the given bytes"
        try:
            model = onnx.load_model_from_string(bytes(model_or_path))
        except Exception as e:  # noqa: BLE001 - protobuf raises its own DecodeError
            raise ValueError(f"{what} are not an ONNX model ({type(e).__name__}: {e})") from None
    elif isinstance(model_or_path, (str, os.PathLike)):
        path = os.fspath(model_or_path)
        what = repr(path)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"ONNX model {path!r} does not exist")
        try:
            model = onnx.load(path)
        except Exception as e:  # noqa: BLE001
            raise ValueError(f"{path!r} is not an ONNX model ({type(e).__name__}: {e})") from None
    else:
        raise TypeError(f"expected a path, bytes or onnx.ModelProto, not {type(model_or_path).__name__}")
    if model.ir_version < 1 or not model.HasField("graph") or not model.opset_import:
        raise ValueError(f"{what} is not an ONNX model (no graph or no opset)")
    return model


def _opset(model) -> int:
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return int(o.version)
    raise UnsupportedModelError("the model imports no default-domain (ai.onnx) opset")


def _schema_signature(op_type: str, opset: int):
    import onnx.defs

    schema = onnx.defs.get_schema(op_type, opset)
    return (
        [(i.name, i.option) for i in schema.inputs],
        [(o.name, o.option) for o in schema.outputs],
        sorted(schema.attributes),
    )


def _check_newer_opset(model, opset: int) -> None:
    """A model newer than MAX_OPSET is read as MAX_OPSET when each of its ops has the same inputs,
    outputs and attributes at both versions: the newer versions of these ops only added tensor
    types (bfloat16, float8, int4, ...), which the float32-only runtime never sees."""
    import onnx.defs

    if opset > onnx.defs.onnx_opset_version():
        raise UnsupportedModelError(
            f"the model uses opset {opset}, newer than the installed onnx package knows "
            f"({onnx.defs.onnx_opset_version()}); supported opsets are {MIN_OPSET} to {MAX_OPSET}"
        )
    for index, node in enumerate(model.graph.node):
        if node.domain not in ("", "ai.onnx"):
            continue
        try:
            changed = _schema_signature(node.op_type, opset) != _schema_signature(node.op_type, MAX_OPSET)
        except Exception:  # noqa: BLE001 - an op unknown at MAX_OPSET is reported by the converter
            continue
        if changed:
            raise UnsupportedModelError(
                f"node {index} {node.name!r} ({node.op_type}): the model uses opset {opset}, in which "
                f"{node.op_type} differs from opset {MAX_OPSET} (supported opsets are {MIN_OPSET} to "
                f"{MAX_OPSET}, and newer ones where an op changed only its tensor types)"
            )


def _upgrade(model):
    opset = _opset(model)
    if opset > MAX_OPSET:
        _check_newer_opset(model, opset)
        return model
    if opset < MIN_OPSET:
        raise UnsupportedModelError(
            f"the model uses opset {opset}; supported opsets are {MIN_OPSET} to {MAX_OPSET}"
        )
    if opset >= NATIVE_OPSET:
        return model
    import onnx.version_converter

    try:
        return onnx.version_converter.convert_version(model, CONVERT_TO_OPSET)
    except Exception as e:  # noqa: BLE001 - the converter raises RuntimeError or ConvertError
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UnsupportedModelError(
            f"the model uses opset {opset}; converting it to opset {CONVERT_TO_OPSET} with "
            f"onnx.version_converter failed: {msg}"
        ) from None


def _attrs(node) -> dict[str, Any]:
    import onnx.helper
    import onnx.numpy_helper

    out: dict[str, Any] = {}
    for a in node.attribute:
        if a.type == a.TENSOR:
            out[a.name] = onnx.numpy_helper.to_array(a.t)
        elif a.type in (a.GRAPH, a.GRAPHS, a.SPARSE_TENSOR, a.SPARSE_TENSORS, a.TENSORS):
            out[a.name] = a  # only rejected later
        else:
            v = onnx.helper.get_attribute_value(a)
            if isinstance(v, bytes):
                v = v.decode("utf-8")
            elif isinstance(v, list) and v and isinstance(v[0], bytes):
                v = [s.decode("utf-8") for s in v]
            out[a.name] = v
    return out


# --------------------------------------------------------------------------------------------------
# The converter


class _Converter(OpMappings):
    def __init__(self, model, input_shapes: dict[str, list[int]]) -> None:
        self.model = model
        self.onnx_graph = model.graph
        self.opset = _opset(model)
        self.input_shapes = input_shapes
        self.graph = Graph()
        self.consts: dict[str, Const] = {}  # ONNX name -> folded constant
        self.acts: dict[str, str] = {}  # ONNX name -> IR activation value name
        self.ir_consts: dict[tuple[str, str], str] = {}  # (ONNX name, variant) -> IR constant name
        self.used: set[str] = set()
        self.skip: set[int] = set()  # node indices already converted with an earlier node
        self.index = -1
        self.node = None

    # ---- driver ----------------------------------------------------------------------------------

    def run(self) -> Graph:
        import onnx.numpy_helper

        g = self.onnx_graph
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            self.used.add(vi.name)
        for node in g.node:
            self.used.update(node.output)
            self.used.add(node.name)
        for t in g.initializer:
            self.used.add(t.name)
            self.consts[t.name] = Const(onnx.numpy_helper.to_array(t))
        if len(g.sparse_initializer):
            raise UnsupportedModelError("sparse initializers are not supported")
        self.consumers: dict[str, int] = {}
        for node in g.node:
            for name in node.input:
                self.consumers[name] = self.consumers.get(name, 0) + 1
        self.graph_outputs = {o.name for o in g.output}
        self._inputs()

        for i, node in enumerate(g.node):
            if i in self.skip:
                continue
            self.index, self.node = i, node
            if node.domain not in ("", "ai.onnx"):
                raise self._fail(f"op domain {node.domain!r} is not supported (only the default ai.onnx domain)")
            if node.op_type == "Shape":
                self._shape_op(node)
                continue
            if node.op_type == "Size":
                self._size_op(node)
                continue
            if node.op_type in FOLDS and all(not n or n in self.consts for n in node.input):
                self._fold(node)
                continue
            handler = HANDLERS.get(node.op_type)
            if handler is None:
                raise self._fail(f"op {node.op_type} is not supported. {SUPPORTED}")
            handler(self, node, _attrs(node))
        self.index, self.node = -1, None
        self._outputs()
        self.graph.validate()
        self._cross_check()
        return self.graph

    def _inputs(self) -> None:
        g = self.onnx_graph
        inputs = [vi for vi in g.input if vi.name not in self.consts]
        names = [vi.name for vi in inputs]
        unknown = sorted(set(self.input_shapes) - set(names))
        if unknown:
            raise ValueError(f"input_shapes names {unknown}, which are not graph inputs; the inputs are {names}")
        for vi in inputs:
            t = vi.type.tensor_type
            if not vi.type.HasField("tensor_type"):
                raise UnsupportedModelError(f"graph input {vi.name!r} is not a tensor")
            if t.elem_type != _FLOAT:
                raise UnsupportedModelError(
                    f"graph input {vi.name!r} has element type {_type_name(t.elem_type)}; "
                    "only float32 inputs are supported"
                )
            given = self.input_shapes.get(vi.name)
            if not t.HasField("shape"):
                if given is None:
                    raise UnsupportedModelError(
                        f"graph input {vi.name!r} has no shape; give it with input_shapes "
                        f"(CLI: --input-shape {vi.name}=1,3,224,224)"
                    )
                dims: list[int | str | None] = [None] * len(given)
            else:
                dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0
                        else (d.dim_param or None) for d in t.shape.dim]
            shape = self._input_shape(vi.name, dims, given)
            self.graph.add_value(Value(vi.name, shape))
            self.graph.inputs.append(vi.name)
            self.acts[vi.name] = vi.name
        if not self.graph.inputs:
            raise UnsupportedModelError("the model has no graph input (every input has an initializer)")

    def _input_shape(self, name: str, dims: list[Any], given: list[int] | None) -> tuple[int, ...]:
        if given is not None:
            try:
                given = [int(d) for d in given]
            except (TypeError, ValueError):
                raise ValueError(f"input_shapes[{name!r}] must be a list of ints, got {given!r}") from None
            if len(given) != len(dims):
                raise ValueError(f"input_shapes[{name!r}] has {len(given)} dims; input {name!r} has rank {len(dims)}")
            for i, d in enumerate(given):
                if d < 1 and not (i == 0 and d == -1):
                    raise ValueError(f"input_shapes[{name!r}] dim {i} is {d}; dims must be >= 1 (dim 0 may be -1)")
        shape: list[int] = []
        missing: list[str] = []
        for i, d in enumerate(dims):
            if isinstance(d, int):
                if given is not None and given[i] != d and not (i == 0 and given[i] == -1):
                    raise ValueError(f"input_shapes[{name!r}] dim {i} is {given[i]}, but the model fixes it to {d}")
                shape.append(d)
            elif i == 0:
                shape.append(-1)  # the dynamic batch
            elif given is not None:
                shape.append(given[i])
            else:
                missing.append(f"{i} ({d})" if d else str(i))
                shape.append(-1)
        if missing:
            example = ",".join(str(d) if d > 0 else "1" if i == 0 else "?" for i, d in enumerate(shape))
            raise UnsupportedModelError(
                f"graph input {name!r} has dynamic dimension(s) at axis {', '.join(missing)}; fix them with "
                f"input_shapes={{{name!r}: [...]}} (CLI: --input-shape {name}={example}, each ? a number). "
                "Only the batch (dim 0) may stay dynamic"
            )
        return tuple(shape)

    def _outputs(self) -> None:
        for o in self.onnx_graph.output:
            if o.name in self.consts:
                raise UnsupportedModelError(f"graph output {o.name!r} is a constant: it does not depend on the input")
            ir = self.acts.get(o.name)
            if ir is None:
                raise UnsupportedModelError(f"graph output {o.name!r} is never produced")
            if ir != o.name and ir in self.graph.inputs:
                # a graph that returns its input (Identity, Dropout) still needs a node that copies it
                shape = self.graph.values[ir].shape
                self.graph.add_value(Value(o.name, shape))
                self.graph.add_node("reshape", f"copy_{o.name}", [ir], [o.name], shape=[0] * len(shape))
                self.acts[o.name] = ir = o.name
            if ir != o.name:
                if ir in self.graph.outputs:
                    raise UnsupportedModelError(f"graph outputs {ir!r} and {o.name!r} are the same tensor")
                _rename_value(self.graph, ir, o.name)
                self.acts = {k: (o.name if v == ir else v) for k, v in self.acts.items()}
            self.graph.outputs.append(o.name)

    def _cross_check(self) -> None:
        """Compare every activation shape with onnx.shape_inference where it knows the dims."""
        import onnx
        import onnx.shape_inference

        m = onnx.ModelProto()
        m.CopyFrom(self.model)
        for vi in m.graph.input:
            if vi.name in self.graph.inputs:
                shape = self.graph.values[vi.name].shape
                dims = vi.type.tensor_type.shape.dim
                del dims[:]
                for d in shape:
                    dims.add().dim_param = "batch" if d == -1 else ""
                    if d != -1:
                        dims[-1].dim_value = d
        try:
            inferred = onnx.shape_inference.infer_shapes(m, data_prop=True)
        except Exception:  # noqa: BLE001 - inference is only a cross-check
            return
        if any(n.op_type in ("MaxPool", "AveragePool") and _attrs(n).get("ceil_mode", 0) for n in m.graph.node):
            # onnx shape inference keeps a ceil_mode window that starts in the end padding; onnxruntime,
            # PyTorch and the IR drop it, so the inferred shapes are not comparable from there on
            return
        for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
            ir = self.acts.get(vi.name)
            if ir is None or not vi.type.tensor_type.HasField("shape"):
                continue
            ours = self.graph.values[ir].shape
            theirs = [d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim]
            if len(theirs) != len(ours) or any(t is not None and o != -1 and t != o for o, t in zip(ours, theirs)):
                raise UnsupportedModelError(
                    f"tensor {vi.name!r}: converted shape {list(ours)} disagrees with ONNX shape inference "
                    f"{theirs}; the model cannot be converted safely"
                )

    # ---- helpers ---------------------------------------------------------------------------------

    def _fail(self, why: str) -> UnsupportedModelError:
        n = self.node
        if n is None:
            return UnsupportedModelError(why)
        return UnsupportedModelError(f"node {self.index} {n.name!r} ({n.op_type}): {why}")

    def _fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.used or name in self.graph.values:
            name, k = f"{base}_{k}", k + 1
        self.used.add(name)
        return name

    def _node_name(self) -> str:
        n = self.node
        base = n.name or f"{n.op_type}_{self.index}"
        name, k = base, 1
        taken = {x.name for x in self.graph.nodes}
        while name in taken:
            name, k = f"{base}_{k}", k + 1
        return name

    def _has(self, node, i: int) -> bool:
        return len(node.input) > i and node.input[i] != ""

    def _is_const(self, name: str) -> bool:
        return name in self.consts

    def _act(self, name: str, what: str = "input") -> str:
        """IR value of an activation input."""
        if name in self.acts:
            return self.acts[name]
        if name in self.consts:
            raise self._fail(f"{what} {name!r} is a constant; only an activation is supported here")
        raise self._fail(f"{what} {name!r} is not produced by any earlier node")

    def _shape(self, name: str) -> tuple[int, ...]:
        if name in self.acts:
            return self.graph.values[self.acts[name]].shape
        if name in self.consts:
            return tuple(self.consts[name].value.shape)
        raise self._fail(f"input {name!r} is not produced by any earlier node")

    def _const(self, name: str, what: str) -> np.ndarray:
        """Value of an input that must be known at convert time (a shape, axes, a weight)."""
        c = self.consts.get(name)
        if c is None:
            raise self._fail(f"{what} {name!r} is computed at run time; only a constant is supported")
        if c.tagged:
            raise self._fail(f"{what} {name!r} depends on the batch size; only a constant is supported")
        return c.value

    def _ints(self, name: str, what: str) -> list[int]:
        v = self._const(name, what)
        if not np.issubdtype(v.dtype, np.integer):
            raise self._fail(f"{what} {name!r} has type {v.dtype}, expected integers")
        return [int(x) for x in v.ravel()]

    def _floats(self, name: str, what: str) -> np.ndarray:
        v = self._const(name, what)
        if v.dtype != np.float32:
            raise self._fail(f"{what} {name!r} is a {v.dtype} tensor; only float32 is supported")
        return v

    def _ir_const(self, name: str, what: str, data: np.ndarray | None = None, variant: str = "") -> str:
        """An IR constant holding `data` (default: the float32 ONNX constant `name` as it is)."""
        key = (name, variant)
        if key in self.ir_consts:
            return self.ir_consts[key]
        if data is None:
            data = self._floats(name, what)
        ir_name = name if not variant and name not in self.graph.values else self._fresh(f"{name}{variant}")
        self.used.add(ir_name)
        self.graph.add_constant(ir_name, np.asarray(data, dtype=np.float32))
        self.ir_consts[key] = ir_name
        return ir_name

    def _operand(self, name: str, what: str) -> str:
        """IR value for an input that may be an activation or a float32 constant."""
        if name in self.acts:
            return self.acts[name]
        return self._ir_const(name, what)

    def _extra_outputs_unused(self, node, keep: int = 1) -> None:
        for name in node.output[keep:]:
            if name and (self.consumers.get(name) or name in self.graph_outputs):
                raise self._fail(f"its output {name!r} is used; only the first output is supported")

    def _emit(self, op: str, inputs: list[str], out: str, out_shape: tuple[int, ...], **attrs: Any) -> str:
        """Add an IR node producing ONNX tensor `out` with IR shape `out_shape`."""
        shape = tuple(int(d) for d in out_shape)
        if any(d < 1 for d in shape[1:]) or (shape and shape[0] < 1 and shape[0] != -1):
            if any(d == -1 for d in shape[1:]):
                raise self._fail(
                    f"its output shape {list(shape)} moves the dynamic batch dimension away from dim 0; "
                    "only a batch at dim 0 is supported"
                )
            raise self._fail(f"its output shape {list(shape)} has an empty dimension")
        attrs = check_node(op, inputs, attrs)
        name = out if out not in self.graph.values else self._fresh(out)
        self.graph.add_value(Value(name, shape))
        self.graph.add_node(op, self._node_name(), inputs, [name], **attrs)
        self.acts[out] = name
        return name

    def _alias(self, out: str, src: str) -> None:
        if src in self.consts:
            self.consts[out] = self.consts[src]
        else:
            self.acts[out] = self._act(src)

    # ---- folding ---------------------------------------------------------------------------------

    def _fold(self, node) -> None:
        inputs = [self.consts[n] if n else None for n in node.input]
        try:
            outs = fold(node.op_type, _attrs(node), inputs, self.opset)
        except FoldError as e:
            raise self._fail(str(e)) from None
        for name, c in zip(node.output, outs):
            if name:
                self.consts[name] = c
        if len(node.output) > len(outs):
            self._extra_outputs_unused(node, len(outs))

    def _shape_op(self, node) -> None:
        a = _attrs(node)
        shape = self._shape(node.input[0])
        c = shape_of(shape, a.get("start"), a.get("end"))
        if node.input[0] in self.consts:
            c = Const(c.value)
        self.consts[node.output[0]] = c

    def _size_op(self, node) -> None:
        shape = self._shape(node.input[0])
        value = np.array(math.prod(BATCH if d == -1 else d for d in shape), dtype=np.int64)
        self.consts[node.output[0]] = Const(value, np.array(2 if -1 in shape else 0, dtype=np.int8))


def _rename_value(graph: Graph, old: str, new: str) -> None:
    if new in graph.values:
        raise UnsupportedModelError(f"cannot name the output {new!r}: the name is taken")
    graph.values = {(new if k == old else k): v for k, v in graph.values.items()}
    graph.values[new].name = new
    for node in graph.nodes:
        node.inputs = [new if i == old else i for i in node.inputs]
        node.outputs = [new if o == old else o for o in node.outputs]
    graph.outputs = [new if o == old else o for o in graph.outputs]
