"""Tensor records of a .dsm file: encoding a constant into streams, the tensor table, decoding.

Index streams (relative indices, cluster indices) are bit-packed; when `Encoding.huffman` is set,
each index stream is instead Huffman coded if that is strictly smaller than bit-packing it, so a
stream is never stored larger than its bit-packed form.

Integer tensors (dtypes i8, u8, i32) hold raw values (no codebook). The values of an i8 or u8 tensor
are stored in the smallest of: raw bytes; bit-packed at the narrowest width that holds every value
(two's complement for i8, so int4 weights take 4 bits); Huffman coded bytes when `Encoding.huffman`
is set. i32 values are raw.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from deepslim.format.binio import ByteReader, ByteWriter
from deepslim.format.codecs import (
    bitpack_decode, bitpack_encode, bitpack_size, codebook_indices, codebook_lookup, crc32,
    huffman_decode, huffman_encode, huffman_size, sparse_rel_decode, sparse_rel_encode,
)
from deepslim.format.errors import DsmChecksumError, DsmFormatError
from deepslim.format.graph_section import DTYPE_NAMES, DTYPES, MAX_RANK
from deepslim.ir.graph import Encoding, Value

ROLES = {"values": 1, "indices": 2, "codebook": 3}
CODECS = {"raw": 0, "bitpack": 1, "huffman": 2}
LAYOUTS = {"dense": 0, "sparse_rel": 1}
VALUE_KINDS = {"raw": 0, "codebook": 1}
MAX_TENSORS = 1_000_000
MAX_ELEMENTS = 2**31
MAX_STREAMS = 4
ALIGN = 64
# numpy element type of each dtype, as stored (little-endian)
NUMPY_DTYPES = {"f32": np.dtype("<f4"), "i8": np.dtype("i1"), "u8": np.dtype("u1"), "i32": np.dtype("<i4"), "i16": np.dtype("<i2")}
BYTE_DTYPES = ("i8", "u8")


def _names(table: dict[str, int]) -> dict[int, str]:
    return {v: k for k, v in table.items()}


ROLE_NAMES, CODEC_NAMES = _names(ROLES), _names(CODECS)
LAYOUT_NAMES, VALUE_KIND_NAMES = _names(LAYOUTS), _names(VALUE_KINDS)


@dataclass
class StreamInfo:
    role: str  # "values" | "indices" | "codebook"
    codec: str  # "raw" | "bitpack" | "huffman"
    bits: int
    count: int
    offset: int = 0
    length: int = 0
    crc32: int = 0


@dataclass
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    layout: str  # "dense" | "sparse_rel"
    values: str  # "raw" | "codebook"
    index_bits: int
    cluster_bits: int
    entry_count: int
    streams: list[StreamInfo] = field(default_factory=list)
    dtype: str = "f32"

    @property
    def element_count(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def stored_bytes(self) -> int:
        return sum(s.length for s in self.streams)

    def stream(self, role: str) -> StreamInfo | None:
        return next((s for s in self.streams if s.role == role), None)

    def describe(self) -> str:
        """e.g. 'sparse_rel(4b) + codebook(5b) [indices huffman, values huffman]'."""
        text = self.layout + (f"({self.index_bits}b)" if self.layout == "sparse_rel" else "")
        if self.dtype != "f32":
            text = f"{self.dtype} " + text
        if self.values == "codebook":
            text += f" + codebook({self.cluster_bits}b)"
        coded = [f"{s.role} {s.codec}" + (f" {s.bits}b" if self.dtype in BYTE_DTYPES and s.role == "values" else "")
                 for s in self.streams if s.codec != "raw"]
        return text + (f" [{', '.join(coded)}]" if coded else "")


@dataclass
class EncodedTensor:
    info: TensorInfo  # offsets and CRCs not yet placed
    payloads: list[bytes]  # parallel to info.streams
    nonzeros: int
    fillers: int


def encode_tensor(value: Value) -> EncodedTensor:
    """Encode a constant per its Encoding into streams; raises DsmFormatError naming the tensor."""
    what = f"tensor {value.name!r}"
    enc = value.encoding
    data = np.asarray(value.data)
    if value.dtype not in DTYPES:
        raise DsmFormatError(f"{what}: dtype {value.dtype!r} cannot be stored (known: {', '.join(DTYPES)})")
    if tuple(data.shape) != tuple(value.shape):
        raise DsmFormatError(f"{what}: data shape {tuple(data.shape)} differs from the value's shape {value.shape}")
    if len(data.shape) > MAX_RANK or any(d < 1 for d in data.shape) or data.size > MAX_ELEMENTS:
        raise DsmFormatError(f"{what}: shape {tuple(data.shape)} needs rank <= {MAX_RANK}, dims >= 1, <= 2^31 elements")
    flat = _stored_elements(data, value.dtype, what)
    if value.dtype != "f32" and enc.codebook is not None:
        raise DsmFormatError(f"{what}: a codebook holds f32 centroids; dtype {value.dtype} tensors store raw values")
    fillers = 0
    streams: list[tuple[StreamInfo, bytes]] = []
    if enc.layout == "dense":
        values, index_bits = flat, 0
    else:
        index_bits = enc.index_bits
        indices, values, fillers = sparse_rel_encode(flat, index_bits)
        streams.append(_index_stream("indices", indices, index_bits, enc.huffman))
    if enc.codebook is None:
        streams.append(_values_stream(values, value.dtype, enc.huffman))
        cluster_bits = 0
    else:
        cluster_bits = enc.cluster_bits
        book = np.asarray(enc.codebook, dtype=np.float32)
        if fillers and not np.any(book == 0.0):
            if len(book) >= 1 << cluster_bits:
                raise DsmFormatError(
                    f"{what}: sparse_rel needs {fillers} filler entries of value 0.0, but the codebook "
                    f"has no 0.0 and no room to add it ({len(book)} of 2^{cluster_bits} entries)"
                )
            book = np.append(book, np.float32(0.0))
        clusters = codebook_indices(values, book, what)
        streams.append(_index_stream("values", clusters, cluster_bits, enc.huffman))
        streams.append((StreamInfo("codebook", "raw", 0, len(book)), book.astype("<f4").tobytes()))
    info = TensorInfo(
        value.name, tuple(int(d) for d in data.shape), enc.layout,
        "raw" if enc.codebook is None else "codebook", index_bits, cluster_bits, len(values), dtype=value.dtype,
    )
    for s, payload in streams:
        s.length, s.crc32 = len(payload), crc32(payload)
        info.streams.append(s)
    return EncodedTensor(info, [p for _, p in streams], int(np.count_nonzero(flat)), fillers)


def _stored_elements(data: np.ndarray, dtype: str, what: str) -> np.ndarray:
    """The tensor's elements flattened in C order, in the numpy type of `dtype`; an integer dtype
    needs integer data that fits its range."""
    if dtype == "f32":
        return np.ascontiguousarray(data, dtype=np.float32).ravel()
    target = NUMPY_DTYPES[dtype]
    if data.dtype.kind not in "iub":
        raise DsmFormatError(f"{what}: dtype {dtype} needs integer data, got numpy {data.dtype}")
    info = np.iinfo(target)
    if data.size and (int(data.min()) < info.min or int(data.max()) > info.max):
        raise DsmFormatError(
            f"{what}: values {int(data.min())}..{int(data.max())} do not fit dtype {dtype} ({info.min}..{info.max})"
        )
    return np.ascontiguousarray(data, dtype=target.newbyteorder("=")).ravel()


def value_bits(values: np.ndarray, dtype: str) -> int:
    """Narrowest bitpack width (1..8) holding every i8 (two's complement) or u8 value."""
    if values.size == 0:
        return 1
    lo, hi = int(values.min()), int(values.max())
    if dtype == "u8":
        return max(1, hi.bit_length())
    bits = 1
    while not -(1 << (bits - 1)) <= lo <= hi <= (1 << (bits - 1)) - 1:
        bits += 1
    return bits


def _values_stream(values: np.ndarray, dtype: str, huffman: bool) -> tuple[StreamInfo, bytes]:
    """The values stream of a tensor without codebook: raw, or for i8/u8 whatever is smallest."""
    n = len(values)
    raw = (StreamInfo("values", "raw", 0, n), values.astype(NUMPY_DTYPES[dtype]).tobytes())
    if dtype not in BYTE_DTYPES:
        return raw
    best = raw
    bits = value_bits(values, dtype)
    symbols = values.astype(np.int64) & ((1 << bits) - 1)
    if bitpack_size(n, bits) < len(best[1]):
        best = (StreamInfo("values", "bitpack", bits, n), bitpack_encode(symbols, bits))
    if huffman:
        bytes_ = values.astype(np.int64) & 0xFF
        if huffman_size(bytes_, 8) < len(best[1]):
            best = (StreamInfo("values", "huffman", 8, n), huffman_encode(bytes_, 8))
    return best


def _index_stream(role: str, symbols: np.ndarray, bits: int, huffman: bool) -> tuple[StreamInfo, bytes]:
    if huffman and huffman_size(symbols, bits) < bitpack_size(len(symbols), bits):
        return StreamInfo(role, "huffman", bits, len(symbols)), huffman_encode(symbols, bits)
    return StreamInfo(role, "bitpack", bits, len(symbols)), bitpack_encode(symbols, bits)


def write_tensor_table(infos: list[TensorInfo]) -> bytes:
    w = ByteWriter()
    w.put("u32", len(infos))
    for t in infos:
        w.put_str(t.name, f"tensor {t.name!r}: name")
        w.put("u8", DTYPES[t.dtype])
        w.put("u8", len(t.shape))
        w.put_array("u64", list(t.shape))
        for kind, v in (("u8", LAYOUTS[t.layout]), ("u8", VALUE_KINDS[t.values]), ("u8", t.index_bits),
                        ("u8", t.cluster_bits), ("u64", t.entry_count), ("u8", len(t.streams))):
            w.put(kind, v)
        for s in t.streams:
            for kind, v in (("u8", ROLES[s.role]), ("u8", CODECS[s.codec]), ("u8", s.bits), ("u8", 0),
                            ("u64", s.count), ("u64", s.offset), ("u64", s.length), ("u32", s.crc32)):
                w.put(kind, v)
    return w.bytes()


def read_tensor_table(data: bytes, file_size: int, data_start: int) -> list[TensorInfo]:
    """Parse and validate the tensor table; every stream must lie in [data_start, file_size)."""
    r = ByteReader(data, "tensor table")
    infos = []
    for i in range(r.get_count("u32", MAX_TENSORS, "tensor_count")):
        name = r.get_str(f"tensor {i} name")
        infos.append(_read_record(r, f"tensor {i} ({name!r})", name, file_size, data_start))
    r.expect_end()
    return infos


def _read_record(r: ByteReader, field: str, name: str, file_size: int, data_start: int) -> TensorInfo:
    dtype = r.get("u8", f"{field} dtype")
    if dtype not in DTYPE_NAMES:
        raise r.fail(f"{field} dtype", f"{dtype} is not a known dtype")
    shape = tuple(r.get_array("u64", r.get_count("u8", MAX_RANK, f"{field} rank"), f"{field} dims"))
    if any(d < 1 for d in shape):
        raise r.fail(f"{field} dims", f"{shape} has a dimension < 1")
    elements = 1
    for d in shape:
        elements *= d
    if elements > MAX_ELEMENTS:
        raise r.fail(f"{field} dims", f"{shape} has {elements} elements, more than 2^31")
    layout = LAYOUT_NAMES.get(r.get("u8", f"{field} layout"))
    values = VALUE_KIND_NAMES.get(r.get("u8", f"{field} values"))
    if layout is None or values is None:
        raise r.fail(f"{field} layout/values", "is not a known kind")
    index_bits = r.get("u8", f"{field} index_bits")
    cluster_bits = r.get("u8", f"{field} cluster_bits")
    if (layout == "dense" and index_bits != 0) or (layout == "sparse_rel" and not 1 <= index_bits <= 16):
        raise r.fail(f"{field} index_bits", f"{index_bits} does not fit layout {layout}")
    if (values == "raw" and cluster_bits != 0) or (values == "codebook" and not 1 <= cluster_bits <= 16):
        raise r.fail(f"{field} cluster_bits", f"{cluster_bits} does not fit values {values}")
    entries = r.get("u64", f"{field} entry_count")
    if (layout == "dense" and entries != elements) or entries > elements:
        raise r.fail(f"{field} entry_count", f"{entries} does not fit {layout} with {elements} elements")
    info = TensorInfo(name, shape, layout, values, index_bits, cluster_bits, entries, [], DTYPE_NAMES[dtype])
    for j in range(r.get_count("u8", MAX_STREAMS, f"{field} stream_count")):
        sfield = f"{field} stream {j}"
        role = ROLE_NAMES.get(r.get("u8", f"{sfield} role"))
        codec = CODEC_NAMES.get(r.get("u8", f"{sfield} codec"))
        if role is None or codec is None:
            raise r.fail(f"{sfield} role/codec", "is not a known kind")
        bits = r.get("u8", f"{sfield} bits")
        if r.get("u8", f"{sfield} reserved") != 0:
            raise r.fail(f"{sfield} reserved", "is not 0")
        count, offset, length = r.get_array("u64", 3, f"{sfield} count/offset/length")
        crc = r.get("u32", f"{sfield} crc32")
        if offset % ALIGN or offset < data_start or offset + length > file_size:
            raise r.fail(
                f"{sfield} offset", f"{offset} (+ length {length}) is not a multiple of {ALIGN} "
                f"inside the data area [{data_start}, {file_size})"
            )
        if info.stream(role):
            raise r.fail(f"{sfield} role", f"{role} appears twice")
        info.streams.append(StreamInfo(role, codec, bits, count, offset, length, crc))
    _check_streams(r, field, info)
    return info


def _check_streams(r: ByteReader, field: str, t: TensorInfo) -> None:
    need = {"values"} | ({"indices"} if t.layout == "sparse_rel" else set())
    need |= {"codebook"} if t.values == "codebook" else set()
    have = {s.role for s in t.streams}
    if have != need:
        raise r.fail(f"{field} streams", f"are {sorted(have)}, {t.layout}/{t.values} needs {sorted(need)}")
    if t.values == "codebook" and t.dtype != "f32":
        raise r.fail(f"{field} values", f"is codebook, which decodes to f32, but the dtype is {t.dtype}")
    for s in t.streams:
        sfield = f"{field} {s.role} stream"
        index_stream = s.role == "indices" or (s.role == "values" and t.values == "codebook")
        if index_stream:
            bits = t.index_bits if s.role == "indices" else t.cluster_bits
            ok = s.codec in ("bitpack", "huffman") and s.bits == bits and s.count == t.entry_count
            if s.codec == "bitpack" and s.length != bitpack_size(s.count, s.bits):
                raise r.fail(f"{sfield} length", f"{s.length} is not ceil({s.count} * {s.bits} / 8)")
        elif s.role == "values":
            ok = _values_stream_ok(s, t)
        else:
            ok = s.codec == "raw" and s.bits == 0 and 1 <= s.count <= 1 << t.cluster_bits and s.length == 4 * s.count
        if not ok:
            raise r.fail(sfield, f"(codec {s.codec}, bits {s.bits}, count {s.count}, length {s.length}) "
                                 f"does not fit {t.layout}/{t.values} with {t.entry_count} entries")


def _values_stream_ok(s: StreamInfo, t: TensorInfo) -> bool:
    """A raw-values stream: raw elements of the dtype; i8/u8 also bitpack (1..8 bits) or huffman (8)."""
    if s.count != t.entry_count:
        return False
    if s.codec == "raw":
        return s.bits == 0 and s.length == NUMPY_DTYPES[t.dtype].itemsize * s.count
    if t.dtype not in BYTE_DTYPES:
        return False
    if s.codec == "bitpack":
        return 1 <= s.bits <= 8 and s.length == bitpack_size(s.count, s.bits)
    return s.bits == 8


def _decode_values(s: StreamInfo, payload: bytes, dtype: str) -> np.ndarray:
    """A raw-values stream into an array of the dtype (i8 bitpack symbols are sign-extended)."""
    np_type = NUMPY_DTYPES[dtype]
    if s.codec == "raw":
        return np.frombuffer(payload, dtype=np_type).astype(np_type.newbyteorder("="))
    if s.codec == "bitpack":
        symbols = bitpack_decode(payload, s.count, s.bits).astype(np.int64)
    else:
        symbols = huffman_decode(payload, s.count, s.bits).astype(np.int64)
    if dtype == "i8":
        sign = 1 << (s.bits - 1)
        symbols = (symbols ^ sign) - sign
    return symbols.astype(np_type.newbyteorder("="))


def decode_tensor(t: TensorInfo, file: bytes) -> tuple[np.ndarray, Encoding]:
    """Check stream CRCs and decode a validated record into its array and Encoding."""
    what = f"tensor {t.name!r}"
    decoded = {}
    for s in t.streams:
        payload = bytes(file[s.offset : s.offset + s.length])
        if crc32(payload) != s.crc32:
            raise DsmChecksumError(f"{what}: {s.role} stream CRC-32 is {crc32(payload):#010x}, record says {s.crc32:#010x}")
        try:
            if s.role == "values" and t.values == "raw":
                decoded[s.role] = _decode_values(s, payload, t.dtype)
            elif s.codec == "raw":
                decoded[s.role] = np.frombuffer(payload, dtype="<f4").astype(np.float32)
            elif s.codec == "bitpack":
                decoded[s.role] = bitpack_decode(payload, s.count, s.bits)
            else:
                decoded[s.role] = huffman_decode(payload, s.count, s.bits)
        except DsmFormatError as e:
            raise DsmFormatError(f"{what}: {s.role} stream: {e}") from None
    codebook = decoded.get("codebook")
    values = decoded["values"]
    if codebook is not None:
        values = codebook_lookup(values, codebook, what)
    if t.layout == "dense":
        flat = values
    else:
        try:
            flat = sparse_rel_decode(decoded["indices"], values, t.element_count, what, values.dtype)
        except MemoryError:
            raise DsmFormatError(f"{what}: {t.element_count} elements do not fit in memory") from None
    huffman = any(s.codec == "huffman" for s in t.streams)
    enc = Encoding(t.layout, t.index_bits, codebook, t.cluster_bits, huffman)
    return flat.reshape(t.shape), enc
