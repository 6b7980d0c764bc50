"""A recipe with a `quantize:` section ends in an int8 .dsm: prune -> QAT -> quantize_graph, pruned
weights stored sparse, run by the runtime bit for bit as the integer reference."""

import numpy as np
import pytest
import torch

from deepslim import zoo
from deepslim.compress import load_recipe
from deepslim.format import load_dsm, read_dsm
from deepslim.quant import run_quantized
from deepslim.quant.fallback import read_report, runtime_available
from deepslim.workflow import compress_and_export


def _data(n, seed):
    """Synthetic 28x28 'images' whose class is the brightest of ten horizontal bands."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 10, n)
    x = rng.random((n, 1, 28, 28), dtype=np.float32) * 0.5
    for i, c in enumerate(y):
        x[i, 0, 2 * c + 4 : 2 * c + 6] += 1.0
    return x, y.astype(np.int64)


RECIPE = {
    "prune": {"sparsity": {"fc1": 0.8, "fc2": 0.6}, "iterations": 1, "epochs_per_iteration": 1,
              "train": {"batch_size": 64}},
    "quantize": {"calib_samples": 128, "qat": {"epochs": 1, "train": {"lr": 1e-3, "batch_size": 64}}},
}


@pytest.fixture(scope="module")
def compressed(tmp_path_factory):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = zoo.get("lenet300")
    splits = {"train": _data(512, 0), "val": _data(128, 1), "test": _data(128, 2)}
    path = tmp_path_factory.mktemp("int8") / "lenet300_int8.dsm"
    result, report, fallback = compress_and_export(model, load_recipe(RECIPE), splits, path, progress=False)
    return result, path, splits, fallback


def test_recipe_with_quantize_writes_an_int8_dsm(compressed):
    result, path, splits, fallback = compressed
    assert fallback is None
    graph, info = load_dsm(path)
    ops = [n.op for n in graph.nodes]
    assert ops.count("qdense") == 3 and "dense" not in ops
    assert ops.count("quantize") == 1 and ops.count("dequantize") == 1 and ops[-1] == "dequantize"
    # pruned weights: i8, exactly as sparse as the compressed model, stored sparse_rel where smaller
    for layer in ("fc1", "fc2"):
        w = graph.values[f"{layer}.weight"]
        assert w.dtype == "i8"
        expected_zeros = (result.model.get_submodule(layer).weight.detach().numpy() == 0).mean()
        assert (w.data == 0).mean() >= expected_zeros
    fc1 = next(t for t in info.tensors if t.name == "fc1.weight")
    assert fc1.layout == "sparse_rel"
    # the integer reference classifies the synthetic data as well as the float model
    x, y = splits["test"]
    assert (run_quantized(graph, x).argmax(1) == y).mean() > 0.8


def test_the_runtime_runs_it_bit_exactly(compressed):
    if runtime_available() is not None:
        pytest.skip("native runtime not built")
    from deepslim.runtime import Session

    _, path, splits, _ = compressed
    x = splits["test"][0]
    with Session(path) as session:
        out = session.run(x)
    np.testing.assert_array_equal(out, run_quantized(read_dsm(path), x))


def test_measured_fallback_through_the_recipe_path(compressed, tmp_path, monkeypatch):
    """fallback='measure' with an injected timer: fc2 is slower in int8 and stays fp32."""
    from deepslim.quant import fallback as fb
    from deepslim.workflow import export_quantized

    def timer(graph, x, threads):
        return {n.name: 5.0 if (n.name, n.op) == ("fc2", "qdense") else 1.0 if not n.op.startswith("q") else 0.1
                for n in graph.nodes}

    monkeypatch.setattr(fb, "profile_graph", timer)
    result, _, splits, _ = compressed
    path = tmp_path / "fb.dsm"
    _, report = export_quantized(result.model, result.quantize, path, result.encodings, fallback="measure",
                                 progress=False)
    assert report.keep_fp32 == ["fc2"]
    graph = read_dsm(path)
    assert {n.name: n.op for n in graph.nodes}["fc2"] == "dense"
    assert read_report(graph).keep_fp32 == ["fc2"]
    with pytest.raises(ValueError, match="fallback must be"):
        export_quantized(result.model, result.quantize, path, fallback="always")
