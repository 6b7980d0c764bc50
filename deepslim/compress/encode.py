"""How each weight tensor is stored in a .dsm file, and how many bytes that takes (numpy only).

`encodings()` picks, for every conv/fc weight, the smallest of the .dsm encodings (dense or
sparse_rel layout; raw float32 or codebook values) by the estimate below, and returns the
`deepslim.ir.Encoding` the writer needs. With a codebook, every nonzero value of the tensor is
exactly one of its entries (float32 equality). Biases are listed only with `biases=True` and when a
codebook encoding is smaller than dense raw float32 (shared biases, kmeans `bias_bits`).

Size estimate of one tensor (docs/format.md): each stream's bytes (Huffman: u32 n + n code lengths
+ the code bits, with code lengths from the symbol counts; bitpack: count*bits/8; raw: 4 per value;
codebook: 4 per centroid), each stream padded to the 64-byte alignment, plus its tensor-table record.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from deepslim.ir import Encoding

ALIGN = 64
STREAM_RECORD_BYTES = 32
DEFAULT_INDEX_BITS = {"conv": 8, "fc": 5}
MAX_BITS = 16


# ------------------------------------------------------------------------------ stateless functions


def relative_indices(keep: np.ndarray, index_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Relative-index entries of a flat bool array of nonzero positions.

    Returns (index per entry, True where the entry is a filler). A gap of g zeros before a nonzero
    needs g >> index_bits fillers (each advancing 2^index_bits positions) and then the entry g & max.
    """
    top = (1 << index_bits) - 1
    pos = np.flatnonzero(np.asarray(keep).ravel())
    gaps = np.diff(pos, prepend=-1) - 1
    fillers = gaps >> index_bits
    per_entry = fillers + 1
    total = int(per_entry.sum())
    index = np.full(total, top, dtype=np.int64)
    filler = np.ones(total, dtype=bool)
    real = np.cumsum(per_entry) - 1
    index[real] = gaps & top
    filler[real] = False
    return index, filler


def decode_relative(index: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """The inverse of relative indexing (the .dsm decoding rule), for checks."""
    out = np.zeros(size, dtype=np.asarray(values).dtype)
    p = np.cumsum(np.asarray(index, dtype=np.int64) + 1) - 1
    out[p] = values
    return out


def huffman_code_lengths(counts: np.ndarray) -> np.ndarray:
    """Huffman code length of each symbol (0 for absent symbols; a lone symbol gets length 1)."""
    counts = np.asarray(counts, dtype=np.int64)
    lengths = np.zeros(len(counts), dtype=np.int64)
    present = np.flatnonzero(counts > 0)
    if len(present) == 1:
        lengths[present] = 1
    if len(present) <= 1:
        return lengths
    heap = [(int(counts[s]), int(s), [int(s)]) for s in present]
    heapq.heapify(heap)
    while len(heap) > 1:
        c1, t1, s1 = heapq.heappop(heap)
        c2, t2, s2 = heapq.heappop(heap)
        for s in s1 + s2:
            lengths[s] += 1
        heapq.heappush(heap, (c1 + c2, min(t1, t2), s1 + s2))
    return lengths


def huffman_stream_bytes(symbols: np.ndarray) -> int:
    """Bytes of a Huffman-coded stream: u32 n, n code lengths, then the code bits."""
    symbols = np.asarray(symbols, dtype=np.int64)
    if symbols.size == 0:
        return 4
    counts = np.bincount(symbols)
    bits = int((counts * huffman_code_lengths(counts)).sum())
    return 4 + len(counts) + math.ceil(bits / 8)


def bitpack_bytes(count: int, bits: int) -> int:
    return math.ceil(count * bits / 8)


def min_bits(n_symbols: int) -> int:
    """Bits needed to number `n_symbols` symbols (at least 1)."""
    return max(1, math.ceil(math.log2(max(n_symbols, 1))))


# ------------------------------------------------------------------------------------ one tensor


def _symbols(flat: np.ndarray, enc: Encoding) -> tuple[np.ndarray | None, np.ndarray, int]:
    """(relative indices or None, stored values (cluster indices or floats), entry count)."""
    if enc.layout == "sparse_rel":
        index, filler = relative_indices(flat != 0, enc.index_bits)
        stored = np.zeros(len(index), dtype=np.float32)
        stored[~filler] = flat[flat != 0]
    else:
        index, stored = None, flat
    if enc.codebook is not None:
        codebook = enc.codebook
        order = np.argsort(codebook, kind="stable")
        pos = np.searchsorted(codebook[order], stored)
        pos = np.minimum(pos, len(codebook) - 1)
        if not np.array_equal(codebook[order][pos], stored):
            missing = stored[codebook[order][pos] != stored]
            raise ValueError(f"value {missing[0]!r} is not in the codebook")
        stored = order[pos]
    return index, stored, len(stored)


def stream_bytes(weight: np.ndarray, enc: Encoding) -> dict[str, int]:
    """Bytes of each stream ("indices", "values", "codebook") of `weight` under `enc`."""
    flat = np.asarray(weight, dtype=np.float32).ravel()
    index, stored, count = _symbols(flat, enc)
    out = {}
    if index is not None:
        out["indices"] = huffman_stream_bytes(index) if enc.huffman else bitpack_bytes(count, enc.index_bits)
    if enc.codebook is None:
        out["values"] = 4 * count
    else:
        out["values"] = huffman_stream_bytes(stored) if enc.huffman else bitpack_bytes(count, enc.cluster_bits)
        out["codebook"] = 4 * len(enc.codebook)
    return out


def record_bytes(name: str, shape: tuple[int, ...], n_streams: int) -> int:
    """Bytes of the tensor-table record and the graph-section value entry of one constant."""
    name_len = 2 + len(name.encode())
    table = name_len + 2 + 8 * len(shape) + 4 + 8 + 1 + STREAM_RECORD_BYTES * n_streams
    graph = name_len + 2 + 8 * len(shape) + 4
    return table + graph


def estimate_bytes(weight: np.ndarray, enc: Encoding, name: str = "") -> int:
    """Bytes `weight` adds to a .dsm file under `enc`: streams padded to 64 bytes, plus records."""
    streams = stream_bytes(weight, enc)
    padded = sum(ALIGN * math.ceil(b / ALIGN) for b in streams.values())
    return padded + record_bytes(name, np.shape(weight), len(streams))


def codebook_for(weight: np.ndarray, layout: str, index_bits: int = 0) -> np.ndarray | None:
    """Sorted distinct nonzero values, plus 0.0 when a stored entry decodes to zero; None if > 2^16."""
    flat = np.asarray(weight, dtype=np.float32).ravel()
    values = np.unique(flat[flat != 0])
    if layout == "dense":
        needs_zero = bool((flat == 0).any())
    else:
        needs_zero = bool((relative_indices(flat != 0, index_bits)[1]).any())
    if needs_zero:
        values = np.append(values, np.float32(0.0))
    if len(values) > (1 << MAX_BITS) or len(values) == 0:
        return None
    return values.astype(np.float32)


def candidates(weight: np.ndarray, index_bits: int | None, huffman: bool = True) -> list[Encoding]:
    """Every .dsm encoding of `weight` worth comparing (index_bits None: try 1..16)."""
    flat = np.asarray(weight, dtype=np.float32).ravel()
    out = [Encoding("dense", huffman=huffman)]
    layouts = [("dense", 0)]
    if (flat == 0).any():
        for b in range(1, MAX_BITS + 1) if index_bits is None else [index_bits]:
            out.append(Encoding("sparse_rel", index_bits=b, huffman=huffman))
            layouts.append(("sparse_rel", b))
    for layout, b in layouts:
        codebook = codebook_for(flat, layout, b)
        if codebook is not None:
            out.append(Encoding(layout, index_bits=b, codebook=codebook, cluster_bits=min_bits(len(codebook)),
                                huffman=huffman))
    return out


def best_encoding(weight: np.ndarray, index_bits: int | None, huffman: bool = True, name: str = "") -> Encoding:
    """The candidate encoding with the smallest estimated size."""
    return min(candidates(weight, index_bits, huffman), key=lambda e: estimate_bytes(weight, e, name))


# ------------------------------------------------------------------------------------ whole model


def _weights_and_biases(model_or_state) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(conv/fc weights by parameter name, every other parameter by name) as float32 numpy."""
    state = model_or_state.state_dict() if hasattr(model_or_state, "state_dict") else model_or_state
    weights, others = {}, {}
    for key, value in state.items():
        array = value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)
        if not np.issubdtype(array.dtype, np.floating):
            continue
        array = array.astype(np.float32)
        if key.endswith("weight") and array.ndim in (2, 4):
            weights[key] = array
        else:
            others[key] = array
    return weights, others


def _layer_setting(setting, key: str, ndim: int):
    if setting is None or isinstance(setting, int):
        return setting
    layer = key[: -len(".weight")] if key.endswith(".weight") else key
    kind = "conv" if ndim == 4 else "fc"
    return setting.get(layer, setting.get(kind))


def encodings(
    model_or_state,
    index_bits: int | Mapping[str, int] | None = DEFAULT_INDEX_BITS,
    huffman: bool = True,
    biases: bool = False,
) -> dict[str, Encoding]:
    """Parameter name -> Encoding for every conv/fc weight of a model or state dict.

    biases: also list each bias ("*.bias") for which a codebook encoding is smaller than raw
    float32, i.e. the biases that weight sharing clustered (kmeans `bias_bits`).

    index_bits: one width, or per layer name or type ("conv"/"fc"); None (or a layer missing from
    the mapping) picks the width that gives the smallest file.
    """
    weights, others = _weights_and_biases(model_or_state)
    out = {
        key: best_encoding(w, _layer_setting(index_bits, key, w.ndim), huffman, key)
        for key, w in weights.items()
    }
    for key, array in others.items() if biases else ():
        if not key.endswith("bias"):
            continue
        enc = best_encoding(array, None, huffman, key)
        if enc.codebook is not None and estimate_bytes(array, enc, key) < estimate_bytes(array, Encoding(), key):
            out[key] = enc
    return out


@dataclass(frozen=True)
class SizeReport:
    params: int
    fp32_bytes: int  # params * 4
    payload_bytes: int  # stream bytes only
    file_bytes: int  # with 64-byte alignment and table records (no header or graph ops)
    tensors: dict[str, dict]

    @property
    def ratio(self) -> float:
        """fp32 bytes / estimated bytes in the file."""
        return self.fp32_bytes / self.file_bytes

    @property
    def payload_ratio(self) -> float:
        return self.fp32_bytes / self.payload_bytes


def size_report(model_or_state, encs: Mapping[str, Encoding] | None = None) -> SizeReport:
    """Estimated storage of all parameters: weights under `encs` (default: `encodings()`), the
    rest dense raw float32."""
    weights, others = _weights_and_biases(model_or_state)
    if encs is None:
        encs = encodings(model_or_state)
    tensors = {}
    params = payload = file = 0
    for key, array in {**weights, **others}.items():
        enc = encs.get(key, Encoding())
        streams = stream_bytes(array, enc)
        size = estimate_bytes(array, enc, key)
        nonzero = int((array != 0).sum())
        tensors[key] = {"shape": list(array.shape), "params": int(array.size), "nonzero": nonzero,
                        "layout": enc.layout, "index_bits": enc.index_bits,
                        "codebook": 0 if enc.codebook is None else len(enc.codebook),
                        "cluster_bits": enc.cluster_bits, "streams": streams, "bytes": size}
        params += array.size
        payload += sum(streams.values())
        file += size
    return SizeReport(params, 4 * params, payload, file, tensors)
