"""Int8 quantization in PyTorch: the post-training simulation and quantization-aware training (QAT).

    qm = prepare_qat(model, QATConfig())     # fx-traced copy with fake quantization
    calibrate(qm, x_calib)                   # observers start from the float ranges (PTQ)
    fit(qm, train, val, after_step=FreezeSchedule(...))
    ranges = convert(qm)                     # trained weights back into `model`; {IR value: (lo, hi)}

`prepare_qat` traces the model with torch.fx and quantizes exactly the values the int8 runtime
quantizes (docs/format.md, "Quantized inference"): the graph input, the output of every conv/linear
layer (after the ReLU/ReLU6 that the IR fuses into it), of every add, pool or other computing op; ops
that pass u8 through (max pool, flatten, dropout, reshape...) get no fake quantization of their own.
A Conv2d/Linear (with the BatchNorm after it) becomes a `QATLayer`, whose weight is fake-quantized
per output channel *after* the BatchNorm is folded into it, as the runtime will see it:

    training, BN live:  y = BN_batch(conv(x, fq(w * s)) / s + b),  s = gamma / sqrt(running_var + eps)
    eval or BN frozen:  y = conv(x, fq(w * s)) + (b - running_mean) * s + beta

(Jacob et al. 2018, section 3.2). The freeze schedule first stops the observers (ranges fixed),
then the BatchNorm statistics (running statistics from then on).

Each fake-quantized activation is named by the IR value it becomes after `from_torch` + `optimize`
(`conv1`, `features.0.2`, `add`, `input`, `output`), so `convert`'s ranges go straight to
`deepslim.quant.quantize_graph(graph, ranges=...)`.
"""

from __future__ import annotations

import copy
import math
import operator
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np
import torch
import torch.fx
import torch.nn.functional as F
from torch import nn

from deepslim.compress.fakequant import FakeQuantAct, fake_quant_weight

# Modules, functions and methods whose u8 output keeps the input's scale and zero point.
_PASS_MODULES = (nn.MaxPool2d, nn.Flatten, nn.Dropout, nn.Dropout2d, nn.Identity, nn.AdaptiveMaxPool2d,
                 nn.ChannelShuffle, nn.Unflatten)
_PASS_FUNCTIONS = {torch.flatten, F.max_pool2d, F.dropout, F.adaptive_max_pool2d, torch.reshape,
                   torch.permute, torch.transpose, F.channel_shuffle, torch.channel_shuffle}
_PASS_METHODS = {"view", "reshape", "flatten", "contiguous", "permute", "transpose"}
# Activations the IR fuses into the producing conv/dense/add as a clamp of the u8 result.
_CLAMP_MODULES = (nn.ReLU, nn.ReLU6, nn.Hardtanh)
_CLAMP_FUNCTIONS = {F.relu, torch.relu, F.relu6, F.hardtanh, torch.clamp}
_CLAMP_METHODS = {"relu", "clamp"}
_ADD = {operator.add, torch.add}
# Functions and methods that do not produce activations (shapes, sizes).
_SHAPE_FUNCTIONS = {getattr, operator.getitem, operator.floordiv, operator.mul, operator.sub}
_SHAPE_METHODS = {"size", "dim"}


@dataclass(frozen=True)
class QATConfig:
    """Quantization-aware fine-tuning.

    epochs: fine-tuning epochs (0: post-training quantization only, the observers calibrated).
    train: TrainConfig options for fine-tuning (lr defaults to 1e-4).
    calib_samples: training samples whose float min/max start the observers.
    averaging: EMA constant of the observers while training.
    freeze_observers_after, freeze_bn_after: epochs (fractions allowed) after which the activation
        ranges, then the BatchNorm statistics stop updating.
    train_samples: fine-tune on this many training samples per epoch (None: all).
    """

    epochs: int = 1
    train: dict[str, Any] = field(default_factory=dict)
    calib_samples: int = 1000
    averaging: float = 0.01
    freeze_observers_after: float = 0.5
    freeze_bn_after: float = 0.5
    train_samples: int | None = None

    def __post_init__(self) -> None:
        from deepslim.train import TrainConfig

        if isinstance(self.epochs, bool) or not isinstance(self.epochs, int) or self.epochs < 0:
            raise ValueError(f"qat.epochs must be an integer >= 0, got {self.epochs!r}")
        if not isinstance(self.train, dict):
            raise ValueError(f"qat.train must be a mapping of training options, got {self.train!r}")
        try:
            TrainConfig.from_dict(self.train)
        except ValueError as e:
            raise ValueError(f"qat.train: {e}") from e
        if isinstance(self.calib_samples, bool) or not isinstance(self.calib_samples, int) or self.calib_samples < 1:
            raise ValueError(f"qat.calib_samples must be an integer >= 1, got {self.calib_samples!r}")
        if isinstance(self.averaging, bool) or not isinstance(self.averaging, (int, float)) or not 0 < self.averaging <= 1:
            raise ValueError(f"qat.averaging must be a number in (0, 1], got {self.averaging!r}")
        for key in ("freeze_observers_after", "freeze_bn_after"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
                raise ValueError(f"qat.{key} must be a number of epochs >= 0, got {v!r}")
        n = self.train_samples
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ValueError(f"qat.train_samples must be an integer >= 1 or null, got {n!r}")


CALIB_METHODS = ("minmax", "percentile", "kl", "mse")  # deepslim.quant.calibrate.METHODS


@dataclass(frozen=True)
class QuantizeConfig:
    """The recipe's `quantize:` step: int8 with u8 activations (docs/quantization.md).

    method: calibration of the activation ranges ("minmax", "percentile", "kl", "mse"), one for all
        or per layer name/type ({"conv": "kl", "fc3": "minmax"}; the layer's output activation; other
        activations use "minmax"). QAT's trained ranges replace them.
    calib_samples: training samples used for calibration.
    weight_bits: 8 or 4 (int4 weights stored as 4-bit i8).
    keep_fp32: conv/fc layers that stay float32.
    int16: conv/fc layers that run 16x8 (i8 weights, i16 output activation; quantize_graph's int16).
    activation_bits: 8, or 16 to run every conv/fc layer not in keep_fp32 16x8.
    sensitivity: SensitivityConfig options; keeps the most sensitive layers in float32 (added to
        keep_fp32), or with keep_as int16 runs them 16x8 (added to int16), until the simulated int8
        accuracy is within `budget` points of float32.
    qat: QATConfig options; without it the step is post-training quantization only. Its fake
        quantization simulates the int16 layers' activations as i16 and the rest as u8.
    """

    method: str | dict[str, str] = "minmax"
    calib_samples: int = 1000
    weight_bits: int = 8
    keep_fp32: tuple[str, ...] = ()
    int16: tuple[str, ...] = ()
    activation_bits: int = 8
    sensitivity: Any = None
    qat: Any = None

    def __post_init__(self) -> None:
        from deepslim.compress.sensitivity import SensitivityConfig

        methods = self.method.values() if isinstance(self.method, dict) else [self.method]
        if isinstance(self.method, dict) and not self.method:
            raise ValueError("quantize.method must be a method name or a non-empty mapping of layer -> method")
        for m in methods:
            if m not in CALIB_METHODS:
                raise ValueError(f"quantize.method: unknown calibration method {m!r}; known: {', '.join(CALIB_METHODS)}")
        if isinstance(self.calib_samples, bool) or not isinstance(self.calib_samples, int) or self.calib_samples < 1:
            raise ValueError(f"quantize.calib_samples must be an integer >= 1, got {self.calib_samples!r}")
        if self.weight_bits not in (4, 8) or isinstance(self.weight_bits, bool):
            raise ValueError(f"quantize.weight_bits must be 8 or 4, got {self.weight_bits!r}")
        if isinstance(self.keep_fp32, str) or not all(isinstance(k, str) for k in self.keep_fp32):
            raise ValueError(f"quantize.keep_fp32 must be a list of layer names, got {self.keep_fp32!r}")
        object.__setattr__(self, "keep_fp32", tuple(self.keep_fp32))
        if isinstance(self.int16, str) or not all(isinstance(k, str) for k in self.int16):
            raise ValueError(f"quantize.int16 must be a list of layer names, got {self.int16!r}")
        object.__setattr__(self, "int16", tuple(self.int16))
        both = sorted(set(self.int16) & set(self.keep_fp32))
        if both:
            raise ValueError(f"quantize: layers both in int16 and keep_fp32: {both}")
        if self.activation_bits not in (8, 16) or isinstance(self.activation_bits, bool):
            raise ValueError(f"quantize.activation_bits must be 8 or 16, got {self.activation_bits!r}")
        for key, cls in (("sensitivity", SensitivityConfig), ("qat", QATConfig)):
            v = getattr(self, key)
            if isinstance(v, dict):
                unknown = set(v) - set(cls.__dataclass_fields__)
                if unknown:
                    raise ValueError(f"quantize.{key}: unknown key(s) {sorted(unknown)}; "
                                     f"known: {sorted(cls.__dataclass_fields__)}")
                object.__setattr__(self, key, cls(**v))
            elif v is not None and not isinstance(v, cls):
                raise ValueError(f"quantize.{key} must be a mapping, got {v!r}")

    def check(self, model: nn.Module) -> None:
        from deepslim.compress.layers import check_keys

        check_keys(dict.fromkeys(self.keep_fp32), model, "quantize.keep_fp32")
        check_keys(dict.fromkeys(self.int16), model, "quantize.int16")
        if isinstance(self.method, dict):
            check_keys(self.method, model, "quantize.method")


@dataclass
class QuantizePlan:
    """What the .dsm writer needs to quantize the exported graph (`quantize_for_export`)."""

    keep_fp32: list[str]
    weight_bits: int = 8
    method: str | dict[str, str] = "minmax"
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)  # from QAT; beat calibration
    calib: np.ndarray | None = None  # calibration inputs
    history: dict[str, Any] = field(default_factory=dict)
    int16: list[str] = field(default_factory=list)  # layers that run 16x8
    activation_bits: int = 8


# --------------------------------------------------------------------------------- module state


class QATLayer(nn.Module):
    """A Conv2d or Linear (+ the BatchNorm after it) with its folded weight fake-quantized."""

    def __init__(self, layer: nn.Conv2d | nn.Linear, bn: nn.Module | None, name: str, bn_name: str | None,
                 bits: int = 8) -> None:
        super().__init__()
        if isinstance(layer, nn.Conv2d) and layer.padding_mode != "zeros":
            raise ValueError(f"{name}: padding_mode {layer.padding_mode!r} is not supported")
        self.layer = layer
        self.bn = bn
        self.name = name
        self.bn_name = bn_name
        self.bits = bits
        self.quantize_weight = True
        self.register_buffer("bn_frozen", torch.tensor(False))

    def _op(self, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        m = self.layer
        if isinstance(m, nn.Conv2d):
            return F.conv2d(x, w, b, m.stride, m.padding, m.dilation, m.groups)
        return F.linear(x, w, b)

    def _fq(self, w: torch.Tensor) -> torch.Tensor:
        return fake_quant_weight(w, self.bits) if self.quantize_weight else w

    def bn_scale(self) -> torch.Tensor:
        bn = self.bn
        gamma = bn.weight if bn.weight is not None else torch.ones_like(bn.running_var)
        return gamma / torch.sqrt(bn.running_var + bn.eps)

    def folded(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The (weight, bias) the runtime computes with, BatchNorm folded in with running statistics."""
        w, b = self.layer.weight, self.layer.bias
        if self.bn is None:
            return w, b
        s = self.bn_scale()
        beta = self.bn.bias if self.bn.bias is not None else torch.zeros_like(s)
        b0 = b if b is not None else torch.zeros_like(s)
        return w * s.reshape(-1, *([1] * (w.dim() - 1))), (b0 - self.bn.running_mean) * s + beta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.bn is None or not self.training or bool(self.bn_frozen):
            w, b = self.folded()
            return self._op(x, self._fq(w), b)
        bn, s = self.bn, self.bn_scale()
        w = self.layer.weight
        y = self._op(x, self._fq(w * s.reshape(-1, *([1] * (w.dim() - 1)))), None)
        shape = (1, -1) + (1,) * (y.dim() - 2)
        y = y / s.reshape(shape)
        if self.layer.bias is not None:
            y = y + self.layer.bias.reshape(shape)
        bn.num_batches_tracked += 1
        momentum = bn.momentum if bn.momentum is not None else 1.0 / float(bn.num_batches_tracked)
        return F.batch_norm(y, bn.running_mean, bn.running_var, bn.weight, bn.bias, True, momentum, bn.eps)

    def extra_repr(self) -> str:
        return f"{self.name!r}, bn={self.bn_name!r}, bits={self.bits}, quantize_weight={self.quantize_weight}"


@dataclass
class _Point:
    """Where an activation is fake-quantized: the fx node, its IR value name, the op that produces it
    (None for the graph input) and the ops that read it (through pass-through ops)."""

    node: torch.fx.Node
    value: str
    producer: str | None
    consumers: list[str]


def _kind(n: torch.fx.Node, modules: dict[str, nn.Module]) -> str:
    """'pass', 'clamp', 'shape', 'layer', 'add' or 'op' (any other computing op)."""
    if n.op == "call_module":
        m = modules[n.target]
        if isinstance(m, QATLayer):
            return "layer"
        if isinstance(m, _PASS_MODULES):
            return "pass"
        if isinstance(m, _CLAMP_MODULES):
            return "clamp"
        return "op"
    if n.op == "call_function":
        if n.target in _ADD and sum(isinstance(a, torch.fx.Node) for a in n.args[:2]) == 2:
            return "add"
        if n.target in _PASS_FUNCTIONS:
            return "pass"
        if n.target in _CLAMP_FUNCTIONS:
            return "clamp"
        if n.target in _SHAPE_FUNCTIONS:
            return "shape"
        return "op"
    if n.op == "call_method":
        if n.target in _PASS_METHODS:
            return "pass"
        if n.target in _CLAMP_METHODS:
            return "clamp"
        if n.target in _SHAPE_METHODS:
            return "shape"
        return "op"
    return "shape"


def _op_name(n: torch.fx.Node) -> str:
    """The IR node/value name the torch front end gives an fx node."""
    if n.op == "placeholder":
        return "input"
    return n.target if n.op == "call_module" else n.name


def _tensor_users(n: torch.fx.Node, modules) -> list[torch.fx.Node]:
    return [u for u in n.users if u.op == "output" or _kind(u, modules) != "shape"]


def _points(gm: torch.fx.GraphModule) -> list[_Point]:
    modules = dict(gm.named_modules())
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    outputs: set[torch.fx.Node] = set()
    torch.fx.node.map_arg(out_node.args, outputs.add)

    def consumers(n: torch.fx.Node) -> list[str]:
        found = []
        for u in _tensor_users(n, modules):
            if u.op == "output":
                continue
            if _kind(u, modules) == "pass":
                found += consumers(u)
            else:
                found.append(_op_name(u))
        return found

    points = []
    for n in gm.graph.nodes:
        kind = "input" if n.op == "placeholder" else _kind(n, modules)
        if kind in ("pass", "shape"):
            continue
        if kind == "clamp":
            src = n.args[0]
            if isinstance(src, torch.fx.Node) and _kind(src, modules) in ("layer", "add") \
                    and len(_tensor_users(src, modules)) == 1 and src not in outputs:
                continue  # fused into its producer (the IR fuses one activation); the point follows it
        producer = None if kind == "input" else _op_name(n)
        point = n
        users = _tensor_users(n, modules)
        if kind in ("layer", "add") and len(users) == 1 and n not in outputs and users[0].op != "output" \
                and _kind(users[0], modules) == "clamp":
            point = users[0]
        value = "output" if point in outputs else _op_name(point)
        points.append(_Point(point, value, producer, consumers(point)))
    return points


def prepare_qat(model: nn.Module, config: QATConfig | None = None, *, keep_fp32: Iterable[str] = (),
                weight_bits: int = 8, int16: Iterable[str] = (), activation_bits: int = 8) -> torch.fx.GraphModule:
    """A fake-quantized copy of `model` (a torch.fx GraphModule); `model` is not modified.

    keep_fp32: conv/fc layer names whose weights stay float (their activations are still quantized
    where a quantized op reads or writes them). int16: conv/fc layers that will run 16x8 (their
    activations simulated as i16, see set_quantized); activation_bits 16: every conv/fc layer not in
    keep_fp32, as quantize_graph takes them. `convert` writes the trained weights back to `model`.
    """
    config = config or QATConfig()
    gm = torch.fx.symbolic_trace(copy.deepcopy(model))
    modules = dict(gm.named_modules())
    layer_names = [n for n, m in modules.items() if isinstance(m, (nn.Conv2d, nn.Linear))]
    keep, wide = set(keep_fp32), list(int16)
    for what, names in (("keep_fp32", keep), ("int16", wide)):
        unknown = set(names) - set(layer_names)
        if unknown:
            raise ValueError(f"{what}: unknown layer(s) {sorted(unknown)}; conv/fc layers: {', '.join(layer_names)}")
    if activation_bits == 16:
        wide = [n for n in layer_names if n not in keep]
    for n in list(gm.graph.nodes):
        if n.op != "call_module" or not isinstance(modules.get(n.target), (nn.Conv2d, nn.Linear)):
            continue
        layer = modules[n.target]
        bn_type = nn.BatchNorm2d if isinstance(layer, nn.Conv2d) else nn.BatchNorm1d
        bn_node = None
        if len(n.users) == 1:
            (u,) = n.users
            if u.op == "call_module" and isinstance(modules[u.target], bn_type) and \
                    modules[u.target].track_running_stats:
                bn_node = u
        bn = modules[bn_node.target] if bn_node is not None else None
        q = QATLayer(layer, bn, n.target, bn_node.target if bn_node is not None else None, weight_bits)
        q.quantize_weight = n.target not in keep
        _set_submodule(gm, n.target, q)
        if bn_node is not None:
            bn_node.replace_all_uses_with(n)
            gm.graph.erase_node(bn_node)
            _set_submodule(gm, bn_node.target, nn.Identity())
    gm.act_quant = nn.ModuleList()
    for i, p in enumerate(_points(gm)):
        fq = FakeQuantAct(p.value, averaging=config.averaging)
        fq.producer, fq.consumers = p.producer, tuple(p.consumers)
        gm.act_quant.append(fq)
        with gm.graph.inserting_after(p.node):
            new = gm.graph.call_module(f"act_quant.{i}", (p.node,))
        p.node.replace_all_uses_with(new, delete_user_cb=lambda u, new=new: u is not new)
    gm.graph.lint()
    gm.recompile()
    gm.__dict__["_qat_source"] = model
    if hasattr(model, "input_shape"):
        gm.input_shape = model.input_shape
    set_quantized(gm, None, keep_fp32=keep, int16=wide)
    return gm


def _set_submodule(root: nn.Module, target: str, module: nn.Module) -> None:
    *path, last = target.split(".")
    parent = root
    for part in path:
        parent = getattr(parent, part)
    setattr(parent, last, module)


def qat_layers(qm: nn.Module) -> dict[str, QATLayer]:
    return {m.name: m for m in qm.modules() if isinstance(m, QATLayer)}


def act_quantizers(qm: nn.Module) -> list[FakeQuantAct]:
    return [m for m in qm.modules() if isinstance(m, FakeQuantAct)]


def quantizable_ops(qm: nn.Module) -> list[str]:
    """Names of every op that runs in int8 when quantized (layers, adds, pools...), in order."""
    names: list[str] = []
    for fq in act_quantizers(qm):
        for op in (fq.producer, *fq.consumers):
            if op is not None and op not in names:
                names.append(op)
    return names


def set_quantized(qm: nn.Module, ops: Iterable[str] | None, *, keep_fp32: Iterable[str] = (),
                  int16: Iterable[str] = ()) -> None:
    """Quantize only `ops` (None: every op) minus `keep_fp32`: a layer's weight is fake-quantized when
    it is quantized; an activation when the op writing it or an op reading it is quantized (a value
    between float ops stays float, as in the runtime's fp32 islands).

    `int16`: quantized layers that run 16x8 (quantize_graph's `int16`). An activation is i16 when an
    int16 layer writes it, or a float op writes it and int16 layers read it, and no quantized op
    reads it in u8 (one fake quantizer per value: a value read both ways is simulated as u8)."""
    keep = set(keep_fp32)
    on = set(quantizable_ops(qm) if ops is None else ops) - keep
    wide = set(int16) & on
    for name, layer in qat_layers(qm).items():
        layer.quantize_weight = name in on
    for fq in act_quantizers(qm):
        fq.enabled = fq.producer in on or any(c in on for c in fq.consumers)
        readers = [c for c in fq.consumers if c in on]
        written_wide = fq.producer in wide or (fq.producer not in on and bool(readers))
        fq.bits = 16 if written_wide and all(c in wide for c in readers) else 8


def calibrate(qm: nn.Module, x: np.ndarray, batch_size: int = 500) -> None:
    """Set the observers to the float min/max of every quantized activation over `x` (PTQ minmax)."""
    fqs = act_quantizers(qm)
    training = qm.training
    qm.eval()
    for fq in fqs:
        fq.calibrating = True
    layers = list(qat_layers(qm).values())
    saved = [layer.quantize_weight for layer in layers]
    for layer in layers:
        layer.quantize_weight = False
    try:
        with torch.no_grad():
            for i in range(0, len(x), batch_size):
                qm(torch.from_numpy(np.ascontiguousarray(x[i:i + batch_size], dtype=np.float32)))
    finally:
        for fq in fqs:
            fq.calibrating = False
        for layer, s in zip(layers, saved):
            layer.quantize_weight = s
        qm.train(training)


def freeze_observers(qm: nn.Module, frozen: bool = True) -> None:
    for fq in act_quantizers(qm):
        fq.frozen.fill_(frozen)


def freeze_bn(qm: nn.Module, frozen: bool = True) -> None:
    for layer in qat_layers(qm).values():
        layer.bn_frozen.fill_(frozen)


class FreezeSchedule:
    """An `after_step` callback: after `observer_step` optimizer steps the activation ranges stop
    updating, after `bn_step` the BatchNorm statistics (None: never)."""

    def __init__(self, observer_step: int | None, bn_step: int | None) -> None:
        self.observer_step, self.bn_step = observer_step, bn_step
        self.step = 0

    def __call__(self, qm: nn.Module) -> None:
        self.step += 1
        if self.observer_step is not None and self.step == self.observer_step:
            freeze_observers(qm)
        if self.bn_step is not None and self.step == self.bn_step:
            freeze_bn(qm)


def ranges_of(qm: nn.Module) -> dict[str, tuple[float, float]]:
    """{IR value name: (lo, hi)} of every enabled, observed activation."""
    return {fq.value_name: fq.observer.range() for fq in act_quantizers(qm)
            if fq.enabled and fq.observer.initialized}


def convert(qm: torch.fx.GraphModule, model: nn.Module | None = None) -> dict[str, tuple[float, float]]:
    """Write the trained weights and BatchNorm parameters/statistics of `qm` back into `model` (the
    model given to prepare_qat by default) and return the activation ranges per IR value name
    (`complete_ranges(graph, ranges)` adds the values that only pass u8 through, such as a flatten
    the graph input goes through first).

    `from_torch` then folds each BatchNorm with the same formula as `QATLayer.folded`, so
    `quantize_graph(optimize(from_torch(model, x)), ranges=convert(qm))` runs what QAT simulated."""
    from deepslim.compress.kmeans import strip_sharing
    from deepslim.compress.prune import strip_masks

    target = model if model is not None else qm.__dict__["_qat_source"]
    strip_sharing(qm)
    strip_masks(qm)
    with torch.no_grad():
        for name, layer in qat_layers(qm).items():
            dst = target.get_submodule(name)
            dst.load_state_dict(layer.layer.state_dict())
            if layer.bn is not None:
                target.get_submodule(layer.bn_name).load_state_dict(layer.bn.state_dict())
    return ranges_of(qm)


# IR ops whose u8 output keeps the input's scale and zero point (docs/format.md).
_IR_PASS_OPS = ("maxpool2d", "global_maxpool", "flatten", "reshape", "transpose", "channel_shuffle", "slice", "pad")


def complete_ranges(graph, ranges: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
    """`ranges` plus the outputs of ops that pass u8 through (max pool, flatten...), each with its
    input's range, so every activation of a quantized region has one."""
    out = dict(ranges)
    for node in graph.nodes:
        if node.op in _IR_PASS_OPS and node.inputs and node.inputs[0] in out:
            for name in node.outputs:
                out.setdefault(name, out[node.inputs[0]])
    return out


def check_ranges(graph, ranges: dict[str, tuple[float, float]]) -> None:
    """Every range must name an activation of the IR graph (after optimize())."""
    activations = {name for name, v in graph.values.items() if not v.is_constant}
    unknown = sorted(set(ranges) - activations)
    if unknown:
        raise ValueError(f"ranges name values the graph does not have: {unknown}")


# -------------------------------------------------------------------------------------- method


def preserve_structure(qm: nn.Module, *, shared: bool = False) -> None:
    """Keep earlier compression through fine-tuning: pruned (exactly zero) weights stay zero, and with
    `shared` each weight trains as its codebook of distinct nonzero values (k-means sharing)."""
    from torch.nn.utils import parametrize

    from deepslim.compress.kmeans import SharedWeight
    from deepslim.compress.prune import attach_mask

    for layer in qat_layers(qm).values():
        m = layer.layer
        mask = m.weight.detach() != 0
        if shared:
            values, labels = torch.unique(m.weight.detach()[mask], return_inverse=True)
            full = torch.zeros(m.weight.shape, dtype=torch.long)
            full[mask] = labels
            parametrize.register_parametrization(m, "weight", SharedWeight(values, full, mask), unsafe=True)
        elif not bool(mask.all()):
            attach_mask(m, mask)


def _after_steps(*fns: Callable[[nn.Module], None]) -> Callable[[nn.Module], None]:
    def run(model: nn.Module) -> None:
        for fn in fns:
            fn(model)
    return run


def quantization_aware_training(
    model: nn.Module,
    config: QATConfig,
    train_data,
    val_data=None,
    *,
    keep_fp32: Iterable[str] = (),
    weight_bits: int = 8,
    int16: Iterable[str] = (),
    activation_bits: int = 8,
    shared: bool = False,
    progress: bool = True,
    seed: int = 0,
    loss=None,
) -> tuple[dict[str, tuple[float, float]], dict[str, Any]]:
    """Calibrate, fine-tune with fake quantization and the freeze schedule, and write the weights back
    into `model` (in place). Returns (ranges per IR value name, history).

    `int16` / `activation_bits` (16: every conv/fc layer not in keep_fp32) name the layers that will run
    16x8, as quantize_graph takes them: their activations are simulated as i16 while training, so the
    ranges learnt are the ones the i16 scales come from.

    `loss(output, target)`: the training loss; default `deepslim.train.default_loss(model)`, decided on
    `model` itself (the traced copy ends in a fake quantizer, not in the model's softmax)."""
    from deepslim.compress.prune import reapply_masks
    from deepslim.train import TrainConfig, default_loss, evaluate, fit

    loss = loss if loss is not None else default_loss(model)

    qm = prepare_qat(model, config, keep_fp32=keep_fp32, weight_bits=weight_bits, int16=int16,
                     activation_bits=activation_bits)
    x, y = train_data
    calibrate(qm, x[: config.calib_samples])
    history: dict[str, Any] = {}
    if val_data is not None:
        history["ptq_val_accuracy"] = evaluate(qm, val_data)
    train_config = TrainConfig.from_dict({"seed": seed, "lr": 1e-4, **config.train, "epochs": config.epochs})
    if config.epochs > 0:
        if config.train_samples is not None:
            order = np.random.default_rng(seed).permutation(len(x))[: config.train_samples]
            x, y = x[order], y[order]
        preserve_structure(qm, shared=shared)
        steps = math.ceil(len(x) / train_config.batch_size)
        schedule = FreezeSchedule(max(1, round(config.freeze_observers_after * steps)),
                                  max(1, round(config.freeze_bn_after * steps)))
        history["epochs"] = fit(qm, (x, y), val_data, config=train_config,
                                after_step=_after_steps(reapply_masks, schedule), loss=loss, progress=progress,
                                desc="QAT")
        if val_data is not None:
            history["qat_val_accuracy"] = evaluate(qm, val_data)
    ranges = convert(qm, model)
    model.eval()
    return ranges, history


def quantize(model: nn.Module, config: QuantizeConfig, train_data=None, val_data=None, *, shared: bool = False,
             progress: bool = True, seed: int = 0) -> QuantizePlan:
    """The compress() step: sensitivity analysis (optional), then QAT (optional) in place.

    Returns the plan for `quantize_for_export`. Needs training inputs for calibration.
    """
    from deepslim.compress.sensitivity import torch_sensitivity

    config.check(model)
    if train_data is None:
        raise ValueError("quantize needs training data: its first calib_samples inputs calibrate the ranges")
    calib = np.ascontiguousarray(train_data[0][: config.calib_samples], dtype=np.float32)
    keep = list(config.keep_fp32)
    wide = list(config.int16)
    history: dict[str, Any] = {}
    if config.sensitivity is not None:
        if val_data is None:
            raise ValueError("quantize.sensitivity needs validation data")
        report = torch_sensitivity(model, calib, val_data, config.sensitivity, weight_bits=config.weight_bits)
        keep += [k for k in report.keep_fp32 if k not in keep]
        wide += [k for k in report.int16 if k not in wide and k not in keep]
        history["sensitivity"] = {"reference": report.reference, "drops": report.drops,
                                  "keep_fp32": report.keep_fp32, "int16": report.int16, "trail": report.trail}
        if progress:
            print(report.table())
    ranges: dict[str, tuple[float, float]] = {}
    if config.qat is not None:
        qat_config = QATConfig(**{**config.qat.__dict__, "calib_samples": config.calib_samples})
        ranges, history["qat"] = quantization_aware_training(
            model, qat_config, train_data, val_data, keep_fp32=keep, weight_bits=config.weight_bits, int16=wide,
            activation_bits=config.activation_bits, shared=shared, progress=progress, seed=seed)
    return QuantizePlan(keep, config.weight_bits, config.method, ranges, calib, history, wide, config.activation_bits)


def quantize_for_export(graph, plan: QuantizePlan):
    """The fp32 IR graph (after optimize()) -> the quantized graph the plan describes: QAT ranges
    first, then per-layer calibration methods for the layers' outputs, the rest by the default."""
    from deepslim.quant import quantize_graph
    from deepslim.quant.calibrate import collect_stats, range_from_stats

    ranges = complete_ranges(graph, plan.ranges)
    method = plan.method if isinstance(plan.method, str) else "minmax"
    if isinstance(plan.method, dict):
        kinds = {"conv2d": "conv", "dense": "fc"}
        stats = collect_stats(graph, plan.calib)
        for node in graph.nodes:
            m = plan.method.get(node.name, plan.method.get(kinds.get(node.op, ""), None))
            if m is not None and node.outputs[0] not in ranges:
                ranges[node.outputs[0]] = range_from_stats(stats[node.outputs[0]], m)
    return quantize_graph(graph, calib=plan.calib, ranges=ranges or None, method=method,
                          keep_fp32=plan.keep_fp32, weight_bits=plan.weight_bits,
                          int16=[n for n in plan.int16 if n not in plan.keep_fp32],
                          activation_bits=plan.activation_bits)
