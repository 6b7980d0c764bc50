"""Write and read .dsm files (docs/format.md): header, graph section, tensor table, data streams."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field

from deepslim.format.codecs import crc32
from deepslim.format.errors import DsmChecksumError, DsmFormatError, DsmVersionError
from deepslim.format.quant_check import check_quantized
from deepslim.format.graph_section import ACTIVATION_DTYPES, DTYPES, decode_graph_section, encode_graph_section
from deepslim.format.tensors import (
    ALIGN, TensorInfo, decode_tensor, encode_tensor, read_tensor_table, write_tensor_table,
)
from deepslim.ir.graph import Graph
from deepslim.ir.ops import check_node

MAGIC = b"DEEPSLIM"
VERSION = 1
HEADER = struct.Struct("<8sIIQQQQQII")  # see docs/format.md, "Header"
HEADER_SIZE = 64
assert HEADER.size == HEADER_SIZE


@dataclass
class TensorReport:
    name: str
    shape: tuple[int, ...]
    elements: int
    nonzeros: int
    fillers: int
    encoding: str  # e.g. "sparse_rel(4b) + codebook(5b) [indices huffman, values bitpack]"
    stream_bytes: dict[str, int]  # role -> stored bytes
    total_bytes: int


@dataclass
class WriteReport:
    path: str
    tensors: list[TensorReport]
    header_bytes: int
    graph_bytes: int
    table_bytes: int
    file_size: int

    def __str__(self) -> str:
        lines = [f"{self.path}: {self.file_size} bytes"]
        for t in self.tensors:
            streams = ", ".join(f"{k} {v}" for k, v in t.stream_bytes.items())
            lines.append(f"  {t.name} {t.shape} {t.nonzeros}/{t.elements} nonzero, {t.encoding}: "
                         f"{t.total_bytes} bytes ({streams})")
        return "\n".join(lines)


@dataclass
class DsmInfo:
    """Storage details of a .dsm file, read without decoding the tensors."""
    version: int
    file_size: int
    graph_offset: int
    graph_length: int
    tensors_offset: int
    tensors_length: int
    tensors: list[TensorInfo] = field(default_factory=list)


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def encode_dsm(graph: Graph) -> tuple[bytes, WriteReport]:
    """The bytes of a .dsm file for `graph`, and a report of what each tensor costs."""
    _check_graph(graph)
    encoded = [encode_tensor(v) for v in graph.constants()]
    index = {e.info.name: i for i, e in enumerate(encoded)}
    graph_bytes = encode_graph_section(graph, index)
    data = assemble_dsm(graph_bytes, [e.info for e in encoded], [e.payloads for e in encoded])
    reports = [
        TensorReport(e.info.name, e.info.shape, e.info.element_count, e.nonzeros, e.fillers,
                     e.info.describe(), {s.role: s.length for s in e.info.streams}, e.info.stored_bytes)
        for e in encoded
    ]
    table_len = HEADER.unpack_from(data)[7]
    return data, WriteReport("", reports, HEADER_SIZE, len(graph_bytes), table_len, len(data))


def assemble_dsm(graph_bytes: bytes, infos: list[TensorInfo], payloads: list[list[bytes]],
                 version: int = VERSION, flags: int = 0) -> bytes:
    """Lay out header, graph section, tensor table and 64-byte aligned streams into file bytes.
    Sets each stream's offset (and length) in `infos`; CRCs are taken as they are in `infos`."""
    tensors_offset = HEADER_SIZE + len(graph_bytes)
    table_len = len(write_tensor_table(infos))  # offsets do not change the table's size
    pos = _align(tensors_offset + table_len)
    blobs = []
    for info, streams in zip(infos, payloads):
        for s, payload in zip(info.streams, streams):
            pos = _align(pos)
            s.offset, s.length = pos, len(payload)
            blobs.append((pos, payload))
            pos += len(payload)
    table = write_tensor_table(infos)
    out = bytearray(pos)
    out[HEADER_SIZE:tensors_offset] = graph_bytes
    out[tensors_offset : tensors_offset + len(table)] = table
    for offset, payload in blobs:
        out[offset : offset + len(payload)] = payload
    out[:HEADER_SIZE] = HEADER.pack(MAGIC, version, flags, pos, HEADER_SIZE, len(graph_bytes),
                                    tensors_offset, len(table), crc32(graph_bytes), crc32(table))
    return bytes(out)


def write_dsm(graph: Graph, path: str | os.PathLike) -> WriteReport:
    """Validate `graph`, encode every constant per its Encoding and write the .dsm file."""
    data, report = encode_dsm(graph)
    with open(path, "wb") as f:
        f.write(data)
    report.path = os.fspath(path)
    return report


def _check_graph(graph: Graph) -> None:
    try:
        graph.validate()
        for node in graph.nodes:
            check_node(node.op, node.inputs, node.attrs)
    except (ValueError, KeyError) as e:
        raise DsmFormatError(f"graph: {e}") from None
    for v in graph.values.values():
        if not v.name:
            raise DsmFormatError("graph: a value has an empty name")
        if v.dtype not in DTYPES:
            raise DsmFormatError(f"value {v.name!r}: dtype {v.dtype!r} cannot be stored (known: {', '.join(DTYPES)})")
        if v.is_constant:
            continue
        if v.dtype not in ACTIVATION_DTYPES:
            raise DsmFormatError(f"value {v.name!r}: an activation is f32, u8 or i16, not {v.dtype}")
        if any(d < 1 for d in v.shape[1:]) or (v.shape and v.shape[0] < 1 and v.shape[0] != -1):
            raise DsmFormatError(f"value {v.name!r}: shape {v.shape} needs dims >= 1 (dims[0] may be -1)")
    for node in graph.nodes:
        for name in node.outputs:
            if graph.values[name].is_constant:
                raise DsmFormatError(f"node {node.name!r} writes the constant {name!r}")
    check_quantized(graph)
    for name in graph.inputs:
        if graph.values[name].is_constant:
            raise DsmFormatError(f"graph input {name!r} is a constant")


def _read_bytes(source: str | os.PathLike | bytes | bytearray | memoryview) -> bytes:
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    with open(source, "rb") as f:
        return f.read()


def _parse(data: bytes) -> tuple[DsmInfo, Graph, dict[str, int]]:
    if len(data) < HEADER_SIZE:
        raise DsmFormatError(f"header: the file has {len(data)} bytes, fewer than the {HEADER_SIZE}-byte header")
    (magic, version, flags, file_size, g_off, g_len, t_off, t_len, g_crc, t_crc) = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise DsmFormatError(f"header: magic is {magic!r}, not {MAGIC!r}: not a .dsm file")
    if version != VERSION:
        raise DsmVersionError(f"header: format version {version} is not supported; this reader knows version {VERSION}")
    if flags != 0:
        raise DsmFormatError(f"header: flags are {flags:#x}, must be 0")
    if file_size != len(data):
        raise DsmFormatError(f"header: file_size says {file_size} bytes, the file has {len(data)}")
    if g_off != HEADER_SIZE:
        raise DsmFormatError(f"header: graph_offset is {g_off}, must be {HEADER_SIZE}")
    if g_off + g_len > file_size:
        raise DsmFormatError(f"header: graph section [{g_off}, +{g_len}) passes file_size {file_size}")
    if t_off < g_off + g_len or t_off + t_len > file_size:
        raise DsmFormatError(f"header: tensor table [{t_off}, +{t_len}) is not between the graph section and file_size {file_size}")
    graph_bytes, table_bytes = data[g_off : g_off + g_len], data[t_off : t_off + t_len]
    if crc32(graph_bytes) != g_crc:
        raise DsmChecksumError(f"header: graph_crc32 is {g_crc:#010x}, the graph section's CRC-32 is {crc32(graph_bytes):#010x}")
    if crc32(table_bytes) != t_crc:
        raise DsmChecksumError(f"header: tensors_crc32 is {t_crc:#010x}, the tensor table's CRC-32 is {crc32(table_bytes):#010x}")
    tensors = read_tensor_table(table_bytes, file_size, t_off + t_len)
    graph, tensor_of = decode_graph_section(graph_bytes, len(tensors))
    for name, i in tensor_of.items():
        value, t = graph.values[name], tensors[i]
        if tuple(value.shape) != tuple(t.shape) or value.dtype != t.dtype:
            raise DsmFormatError(f"value {name!r}: shape {value.shape} ({value.dtype}) differs from its tensor record {t.name!r}: {t.shape} ({t.dtype})")
    info = DsmInfo(version, file_size, g_off, g_len, t_off, t_len, tensors)
    return info, graph, tensor_of


def read_dsm_info(source: str | os.PathLike | bytes) -> DsmInfo:
    """Header and per-tensor storage (layouts, bits, streams) of a validated file; tensors are not decoded."""
    return _parse(_read_bytes(source))[0]


def load_dsm(source: str | os.PathLike | bytes) -> tuple[Graph, DsmInfo]:
    """The graph with every constant decoded, and the storage details."""
    data = _read_bytes(source)
    info, graph, tensor_of = _parse(data)
    for name, i in tensor_of.items():
        array, encoding = decode_tensor(info.tensors[i], data)
        graph.values[name].data = array
        graph.values[name].encoding = encoding
    check_quantized(graph)
    return graph, info


def read_dsm(source: str | os.PathLike | bytes) -> Graph:
    """Read and fully validate a .dsm file (path or bytes) into a Graph with decoded constants."""
    return load_dsm(source)[0]
