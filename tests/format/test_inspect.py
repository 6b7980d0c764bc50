"""deepslim inspect: graph listing and Deep-Compression-style size table."""

import numpy as np

from deepslim.format import encode_dsm, load_dsm
from deepslim.format.inspect import format_inspect, size_breakdown
from deepslim.ir import Encoding

from dsm_graphs import dense_net


def test_size_breakdown_columns(tmp_path):
    book = np.array([0.0, 1.0, -1.0, 0.5], np.float32)
    w = np.zeros((10, 100), np.float32)
    w[:, ::10] = book[1 + np.arange(100).reshape(10, 10) % 3]  # 10% dense, gaps of 9 zeros
    data, report = encode_dsm(dense_net(w, Encoding("sparse_rel", 4, book, 2, huffman=True)))
    graph, info = load_dsm(data)
    weight, bias = size_breakdown(info, graph)
    entries = 100  # gaps of 9 fit in 4 bits: no fillers
    assert weight.dense_bytes == 4000
    assert weight.pruned_bytes == 4 * entries + entries * 4 // 8
    assert weight.quantized_bytes == entries * 2 // 8 + entries * 4 // 8 + 16
    assert weight.stored_bytes == report.tensors[0].total_bytes
    assert weight.density == 10.0
    assert weight.ratio == 4000 / weight.stored_bytes
    assert bias.dense_bytes == bias.pruned_bytes == bias.quantized_bytes == bias.stored_bytes == 40
    path = tmp_path / "m.dsm"
    path.write_bytes(data)
    text = format_inspect(path)
    assert "dense      fc" in text and "activation=1" in text and "h [1, 10]" in text
    assert "fc.weight" in text and "10.0%" in text and "total" in text
    assert f"file: {len(data)} bytes" in text
