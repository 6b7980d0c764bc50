"""Integer dtypes of the .dsm format (i8, u8, i16, i32): round trips, the value codecs the writer picks
(raw, bitpack at the narrowest width, Huffman), and what the reader and writer reject."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deepslim.format import DsmFormatError, encode_dsm, load_dsm
from deepslim.ir import Encoding, Graph, Value

from dsm_graphs import rebuild


def _graph(**constants) -> Graph:
    """x (1, 4) -> relu -> y, plus the given constants (name -> (dtype, array, Encoding))."""
    g = Graph()
    g.add_value(Value("x", (-1, 4)))
    g.add_value(Value("y", (-1, 4)))
    g.add_node("relu", "r", ["x"], ["y"])
    for name, (dtype, data, enc) in constants.items():
        g.add_value(Value(name, tuple(data.shape), dtype, data, enc or Encoding()))
    g.inputs, g.outputs = ["x"], ["y"]
    return g


def _round_trip(dtype, data, enc=None):
    data_bytes, report = encode_dsm(_graph(t=(dtype, data, enc)))
    graph, info = load_dsm(data_bytes)
    return graph.values["t"], info.tensors[0], data_bytes


@settings(max_examples=40, deadline=None)
@given(
    dtype=st.sampled_from(["i8", "u8", "i16", "i32"]),
    layout=st.sampled_from(["dense", "sparse_rel"]),
    huffman=st.booleans(),
    bits=st.integers(1, 8),
    density=st.floats(0.0, 1.0),
    shape=st.lists(st.integers(1, 9), min_size=1, max_size=3),
    seed=st.integers(0, 2**16),
)
def test_integer_tensors_round_trip_exactly(dtype, layout, huffman, bits, density, shape, seed):
    rng = np.random.default_rng(seed)
    if dtype == "i8":
        data = rng.integers(-(1 << (bits - 1)), 1 << (bits - 1), shape)
    elif dtype == "u8":
        data = rng.integers(0, 1 << bits, shape)
    elif dtype == "i16":
        data = rng.integers(-(2**15), 2**15, shape)
    else:
        data = rng.integers(-(2**31), 2**31, shape, dtype=np.int64)
    data = (data * (rng.random(shape) < density)).astype(np.int64)
    enc = Encoding(layout, index_bits=3 if layout == "sparse_rel" else 0, huffman=huffman)
    value, record, _ = _round_trip(dtype, data, enc)
    assert value.dtype == dtype and record.dtype == dtype
    assert value.data.dtype == {"i8": np.int8, "u8": np.uint8, "i16": np.int16, "i32": np.int32}[dtype]
    np.testing.assert_array_equal(value.data, data)
    assert value.encoding.layout == layout


def test_int4_weights_take_half_a_byte_each():
    data = np.arange(-8, 8).repeat(7).reshape(16, 7)  # 112 values in -8..7
    value, record, _ = _round_trip("i8", data)
    s = record.stream("values")
    assert (s.codec, s.bits, s.length) == ("bitpack", 4, 56)
    np.testing.assert_array_equal(value.data, data)
    assert record.describe() == "i8 dense [values bitpack 4b]"


def test_full_range_i8_is_raw_and_skewed_i8_is_huffman_when_asked():
    rng = np.random.default_rng(0)
    full = rng.integers(-128, 128, 1000)
    _, record, _ = _round_trip("i8", full, Encoding(huffman=True))
    assert record.stream("values").codec == "raw" and record.stream("values").length == 1000
    skewed = np.where(rng.random(4000) < 0.9, 0, rng.integers(-127, 128, 4000))
    value, record, _ = _round_trip("i8", skewed, Encoding(huffman=True))
    s = record.stream("values")
    assert s.codec == "huffman" and s.bits == 8 and s.length < 0.5 * 4000
    np.testing.assert_array_equal(value.data, skewed)
    _, plain, _ = _round_trip("i8", skewed)  # without huffman: the narrowest bitpack (8 bits = raw)
    assert plain.stream("values").codec == "raw"


def test_sparse_i8_with_huffman_values_and_fillers():
    data = np.zeros(300, dtype=np.int64)
    data[[0, 5, 150, 299]] = [3, -7, 1, -1]
    value, record, _ = _round_trip("i8", data, Encoding("sparse_rel", index_bits=4, huffman=True))
    assert record.entry_count > 4  # fillers bridge the long runs
    np.testing.assert_array_equal(value.data, data)


@pytest.mark.parametrize("dtype, data, enc, message", [
    ("i8", np.array([0, 200]), None, "do not fit dtype i8"),
    ("u8", np.array([-1, 2]), None, "do not fit dtype u8"),
    ("i8", np.array([0.5, 1.0]), None, "needs integer data"),
    ("i8", np.array([1, 2]), Encoding(codebook=np.array([1.0, 2.0]), cluster_bits=1), "codebook"),
])
def test_writer_rejects_data_that_does_not_fit_the_dtype(dtype, data, enc, message):
    with pytest.raises(DsmFormatError, match=message):
        encode_dsm(_graph(t=(dtype, data, enc)))


def test_writer_rejects_integer_activations():
    g = _graph()
    g.values["y"].dtype = "i32"
    with pytest.raises(DsmFormatError, match="activation is f32, u8 or i16"):
        encode_dsm(g)


def test_reader_rejects_bad_integer_value_streams():
    _, _, data = _round_trip("i8", np.arange(-8, 8))  # bitpack 4 bits

    def wide(infos, payloads):
        infos[0].streams[0].bits = 9

    with pytest.raises(DsmFormatError, match="values stream"):
        load_dsm(rebuild(data, edit=wide))

    def as_i32(infos, payloads):
        infos[0].dtype = "i32"

    with pytest.raises(DsmFormatError):
        load_dsm(rebuild(data, edit=as_i32))
