"""The mobile zoo in the native runtime: each model, through the PyTorch front end and through an
ONNX export + the ONNX front end, matches PyTorch and ONNX Runtime within 1e-4 x max(1, max |ref|).
224x224 models run once at batch 1; the Fashion-MNIST variants at batch 1 and 4."""

import warnings

import numpy as np
import onnxruntime as ort
import pytest
import torch

from deepslim import zoo
from deepslim.format import write_dsm
from deepslim.frontends.onnx import from_onnx
from deepslim.frontends.torch import from_torch
from deepslim.ir.passes import optimize
from deepslim.runtime import Session

TOLERANCE = 1e-4
MOBILE = ["squeezenet1_1", "mobilenet_v1", "mobilenet_v2", "shufflenet_v2", "resnet18",
          "efficientnet_lite0", "mobilenet_v3_small", "seg_mobilenet_v2"]


def _close(actual, reference, what):
    bound = TOLERANCE * max(1.0, float(np.abs(reference).max()))
    diff = float(np.abs(actual - reference).max())
    assert actual.shape == reference.shape, f"{what}: shape {actual.shape} vs {reference.shape}"
    assert diff <= bound, f"{what}: max abs difference {diff:.3g} > {bound:.3g}"


def _randomize_batchnorm(model):
    """Non-trivial BatchNorm statistics, so folding them is actually tested."""
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.bias.data.copy_(torch.randn(m.num_features, generator=g) * 0.1)


def _check(name, batches, tmp_path):
    torch.manual_seed(0)
    model = zoo.get(name).eval()
    _randomize_batchnorm(model)
    shape = tuple(model.input_shape)
    dsm_torch = tmp_path / f"{name}_torch.dsm"
    write_dsm(optimize(from_torch(model, torch.zeros(1, *shape))), dsm_torch)
    onnx_path = tmp_path / f"{name}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, torch.zeros(1, *shape), str(onnx_path), dynamo=False, opset_version=17,
                          input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    dsm_onnx = tmp_path / f"{name}_onnx.dsm"
    write_dsm(optimize(from_onnx(onnx_path)), dsm_onnx)
    ort_session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    ours_torch, ours_onnx = Session(dsm_torch), Session(dsm_onnx)
    for batch in batches:
        x = torch.randn(batch, *shape)
        with torch.no_grad():
            ref_torch = model(x).numpy()
        ref_ort = ort_session.run(None, {"input": x.numpy()})[0]
        _close(ours_torch.run(x.numpy()), ref_torch, f"{name} (PyTorch front end) vs PyTorch, batch {batch}")
        _close(ours_onnx.run(x.numpy()), ref_ort, f"{name} (ONNX front end) vs ONNX Runtime, batch {batch}")


@pytest.mark.parametrize("name", MOBILE)
def test_224_model_matches_pytorch_and_onnxruntime(name, tmp_path):
    _check(name, [1], tmp_path)


@pytest.mark.parametrize("name", [f"{m}_fmnist" for m in MOBILE])
def test_small_variant_matches_at_batch_1_and_4(name, tmp_path):
    _check(name, [1, 4], tmp_path)


def test_convert_and_run_an_exported_mobilenet_v2(tmp_path, capsys):
    """`deepslim convert` + `deepslim run` on torch.onnx.export's MobileNetV2."""
    from deepslim.cli import main

    torch.manual_seed(0)
    model = zoo.get("mobilenet_v2").eval()
    onnx_path = tmp_path / "mobilenet_v2.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, torch.zeros(1, 3, 224, 224), str(onnx_path), dynamo=False, opset_version=13,
                          input_names=["input"], output_names=["output"])
    dsm = tmp_path / "mobilenet_v2.dsm"
    assert main(["convert", str(onnx_path), "-o", str(dsm)]) == 0
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", str(dsm), "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy")]) == 0
    reference = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    _close(np.load(tmp_path / "y.npy"), reference, "deepslim run vs ONNX Runtime")
    assert main(["run", str(dsm), "--input", str(tmp_path / "x.npy")]) == 0
    top1 = int(np.argmax(reference[0]))
    assert f"top-5 (class: score): {top1}:" in capsys.readouterr().out
