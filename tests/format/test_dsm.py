"""write_dsm / read_dsm round trips over every encoding combination, and the write report."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deepslim.format import DsmFormatError, encode_dsm, load_dsm, read_dsm, read_dsm_info, write_dsm
from deepslim.ir import Encoding, Graph, Value

from dsm_graphs import dense_net


def _weights(rng, shape, density, codebook):
    if codebook is None:
        w = rng.standard_normal(shape).astype(np.float32)
    else:
        w = codebook[rng.integers(0, len(codebook), shape)]
    return (w * (rng.random(shape) < density)).astype(np.float32)


@settings(max_examples=60, deadline=None)
@given(
    layout=st.sampled_from(["dense", "sparse_rel"]),
    use_codebook=st.booleans(),
    huffman=st.booleans(),
    index_bits=st.integers(1, 16),
    cluster_bits=st.integers(1, 8),
    m=st.integers(1, 20),
    k=st.integers(1, 70),
    density=st.sampled_from([0.0, 0.02, 0.3, 1.0]),
    seed=st.integers(0, 2**32 - 1),
)
def test_round_trip_every_encoding(layout, use_codebook, huffman, index_bits, cluster_bits, m, k, density, seed):
    rng = np.random.default_rng(seed)
    codebook = None
    if use_codebook:
        size = int(rng.integers(1, (1 << cluster_bits) + 1))
        codebook = np.unique(rng.standard_normal(size).astype(np.float32))
        codebook[0] = 0.0  # dense tensors store their zeros through the codebook too
    w = _weights(rng, (m, k), density, codebook)
    enc = Encoding(layout, index_bits if layout == "sparse_rel" else 0, codebook,
                   cluster_bits if use_codebook else 0, huffman)
    data, report = encode_dsm(dense_net(w, enc))
    g = read_dsm(data)
    np.testing.assert_array_equal(g.values["fc.weight"].data, w)
    np.testing.assert_array_equal(g.values["fc.bias"].data, np.linspace(-1, 1, m, dtype=np.float32))
    got = g.values["fc.weight"].encoding
    assert (got.layout, got.index_bits, got.cluster_bits) == (enc.layout, enc.index_bits, enc.cluster_bits)
    if use_codebook:
        np.testing.assert_array_equal(got.codebook, codebook)
    else:
        assert got.codebook is None
    assert report.file_size == len(data)
    t = report.tensors[0]
    assert (t.name, t.shape, t.elements, t.nonzeros) == ("fc.weight", (m, k), m * k, int(np.count_nonzero(w)))
    assert t.total_bytes == sum(t.stream_bytes.values())


def test_graph_structure_round_trips(tmp_path):
    rng = np.random.default_rng(1)
    g = dense_net(rng.standard_normal((3, 5)).astype(np.float32))
    report = write_dsm(g, tmp_path / "m.dsm")
    assert report.path.endswith("m.dsm") and report.file_size == (tmp_path / "m.dsm").stat().st_size
    back = read_dsm(tmp_path / "m.dsm")
    assert back.inputs == ["x"] and back.outputs == ["y"]
    assert [(n.op, n.name, n.inputs, n.outputs, n.attrs) for n in back.nodes] == [
        ("dense", "fc", ["x", "fc.weight", "fc.bias"], ["h"], {"activation": 1}),
        ("softmax", "prob", ["h"], ["y"], {"axis": -1}),
    ]
    shapes = {n: v.shape for n, v in g.values.items()}
    shapes.update(h=(1, 3), y=(1, 3))  # activations are stored at batch 1
    assert {n: v.shape for n, v in back.values.items()} == shapes


def test_huffman_is_used_only_when_smaller():
    rng = np.random.default_rng(2)
    book = np.array([0.0, 1.0, -1.0, 2.0], dtype=np.float32)
    skewed = book[np.minimum(rng.geometric(0.7, (64, 64)) - 1, 3)]
    uniform = book[rng.integers(0, 4, (64, 64))]
    for w, expect in ((skewed, "huffman"), (uniform, "bitpack")):
        data, _ = encode_dsm(dense_net(w, Encoding("dense", 0, book, 2, huffman=True)))
        assert read_dsm_info(data).tensors[0].stream("values").codec == expect


def test_streams_are_aligned_and_sparse_fillers_reported():
    w = np.zeros((2, 40), dtype=np.float32)
    w[0, 0], w[1, 39] = 1.5, -2.0  # a gap of 78 zeros with 3-bit indices: 9 fillers
    data, report = encode_dsm(dense_net(w, Encoding("sparse_rel", 3)))
    assert report.tensors[0].fillers == 9 and report.tensors[0].nonzeros == 2
    info = read_dsm_info(data)
    assert all(s.offset % 64 == 0 for t in info.tensors for s in t.streams)
    assert info.tensors[0].entry_count == 11
    assert "sparse_rel(3b)" in report.tensors[0].encoding


def test_codebook_gets_zero_appended_for_fillers():
    w = np.zeros((1, 100), dtype=np.float32)
    w[0, 99] = 0.5
    book = np.array([0.5, -0.5], dtype=np.float32)
    graph, _ = load_dsm(encode_dsm(dense_net(w, Encoding("sparse_rel", 2, book, 2)))[0])
    assert graph.values["fc.weight"].encoding.codebook.tolist() == [0.5, -0.5, 0.0]
    np.testing.assert_array_equal(graph.values["fc.weight"].data, w)


def test_writer_errors_name_the_tensor():
    w = np.zeros((1, 100), dtype=np.float32)
    w[0, 99] = 0.5
    full = np.array([0.5, -0.5], dtype=np.float32)
    with pytest.raises(DsmFormatError, match="'fc.weight'.*no 0.0 and no room"):
        encode_dsm(dense_net(w, Encoding("sparse_rel", 2, full, 1)))
    with pytest.raises(DsmFormatError, match="'fc.weight': value 0.25"):
        encode_dsm(dense_net(np.full((2, 2), 0.25, np.float32), Encoding("dense", 0, full, 1)))


def test_writer_rejects_invalid_graphs():
    g = dense_net(np.ones((2, 2), np.float32))
    g.nodes.reverse()
    with pytest.raises(DsmFormatError, match="reads 'h' before it is produced"):
        encode_dsm(g)
    g = dense_net(np.ones((2, 2), np.float32))
    g.nodes[1].attrs["bogus"] = 1
    with pytest.raises(DsmFormatError, match="unknown attribute 'bogus'"):
        encode_dsm(g)
    g = Graph()
    g.add_value(Value("x", (1, 4, 4, 4)))
    g.add_value(Value("y", (1, 4, 2, 2)))
    g.add_node("maxpool2d", "pool", ["x"], ["y"])
    g.inputs, g.outputs = ["x"], ["y"]
    with pytest.raises(DsmFormatError, match="'kernel' is required"):
        encode_dsm(g)
