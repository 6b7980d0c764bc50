"""PyTorch front end: an `nn.Module` and an example input become an IR `Graph`.

The model is traced with `torch.fx.symbolic_trace`, which keeps calls to `nn.Module`s as single
nodes with their parameters attached, so each maps to one IR op (see docs/frontends.md). The example
input is run through the traced graph to record every activation's shape; with `dynamic_batch` it is
run a second time with one more sample, and the dimension that changes (only dim 0 may) becomes -1.

Mapping (everything else raises `UnsupportedModelError`):
    nn.Conv2d                                    -> conv2d (a BatchNorm2d right after it is folded in)
    nn.Linear                                    -> dense  (a BatchNorm1d right after it is folded in)
    nn.ReLU, F.relu, torch.relu, x.relu()        -> relu
    nn.MaxPool2d, F.max_pool2d                   -> maxpool2d
    nn.AvgPool2d, F.avg_pool2d                   -> avgpool2d
    nn.AdaptiveAvg/MaxPool2d (in % out == 0)     -> avgpool2d / maxpool2d
    nn.Flatten, torch.flatten, x.flatten(),
    x.view / x.reshape that flatten trailing dims -> flatten
    nn.Softmax, F.softmax, torch.softmax         -> softmax
    nn.Dropout*, nn.Identity, F.dropout*, x.contiguous() -> removed
    nn.BatchNorm1d/2d elsewhere                  -> batchnorm
    nn.ReLU6, F.relu6, nn.Hardtanh, x.clamp(a, b), nn.LeakyReLU, nn.Sigmoid, nn.Hardsigmoid,
    nn.Hardswish, nn.Tanh (and their functions)   -> activation
    + - * / torch.add/sub/mul/div (tensor or constant operands) -> add / sub / mul / div
    torch.cat                                    -> concat
    nn.ConvTranspose2d                           -> conv_transpose2d
    nn.LocalResponseNorm (odd size)              -> lrn
    nn.ChannelShuffle, view-transpose-view shuffle -> channel_shuffle
    other x.view / x.reshape                     -> reshape
    x.permute, x.transpose, torch.permute/transpose -> transpose
    x[:, a:b] (step 1)                           -> slice
    F.pad, nn.ZeroPad2d/ConstantPad2d/ReflectionPad2d/ReplicationPad2d -> pad
    F.interpolate, nn.Upsample (nearest, nearest-exact, bilinear) -> resize (fixed output size)
    nn.AdaptiveAvg/MaxPool2d(1), F.adaptive_avg_pool2d(x, 1), x.mean((2, 3), keepdim=True)
                                                 -> global_avgpool / global_maxpool
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from deepslim.frontends.errors import UnsupportedModelError
from deepslim.ir.graph import ACTIVATIONS, Encoding, Graph, Value
from deepslim.ir.passes.channel_shuffle import fuse_channel_shuffle

__all__ = ["from_torch", "UnsupportedModelError"]


def from_torch(
    model: nn.Module,
    example_input: torch.Tensor,
    *,
    input_name: str = "input",
    output_name: str = "output",
    dynamic_batch: bool = True,
    encodings: dict[str, Encoding] | None = None,
) -> Graph:
    """Convert `model` (evaluated in eval mode) into a Graph.

    example_input: a float32 tensor with the batch as dim 0, e.g. torch.zeros(1, 1, 28, 28).
    dynamic_batch: the graph input's and every activation's dim 0 is -1 (any batch size).
    encodings: how to store constants, keyed by parameter name ("conv1.weight"); others are dense raw.
        A codebook encoding cannot be given for a weight that BatchNorm folding changes.

    The model's train/eval flags are restored on return. Raises UnsupportedModelError naming the
    node and its module type, function or method when something cannot be represented.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, not {type(model).__name__}")
    if not isinstance(example_input, torch.Tensor) or example_input.dtype != torch.float32:
        raise TypeError("example_input must be a float32 torch.Tensor (batch first)")
    if example_input.dim() < 1 or example_input.shape[0] < 1:
        raise ValueError(f"example_input needs a batch dimension, got shape {tuple(example_input.shape)}")
    if input_name == output_name:
        raise ValueError(f"input_name and output_name must differ, both are {input_name!r}")
    modes = {m: m.training for m in model.modules()}
    model.eval()
    try:
        return _Converter(model, example_input, input_name, output_name, dynamic_batch, encodings).run()
    finally:
        for m, training in modes.items():
            m.training = training


# --------------------------------------------------------------------------------------------------
# Tracing and shape recording


class _ShapeRecorder(torch.fx.Interpreter):
    """Runs the traced graph and records the shape of every tensor a node produces."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        super().__init__(gm)
        self.shapes: dict[str, tuple[int, ...]] = {}

    def run_node(self, n: torch.fx.Node) -> Any:
        out = super().run_node(n)
        if isinstance(out, torch.Tensor):
            self.shapes[n.name] = tuple(int(d) for d in out.shape)
        return out


def _record_shapes(gm: torch.fx.GraphModule, x: torch.Tensor) -> dict[str, tuple[int, ...]]:
    recorder = _ShapeRecorder(gm)
    with torch.no_grad():
        recorder.run(x)
    return recorder.shapes


class _NonTensor:
    """An fx value that is not an activation: a shape, a size, a parameter read by get_attr."""

    def __init__(self, what: str) -> None:
        self.what = what


def _pair(v: Any) -> tuple[int, int]:
    if isinstance(v, (tuple, list)):
        if len(v) == 1:
            return int(v[0]), int(v[0])
        if len(v) != 2:
            raise ValueError(f"expected 1 or 2 values, got {v!r}")
        return int(v[0]), int(v[1])
    return int(v), int(v)


def _arg(n: torch.fx.Node, index: int, name: str, default: Any) -> Any:
    """Argument `name` of a call, whether passed by position `index` or by keyword."""
    if index < len(n.args):
        return n.args[index]
    return n.kwargs.get(name, default)


def _is_dropout(m: nn.Module) -> bool:
    return isinstance(m, nn.modules.dropout._DropoutNd)


_MODULE_NAMES = (
    "Conv2d, ConvTranspose2d, Linear, BatchNorm1d/2d, ReLU, ReLU6, Hardtanh, LeakyReLU, Sigmoid, Hardsigmoid, "
    "Hardswish, Tanh, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d/AdaptiveMaxPool2d (output 1x1 or dividing the "
    "input), Flatten, Softmax, LocalResponseNorm (odd size), ChannelShuffle, ZeroPad2d/ConstantPad*/"
    "ReflectionPad*/ReplicationPad*, Upsample, Dropout*, Identity"
)
_FUNCTION_NAMES = (
    "F.relu, F.relu6, F.hardtanh, F.leaky_relu, sigmoid, tanh, F.hardsigmoid, F.hardswish, clamp, + - * / "
    "(torch.add/sub/mul/div), torch.cat, torch.permute/transpose, torch.mean over (2, 3), F.max_pool2d, "
    "F.avg_pool2d, F.adaptive_avg/max_pool2d, F.interpolate, F.pad, F.local_response_norm, F.channel_shuffle, "
    "torch.flatten, torch.reshape, F.softmax, torch.softmax, F.dropout*, slicing x[:, a:b]"
)
_METHOD_NAMES = (
    "relu, sigmoid, tanh, clamp, add, sub, mul, div, permute, transpose, mean, flatten, view/reshape, softmax, "
    "size, contiguous"
)
SUPPORTED = f"supported modules: {_MODULE_NAMES}; functions: {_FUNCTION_NAMES}; tensor methods: {_METHOD_NAMES}"


# --------------------------------------------------------------------------------------------------
# The converter


class _Converter:
    def __init__(
        self,
        model: nn.Module,
        x: torch.Tensor,
        input_name: str,
        output_name: str,
        dynamic_batch: bool,
        encodings: dict[str, Encoding] | None,
    ) -> None:
        self.model = model
        self.x = x
        self.input_name = input_name
        self.output_name = output_name
        self.dynamic_batch = dynamic_batch
        self.encodings = dict(encodings or {})
        self.graph = Graph()
        self.env: dict[torch.fx.Node, str | _NonTensor] = {}
        self.folded_bn: dict[torch.fx.Node, str] = {}  # BatchNorm fx node -> the value it passes on
        self.used_names: set[str] = {input_name, output_name}
        self.used_names.update(name for name, _ in model.named_parameters())
        self.used_names.update(name for name, _ in model.named_buffers())
        self.module_calls: dict[str, int] = {}

    # ---- driver ----------------------------------------------------------------------------------

    def run(self) -> Graph:
        try:
            self.gm = torch.fx.symbolic_trace(self.model)
        except Exception as e:  # noqa: BLE001 - any tracing failure means the same thing to the user
            raise UnsupportedModelError(
                f"torch.fx cannot trace {type(self.model).__name__}: {type(e).__name__}: {e}. "
                "Models with data-dependent control flow need torch.export, which this front end "
                "does not use yet"
            ) from e
        self.modules = dict(self.gm.named_modules())
        self.shapes = _record_shapes(self.gm, self.x)
        self.shapes2 = self.shapes
        if self.dynamic_batch:
            x2 = torch.cat([self.x, self.x[:1]], dim=0)
            try:
                self.shapes2 = _record_shapes(self.gm, x2)
            except Exception as e:  # noqa: BLE001
                raise UnsupportedModelError(
                    f"{type(self.model).__name__} fails with batch size {x2.shape[0]} "
                    f"({type(e).__name__}: {e}); it may hard-code the batch size. "
                    "Pass dynamic_batch=False to convert it for the example's batch size only"
                ) from e

        out_value: str | None = None
        for n in self.gm.graph.nodes:
            if n.op == "placeholder":
                self._placeholder(n)
            elif n.op == "get_attr":
                self.env[n] = _NonTensor(f"attribute {n.target!r} read directly")
            elif n.op == "call_module":
                self._call_module(n)
            elif n.op == "call_function":
                self._call_function(n)
            elif n.op == "call_method":
                self._call_method(n)
            elif n.op == "output":
                out = n.args[0]
                if not isinstance(out, torch.fx.Node):
                    raise UnsupportedModelError(
                        f"the model returns {type(out).__name__}; only a single tensor output is supported"
                    )
                out_value = self._tensor(out, n, "output")
        assert out_value is not None
        if out_value == self.input_name:
            raise UnsupportedModelError("the model returns its input unchanged; there is nothing to convert")
        _rename_value(self.graph, out_value, self.output_name)
        self.graph.outputs = [self.output_name]

        unknown = sorted(set(self.encodings) - {v.name for v in self.graph.constants()})
        if unknown:
            raise ValueError(
                f"encodings given for {unknown}, which are not constants of the graph; constants: "
                f"{sorted(v.name for v in self.graph.constants())}"
            )
        self.graph.validate()
        return fuse_channel_shuffle(self.graph)

    # ---- helpers ---------------------------------------------------------------------------------

    def _fail(self, n: torch.fx.Node, what: str, why: str) -> UnsupportedModelError:
        return UnsupportedModelError(f"cannot convert node {n.name!r} ({what}): {why}. {SUPPORTED}")

    def _what(self, n: torch.fx.Node) -> str:
        if n.op == "call_module":
            return f"module {n.target!r} of type nn.{type(self.modules[n.target]).__name__}"
        if n.op == "call_function":
            return f"function {getattr(n.target, '__module__', '') or ''}.{getattr(n.target, '__name__', n.target)}"
        if n.op == "call_method":
            return f"tensor method .{n.target}()"
        return n.op

    def _tensor(self, arg: Any, n: torch.fx.Node, what: str) -> str:
        """The IR value name of an fx argument that must be an activation."""
        v = self.env.get(arg) if isinstance(arg, torch.fx.Node) else None
        if not isinstance(v, str):
            desc = v.what if isinstance(v, _NonTensor) else repr(arg)
            raise self._fail(n, what, f"its input {desc} is not an activation tensor")
        return v

    def _shape(self, n: torch.fx.Node) -> tuple[int, ...]:
        """The IR shape of fx node n's output: dim 0 is -1 when it follows the batch size."""
        s1 = self.shapes[n.name]
        if not self.dynamic_batch:
            return s1
        s2 = self.shapes2[n.name]
        out = []
        for i, (a, b) in enumerate(zip(s1, s2)):
            if a == b:
                out.append(a)
            elif i == 0:
                out.append(-1)
            else:
                raise self._fail(
                    n, self._what(n), f"dimension {i} of its output depends on the batch size "
                    f"({s1} at batch {self.x.shape[0]}, {s2} at batch {self.x.shape[0] + 1})"
                )
        return tuple(out)

    def _in_shape(self, arg: torch.fx.Node) -> tuple[int, ...]:
        return self.shapes[arg.name]

    def _fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.used_names:
            name, k = f"{base}_{k}", k + 1
        self.used_names.add(name)
        return name

    def _node_name(self, n: torch.fx.Node) -> str:
        if n.op == "call_module":
            count = self.module_calls.get(n.target, 0)
            self.module_calls[n.target] = count + 1
            base = n.target if count == 0 else f"{n.target}_{count}"
        else:
            base = n.name
        return self._fresh(base)

    def _emit(self, n: torch.fx.Node, op: str, inputs: list[str], **attrs: Any) -> str:
        """Add an IR node for fx node n; its single output value is named like the node."""
        name = self._node_name(n)
        self.graph.add_value(Value(name, self._shape(n)))
        self.graph.add_node(op, name, inputs, [name], **attrs)
        self.env[n] = name
        return name

    def _const(self, name: str, data: np.ndarray, changed: bool = False) -> str:
        if name in self.graph.values:
            if not np.array_equal(self.graph.values[name].data, data):
                raise UnsupportedModelError(
                    f"parameter {name!r} is used by several calls with different values after BatchNorm "
                    "folding (a shared module followed by a BatchNorm at only some of its calls)"
                )
            return name
        enc = self.encodings.get(name)
        if enc is not None and changed and enc.codebook is not None:
            raise ValueError(
                f"encodings[{name!r}] has a codebook, but BatchNorm folding changes {name!r}; fold the "
                "BatchNorm before clustering the weights"
            )
        self.graph.add_constant(name, data, enc)
        return name

    def _need_rank(self, n: torch.fx.Node, arg: torch.fx.Node, ranks: tuple[int, ...], what: str) -> None:
        r = len(self._in_shape(arg))
        if r not in ranks:
            raise self._fail(n, what, f"input has rank {r} (shape {self._in_shape(arg)}); expected rank {ranks}")

    # ---- fx node kinds ---------------------------------------------------------------------------

    def _placeholder(self, n: torch.fx.Node) -> None:
        if self.graph.inputs:
            raise UnsupportedModelError(
                f"forward() takes a second input {n.target!r}; only models with one tensor input are supported"
            )
        shape = tuple(self.x.shape)
        if self.dynamic_batch:
            shape = (-1, *shape[1:])
        self.graph.add_value(Value(self.input_name, shape))
        self.graph.inputs.append(self.input_name)
        self.env[n] = self.input_name

    def _call_module(self, n: torch.fx.Node) -> None:
        m = self.modules[n.target]
        what = self._what(n)
        if n in self.folded_bn:
            self.env[n] = self.folded_bn[n]
            return
        for cls, handler in _MODULE_RULES:
            if isinstance(m, cls):
                handler(self, n, m, what)
                return
        if isinstance(m, (nn.SiLU, nn.Mish, nn.GELU)):
            raise self._fail(n, what, "this activation is not in the op set (docs/format.md, activation codes 0-7)")
        raise self._fail(n, what, "this module type is not supported")

    def _call_function(self, n: torch.fx.Node) -> None:
        what = self._what(n)
        if n.target is operator.getitem and isinstance(self.env.get(n.args[0]), str):
            self._slice(n, what)
            return
        if n.target in _SHAPE_ARITHMETIC and not any(
            isinstance(self.env.get(a), str) or (isinstance(a, torch.fx.Node) and a.op == "get_attr") for a in n.args
        ):
            self.env[n] = _NonTensor(f"shape value {n.name!r}")  # c // 3 with c = x.size(1)
            return
        if n.target in (getattr, operator.getitem):
            # x.shape, x.shape[0], x.size()[0]: only meaningful as arguments of view/reshape
            self.env[n] = _NonTensor(f"shape value {n.name!r}")
            return
        if n.target in (F.silu, F.gelu, F.mish):
            raise self._fail(n, what, "this activation is not in the op set (docs/format.md, activation codes 0-7)")
        handler = _FUNCTION_RULES.get(n.target)
        if handler is None:
            raise self._fail(n, what, "this function is not supported")
        handler(self, n, what)

    def _call_method(self, n: torch.fx.Node) -> None:
        what = self._what(n)
        if n.target in ("size", "dim"):
            self.env[n] = _NonTensor(f"shape value {n.name!r}")
            return
        handler = _METHOD_RULES.get(n.target)
        if handler is None:
            raise self._fail(n, what, "this tensor method is not supported")
        handler(self, n, what)

    # ---- op mappings -----------------------------------------------------------------------------

    def _bn_after(self, n: torch.fx.Node, bn_type: type) -> tuple[torch.fx.Node, nn.Module] | None:
        """The BatchNorm module call that is the only user of n, if any."""
        if len(n.users) != 1:
            return None
        (user,) = n.users
        if user.op == "call_module" and isinstance(self.modules[user.target], bn_type):
            return user, self.modules[user.target]
        return None

    def _fold_bn(self, bn_node: torch.fx.Node, bn: nn.Module, w: np.ndarray, b: np.ndarray | None):
        what = self._what(bn_node)
        if bn.running_mean is None or bn.running_var is None:
            raise self._fail(bn_node, what, "BatchNorm without running statistics (track_running_stats=False)")
        mean = bn.running_mean.detach().double().numpy()
        var = bn.running_var.detach().double().numpy()
        gamma = bn.weight.detach().double().numpy() if bn.weight is not None else np.ones_like(mean)
        beta = bn.bias.detach().double().numpy() if bn.bias is not None else np.zeros_like(mean)
        scale = gamma / np.sqrt(var + bn.eps)
        w2 = w.astype(np.float64) * scale.reshape((-1,) + (1,) * (w.ndim - 1))
        b0 = b.astype(np.float64) if b is not None else np.zeros_like(mean)
        b2 = (b0 - mean) * scale + beta
        return w2.astype(np.float32), b2.astype(np.float32)

    def _weights(self, n: torch.fx.Node, m: nn.Module, prefix: str, bn_type: type) -> list[str]:
        """Constants for m's weight and bias (BatchNorm folded in when it follows); returns their names."""
        w = m.weight.detach().float().numpy()
        b = m.bias.detach().float().numpy() if m.bias is not None else None
        bn = self._bn_after(n, bn_type)
        if bn is not None:
            w, b = self._fold_bn(bn[0], bn[1], w, b)
        w_name = self._const(f"{prefix}.weight", w, changed=bn is not None)
        b_name = self._const(f"{prefix}.bias", b, changed=bn is not None) if b is not None else ""
        return [w_name, b_name] if b_name else [w_name]

    def _conv2d(self, n: torch.fx.Node, m: nn.Conv2d, what: str) -> None:
        if m.padding_mode != "zeros":
            raise self._fail(n, what, f"padding_mode={m.padding_mode!r}; only 'zeros' is supported")
        x = self._tensor(n.args[0], n, what)
        self._need_rank(n, n.args[0], (4,), what)
        kh, kw = m.kernel_size
        dh, dw = m.dilation
        if m.padding == "valid":
            pads = [0, 0, 0, 0]
        elif m.padding == "same":
            th, tw = dh * (kh - 1), dw * (kw - 1)  # PyTorch puts the odd element at the end
            pads = [th // 2, tw // 2, th - th // 2, tw - tw // 2]
        else:
            ph, pw = _pair(m.padding)
            pads = [ph, pw, ph, pw]
        inputs = [x, *self._weights(n, m, n.target, nn.BatchNorm2d)]
        out = self._emit(
            n, "conv2d", inputs, strides=list(m.stride), pads=pads, dilations=[dh, dw],
            group=int(m.groups), activation=0,
        )
        bn = self._bn_after(n, nn.BatchNorm2d)
        if bn is not None:
            self.folded_bn[bn[0]] = out

    def _linear(self, n: torch.fx.Node, m: nn.Linear, what: str) -> None:
        x = self._tensor(n.args[0], n, what)
        self._need_rank(n, n.args[0], (2,), what)
        inputs = [x, *self._weights(n, m, n.target, nn.BatchNorm1d)]
        out = self._emit(n, "dense", inputs, activation=0)
        bn = self._bn_after(n, nn.BatchNorm1d)
        if bn is not None:
            self.folded_bn[bn[0]] = out

    def _relu(self, n: torch.fx.Node, what: str) -> None:
        self._emit(n, "relu", [self._tensor(n.args[0], n, what)])

    def _pool(
        self, n: torch.fx.Node, what: str, op: str, kernel: Any, stride: Any, padding: Any,
        dilation: Any = 1, ceil_mode: bool = False, count_include_pad: bool = True,
        divisor_override: Any = None, return_indices: bool = False,
    ) -> None:
        x = self._tensor(n.args[0], n, what)
        self._need_rank(n, n.args[0], (4,), what)
        if _pair(dilation) != (1, 1):
            raise self._fail(n, what, f"dilation={dilation!r}; pooling supports dilation 1 only")
        if return_indices:
            raise self._fail(n, what, "return_indices=True is not supported")
        if divisor_override is not None:
            raise self._fail(n, what, "divisor_override is not supported")
        k = _pair(kernel)
        s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else _pair(stride)
        ph, pw = _pair(padding)
        attrs: dict[str, Any] = dict(kernel=list(k), strides=list(s), pads=[ph, pw, ph, pw], ceil_mode=int(bool(ceil_mode)))
        if op == "avgpool2d":
            attrs["count_include_pad"] = int(bool(count_include_pad))
        self._emit(n, op, [x], **attrs)

    def _maxpool_module(self, n: torch.fx.Node, m: nn.MaxPool2d, what: str) -> None:
        self._pool(n, what, "maxpool2d", m.kernel_size, m.stride, m.padding, m.dilation, m.ceil_mode,
                   return_indices=m.return_indices)

    def _avgpool_module(self, n: torch.fx.Node, m: nn.AvgPool2d, what: str) -> None:
        self._pool(n, what, "avgpool2d", m.kernel_size, m.stride, m.padding, 1, m.ceil_mode,
                   m.count_include_pad, m.divisor_override)

    def _adaptive_pool_module(self, n: torch.fx.Node, m: nn.Module, what: str) -> None:
        op = "avgpool2d" if isinstance(m, nn.AdaptiveAvgPool2d) else "maxpool2d"
        self._adaptive_pool(n, what, op, getattr(m, "return_indices", False))

    def _adaptive_pool(self, n: torch.fx.Node, what: str, op: str, return_indices: bool = False) -> None:
        """Global pooling for a 1x1 output, else a pool with kernel = stride = in / out."""
        self._need_rank(n, n.args[0], (4,), what)
        if return_indices:
            raise self._fail(n, what, "return_indices=True is not supported")
        h, w = self._in_shape(n.args[0])[2:]
        oh, ow = self.shapes[n.name][2:]
        if (oh, ow) == (1, 1):
            self._emit(n, "global_" + op[:-2], [self._tensor(n.args[0], n, what)])
            return
        if h % oh or w % ow:
            raise self._fail(n, what, f"input {h}x{w} is not a multiple of the output {oh}x{ow}")
        self._pool(n, what, op, (h // oh, w // ow), (h // oh, w // ow), 0)

    def _flatten(self, n: torch.fx.Node, what: str, start_dim: int, end_dim: int) -> None:
        x = self._tensor(n.args[0], n, what)
        rank = len(self._in_shape(n.args[0]))
        start = start_dim + rank if start_dim < 0 else start_dim
        end = end_dim + rank if end_dim < 0 else end_dim
        if rank > 0 and end != rank - 1:
            raise self._fail(n, what, f"end_dim={end_dim}; only flattening through the last dimension is supported")
        self._emit(n, "flatten", [x], axis=int(start))

    def _reshape(self, n: torch.fx.Node, what: str) -> None:
        """view/reshape: flatten when it merges all dimensions from some axis on, else reshape."""
        src = n.args[0]
        x = self._tensor(src, n, what)
        for axis in range(len(self.shapes[src.name]) + 1):
            if all(
                shapes[n.name] == shapes[src.name][:axis] + (math.prod(shapes[src.name][axis:]),)
                for shapes in (self.shapes, self.shapes2)
            ):
                self._emit(n, "flatten", [x], axis=axis)
                return
        self._general_reshape(n, what, x)

    def _general_reshape(self, n: torch.fx.Node, what: str, x: str) -> None:
        """A reshape node: fixed sizes, except the one output dimension that follows the batch, which is
        0 (copy the input's batch) when it is dim 0 and equals the input's dim 0, else -1."""
        src = n.args[0]
        spec = list(self.shapes[n.name])
        if self.shapes2 is not self.shapes:
            s1, s2 = self.shapes[n.name], self.shapes2[n.name]
            moving = [i for i, (a, b) in enumerate(zip(s1, s2)) if a != b]
            if moving != [0]:
                raise self._fail(
                    n, what, f"reshape {self.shapes2[src.name]} -> {s2} at batch {self.x.shape[0] + 1} moves the "
                    "batch out of dimension 0 or hard-codes the batch size. Use x.view(x.size(0), ...), "
                    "or pass dynamic_batch=False"
                )
            same_batch = s1[0] == self.shapes[src.name][0] and s2[0] == self.shapes2[src.name][0]
            spec[0] = 0 if same_batch else -1
        self._emit(n, "reshape", [x], shape=spec)

    def _softmax(self, n: torch.fx.Node, what: str, dim: Any) -> None:
        x = self._tensor(n.args[0], n, what)
        rank = len(self._in_shape(n.args[0]))
        if dim is None:  # PyTorch's legacy implicit dim
            dim = 0 if rank in (0, 1, 3) else 1
        if not -rank <= int(dim) < rank:
            raise self._fail(n, what, f"dim={dim} out of range for rank {rank}")
        self._emit(n, "softmax", [x], axis=int(dim))

    # ---- ops 8-24 -----------------------------------------------------------------------------------

    def _fresh_value(self, base: str, shape: tuple[int, ...]) -> str:
        """An intermediate activation for an fx node that becomes two IR nodes."""
        name = self._fresh(base)
        self.graph.add_value(Value(name, shape))
        return name

    def _batchnorm(self, n: torch.fx.Node, m: nn.Module, what: str) -> None:
        """A BatchNorm that could not be folded into a preceding Conv2d/Linear: the batchnorm op."""
        if m.running_mean is None or m.running_var is None:
            raise self._fail(n, what, "BatchNorm without running statistics (track_running_stats=False)")
        self._need_rank(n, n.args[0], (4,) if isinstance(m, nn.BatchNorm2d) else (2, 3), what)
        x = self._tensor(n.args[0], n, what)
        c = m.running_mean.numel()
        p = n.target
        scale = m.weight.detach().float().numpy() if m.weight is not None else np.ones(c, np.float32)
        bias = m.bias.detach().float().numpy() if m.bias is not None else np.zeros(c, np.float32)
        names = [
            self._const(f"{p}.weight", scale) if m.weight is not None else self._const(self._fresh(f"{p}.scale"), scale),
            self._const(f"{p}.bias", bias) if m.bias is not None else self._const(self._fresh(f"{p}.shift"), bias),
            self._const(f"{p}.running_mean", m.running_mean.detach().float().numpy()),
            self._const(f"{p}.running_var", m.running_var.detach().float().numpy()),
        ]
        self._emit(n, "batchnorm", [x, *names], epsilon=float(m.eps))

    def _act(self, n: torch.fx.Node, what: str, kind: str, alpha: float = 0.0, beta: float = 0.0) -> None:
        x = self._tensor(n.args[0], n, what)
        self._emit(n, "activation", [x], kind=ACTIVATIONS[kind], alpha=float(alpha), beta=float(beta))

    def _clamp(self, n: torch.fx.Node, what: str) -> None:
        lo, hi = _arg(n, 1, "min", None), _arg(n, 2, "max", None)
        if any(isinstance(v, torch.fx.Node) for v in (lo, hi)):
            raise self._fail(n, what, "clamp bounds must be numbers")
        if lo is not None and hi is not None:
            self._act(n, what, "clip", lo, hi)
        elif lo == 0 and hi is None:
            self._relu(n, what)
        else:
            raise self._fail(n, what, f"clamp(min={lo}, max={hi}): both bounds are needed (or min=0 alone)")

    def _operand(self, arg: Any, n: torch.fx.Node, what: str) -> str:
        """An activation, a module attribute tensor (a constant named after it) or a number (a constant)."""
        if isinstance(arg, torch.fx.Node) and arg.op == "get_attr":
            data = _get_attr(self.gm, arg.target)
            return self._const(arg.target, data.detach().float().numpy())
        if isinstance(arg, (int, float)) and not isinstance(arg, bool):
            return self._const(self._fresh(f"{n.name}.const"), np.array([arg], dtype=np.float32))
        return self._tensor(arg, n, what)

    def _binary(self, n: torch.fx.Node, what: str, op: str) -> None:
        a, b = _arg(n, 0, "input", None), _arg(n, 1, "other", None)
        if n.kwargs.get("alpha", 1) != 1:
            raise self._fail(n, what, "alpha other than 1 is not supported")
        if n.kwargs.get("rounding_mode") is not None:
            raise self._fail(n, what, "rounding_mode is not supported")
        inputs = [self._operand(a, n, what), self._operand(b, n, what)]
        if all(self.graph.values[i].is_constant for i in inputs):
            raise self._fail(n, what, "both operands are constants")
        self._emit(n, op, inputs, **({"activation": 0} if op == "add" else {}))

    def _cat(self, n: torch.fx.Node, what: str) -> None:
        tensors = _arg(n, 0, "tensors", None)
        dim = int(_arg(n, 1, "dim", 0))
        if not isinstance(tensors, (list, tuple)) or not 1 <= len(tensors) <= 255:
            raise self._fail(n, what, "needs a list of 1 to 255 tensors")
        inputs = [self._operand(t, n, what) for t in tensors]
        rank = len(self.shapes[n.name])
        if self.dynamic_batch and dim in (0, -rank):
            raise self._fail(n, what, "concatenating along the batch dimension; pass dynamic_batch=False")
        self._emit(n, "concat", inputs, axis=dim)

    def _permute(self, n: torch.fx.Node, what: str, perm: list[int]) -> None:
        x = self._tensor(n.args[0], n, what)
        rank = len(self._in_shape(n.args[0]))
        perm = [int(p) + rank if int(p) < 0 else int(p) for p in perm]
        if self.dynamic_batch and perm[0] != 0:
            raise self._fail(n, what, "moves the batch dimension; pass dynamic_batch=False")
        self._emit(n, "transpose", [x], perm=perm)

    def _permute_call(self, n: torch.fx.Node, what: str) -> None:
        dims = n.args[1:] if len(n.args) > 1 else (n.kwargs.get("dims"),)
        if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
            dims = dims[0]
        self._permute(n, what, list(dims))

    def _transpose_call(self, n: torch.fx.Node, what: str) -> None:
        rank = len(self._in_shape(n.args[0]))
        a, b = (int(_arg(n, 1, "dim0", 0)) % rank, int(_arg(n, 2, "dim1", 1)) % rank)
        perm = list(range(rank))
        perm[a], perm[b] = perm[b], perm[a]
        self._permute(n, what, perm)

    def _slice(self, n: torch.fx.Node, what: str) -> None:
        """x[:, a:b, ...] with step 1 and fixed bounds; indexing by an int or None is not supported."""
        x = self._tensor(n.args[0], n, what)
        shape = self._in_shape(n.args[0])
        index = n.args[1] if isinstance(n.args[1], tuple) else (n.args[1],)
        if len(index) > len(shape):
            raise self._fail(n, what, f"index {index} has more entries than rank {len(shape)}")
        axes, starts, ends = [], [], []
        for axis, item in enumerate(index):
            if not isinstance(item, slice) or any(isinstance(v, torch.fx.Node) for v in (item.start, item.stop, item.step)):
                raise self._fail(n, what, f"index {item!r}: only slices with fixed bounds are supported")
            if item.step not in (None, 1):
                raise self._fail(n, what, f"slice step {item.step}: only step 1 is supported")
            if item == slice(None):
                continue
            if axis == 0 and self.dynamic_batch:
                raise self._fail(n, what, "slicing the batch dimension; pass dynamic_batch=False")
            start, stop, _ = item.indices(shape[axis])
            axes.append(axis)
            starts.append(start)
            ends.append(max(stop, start))
        if not axes:
            self._identity(n, what)
            return
        self._emit(n, "slice", [x], axes=axes, starts=starts, ends=ends)

    def _mean(self, n: torch.fx.Node, what: str) -> None:
        """x.mean((2, 3), keepdim=True) -> global_avgpool; without keepdim a reshape to (N, C) follows."""
        rank = len(self._in_shape(n.args[0]))
        dims = _arg(n, 1, "dim", None)
        dims = [dims] if isinstance(dims, int) else list(dims or [])
        keep = bool(_arg(n, 2, "keepdim", False))
        if rank != 4 or sorted(int(d) % 4 for d in dims) != [2, 3] or n.kwargs.get("dtype") is not None:
            raise self._fail(n, what, "only the mean over dims (2, 3) of a 4-D tensor (global average pooling)")
        x = self._tensor(n.args[0], n, what)
        if keep:
            self._emit(n, "global_avgpool", [x])
            return
        shape = self._shape(n)
        pooled = self._fresh_value(f"{n.name}_pool", (*shape, 1, 1))
        self.graph.add_node("global_avgpool", pooled, [x], [pooled])
        self._emit(n, "reshape", [pooled], shape=[0, 0])

    def _conv_transpose2d(self, n: torch.fx.Node, m: nn.ConvTranspose2d, what: str) -> None:
        if m.padding_mode != "zeros":
            raise self._fail(n, what, f"padding_mode={m.padding_mode!r}; only 'zeros' is supported")
        if len(n.args) > 1 or n.kwargs.get("output_size") is not None:
            raise self._fail(n, what, "output_size is not supported; set output_padding instead")
        self._need_rank(n, n.args[0], (4,), what)
        x = self._tensor(n.args[0], n, what)
        ph, pw = _pair(m.padding)
        inputs = [x, self._const(f"{n.target}.weight", m.weight.detach().float().numpy())]
        if m.bias is not None:
            inputs.append(self._const(f"{n.target}.bias", m.bias.detach().float().numpy()))
        self._emit(
            n, "conv_transpose2d", inputs, strides=list(m.stride), pads=[ph, pw, ph, pw], dilations=list(m.dilation),
            group=int(m.groups), output_padding=list(m.output_padding), activation=0,
        )

    def _lrn(self, n: torch.fx.Node, what: str, size: int, alpha: float, beta: float, k: float) -> None:
        if size % 2 == 0:
            raise self._fail(
                n, what, f"size={size}: PyTorch's window for an even size is one channel earlier than the "
                "lrn op's (ONNX's), so only odd sizes are supported"
            )
        self._need_rank(n, n.args[0], (4,), what)
        x = self._tensor(n.args[0], n, what)
        self._emit(n, "lrn", [x], size=int(size), alpha=float(alpha), beta=float(beta), bias=float(k))

    def _channel_shuffle(self, n: torch.fx.Node, what: str, groups: int) -> None:
        self._need_rank(n, n.args[0], (4,), what)
        self._emit(n, "channel_shuffle", [self._tensor(n.args[0], n, what)], group=int(groups))

    def _pad(self, n: torch.fx.Node, what: str, pad: Any, mode: str, value: Any) -> None:
        """F.pad's `pad` lists (begin, end) pairs from the last axis backwards."""
        x = self._tensor(n.args[0], n, what)
        rank = len(self._in_shape(n.args[0]))
        pad = [int(p) for p in pad]
        if len(pad) % 2 or len(pad) > 2 * rank or min(pad, default=0) < 0:
            raise self._fail(n, what, f"pad={pad}: needs (begin, end) pairs >= 0 for at most {rank} axes")
        modes = {"constant": "constant", "reflect": "reflect", "replicate": "edge"}
        if mode not in modes:
            raise self._fail(n, what, f"mode={mode!r}; supported: constant, reflect, replicate")
        pads = [0] * (2 * rank)
        for j in range(len(pad) // 2):
            pads[rank - 1 - j], pads[2 * rank - 1 - j] = pad[2 * j], pad[2 * j + 1]
        if self.dynamic_batch and (pads[0] or pads[rank]):
            raise self._fail(n, what, "pads the batch dimension; pass dynamic_batch=False")
        attrs: dict[str, Any] = {"pads": pads, "mode": modes[mode]}
        if mode == "constant":
            attrs["value"] = float(value or 0.0)
        self._emit(n, "pad", [x], **attrs)

    def _interpolate(self, n: torch.fx.Node, what: str, scale_factor: Any, mode: str, align_corners: Any,
                     recompute: Any = None, antialias: bool = False) -> None:
        """Resize to the recorded output size. PyTorch's nearest is ONNX asymmetric + floor,
        nearest-exact half_pixel + round_prefer_ceil, bilinear half_pixel (or align_corners)."""
        self._need_rank(n, n.args[0], (4,), what)
        x = self._tensor(n.args[0], n, what)
        (h, w), (oh, ow) = self._in_shape(n.args[0])[2:], self.shapes[n.name][2:]
        if antialias:
            raise self._fail(n, what, "antialias=True is not supported")
        if scale_factor is not None and not recompute:
            sf = scale_factor if isinstance(scale_factor, (list, tuple)) else (scale_factor, scale_factor)
            if any(isinstance(f, torch.fx.Node) for f in sf) or h * float(sf[0]) != oh or w * float(sf[1]) != ow:
                raise self._fail(
                    n, what, f"scale_factor={scale_factor} does not give whole output sizes from {h}x{w}; PyTorch "
                    "then samples with the factor, not with the sizes. Pass size=... or recompute_scale_factor=True"
                )
        if mode == "nearest":
            attrs = dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
        elif mode == "nearest-exact":
            attrs = dict(mode="nearest", coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_ceil")
        elif mode == "bilinear":
            attrs = dict(mode="linear", coordinate_transformation_mode="align_corners" if align_corners else "half_pixel")
        else:
            raise self._fail(n, what, f"mode={mode!r}; supported: nearest, nearest-exact, bilinear")
        self._emit(n, "resize", [x], sizes=[oh, ow], **attrs)

    def _identity(self, n: torch.fx.Node, what: str) -> None:
        self.env[n] = self._tensor(n.args[0], n, what)


_SHAPE_ARITHMETIC = (operator.add, operator.sub, operator.mul, operator.floordiv, operator.truediv, operator.mod)


def _get_attr(module: nn.Module, target: str) -> torch.Tensor:
    for part in target.split("."):
        module = getattr(module, part)
    return module


def _rename_value(graph: Graph, old: str, new: str) -> None:
    if old == new:
        return
    if new in graph.values:
        raise ValueError(f"cannot rename {old!r} to {new!r}: the name is taken")
    graph.values = {(new if k == old else k): v for k, v in graph.values.items()}
    graph.values[new].name = new
    for node in graph.nodes:
        node.inputs = [new if i == old else i for i in node.inputs]
        node.outputs = [new if o == old else o for o in node.outputs]
    graph.inputs = [new if i == old else i for i in graph.inputs]
    graph.outputs = [new if o == old else o for o in graph.outputs]


# --------------------------------------------------------------------------------------------------
# Dispatch tables: adding a mapping means adding one line here and one method above.

_C = _Converter
_Module = Callable[[_C, torch.fx.Node, Any, str], None]
_MODULE_RULES: list[tuple[type, _Module]] = [
    (nn.Conv2d, _C._conv2d),
    (nn.ConvTranspose2d, _C._conv_transpose2d),
    (nn.Linear, _C._linear),
    (nn.modules.batchnorm._BatchNorm, _C._batchnorm),  # one not folded into a Conv2d/Linear
    (nn.ReLU, lambda c, n, m, w: c._relu(n, w)),
    (nn.Hardtanh, lambda c, n, m, w: c._act(n, w, "clip", m.min_val, m.max_val)),  # ReLU6 too
    (nn.LeakyReLU, lambda c, n, m, w: c._act(n, w, "leaky_relu", m.negative_slope)),
    (nn.Sigmoid, lambda c, n, m, w: c._act(n, w, "sigmoid")),
    (nn.Hardsigmoid, lambda c, n, m, w: c._act(n, w, "hardsigmoid", 1 / 6, 0.5)),
    (nn.Hardswish, lambda c, n, m, w: c._act(n, w, "hardswish")),
    (nn.Tanh, lambda c, n, m, w: c._act(n, w, "tanh")),
    (nn.MaxPool2d, _C._maxpool_module),
    (nn.AvgPool2d, _C._avgpool_module),
    (nn.AdaptiveAvgPool2d, _C._adaptive_pool_module),
    (nn.AdaptiveMaxPool2d, _C._adaptive_pool_module),
    (nn.Flatten, lambda c, n, m, w: c._flatten(n, w, m.start_dim, m.end_dim)),
    (nn.Softmax, lambda c, n, m, w: c._softmax(n, w, m.dim)),
    (nn.LocalResponseNorm, lambda c, n, m, w: c._lrn(n, w, m.size, m.alpha, m.beta, m.k)),
    (nn.ChannelShuffle, lambda c, n, m, w: c._channel_shuffle(n, w, m.groups)),
    (nn.modules.padding._ConstantPadNd, lambda c, n, m, w: c._pad(n, w, m.padding, "constant", m.value)),
    (nn.modules.padding._ReflectionPadNd, lambda c, n, m, w: c._pad(n, w, m.padding, "reflect", 0)),
    (nn.modules.padding._ReplicationPadNd, lambda c, n, m, w: c._pad(n, w, m.padding, "replicate", 0)),
    (nn.Upsample, lambda c, n, m, w: c._interpolate(n, w, m.scale_factor, m.mode, m.align_corners,
                                                    m.recompute_scale_factor)),
    (nn.Identity, lambda c, n, m, w: c._identity(n, w)),
    (nn.modules.dropout._DropoutNd, lambda c, n, m, w: c._identity(n, w)),
]


def _fn_maxpool(c: _C, n: torch.fx.Node, what: str) -> None:
    c._pool(
        n, what, "maxpool2d", _arg(n, 1, "kernel_size", None), _arg(n, 2, "stride", None),
        _arg(n, 3, "padding", 0), _arg(n, 4, "dilation", 1), _arg(n, 5, "ceil_mode", False),
        return_indices=_arg(n, 6, "return_indices", False),
    )


def _fn_avgpool(c: _C, n: torch.fx.Node, what: str) -> None:
    c._pool(
        n, what, "avgpool2d", _arg(n, 1, "kernel_size", None), _arg(n, 2, "stride", None),
        _arg(n, 3, "padding", 0), 1, _arg(n, 4, "ceil_mode", False), _arg(n, 5, "count_include_pad", True),
        _arg(n, 6, "divisor_override", None),
    )


_Function = Callable[[_C, torch.fx.Node, str], None]
_relu: _Function = lambda c, n, w: c._relu(n, w)  # noqa: E731
_flatten_fn: _Function = lambda c, n, w: c._flatten(n, w, _arg(n, 1, "start_dim", 0), _arg(n, 2, "end_dim", -1))  # noqa: E731
_softmax_fn: _Function = lambda c, n, w: c._softmax(n, w, _arg(n, 1, "dim", None))  # noqa: E731
_identity: _Function = lambda c, n, w: c._identity(n, w)  # noqa: E731

def _binary(op: str) -> _Function:
    return lambda c, n, w: c._binary(n, w, op)


def _act_fn(kind: str, alpha: Callable[[torch.fx.Node], float] = lambda n: 0.0,
            beta: Callable[[torch.fx.Node], float] = lambda n: 0.0) -> _Function:
    return lambda c, n, w: c._act(n, w, kind, alpha(n), beta(n))


def _interpolate_fn(c: _C, n: torch.fx.Node, what: str) -> None:
    c._interpolate(n, what, _arg(n, 2, "scale_factor", None), _arg(n, 3, "mode", "nearest"),
                   _arg(n, 4, "align_corners", None), _arg(n, 5, "recompute_scale_factor", None),
                   _arg(n, 6, "antialias", False))


_relu6 = _act_fn("clip", lambda n: 0.0, lambda n: 6.0)
_hardtanh = _act_fn("clip", lambda n: _arg(n, 1, "min_val", -1.0), lambda n: _arg(n, 2, "max_val", 1.0))
_leaky = _act_fn("leaky_relu", lambda n: _arg(n, 1, "negative_slope", 0.01))
_sigmoid = _act_fn("sigmoid")
_tanh = _act_fn("tanh")
_hardsigmoid = _act_fn("hardsigmoid", lambda n: 1 / 6, lambda n: 0.5)
_hardswish = _act_fn("hardswish")
_clamp: _Function = lambda c, n, w: c._clamp(n, w)  # noqa: E731
_add, _sub, _mul, _div = _binary("add"), _binary("sub"), _binary("mul"), _binary("div")
_cat: _Function = lambda c, n, w: c._cat(n, w)  # noqa: E731
_permute: _Function = lambda c, n, w: c._permute_call(n, w)  # noqa: E731
_transpose: _Function = lambda c, n, w: c._transpose_call(n, w)  # noqa: E731
_mean: _Function = lambda c, n, w: c._mean(n, w)  # noqa: E731

_FUNCTION_RULES: dict[Any, _Function] = {
    F.relu: _relu,
    F.relu_: _relu,
    torch.relu: _relu,
    torch.relu_: _relu,
    F.relu6: _relu6,
    F.hardtanh: _hardtanh,
    F.leaky_relu: _leaky,
    torch.sigmoid: _sigmoid,
    F.sigmoid: _sigmoid,
    torch.tanh: _tanh,
    F.tanh: _tanh,
    F.hardsigmoid: _hardsigmoid,
    F.hardswish: _hardswish,
    torch.clamp: _clamp,
    torch.clip: _clamp,
    operator.add: _add,
    operator.iadd: _add,
    torch.add: _add,
    operator.sub: _sub,
    operator.isub: _sub,
    torch.sub: _sub,
    operator.mul: _mul,
    operator.imul: _mul,
    torch.mul: _mul,
    operator.truediv: _div,
    operator.itruediv: _div,
    torch.div: _div,
    torch.cat: _cat,
    torch.concat: _cat,
    torch.permute: _permute,
    torch.transpose: _transpose,
    torch.mean: _mean,
    F.max_pool2d: _fn_maxpool,
    F.avg_pool2d: _fn_avgpool,
    F.adaptive_avg_pool2d: lambda c, n, w: c._adaptive_pool(n, w, "avgpool2d"),
    F.adaptive_max_pool2d: lambda c, n, w: c._adaptive_pool(n, w, "maxpool2d", _arg(n, 2, "return_indices", False)),
    F.interpolate: _interpolate_fn,
    F.pad: lambda c, n, w: c._pad(n, w, _arg(n, 1, "pad", ()), _arg(n, 2, "mode", "constant"), _arg(n, 3, "value", None)),
    F.local_response_norm: lambda c, n, w: c._lrn(n, w, _arg(n, 1, "size", 0), _arg(n, 2, "alpha", 1e-4),
                                                  _arg(n, 3, "beta", 0.75), _arg(n, 4, "k", 1.0)),
    F.channel_shuffle: lambda c, n, w: c._channel_shuffle(n, w, _arg(n, 1, "groups", 1)),
    torch.flatten: _flatten_fn,
    torch.reshape: lambda c, n, w: c._reshape(n, w),
    F.softmax: _softmax_fn,
    torch.softmax: _softmax_fn,
    F.dropout: _identity,
    F.dropout1d: _identity,
    F.dropout2d: _identity,
    F.dropout3d: _identity,
    F.alpha_dropout: _identity,
    F.feature_alpha_dropout: _identity,
}

_METHOD_RULES: dict[str, _Function] = {
    "relu": _relu,
    "relu_": _relu,
    "sigmoid": _sigmoid,
    "tanh": _tanh,
    "clamp": _clamp,
    "clip": _clamp,
    "add": _add,
    "add_": _add,
    "sub": _sub,
    "mul": _mul,
    "mul_": _mul,
    "div": _div,
    "permute": _permute,
    "transpose": _transpose,
    "mean": _mean,
    "flatten": _flatten_fn,
    "view": lambda c, n, w: c._reshape(n, w),
    "reshape": lambda c, n, w: c._reshape(n, w),
    "softmax": _softmax_fn,
    "contiguous": _identity,
}
