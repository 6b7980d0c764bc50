"""tests/fixtures/ is up to date, readable, and its expected outputs are right."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from deepslim.format import DsmVersionError, read_dsm

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


def _tool():
    spec = importlib.util.spec_from_file_location("make_fixtures", ROOT / "tools" / "make_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fixtures_are_up_to_date():
    files = _tool().build_fixtures()
    assert sum(len(b) for b in files.values()) < 100_000
    for name, data in files.items():
        assert (FIXTURES / name).read_bytes() == data, f"{name} is stale: run tools/make_fixtures.py"


@pytest.mark.parametrize("name", ["tiny_dense", "tiny_compressed"])
def test_fixture_outputs_match_the_reference_on_the_decoded_graph(name):
    tool = _tool()
    graph = read_dsm(FIXTURES / f"{name}.dsm")
    x = np.fromfile(FIXTURES / f"{name}.input.bin", dtype="<f4").reshape(graph.values["input"].shape)
    expected = np.fromfile(FIXTURES / f"{name}.output.bin", dtype="<f4")
    np.testing.assert_array_equal(tool.run_reference(graph, x).ravel(), expected)
    assert abs(expected.sum() - 1) < 1e-5  # a softmax


def test_bad_version_fixture_is_rejected():
    with pytest.raises(DsmVersionError, match="version 2 .*version 1"):
        read_dsm(FIXTURES / "bad_version.dsm")


def test_reference_forward_matches_torch():
    torch = pytest.importorskip("torch")
    tool = _tool()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 9, 7))
    w = rng.standard_normal((6, 2, 3, 2))
    b = rng.standard_normal(6)
    ours = tool.conv2d(x, w, b, strides=(2, 1), pads=(1, 0, 2, 1), dilations=(1, 2), group=2)
    xt = torch.nn.functional.pad(torch.tensor(x), (0, 1, 1, 2))
    theirs = torch.nn.functional.conv2d(xt, torch.tensor(w), torch.tensor(b), stride=(2, 1), dilation=(1, 2), groups=2)
    np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-10, atol=1e-10)
    pooled = tool.maxpool2d(x, kernel=(3, 2), strides=(2, 2), pads=(1, 1, 1, 1))
    theirs = torch.nn.functional.max_pool2d(torch.tensor(x), (3, 2), (2, 2), padding=(1, 1))
    np.testing.assert_array_equal(pooled, theirs.numpy())
