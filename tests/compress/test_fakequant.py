import numpy as np
import pytest
import torch

from deepslim.compress.fakequant import (FakeQuantAct, MinMaxObserver, act_qparams, fake_quant_u8,
                                         fake_quant_weight, quantize_u8, quantize_weight)


from deepslim.quant.params import quantize_array, quantize_weights


def np_act_qparams(lo, hi):
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = np.float32((hi - lo) / 255)
    return float(scale), int(np.clip(np.rint(-lo / np.float64(scale)), 0, 255))


def np_quantize_u8(x, scale, zp):
    q = np.clip(np.rint(x / np.float32(scale)) + zp, 0, 255).astype(np.float32)
    assert np.array_equal(q, quantize_array(x, scale, zp))  # the host quantizer's own op
    return q


@pytest.mark.parametrize("lo,hi", [(-1.3, 2.7), (0.0, 6.0), (0.5, 3.0), (-4.0, -1.0), (-0.1, 0.001)])
def test_act_qparams_match_numpy_and_hold_zero(lo, hi):
    scale, zp = act_qparams(lo, hi)
    assert (scale, zp) == np_act_qparams(lo, hi)
    assert 0 <= zp <= 255
    # 0.0 is exactly representable: quantize(0) == zero_point
    assert float(quantize_u8(torch.zeros(1), scale, zp)) == zp


def test_act_qparams_edge_cases():
    assert act_qparams(0.0, 0.0) == (float(np.float32(1 / 255)), 0)
    assert act_qparams(0.0, 6.0)[1] == 0  # after ReLU the zero point is 0
    assert act_qparams(-6.0, 0.0)[1] == 255
    with pytest.raises(ValueError):
        act_qparams(float("nan"), 1.0)
    with pytest.raises(ValueError):
        act_qparams(2.0, 1.0)


def test_fake_quant_u8_equals_integer_formula():
    rng = np.random.default_rng(0)
    x = rng.normal(0, 2, size=(4, 3, 5, 5)).astype(np.float32)
    scale, zp = act_qparams(-1.5, 3.0)
    # values exactly at half steps round to even
    x.flat[:4] = np.array([0.5, 1.5, 2.5, -0.5], np.float32) * np.float32(scale)
    q = np_quantize_u8(x, scale, zp)
    assert np.array_equal(quantize_u8(torch.from_numpy(x), scale, zp).numpy(), q)
    expected = (q - zp) * np.float32(scale)
    got = fake_quant_u8(torch.from_numpy(x), scale, zp).numpy()
    assert np.array_equal(got, expected)
    assert len(np.unique(got)) <= 256


def test_fake_quant_u8_ste_gradient():
    scale, zp = act_qparams(-1.0, 1.0)
    x = torch.tensor([-3.0, -0.9, 0.0, 0.3, 0.99, 1.5, 10.0], requires_grad=True)
    fake_quant_u8(x, scale, zp).backward(torch.arange(1.0, 8.0))
    assert x.grad.tolist() == [0.0, 2.0, 3.0, 4.0, 5.0, 0.0, 0.0]


def test_weight_quant_per_channel_symmetric_matches_numpy():
    rng = np.random.default_rng(1)
    w = rng.normal(0, 0.1, size=(6, 3, 3, 3)).astype(np.float32)
    w[2] = 0.0  # an all-zero (pruned) channel
    q, scale = quantize_weight(torch.from_numpy(w))
    amax = np.abs(w).reshape(6, -1).max(axis=1)
    np_scale = np.where(amax > 0, amax.astype(np.float64) / 127, 1.0)
    np_q = np.clip(np.rint(w / np_scale[:, None, None, None]), -127, 127)
    assert np.array_equal(scale.numpy(), np_scale)
    assert np.array_equal(q.numpy(), np_q)
    host_q, host_scale = quantize_weights(w)  # the host quantizer agrees bit for bit
    assert np.array_equal(q.numpy(), host_q) and np.array_equal(scale.numpy(), host_scale)
    assert np.abs(q.numpy()).reshape(6, -1).max(axis=1).tolist() == [127, 127, 0, 127, 127, 127]
    fq = fake_quant_weight(torch.from_numpy(w)).numpy()
    assert np.array_equal(fq, (np_q * np_scale[:, None, None, None]).astype(np.float32))
    assert np.all(fq[2] == 0)


def test_weight_quant_4bit_and_identity_gradient():
    w = torch.tensor([[0.7, -0.35, 0.1], [2.0, 1.0, -0.2]], requires_grad=True)
    y = fake_quant_weight(w, bits=4)
    q = (y / (w.detach().abs().amax(1, keepdim=True) / 7)).round()
    assert q.abs().max() == 7 and len(torch.unique(q)) <= 15
    y.backward(torch.full_like(w, 3.0))
    assert torch.equal(w.grad, torch.full_like(w, 3.0))


def test_observer_minmax_and_ema():
    obs = MinMaxObserver()
    obs.update(torch.tensor([-1.0, 2.0]))
    obs.update(torch.tensor([-3.0, 1.0]))
    assert obs.range() == (-3.0, 2.0)
    ema = MinMaxObserver()
    ema.update(torch.tensor([0.0, 4.0]), 0.5)
    ema.update(torch.tensor([-2.0, 2.0]), 0.5)
    assert ema.range() == (-1.0, 3.0)


def test_fake_quant_act_observes_only_when_training_and_not_frozen():
    fq = FakeQuantAct("v", averaging=None)
    fq.eval()
    assert torch.equal(fq(torch.tensor([5.0])), torch.tensor([5.0]))  # nothing observed: identity
    assert not fq.observer.initialized
    fq.train()
    fq(torch.tensor([-1.0, 1.0]))
    fq.frozen.fill_(True)
    fq(torch.tensor([-10.0, 10.0]))
    assert fq.observer.range() == (-1.0, 1.0)
    y = fq(torch.tensor([-10.0, 0.5, 10.0]))
    scale, zp = act_qparams(-1.0, 1.0)
    assert torch.allclose(y, torch.tensor([(0 - zp) * scale, 0.5, (255 - zp) * scale]), atol=scale / 2)
    fq.calibrating = True  # calibration observes the float values and does not quantize
    assert torch.equal(fq(torch.tensor([-10.0, 3.0])), torch.tensor([-10.0, 3.0]))
    assert fq.observer.range() == (-10.0, 3.0)
