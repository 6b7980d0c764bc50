"""Quantization parameters: u8 asymmetric and i16 symmetric per-tensor activations, i8 symmetric
per-channel weights, i32 biases (docs/format.md, "Quantized inference")."""

from __future__ import annotations

import numpy as np

I16_MIN, I16_MAX = -32768, 32767
Q_RANGES = {"u8": (0, 255), "i16": (I16_MIN, I16_MAX)}  # the values of a quantized activation

__all__ = ["I16_MAX", "I16_MIN", "Q_RANGES", "choose_qparams", "choose_qparams_i16", "quantize_bias",
           "quantize_weights", "quantize_array", "dequantize_array"]


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


def choose_qparams_i16(lo: float, hi: float) -> tuple[float, int]:
    """(scale, 0) of i16 (symmetric) for the real range [lo, hi]: scale = max(|lo|, |hi|) / 32767 as a
    float32 number; an empty range gets scale 1/32767."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ValueError(f"range [{lo}, {hi}] is not finite")
    scale = float(np.float32(max(abs(float(lo)), abs(float(hi))) / I16_MAX))
    if scale <= 0.0 or not np.isfinite(scale):
        return float(np.float32(1.0 / I16_MAX)), 0
    return scale, 0


def quantize_array(x: np.ndarray, scale: float, zero_point: int, dtype: str = "u8") -> np.ndarray:
    """The `quantize` op: clamp(rint(x / scale) + zero_point, 0, 255) in float32 (u8), or
    clamp(rint(x / scale), -32768, 32767) (i16, zero_point 0)."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        q = np.rint(x / np.float32(scale)) + np.float32(zero_point)
    q = np.nan_to_num(q, nan=float(zero_point))
    if dtype == "i16":
        return np.clip(q, I16_MIN, I16_MAX).astype(np.int16)
    return np.clip(q, 0, 255).astype(np.uint8)


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
