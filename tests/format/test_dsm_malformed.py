"""Malformed .dsm files: each is rejected with the right DsmFormatError subclass and a message."""

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deepslim.format import DsmChecksumError, DsmFormatError, DsmVersionError, read_dsm
from deepslim.format.binio import ByteWriter
from deepslim.format.codecs import bitpack_encode
from deepslim.format.dsm import HEADER_SIZE, encode_dsm
from deepslim.format.graph_section import encode_graph_section
from deepslim.ir import Encoding, Value

from dsm_graphs import dense_net, rebuild, split


def _file(encoding=None, shape=(3, 8), density=1.0):
    rng = np.random.default_rng(7)
    book = np.array([0.0, 0.5, -0.5, 1.0], dtype=np.float32)
    w = book[rng.integers(1, 4, shape)] if encoding and encoding.codebook is not None else rng.standard_normal(shape)
    w = (w * (rng.random(shape) < density)).astype(np.float32)
    return encode_dsm(dense_net(w, encoding))[0]


SPARSE_CB = Encoding("sparse_rel", 2, np.array([0.0, 0.5, -0.5, 1.0], np.float32), 2, huffman=True)


def _section_bounds(data):
    _, _, _, size, g_off, g_len, t_off, t_len, _, _ = struct.unpack_from("<8sIIQQQQQII", data)
    return sorted({0, HEADER_SIZE - 1, g_off, g_off + g_len, t_off + t_len, size - 1} |
                  {s.offset for t in split(data)[1] for s in t.streams})


def test_truncated_at_every_byte_of_a_tiny_file():
    data = _file(shape=(2, 3))
    assert len(data) < 1024
    for n in range(len(data)):
        with pytest.raises(DsmFormatError, match="header"):
            read_dsm(data[:n])


def test_truncated_at_every_section_boundary_of_a_compressed_file():
    data = _file(SPARSE_CB, shape=(16, 64), density=0.2)
    for n in _section_bounds(data):
        with pytest.raises(DsmFormatError):
            read_dsm(data[:n])


def _patch(data, offset, fmt, value):
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


@pytest.mark.parametrize(
    "offset, fmt, value, error, message",
    [
        (0, "<8s", b"DEEPSLIX", DsmFormatError, "magic"),
        (8, "<I", 2, DsmVersionError, "version 2 .*version 1"),
        (12, "<I", 1, DsmFormatError, "flags"),
        (16, "<Q", 10**9, DsmFormatError, "file_size"),
        (24, "<Q", 65, DsmFormatError, "graph_offset"),
        (32, "<Q", 2**63, DsmFormatError, "graph section"),
        (40, "<Q", 2**64 - 1, DsmFormatError, "tensor table"),
        (56, "<I", 0, DsmChecksumError, "graph_crc32"),
        (60, "<I", 0, DsmChecksumError, "tensors_crc32"),
    ],
)
def test_bad_header_fields(offset, fmt, value, error, message):
    with pytest.raises(error, match=message):
        read_dsm(_patch(_file(), offset, fmt, value))


def test_graph_and_table_bytes_are_checksummed():
    data = _file()
    _, _, _, _, g_off, g_len, t_off, t_len, _, _ = struct.unpack_from("<8sIIQQQQQII", data)
    for pos in (g_off + 5, t_off + t_len - 1):
        bad = bytearray(data)
        bad[pos] ^= 0x40
        with pytest.raises(DsmChecksumError, match="crc32"):
            read_dsm(bytes(bad))


def test_every_stream_is_checksummed():
    data = _file(SPARSE_CB, shape=(8, 32), density=0.3)
    for t in split(data)[1]:
        for s in t.streams:
            bad = bytearray(data)
            bad[s.offset] ^= 0x01
            with pytest.raises(DsmChecksumError, match=f"{t.name}.*{s.role} stream CRC"):
                read_dsm(bytes(bad))


def _edit(data, fn, **kw):
    return rebuild(data, edit=fn, **kw)


def _set_record(**changes):
    def edit(infos, payloads):
        for k, v in changes.items():
            setattr(infos[0], k, v)
    return edit


def _set_stream(which, **changes):
    def edit(infos, payloads):
        stream = infos[0].stream(which)
        for k, v in changes.items():
            setattr(stream, k, v)
    return edit


@pytest.mark.parametrize(
    "encoding, edit, message",
    [
        (None, _set_record(shape=(2**20, 2**20)), "more than 2\\^31"),
        (None, _set_record(shape=(3, 0)), "dimension < 1"),
        (None, _set_record(shape=(1,) * 9), "rank is 9"),
        (None, _set_record(entry_count=23), "entry_count"),
        (None, _set_record(layout="sparse_rel"), "index_bits"),
        (None, _set_record(cluster_bits=3), "cluster_bits"),
        (None, _set_stream("values", count=25), "values stream"),
        (None, _set_stream("values", role="indices"), "streams"),
        (SPARSE_CB, _set_record(entry_count=10**6), "entry_count"),
        (SPARSE_CB, _set_stream("codebook", count=17, bits=0), "codebook stream"),
        (SPARSE_CB, _set_stream("indices", bits=3), "indices stream"),
        (SPARSE_CB, _set_stream("values", codec="raw"), "values stream"),
    ],
)
def test_inconsistent_tensor_records(encoding, edit, message):
    data = _edit(_file(encoding, shape=(3, 8)), edit)
    with pytest.raises(DsmFormatError, match=message):
        read_dsm(data)


def test_stream_offsets_are_checked():
    data = _file()
    _, infos, _ = split(data)
    s = infos[0].streams[0]
    for offset, message in ((s.offset + 1, "multiple of 64"), (2**40, "inside the data area"), (0, "data area")):
        table = bytearray(data)
        # the offset field of the first stream record: locate it by its current value
        pos = bytes(table).index(struct.pack("<QQ", s.offset, s.length))
        struct.pack_into("<Q", table, pos, offset)
        with pytest.raises(DsmFormatError, match=message):
            read_dsm(_fix_table_crc(bytes(table)))


def _fix_table_crc(data):
    from deepslim.format.codecs import crc32
    _, _, _, _, _, _, t_off, t_len, _, _ = struct.unpack_from("<8sIIQQQQQII", data)
    return _patch(data, 60, "<I", crc32(data[t_off : t_off + t_len]))


def test_cluster_index_beyond_codebook():
    def shrink_codebook(infos, payloads):
        i = [s.role for s in infos[0].streams].index("codebook")
        payloads[0][i] = payloads[0][i][:4]  # keep only centroid 0; indices 1..3 now point past it
        infos[0].streams[i].count = 1
    with pytest.raises(DsmFormatError, match="cluster index .* codebook's count 1"):
        read_dsm(_edit(_file(SPARSE_CB, shape=(4, 16)), shrink_codebook))


def test_sparse_entries_past_the_element_count():
    def stretch_indices(infos, payloads):
        t = infos[0]
        i = [s.role for s in t.streams].index("indices")
        t.streams[i].codec = "bitpack"
        payloads[0][i] = bitpack_encode(np.full(t.entry_count, 3), 2)
    data = _edit(_file(SPARSE_CB, shape=(3, 8), density=0.9), stretch_indices)
    with pytest.raises(DsmFormatError, match="past the element count 24"):
        read_dsm(data)


def test_garbage_huffman_stream_is_a_format_error():
    def garble(infos, payloads):
        i = [s.role for s in infos[0].streams].index("values")
        assert infos[0].streams[i].codec == "huffman"
        payloads[0][i] = struct.pack("<I", 4) + bytes([1, 1, 1, 1]) + bytes(len(payloads[0][i]))
    rng = np.random.default_rng(3)
    book = np.array([0.0, 0.5, -0.5, 1.0], np.float32)
    w = book[np.minimum(rng.geometric(0.8, (16, 16)), 3)]
    data = encode_dsm(dense_net(w, Encoding("dense", 0, book, 2, huffman=True)))[0]
    with pytest.raises(DsmFormatError, match="'fc.weight': values stream: huffman stream: .*Kraft"):
        read_dsm(_edit(data, garble))


def _graph_bytes(mutate):
    g = dense_net(np.ones((3, 8), np.float32))
    mutate(g)
    return encode_graph_section(g, {"fc.weight": 0, "fc.bias": 1})


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda g: g.nodes.reverse(), "reads 'h' before it is produced"),
        (lambda g: g.nodes[1].outputs.__setitem__(0, "h"), "produced twice"),
        (lambda g: g.nodes[0].attrs.__setitem__("activation", 1.5), "activation"),
        (lambda g: g.nodes[1].attrs.update(axis=[1, 2]), "axis.*type"),
        (lambda g: g.nodes[0].inputs.pop(), None),  # bias is optional: still valid
        (lambda g: g.nodes[0].inputs.__setitem__(0, ""), "'x' is required"),
        (lambda g: g.outputs.append("zz") or g.add_value(Value("zz", (1, 3))), "never produced"),
    ],
)
def test_invalid_graph_sections(mutate, message):
    try:
        graph_bytes = _graph_bytes(mutate)
    except (ValueError, KeyError):  # the writer refused: fine, nothing to read
        return
    data = rebuild(_file(), graph_bytes=graph_bytes)
    if message is None:
        read_dsm(data)
    else:
        with pytest.raises(DsmFormatError, match=message):
            read_dsm(data)


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda w: w.put("u32", 2_000_000), "value_count is 2000000, more than the limit"),
        (lambda w: (w.put("u32", 1), w.put_str("v", ""), w.put("u8", 1), w.put("u8", 9)), "rank is 9"),
        (lambda w: (w.put("u32", 1), w.put_str("v", ""), w.put("u8", 7)), "dtype"),
        (lambda w: (w.put("u32", 1), w.put_str("v", ""), w.put("u8", 1), w.put("u8", 1), w.put("i64", 0)),
         "neither >= 1 nor -1"),
        (lambda w: (w.put("u32", 1), w.put_str("v", ""), w.put("u8", 1), w.put("u8", 2), w.put("i64", 1),
                    w.put("i64", -1)), "only dims\\[0\\]"),
        (lambda w: (w.put("u32", 1), w.put_str("v", ""), w.put("u8", 1), w.put("u8", 0), w.put("i32", 5)),
         "tensor_index"),
        (lambda w: (w.put("u32", 1), w.put_str("v", ""), w.put("u8", 1), w.put("u8", 0), w.put("i32", -1),
                    w.put("u32", 1), w.put("u32", 5)), "value id 5"),
        (lambda w: (w.put("u32", 0), w.put("u32", 0), w.put("u32", 0), w.put("u32", 1), w.put("u16", 99)),
         "99 is not a known op"),
        (lambda w: [w.put("u32", 0) for _ in range(4)] + [w.put("u8", 0)], "trailing bytes"),
        (lambda w: (w.put("u32", 1), w.put_str("v", ""), w.put("u8", 1), w.put("u8", 2), w.put("i64", -1),
                    w.put("i64", 3), w.put("i32", -1), w.put("u32", 0), w.put("u32", 0)),
         "only dims\\[0\\] of a graph input"),
        (lambda w: (w.put("u32", 1), w.put("u16", 5000)), "length 5000"),
    ],
)
def test_handcrafted_graph_sections(build, message):
    w = ByteWriter()
    build(w)
    data = rebuild(_file(), graph_bytes=w.bytes())
    with pytest.raises(DsmFormatError, match=message):
        read_dsm(data)


def test_tensor_count_limit():
    data = _file()
    _, _, _, _, _, _, t_off, _, _, _ = struct.unpack_from("<8sIIQQQQQII", data)
    bad = _fix_table_crc(_patch(data, t_off, "<I", 5_000_000))
    with pytest.raises(DsmFormatError, match="tensor_count is 5000000"):
        read_dsm(bad)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_random_corruption_never_leaks_other_exceptions(data):
    """Flip bytes in the graph section or tensor table (CRCs fixed up): DsmFormatError or success."""
    from deepslim.format.codecs import crc32
    base = _CORRUPTIBLE
    _, _, _, _, g_off, g_len, t_off, t_len, _, _ = struct.unpack_from("<8sIIQQQQQII", base)
    bad = bytearray(base)
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(g_off, t_off + t_len - 1))
        bad[pos] = data.draw(st.integers(0, 255))
    struct.pack_into("<II", bad, 56, crc32(bytes(bad[g_off : g_off + g_len])), crc32(bytes(bad[t_off : t_off + t_len])))
    try:
        read_dsm(bytes(bad))
    except DsmFormatError as e:
        assert str(e)


_CORRUPTIBLE = _file(SPARSE_CB, shape=(6, 16), density=0.3)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_random_stream_corruption_never_leaks_other_exceptions(data):
    """Change bytes of the streams (stream CRCs fixed up): DsmFormatError or success."""
    def corrupt(infos, payloads):
        for _ in range(data.draw(st.integers(1, 3))):
            t = data.draw(st.integers(0, len(payloads) - 1))
            s = data.draw(st.integers(0, len(payloads[t]) - 1))
            p = bytearray(payloads[t][s])
            if p:
                p[data.draw(st.integers(0, len(p) - 1))] = data.draw(st.integers(0, 255))
            payloads[t][s] = bytes(p)
    try:
        read_dsm(rebuild(_HUFFMAN_FILE, edit=corrupt))
    except DsmFormatError as e:
        assert str(e)


_rng = np.random.default_rng(11)
_HUFFMAN_FILE = encode_dsm(dense_net(
    (np.array([0.0, 0.5, -0.5, 1.0], np.float32)[np.minimum(_rng.geometric(0.75, (32, 64)) - 1, 3)]),
    Encoding("sparse_rel", 3, np.array([0.0, 0.5, -0.5, 1.0], np.float32), 2, huffman=True),
))[0]
