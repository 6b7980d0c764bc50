"""Canonical Huffman coding of symbol streams (docs/format.md, "huffman").

Stream layout: `u32 n`, `u8 lengths[n]` (0 = symbol absent), then the code bits, MSB first.
Code lengths are optimal (Huffman) unless the longest would exceed 16 bits; then they are limited
to 16 with the length-adjusting step of JPEG (ITU T.81, Annex K.3), which keeps a prefix code and
gives the shortest codes to the most frequent symbols.
"""

from __future__ import annotations

import heapq
import struct

import numpy as np

from deepslim.format.codecs.bitio import MAX_CODE_BITS, pack_codes, windows16
from deepslim.format.errors import DsmFormatError


def code_lengths(freqs: np.ndarray, max_length: int = MAX_CODE_BITS) -> np.ndarray:
    """Code length per symbol (0 for a symbol of frequency 0), each <= max_length, Kraft sum <= 1."""
    freqs = np.asarray(freqs, dtype=np.int64).ravel()
    present = np.flatnonzero(freqs > 0)
    lengths = np.zeros(len(freqs), dtype=np.uint8)
    if len(present) == 0:
        return lengths
    if len(present) == 1:
        lengths[present] = 1
        return lengths
    if len(present) > (1 << max_length):
        raise DsmFormatError(f"{len(present)} distinct symbols cannot get codes of <= {max_length} bits")
    depth = _huffman_depths(freqs[present])
    # Count codes per length, limit them (JPEG Annex K.3), then hand the lengths out again,
    # shortest to the most frequent symbols.
    per_length = np.bincount(depth, minlength=max(int(depth.max()), max_length) + 1).tolist()
    for i in range(len(per_length) - 1, max_length, -1):
        while per_length[i] > 0:
            j = i - 2
            while per_length[j] == 0:
                j -= 1
            per_length[i] -= 2
            per_length[i - 1] += 1
            per_length[j + 1] += 2
            per_length[j] -= 1
    by_freq = present[np.argsort(-freqs[present], kind="stable")]
    new_lengths = np.repeat(np.arange(len(per_length)), per_length)
    lengths[by_freq] = new_lengths
    return lengths


def _huffman_depths(freqs: np.ndarray) -> np.ndarray:
    """Depth of each leaf in a Huffman tree over `freqs` (all > 0, at least two)."""
    n = len(freqs)
    parent = [0] * (2 * n - 1)
    heap = [(int(f), i) for i, f in enumerate(freqs)]
    heapq.heapify(heap)
    next_id = n
    while len(heap) > 1:
        fa, a = heapq.heappop(heap)
        fb, b = heapq.heappop(heap)
        parent[a] = parent[b] = next_id
        heapq.heappush(heap, (fa + fb, next_id))
        next_id += 1
    depth = [0] * (2 * n - 1)
    for node in range(2 * n - 3, -1, -1):  # parents have larger ids than their children
        depth[node] = depth[parent[node]] + 1
    return np.array(depth[:n], dtype=np.int64)


def canonical_codes(lengths: np.ndarray) -> np.ndarray:
    """Canonical codes (DEFLATE order: by length, then symbol value) for the given lengths."""
    lengths = np.asarray(lengths, dtype=np.int64)
    codes = np.zeros(len(lengths), dtype=np.uint32)
    order = np.lexsort((np.arange(len(lengths)), lengths))
    order = order[lengths[order] > 0]
    code = 0
    prev_len = 0
    for sym in order.tolist():
        ln = int(lengths[sym])
        code <<= ln - prev_len
        prev_len = ln
        codes[sym] = code
        code += 1
    return codes


def huffman_encode(symbols: np.ndarray, bits: int) -> bytes:
    """Encode symbols (each < 2^bits) as a complete huffman stream (header + code bits)."""
    symbols = np.asarray(symbols).ravel()
    _check_alphabet(symbols, bits)
    if symbols.size == 0:
        return struct.pack("<I", 0)
    lengths = code_lengths(np.bincount(symbols.astype(np.int64)))
    codes = canonical_codes(lengths)
    header = struct.pack("<I", len(lengths)) + lengths.tobytes()
    return header + pack_codes(codes[symbols], lengths[symbols])


def huffman_size(symbols: np.ndarray, bits: int) -> int:
    """Bytes `huffman_encode(symbols, bits)` would produce, without encoding."""
    symbols = np.asarray(symbols).ravel()
    _check_alphabet(symbols, bits)
    if symbols.size == 0:
        return 4
    freqs = np.bincount(symbols.astype(np.int64))
    lengths = code_lengths(freqs)
    total_bits = int(np.dot(freqs, lengths.astype(np.int64)))
    return 4 + len(lengths) + (total_bits + 7) // 8


def huffman_decode(data: bytes, count: int, bits: int) -> np.ndarray:
    """Decode `count` symbols from a huffman stream; the stream must end with the last code's byte."""
    if not 1 <= bits <= MAX_CODE_BITS:
        raise DsmFormatError(f"huffman stream: bits must be in 1..{MAX_CODE_BITS}, got {bits}")
    if len(data) < 4:
        raise DsmFormatError(f"huffman stream: {len(data)} bytes, too short for its u32 n")
    (n,) = struct.unpack_from("<I", data, 0)
    if n > (1 << bits):
        raise DsmFormatError(f"huffman stream: n = {n} code lengths, more than 2^{bits}")
    if 4 + n > len(data):
        raise DsmFormatError(f"huffman stream: n = {n} code lengths run past the stream's {len(data)} bytes")
    lengths = np.frombuffer(data, dtype=np.uint8, count=n, offset=4).astype(np.int64)
    payload = data[4 + n :]
    if count == 0:
        if payload:
            raise DsmFormatError(f"huffman stream: count 0 but {len(payload)} bytes of code bits")
        return np.zeros(0, dtype=np.uint16)
    if n and lengths.max() > MAX_CODE_BITS:
        raise DsmFormatError(f"huffman stream: a code length is {int(lengths.max())}, more than 16")
    if not np.any(lengths):
        raise DsmFormatError(f"huffman stream: {count} symbols but no code lengths")
    kraft = int(np.sum(np.where(lengths > 0, 1 << (MAX_CODE_BITS - lengths), 0)))
    if kraft > 1 << MAX_CODE_BITS:
        raise DsmFormatError("huffman stream: code lengths do not form a prefix code (Kraft sum > 1)")
    nbits = 8 * len(payload)
    if count > nbits:
        raise DsmFormatError(f"huffman stream: {count} symbols cannot fit in {nbits} code bits")

    # Lookup tables indexed by the next 16 bits: canonical codes fill the table in order.
    order = np.lexsort((np.arange(n), lengths))
    order = order[lengths[order] > 0]
    span = 1 << (MAX_CODE_BITS - lengths[order])
    table_sym = np.zeros(1 << MAX_CODE_BITS, dtype=np.uint16)
    table_len = np.zeros(1 << MAX_CODE_BITS, dtype=np.int32)  # 0: no code starts with these bits
    table_sym[:kraft] = np.repeat(order, span)
    table_len[:kraft] = np.repeat(lengths[order], span)

    # Decode at every bit position at once, then follow the chain of code starts from bit 0.
    pos_type = np.int32 if nbits < 2**31 - 2 else np.int64
    window = windows16(payload, nbits)
    step = table_len[window]
    nxt = np.empty(nbits + 2, dtype=pos_type)
    np.add(np.arange(nbits, dtype=pos_type), step, out=nxt[:nbits])
    nxt[:nbits][(step == 0) | (nxt[:nbits] > nbits)] = nbits + 1  # sentinel: decoding failed here
    nxt[nbits:] = nbits + 1  # needing a symbol after the last bit is a failure too
    chain = memoryview(nxt)
    starts_np = np.empty(count, dtype=pos_type)
    starts = memoryview(starts_np)
    p = 0
    for i in range(count):
        starts[i] = p
        p = chain[p]
    failed = np.flatnonzero(starts_np > nbits - 1)
    if len(failed) or p > nbits:
        i = int(failed[0]) - 1 if len(failed) else count - 1
        q = int(starts_np[i])
        if step[q] == 0:
            raise DsmFormatError(f"huffman stream: symbol {i} at bit {q} is no code")
        raise DsmFormatError(f"huffman stream: symbol {i} at bit {q} runs past the stream's end")
    if (p + 7) // 8 != len(payload):
        raise DsmFormatError(
            f"huffman stream: codes end in byte {(p + 7) // 8} of {len(payload)} code bytes"
        )
    return table_sym[window[starts_np]]


def _check_alphabet(symbols: np.ndarray, bits: int) -> None:
    if not 1 <= bits <= MAX_CODE_BITS:
        raise DsmFormatError(f"huffman: bits must be in 1..{MAX_CODE_BITS}, got {bits}")
    if symbols.size and (symbols.min() < 0 or int(symbols.max()) >> bits):
        raise DsmFormatError(f"huffman: a symbol is outside the alphabet 0..2^{bits}-1")
