"""Fixed-point requantization helpers against exact Python integer arithmetic."""

import math
from fractions import Fraction

import numpy as np
import pytest

from deepslim.quant.fixedpoint import quantize_multiplier, quantize_multipliers, requant, round_shift


def _exact_round_shift(v: int, n: int) -> int:
    return (v + (1 << (n - 1))) >> n  # Python ints: unbounded, >> floors


def test_round_shift_matches_python_integers_on_every_shift():
    rng = np.random.default_rng(0)
    for n in range(1, 63):
        limit = (1 << 62) - (1 << (n - 1))  # v + 2^(n-1) must not overflow int64
        edges = [0, 1, -1, (1 << (n - 1)), -(1 << (n - 1)), (1 << (n - 1)) - 1, -(1 << (n - 1)) + 1,
                 3 << (n - 1), -(3 << (n - 1)), limit, -limit]
        edges = [e for e in edges if -limit <= e <= limit]
        v = np.concatenate([np.array(edges, dtype=np.int64),
                            rng.integers(-limit, limit, 300, dtype=np.int64, endpoint=True)])
        got = round_shift(v, n)
        want = np.array([_exact_round_shift(int(x), n) for x in v], dtype=np.int64)
        np.testing.assert_array_equal(got, want, err_msg=f"n = {n}")


def test_round_shift_rounds_halves_up():
    assert round_shift(np.array([1, 3, -1, -3, 5]), 1).tolist() == [1, 2, 0, -1, 3]  # 0.5->1, 1.5->2, -0.5->0
    assert round_shift(-5, 2) == -1  # -1.25
    assert round_shift(-6, 2) == -1  # -1.5 rounds towards +inf


def test_round_shift_rejects_out_of_range_shifts():
    for n in (0, 63):
        with pytest.raises(ValueError):
            round_shift(1, n)


@pytest.mark.parametrize("r", [1e-9, 2**-31, 0.001, 0.1234, 0.5, 0.75, 0.999999999, 1.0, 1.5, 123.456, 2**20])
def test_quantize_multiplier_is_normalised_and_close(r):
    m, s = quantize_multiplier(r)
    assert -30 <= s <= 30
    assert (1 << 30) <= m < (1 << 31)
    approx = Fraction(m, 1 << (31 + s)) if 31 + s >= 0 else Fraction(m * (1 << -(31 + s)))
    assert abs(float(approx) - r) <= r * 2**-30


def test_quantize_multiplier_clamps_the_shift():
    m, s = quantize_multiplier(1e-12)  # needs s > 30
    assert s == 30 and m == round(1e-12 * 2**61) and m < 1 << 30
    assert quantize_multiplier(2.0**40) == ((1 << 31) - 1, -30)  # saturates
    assert quantize_multiplier(0.0) == (0, 30)
    for bad in (-1.0, math.inf, math.nan):
        with pytest.raises(ValueError):
            quantize_multiplier(bad)


def test_requant_applies_the_ratio():
    rng = np.random.default_rng(1)
    ratios = rng.uniform(1e-4, 4.0, 50)
    m, s = quantize_multipliers(ratios)
    acc = rng.integers(-(2**31) + 1, 2**31 - 1, (1000, 1), dtype=np.int64)
    got = requant(acc, m[None, :].astype(np.int64), s[None, :].astype(np.int64))
    want = np.array([[_exact_round_shift(int(a) * int(mm), 31 + int(ss)) for mm, ss in zip(m, s)] for a in acc[:, 0]])
    np.testing.assert_array_equal(got, want)
    assert np.all(np.abs(got - acc * ratios) <= 1 + np.abs(acc) * ratios * 2**-29)
