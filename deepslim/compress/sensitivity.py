"""Per-layer int8 sensitivity and mixed precision: which layers to keep in float32.

A layer's sensitivity is the accuracy (in points) lost when only that layer runs in int8 (its
weights, the activation it reads and the one it writes quantized; everything else float). Mixed
precision then keeps the most sensitive layers in float32 (or, with `keep_as: int16`, runs them 16x8:
i8 weights, i16 output activation), one at a time, until the rest-quantized model loses at most
`budget` points, or `max_fp32_layers` are kept.

The search is written against a function `accuracy(quantized_ops) -> percent`, so the same code
runs on the PyTorch fake-quant simulation (`torch_accuracy_fn`, needs PyTorch) or on the bit-exact
integer reference (`graph_accuracy_fn`, deepslim.quant, numpy only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

AccuracyFn = Callable[..., float]  # accuracy(quantized_ops, int16=()) -> percent
KEEP_AS = ("fp32", "int16")


@dataclass(frozen=True)
class SensitivityConfig:
    """budget: accuracy points the int8 model may lose against float32 (measured on `samples`
    validation images); max_fp32_layers: at most this many layers are kept (None: no limit);
    keep_as: "fp32" keeps the chosen layers in float32, "int16" runs them 16x8 (quantize_graph's
    `int16`: weights stay int8, 4x smaller than float32)."""

    budget: float = 0.5
    max_fp32_layers: int | None = None
    samples: int = 2000
    keep_as: str = "fp32"

    def __post_init__(self) -> None:
        if isinstance(self.budget, bool) or not isinstance(self.budget, (int, float)) or not self.budget >= 0:
            raise ValueError(f"sensitivity.budget must be a number of accuracy points >= 0, got {self.budget!r}")
        m = self.max_fp32_layers
        if m is not None and (isinstance(m, bool) or not isinstance(m, int) or m < 0):
            raise ValueError(f"sensitivity.max_fp32_layers must be an integer >= 0 or null, got {m!r}")
        if isinstance(self.samples, bool) or not isinstance(self.samples, int) or self.samples < 1:
            raise ValueError(f"sensitivity.samples must be an integer >= 1, got {self.samples!r}")
        if self.keep_as not in KEEP_AS:
            raise ValueError(f"sensitivity.keep_as must be fp32 or int16, got {self.keep_as!r}")


@dataclass
class SensitivityReport:
    reference: float  # float32 accuracy, percent
    drops: dict[str, float]  # layer -> points lost when only it is quantized
    kept: list[str]  # chosen layers, most sensitive first
    trail: list[tuple[list[str], float]]  # (kept layers, accuracy of the rest quantized) per step
    keep_as: str = "fp32"  # how the chosen layers run: "fp32" or "int16"

    @property
    def accuracy(self) -> float:
        return self.trail[-1][1]

    @property
    def keep_fp32(self) -> list[str]:
        return list(self.kept) if self.keep_as == "fp32" else []

    @property
    def int16(self) -> list[str]:
        return list(self.kept) if self.keep_as == "int16" else []

    def table(self) -> str:
        lines = [f"float32 accuracy {self.reference:.2f}%", "layer                          drop (points)"]
        for name, d in sorted(self.drops.items(), key=lambda kv: -kv[1]):
            lines.append(f"{name:30s} {d:+.2f}{'  ' + self.keep_as if name in self.kept else ''}")
        lines += [f"keep {kept or 'nothing'} in {self.keep_as}: {acc:.2f}%" for kept, acc in self.trail]
        return "\n".join(lines)


# ------------------------------------------------------------------------------ stateless functions


def layer_drops(layers: Sequence[str], accuracy: AccuracyFn, reference: float) -> dict[str, float]:
    """Points lost when only each layer is quantized: reference - accuracy([layer])."""
    return {name: reference - accuracy([name]) for name in layers}


def choose_fp32(drops: dict[str, float], accuracy_with_fp32: Callable[[list[str]], float], reference: float,
                budget: float, max_layers: int | None = None) -> tuple[list[str], list[tuple[list[str], float]]]:
    """Greedy mixed precision: keep the most sensitive layers in fp32 (or 16x8) until the loss is
    within budget.

    accuracy_with_fp32(kept): accuracy with every op quantized except the layers in `kept`, which
    run in fp32 (or 16x8).
    Returns (kept layers, [(kept, accuracy)] for every configuration measured). Ties in sensitivity
    go to the layer listed first.
    """
    order = sorted(drops, key=lambda n: -drops[n])
    limit = len(order) if max_layers is None else min(max_layers, len(order))
    kept: list[str] = []
    trail = [(list(kept), accuracy_with_fp32(kept))]
    while reference - trail[-1][1] > budget and len(kept) < limit:
        kept.append(order[len(kept)])
        trail.append((list(kept), accuracy_with_fp32(kept)))
    return kept, trail


def analyze(layers: Sequence[str], all_ops: Sequence[str], accuracy: AccuracyFn, reference: float,
            config: SensitivityConfig) -> SensitivityReport:
    """Sensitivity of each layer, then the layers to keep (in fp32, or 16x8 with keep_as int16) that
    bring the loss within the budget."""
    drops = layer_drops(layers, accuracy, reference)
    if config.keep_as == "int16":
        def with_kept(keep: list[str]) -> float:
            return accuracy(list(all_ops), int16=list(keep))
    else:
        def with_kept(keep: list[str]) -> float:
            return accuracy([op for op in all_ops if op not in keep])
    kept, trail = choose_fp32(drops, with_kept, reference, config.budget, config.max_fp32_layers)
    return SensitivityReport(reference, drops, kept, trail, config.keep_as)


# ----------------------------------------------------------------------------------- back ends


def torch_accuracy_fn(qm, data) -> AccuracyFn:
    """accuracy(ops, int16) of a calibrated `prepare_qat` model with only `ops` fake-quantized (the
    layers in `int16` with 16-bit outputs, see qat.set_quantized)."""
    from deepslim.compress.qat import set_quantized
    from deepslim.train import evaluate

    def accuracy(ops: Iterable[str], int16: Iterable[str] = ()) -> float:
        set_quantized(qm, list(ops), int16=list(int16))
        return evaluate(qm, data)

    return accuracy


def torch_sensitivity(model, calib_x: np.ndarray, data, config: SensitivityConfig, *,
                      weight_bits: int = 8) -> SensitivityReport:
    """Sensitivity analysis on the PyTorch fake-quant simulation with min/max calibration."""
    from deepslim.compress.layers import weight_layers
    from deepslim.compress.qat import calibrate, prepare_qat, quantizable_ops, set_quantized

    qm = prepare_qat(model, weight_bits=weight_bits)
    calibrate(qm, calib_x)
    data = (data[0][: config.samples], data[1][: config.samples])
    accuracy = torch_accuracy_fn(qm, data)
    reference = accuracy([])
    report = analyze(list(weight_layers(model)), quantizable_ops(qm), accuracy, reference, config)
    set_quantized(qm, None)
    return report


def graph_accuracy_fn(graph, calib: np.ndarray, data, *, method: str = "minmax", weight_bits: int = 8,
                      batch_size: int = 500) -> AccuracyFn:
    """accuracy(ops, int16) of the bit-exact integer reference (deepslim.quant): the fp32 IR graph
    (after optimize()) quantized with every other node in `keep_fp32` and the nodes in `int16` run
    16x8, run by run_quantized on `data`."""
    from deepslim.quant import quantize_graph, run_quantized

    x, y = data

    def accuracy(ops: Iterable[str], int16: Iterable[str] = ()) -> float:
        ops = set(ops)
        kept = [n.name for n in graph.nodes if n.name not in ops]
        qg = quantize_graph(graph, calib=calib, method=method, keep_fp32=kept, weight_bits=weight_bits,
                            int16=[n for n in int16 if n in ops])
        correct = 0
        for i in range(0, len(x), batch_size):
            out = run_quantized(qg, x[i:i + batch_size])
            out = out if isinstance(out, np.ndarray) else next(iter(out.values()))
            correct += int((out.argmax(axis=1) == y[i:i + batch_size]).sum())
        return 100.0 * correct / len(x)

    return accuracy
