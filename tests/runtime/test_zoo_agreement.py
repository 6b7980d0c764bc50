"""Every zoo model, converted from PyTorch and written to .dsm, runs in the native runtime with the
same outputs as PyTorch (max abs difference <= 1e-4 x max(1, max abs reference))."""

import numpy as np
import pytest
import torch

from deepslim import zoo
from deepslim.compress import compress
from deepslim.format import write_dsm
from deepslim.frontends.torch import from_torch
from deepslim.runtime import Session

TOLERANCE = 1e-4
MODELS = ["lenet300", "lenet5", "facenet1m"]


def _close(actual: np.ndarray, reference: np.ndarray) -> None:
    bound = TOLERANCE * max(1.0, float(np.abs(reference).max()))
    diff = float(np.abs(actual - reference).max())
    assert diff <= bound, f"max abs difference {diff:.3g} > {bound:.3g}"


def _export(model: torch.nn.Module, path, encodings=None) -> None:
    example = torch.zeros(1, *model.input_shape)
    write_dsm(from_torch(model, example, encodings=encodings), path)


@pytest.mark.parametrize("name", MODELS)
def test_runtime_matches_pytorch_at_batch_1_and_3(name, tmp_path):
    torch.manual_seed(0)
    model = zoo.get(name).eval()
    _export(model, tmp_path / f"{name}.dsm")
    session = Session(tmp_path / f"{name}.dsm")
    assert session.input_shapes[0][0] == -1, "the batch dimension should be dynamic"
    for batch in (1, 3):
        x = torch.randn(batch, *model.input_shape)
        with torch.no_grad():
            reference = model(x).numpy()
        out = session.run(x.numpy())
        assert out.shape == reference.shape
        _close(out, reference)
        # rows are independent of each other
        _close(session.run(x[-1:].numpy())[0], reference[-1])


def test_compressed_model_runs_with_the_same_outputs(tmp_path):
    """Pruned + shared + Huffman-coded weights decode in the runtime to exactly what PyTorch uses."""
    torch.manual_seed(0)
    model = zoo.get("lenet5").eval()
    recipe = {
        "prune": {"sparsity": {"conv1": 0.3, "conv2": 0.8, "fc1": 0.95, "fc2": 0.8}, "iterations": 1, "epochs_per_iteration": 0},
        "kmeans": {"bits": {"conv": 8, "fc": 5}, "finetune_epochs": 0},
        "index_bits": {"conv": 8, "fc": 5},
        "huffman": True,
    }
    result = compress(model, recipe, progress=False)
    path = tmp_path / "lenet5_c.dsm"
    _export(result.model, path, result.encodings)
    x = torch.randn(4, *model.input_shape)
    with torch.no_grad():
        reference = result.model(x).numpy()
    _close(Session(path).run(x.numpy()), reference)
