"""Calibration methods on synthetic distributions with known answers, and statistics of a graph."""

import numpy as np
import pytest

from deepslim.ir import Graph, Value
from deepslim.quant.calibrate import Stats, calibrate_graph, collect_stats, kl_threshold, range_from_samples
from deepslim.quant.params import choose_qparams, quantize_bias, quantize_weights

RNG = np.random.default_rng(0)
GAUSS = RNG.standard_normal(200_000)
WITH_OUTLIERS = np.concatenate([GAUSS, np.full(20, 100.0)])


def test_minmax_is_the_observed_range():
    assert range_from_samples(WITH_OUTLIERS, "minmax") == (WITH_OUTLIERS.min(), 100.0)


def test_kl_on_a_gaussian_with_outliers_clips_below_the_outlier():
    lo, hi = range_from_samples(WITH_OUTLIERS, "kl")
    assert 3.0 < hi < 10.0  # well below the outliers at 100, above most of the Gaussian mass
    assert lo == pytest.approx(WITH_OUTLIERS.min())  # the negative side has no outlier to clip


def test_kl_keeps_a_uniform_distribution_whole():
    lo, hi = range_from_samples(RNG.uniform(0, 5, 100_000), "kl")
    assert lo >= 0 and hi > 4.8


def test_stats_count_exact_zeros_apart_from_the_abs_histogram():
    x = np.concatenate([np.zeros(300), RNG.uniform(-1, 2, 700)])
    s = Stats(float(x.min()), float(x.max()))
    s.add_histograms(x)
    s.add_histograms(x)
    assert s.zeros == 600 and s.abs_hist.sum() == 1400 and s.hist.sum() == 2000


def test_kl_on_relu_outputs_is_not_driven_by_the_exact_zeros():
    # Half the values are exact zeros (quantized exactly); the rest a half-normal, whose KL threshold
    # alone is ~4.3. Counted in the first bin, the zeros pulled T down to 1.8.
    relu = np.maximum(RNG.standard_normal(200_000), 0)
    lo, hi = range_from_samples(relu, "kl")
    assert lo == 0 and 3.5 < hi <= relu.max()
    assert hi == pytest.approx(range_from_samples(relu, "mse")[1], rel=0.1)


@pytest.mark.parametrize("sd, spike", [(2.0, 0.0), (4.0, 0.0), (0.5, 0.01)])
def test_kl_on_relu6_outputs_keeps_the_spike_at_6(sd, spike):
    # ReLU6 of a Gaussian (zeros, a body, a point mass at 6), or of an exponential body plus 1% at 6:
    # clipping the point mass at 6 costs far more than the rounding it saves. Zeros counted in the
    # first bin gave T = 3.7 for sd 2.
    body = RNG.normal(0, sd, 200_000) if spike == 0 else RNG.exponential(sd, 200_000)
    x = np.concatenate([np.clip(body, 0, 6), np.full(int(spike * 200_000), 6.0)])
    lo, hi = range_from_samples(x, "kl")
    assert lo == x.min() and hi == 6.0


def test_kl_clips_at_most_max_clipped_of_the_values():
    s = Stats(float(WITH_OUTLIERS.min()), 100.0)
    s.add_histograms(WITH_OUTLIERS)
    # The 20 outliers at 100 are 0.01% of the values: clipped under the default 1% bound, kept
    # when no clipping is allowed.
    assert kl_threshold(s.abs_hist, s.absmax) < 10.0
    assert kl_threshold(s.abs_hist, s.absmax, max_clipped=0.0) == 100.0
    for x in (RNG.exponential(1.0, 100_000), np.abs(RNG.standard_cauchy(100_000))):
        s = Stats(0.0, float(x.max()))
        s.add_histograms(x)
        t = kl_threshold(s.abs_hist, s.absmax, levels=255, max_clipped=0.001)
        assert np.mean(x > t) <= 0.001 + 1e-9


def test_percentile_of_a_uniform_distribution():
    x = RNG.uniform(-1, 3, 400_000)
    lo, hi = range_from_samples(x, "percentile", percentile=99.0)
    assert lo == pytest.approx(-1 + 0.04, abs=0.01) and hi == pytest.approx(3 - 0.04, abs=0.01)


def test_mse_clips_a_far_tail_and_keeps_a_uniform_range():
    laplace = RNG.laplace(size=200_000)  # a long tail: its rare far values cost less clipped
    lo, hi = range_from_samples(laplace, "mse")
    assert laplace.min() <= lo < hi <= laplace.max()
    assert hi - lo < 0.9 * (laplace.max() - laplace.min()) and hi - lo > 10
    lo, hi = range_from_samples(RNG.uniform(-2, 2, 100_000), "mse")
    assert lo < -1.9 and hi > 1.9


def test_unknown_method_is_refused():
    with pytest.raises(ValueError, match="unknown calibration method"):
        range_from_samples(GAUSS, "median")


def test_qparams_include_zero_and_map_it_exactly():
    scale, zp = choose_qparams(0.5, 2.0)  # widened to [0, 2]
    assert zp == 0 and scale == pytest.approx(2 / 255)
    scale, zp = choose_qparams(-1.0, 3.0)
    assert zp == round(1.0 / scale) and scale == np.float32(4 / 255)
    assert choose_qparams(0.0, 0.0) == (np.float32(1 / 255), 0)


def test_weights_per_channel_zero_channel_and_int4():
    w = np.array([[0.5, -1.0, 0.25], [0.0, 0.0, 0.0], [2.0, 1.0, -2.0]], dtype=np.float32)
    q, s = quantize_weights(w)
    assert s.tolist() == [1 / 127, 1.0, 2 / 127]
    assert q.tolist() == [[64, -127, 32], [0, 0, 0], [127, 64, -127]]
    q4, s4 = quantize_weights(w, bits=4)
    assert q4.min() >= -7 and q4.max() <= 7 and q4[0].tolist() == [4, -7, 2]
    b = quantize_bias(np.array([1.0, 1e12, -3.0]), 0.01, s)
    assert b.tolist() == [12700, 2**31 - 1, -19050]


def test_collect_stats_sees_every_value():
    g = Graph()
    g.add_value(Value("x", (-1, 3)))
    g.add_value(Value("h", (-1, 3)))
    g.add_value(Value("y", (-1, 3)))
    g.add_constant("w", np.eye(3, dtype=np.float32) * 2)
    g.add_node("dense", "fc", ["x", "w"], ["h"])
    g.add_node("relu", "r", ["h"], ["y"])
    g.inputs, g.outputs = ["x"], ["y"]
    x = np.array([[-1, 0, 2], [3, -4, 1]], dtype=np.float32)
    stats = collect_stats(g, x, batch=1)
    assert (stats["x"].lo, stats["x"].hi) == (-4, 3)
    assert (stats["h"].lo, stats["h"].hi) == (-8, 6)
    assert (stats["y"].lo, stats["y"].hi) == (0, 6)
    assert stats["h"].hist.sum() == 6
    assert calibrate_graph(g, x)["y"] == (0, 6)
