"""Fake quantization in PyTorch that mirrors the int8 runtime (docs/format.md, "Quantized inference").

Activations: u8, asymmetric, per tensor. A real range (lo, hi) is first widened to hold 0.0, then
`scale = float32((hi - lo) / 255)`, `zero_point = clamp(round(-lo / scale), 0, 255)`
(deepslim.quant.params.choose_qparams, shared with the host quantizer), and a value becomes
`q = clamp(rint(x / scale) + zero_point, 0, 255)` (float32 division, round half to even), read back
as `(q - zero_point) * scale`.

Weights: i8, symmetric, per output channel (dim 0): `scale[o] = max|w[o]| / 127` (qmax = 7 for
int4 weights), `q = clamp(rint(w / scale), -qmax, qmax)`, in float64 as the host quantizer does.

Gradients pass straight through (the straight-through estimator): the gradient of a fake-quantized
activation is the incoming gradient where `rint(x / scale) + zero_point` lies in 0..255 and zero where
it was clamped; weights are never clamped, so their gradient is the identity.

The functions are stateless (tensor in, tensor out); `MinMaxObserver` and `FakeQuantAct` are the
modules that carry the running range during calibration and quantization-aware training.
"""

from __future__ import annotations

import math

import torch
from torch import nn

QMIN_U8, QMAX_U8 = 0, 255


# ------------------------------------------------------------------------------ stateless functions


def act_qparams(lo: float, hi: float) -> tuple[float, int]:
    """(scale, zero_point) of the u8 asymmetric scheme for the real range [lo, hi]: the host
    quantizer's own rule (`deepslim.quant.params.choose_qparams`), so both sides agree bit for bit.

    The range is widened to include 0.0 (zero padding and ReLU zeros stay exact); the scale is a
    float32 number; an empty range gets scale 1/255.
    """
    from deepslim.quant.params import choose_qparams

    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise ValueError(f"activation range must be finite with lo <= hi, got ({lo}, {hi})")
    return choose_qparams(lo, hi)


def quantize_u8(x: torch.Tensor, scale: float, zero_point: int) -> torch.Tensor:
    """The runtime's `quantize` op: clamp(rint(x / scale) + zero_point, 0, 255), as float32 integers."""
    s = torch.tensor(scale, dtype=torch.float32)
    return torch.clamp(torch.round(x / s) + zero_point, QMIN_U8, QMAX_U8)


class _FakeQuant(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale, zero_point, qmin, qmax):
        s = torch.tensor(scale, dtype=torch.float32)
        q = torch.round(x / s) + zero_point
        ctx.save_for_backward((q >= qmin) & (q <= qmax))
        return (torch.clamp(q, qmin, qmax) - zero_point) * s

    @staticmethod
    def backward(ctx, grad):
        (inside,) = ctx.saved_tensors
        return grad * inside, None, None, None, None


def fake_quant_u8(x: torch.Tensor, scale: float, zero_point: int) -> torch.Tensor:
    """quantize_u8 then dequantize, with the straight-through gradient (zero where clamped)."""
    return _FakeQuant.apply(x, float(scale), int(zero_point), QMIN_U8, QMAX_U8)


def fake_quant_i16(x: torch.Tensor, scale: float) -> torch.Tensor:
    """An i16 activation (symmetric, zero point 0): clamp(rint(x / scale), -32768, 32767) * scale,
    with the straight-through gradient of fake_quant_u8."""
    return _FakeQuant.apply(x, float(scale), 0, -32768, 32767)


def weight_scales(w: torch.Tensor, bits: int = 8) -> torch.Tensor:
    """Per-output-channel symmetric scales max|w[o]| / (2^(bits-1) - 1) in float64 (as the host
    quantizer computes them); an all-zero channel gets 1.0."""
    qmax = (1 << (bits - 1)) - 1
    amax = w.detach().abs().reshape(w.shape[0], -1).amax(dim=1).to(torch.float64)
    return torch.where(amax > 0, amax / qmax, torch.ones_like(amax))


def quantize_weight(w: torch.Tensor, bits: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """(q, scale): the integer weights (as float32) and their float64 per-channel scales, computed
    like `deepslim.quant.params.quantize_weights`."""
    qmax = (1 << (bits - 1)) - 1
    scale = weight_scales(w, bits)
    s = scale.reshape(-1, *([1] * (w.dim() - 1)))
    return torch.clamp(torch.round(w.detach().to(torch.float64) / s), -qmax, qmax).to(torch.float32), scale


class _FakeQuantWeight(torch.autograd.Function):
    @staticmethod
    def forward(ctx, w, bits):
        q, scale = quantize_weight(w, bits)
        return (q.to(torch.float64) * scale.reshape(-1, *([1] * (w.dim() - 1)))).to(w.dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def fake_quant_weight(w: torch.Tensor, bits: int = 8) -> torch.Tensor:
    """Per-channel symmetric fake quantization of a weight (dim 0 = output channels), STE gradient."""
    if bits not in (4, 8):
        raise ValueError(f"weight bits must be 8 or 4, got {bits}")
    return _FakeQuantWeight.apply(w, int(bits))


# --------------------------------------------------------------------------------- module state


class MinMaxObserver(nn.Module):
    """Running range of a tensor: the plain min/max over all batches (`averaging` None, calibration)
    or an exponential moving average `r = (1 - c) r + c r_batch` (QAT); the first batch sets it."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("lo", torch.tensor(0.0))
        self.register_buffer("hi", torch.tensor(0.0))
        self.register_buffer("count", torch.tensor(0, dtype=torch.long))

    @property
    def initialized(self) -> bool:
        return int(self.count) > 0

    @torch.no_grad()
    def update(self, x: torch.Tensor, averaging: float | None = None) -> None:
        lo, hi = x.min().float(), x.max().float()
        if not self.initialized:
            self.lo.copy_(lo)
            self.hi.copy_(hi)
        elif averaging is None:
            self.lo.copy_(torch.minimum(self.lo, lo))
            self.hi.copy_(torch.maximum(self.hi, hi))
        else:
            self.lo.mul_(1 - averaging).add_(averaging * lo)
            self.hi.mul_(1 - averaging).add_(averaging * hi)
        self.count += 1

    def range(self) -> tuple[float, float]:
        return float(self.lo), float(self.hi)


class FakeQuantAct(nn.Module):
    """Observer + u8 fake quantization of one activation (one IR value, `value_name`).

    Observes when (training and not frozen) or calibrating; fake-quantizes when enabled and the
    observer has seen data. `frozen` is a buffer so the freeze survives a state_dict round trip.
    """

    def __init__(self, value_name: str, averaging: float | None = 0.01) -> None:
        super().__init__()
        self.value_name = value_name
        self.averaging = averaging
        self.observer = MinMaxObserver()
        self.register_buffer("frozen", torch.tensor(False))
        self.enabled = True
        self.calibrating = False
        self.bits = 8  # 16: the value is an i16 activation (qat.set_quantized's int16 layers)

    def qparams(self) -> tuple[float, int]:
        return act_qparams(*self.observer.range())

    def i16_scale(self) -> float:
        from deepslim.quant.params import choose_qparams_i16

        return choose_qparams_i16(*self.observer.range())[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.calibrating:
            self.observer.update(x.detach(), None)
        elif self.training and not bool(self.frozen):
            self.observer.update(x.detach(), self.averaging)
        if self.enabled and not self.calibrating and self.observer.initialized:
            if self.bits == 16:
                return fake_quant_i16(x, self.i16_scale())
            return fake_quant_u8(x, *self.qparams())
        return x

    def extra_repr(self) -> str:
        return f"{self.value_name!r}, enabled={self.enabled}, bits={self.bits}, frozen={bool(self.frozen)}"
