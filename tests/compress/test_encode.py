import math

import numpy as np
import pytest
import torch
from torch import nn

from deepslim.compress import encode
from deepslim.compress.kmeans import share


def test_relative_indices_with_fillers():
    keep = np.zeros(40, bool)
    keep[[0, 3, 4, 20, 39]] = True
    index, filler = encode.relative_indices(keep, 3)  # max index 7, filler advances 8
    # gaps 0, 2, 0, 15 (= filler + 7), 18 (= 2 fillers + 2)
    assert index.tolist() == [0, 2, 0, 7, 7, 7, 7, 2]
    assert filler.tolist() == [False, False, False, True, False, True, True, False]
    values = np.arange(1, 41, dtype=np.float32) * keep
    stored = np.zeros(len(index), np.float32)
    stored[~filler] = values[keep]
    np.testing.assert_array_equal(encode.decode_relative(index, stored, 40), values)


def numpy_huffman_bits(counts):
    """Total code bits by repeatedly merging the two smallest weights (each merge adds its sum)."""
    weights = sorted(c for c in counts if c > 0)
    if len(weights) == 1:
        return weights[0]
    total = 0
    while len(weights) > 1:
        a, b = weights.pop(0), weights.pop(0)
        total += a + b
        weights = sorted(weights + [a + b])
    return total


@pytest.mark.parametrize("counts", [[5], [1, 1], [10, 1, 1, 3, 0, 7], [1, 2, 4, 8, 16, 32], list(range(1, 40))])
def test_huffman_lengths(counts):
    lengths = encode.huffman_code_lengths(np.array(counts))
    assert all((c == 0) == (n == 0) for c, n in zip(counts, lengths))
    assert sum(2.0 ** -n for n in lengths if n) <= 1.0
    assert int((np.array(counts) * lengths).sum()) == numpy_huffman_bits(counts)


def test_huffman_stream_bytes():
    symbols = np.array([0] * 6 + [1] * 1 + [3] * 1)  # lengths 1, 2, 0, 2 -> 10 bits
    assert encode.huffman_stream_bytes(symbols) == 4 + 4 + 2


def pruned_shared(seed=0, shape=(40, 50), density=0.1, bits=4):
    w = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    cut = w.abs().flatten().kthvalue(int((1 - density) * w.numel())).values
    w[w.abs() <= cut] = 0
    codebook, labels, mask = share(w, bits)
    return torch.where(mask, codebook[labels], torch.tensor(0.0))


def test_encodings_values_exactly_in_codebook():
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.Flatten(), nn.Linear(40, 50))
    with torch.no_grad():
        model[2].weight.copy_(pruned_shared(shape=(50, 40)))
        model[0].weight.copy_(pruned_shared(1, (4, 1, 3, 3), density=0.7, bits=3))
    encs = encode.encodings(model, {"conv": 4, "fc": 5})
    assert set(encs) == {"0.weight", "2.weight"}  # biases stay dense raw float32
    for key, enc in encs.items():
        w = model.state_dict()[key].numpy()
        assert enc.codebook is not None and enc.codebook.dtype == np.float32
        assert np.isin(w[w != 0], enc.codebook).all()
        assert len(enc.codebook) <= 2 ** enc.cluster_bits
    fc = encs["2.weight"]
    assert fc.layout == "sparse_rel" and fc.index_bits == 5 and fc.huffman


def test_zero_in_codebook_only_when_fillers_need_it():
    w = np.zeros(100, np.float32)
    w[[0, 1, 99]] = [0.5, -0.5, 0.5]
    assert 0.0 in encode.codebook_for(w, "sparse_rel", 4)  # gap of 97 needs fillers
    assert 0.0 not in encode.codebook_for(w, "sparse_rel", 7)


def test_estimate_counts_streams():
    w = pruned_shared().numpy()
    enc = encode.best_encoding(w, 5)
    streams = encode.stream_bytes(w, enc)
    index, filler = encode.relative_indices(w.ravel() != 0, 5)
    counts = np.bincount(index)
    expected_index = 4 + len(counts) + math.ceil((counts * encode.huffman_code_lengths(counts)).sum() / 8)
    assert streams["indices"] == expected_index
    assert streams["codebook"] == 4 * len(enc.codebook)
    total = encode.estimate_bytes(w, enc, "w")
    assert total >= sum(streams.values())
    # raw dense float32 storage is far larger than the sparse, shared encoding
    assert encode.estimate_bytes(w, encode.Encoding(), "w") > 10 * total


def test_size_report_ratio():
    model = nn.Linear(400, 100)
    with torch.no_grad():
        model.weight.copy_(pruned_shared(shape=(100, 400), density=0.05))
    report = encode.size_report(model)
    assert report.params == 40_100 and report.fp32_bytes == 160_400
    assert report.tensors["bias"]["layout"] == "dense" and report.tensors["bias"]["streams"] == {"values": 400}
    assert report.ratio > 20
    assert report.file_bytes >= report.payload_bytes


def test_writer_accepts_encodings(tmp_path):
    dsm = pytest.importorskip("deepslim.format.dsm")
    frontend = pytest.importorskip("deepslim.frontends.torch")
    model = nn.Sequential(nn.Flatten(), nn.Linear(400, 100), nn.ReLU(), nn.Linear(100, 10))
    with torch.no_grad():
        model[1].weight.copy_(pruned_shared(shape=(100, 400), density=0.05))
        model[3].weight.copy_(pruned_shared(2, shape=(10, 100), density=0.3, bits=3))
    encs = encode.encodings(model)
    graph = frontend.from_torch(model, torch.zeros(1, 1, 20, 20), encodings=encs)
    path = tmp_path / "m.dsm"
    dsm.write_dsm(graph, path)
    report = encode.size_report(model, encs)
    # the estimate leaves out the header and the graph's ops only
    assert report.file_bytes <= path.stat().st_size <= report.file_bytes + 1024
    decoded = {v.name: v.data for v in dsm.read_dsm(path).constants()}
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(decoded[key], value.numpy())


def test_shared_biases_are_encoded_and_written_exactly(tmp_path):
    from deepslim.compress.kmeans import KMeansConfig, quantize

    dsm = pytest.importorskip("deepslim.format.dsm")
    frontend = pytest.importorskip("deepslim.frontends.torch")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(400, 300), nn.ReLU(), nn.Linear(300, 10))
    with torch.no_grad():
        model[1].weight.copy_(pruned_shared(shape=(300, 400), density=0.05))
        model[1].bias.normal_()
    quantize(model, KMeansConfig(bits={"fc": 4}, bias_bits=4, finetune_epochs=0), progress=False)
    assert set(encode.encodings(model)) == {"1.weight", "3.weight"}  # biases only when asked for
    encs = encode.encodings(model, biases=True)
    assert set(encs) == {"1.weight", "3.weight", "1.bias"}  # 10 shared biases: raw float32 is smaller
    assert encs["1.bias"].codebook is not None and len(encs["1.bias"].codebook) <= 15
    with_raw = encode.size_report(model, encode.encodings(model))
    shared = encode.size_report(model, encs)
    assert shared.file_bytes < with_raw.file_bytes - 800  # 300 raw biases are 1,200 bytes
    graph = frontend.from_torch(model, torch.zeros(1, 1, 20, 20), encodings=encs)
    path = tmp_path / "m.dsm"
    dsm.write_dsm(graph, path)
    assert shared.file_bytes <= path.stat().st_size <= shared.file_bytes + 1024
    decoded = {v.name: v.data for v in dsm.read_dsm(path).constants()}
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(decoded[key], value.numpy())
