"""Fixed-point requantization (docs/format.md, "Quantized inference"): the only rounding step of
the integer pipeline, and how a real rescale factor becomes a multiplier and a shift.

    round_shift(v, n) = (v + 2^(n-1)) >> n          arithmetic shift, v int64, n in 1..62
    requant(acc, M, s) = round_shift(acc * M, 31 + s)

`quantize_multiplier(r)` picks (M, s) with M * 2^-(31+s) ~= r and M in [2^30, 2^31) whenever the
shift range -30..30 allows it; `quantize_multiplier(r, 15)` the multiple of 2^16 that a qconv2d /
qdense with i16 x needs (`requant_i16_input`). Needs numpy only.
"""

from __future__ import annotations

import math

import numpy as np

SHIFT_MIN, SHIFT_MAX = -30, 30
MULT_MAX = (1 << 31) - 1

__all__ = ["MULT_MAX", "SHIFT_MAX", "SHIFT_MIN", "quantize_multiplier", "quantize_multipliers",
           "requant", "requant_i16_input", "round_shift"]


def round_shift(v, n):
    """(v + 2^(n-1)) >> n on int64 (scalars or arrays; `n` may be an array broadcast against v)."""
    v = np.asarray(v, dtype=np.int64)
    n = np.asarray(n, dtype=np.int64)
    if np.any((n < 1) | (n > 62)):
        raise ValueError(f"round_shift: n must be in 1..62, got {n}")
    return (v + (np.int64(1) << (n - 1))) >> n


def requant(acc, multiplier, shift):
    """round_shift(acc * multiplier, 31 + shift), all int64 (acc int32 range, multiplier < 2^31)."""
    acc = np.asarray(acc, dtype=np.int64)
    return round_shift(acc * np.asarray(multiplier, dtype=np.int64), 31 + np.asarray(shift, dtype=np.int64))


def quantize_multiplier(r: float, significant_bits: int = 31) -> tuple[int, int]:
    """(M, s) with M * 2^-(31+s) closest to r >= 0, M = m * 2^(31 - significant_bits) with m in
    [2^(b-1), 2^b) (b = significant_bits) for s in (1 - b)..30; outside that the shift is clamped (a
    tiny r gets a small m, possibly 0; a huge r saturates m at 2^b - 1).

    b = 31 is the full multiplier; b = 15 the one of a qconv2d / qdense with i16 x, a multiple of 2^16
    with 15 + s >= 1, so requant(acc, M, s) = round_shift(acc * (M >> 16), 15 + s) in int64."""
    r = float(r)
    if not math.isfinite(r) or r < 0:
        raise ValueError(f"quantize_multiplier: ratio must be finite and >= 0, got {r}")
    if not 1 <= significant_bits <= 31:
        raise ValueError(f"quantize_multiplier: significant_bits must be in 1..31, got {significant_bits}")
    b = significant_bits
    shift_min = max(SHIFT_MIN, 1 - b)
    if r == 0.0:
        return 0, SHIFT_MAX
    mant, exp = math.frexp(r)  # r = mant * 2^exp, mant in [0.5, 1)
    s = -exp
    m = round(mant * (1 << b))
    if m == 1 << b:  # mant rounded up to 1.0
        m, s = 1 << (b - 1), s - 1
    if s > SHIFT_MAX:
        s = SHIFT_MAX
        m = round(math.ldexp(r, b + s))
    elif s < shift_min:
        s = shift_min
        m = min(round(math.ldexp(r, b + s)), (1 << b) - 1)
    return int(m) << (31 - b), int(s)


def quantize_multipliers(ratios, significant_bits: int = 31) -> tuple[np.ndarray, np.ndarray]:
    """quantize_multiplier of each ratio: (multipliers int32, shifts int32)."""
    pairs = [quantize_multiplier(r, significant_bits) for r in np.asarray(ratios, dtype=np.float64).ravel()]
    m = np.array([p[0] for p in pairs], dtype=np.int32)
    s = np.array([p[1] for p in pairs], dtype=np.int32)
    return m, s


def requant_i16_input(acc, multiplier, shift):
    """requant(acc, M, s) for a multiplier M that is a multiple of 2^16 and 15 + s >= 1 (qconv2d /
    qdense with i16 x): round_shift(acc * (M >> 16), 15 + s), exact in int64 for |acc| < 2^47,
    where acc * M itself would overflow it."""
    acc = np.asarray(acc, dtype=np.int64)
    m = np.asarray(multiplier, dtype=np.int64)
    if np.any(m % (1 << 16)):
        raise ValueError("an i16-input multiplier must be a multiple of 2^16")
    return round_shift(acc * (m >> 16), 15 + np.asarray(shift, dtype=np.int64))
