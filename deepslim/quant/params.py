"""Quantization parameters: u8 asymmetric per-tensor activations, i8 symmetric per-channel weights,
i32 biases (docs/format.md, "Quantized inference (int8)")."""

from __future__ import annotations

import numpy as np

__all__ = ["choose_qparams", "quantize_bias", "quantize_weights", "quantize_array", "dequantize_array"]


def choose_qparams(lo: float, hi: float) -> tuple[float, int]:
    """(scale, zero_point) of u8 for the real range [lo, hi], widened to include 0 so that 0 is
    exact. The scale is a float32 number (as stored in the file); an empty range gets scale 1/255."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ValueError(f"range [{lo}, {hi}] is not finite")
    scale = float(np.float32((hi - lo) / 255.0))
    if scale <= 0.0 or not np.isfinite(scale):
        return float(np.float32(1.0 / 255.0)), 0
    zp = int(np.clip(round(-lo / scale), 0, 255))
    return scale, zp


def quantize_array(x: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """The `quantize` op: clamp(rint(x / scale) + zero_point, 0, 255) in float32."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        q = np.rint(x / np.float32(scale)) + np.float32(zero_point)
    return np.clip(np.nan_to_num(q, nan=float(zero_point)), 0, 255).astype(np.uint8)


def dequantize_array(q: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """The `dequantize` op: (q - zero_point) * scale in float32."""
    return (np.asarray(q).astype(np.float32) - np.float32(zero_point)) * np.float32(scale)


def quantize_weights(w: np.ndarray, bits: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-output-channel (axis 0) quantization: scale[o] = max|w[o]| / qmax with
    qmax = 2^(bits-1) - 1 (127, or 7 for int4); q = clamp(rint(w / scale), -qmax, qmax), int8.
    An all-zero channel gets scale 1 (its q is 0 whatever the scale; avoids dividing by zero)."""
    if bits not in (4, 8):
        raise ValueError(f"weight bits must be 8 or 4, got {bits}")
    qmax = (1 << (bits - 1)) - 1
    w = np.asarray(w, dtype=np.float64)
    flat = w.reshape(len(w), -1)
    amax = np.abs(flat).max(axis=1)
    scale = np.where(amax > 0, amax / qmax, 1.0)
    q = np.clip(np.rint(flat / scale[:, None]), -qmax, qmax).astype(np.int8)
    return q.reshape(w.shape), scale


def quantize_bias(b: np.ndarray | None, x_scale: float, w_scale: np.ndarray) -> np.ndarray:
    """round(b / (x_scale * w_scale[o])) saturated to int32 (zeros when there is no bias)."""
    if b is None:
        return np.zeros(len(w_scale), dtype=np.int32)
    q = np.rint(np.asarray(b, dtype=np.float64) / (x_scale * np.asarray(w_scale, dtype=np.float64)))
    return np.clip(q, -(2**31), 2**31 - 1).astype(np.int32)
