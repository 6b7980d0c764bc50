"""Round trips and rejections of the stream codecs (bitpack, huffman, sparse_rel, codebook)."""

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deepslim.format.codecs import (
    bitpack_decode,
    bitpack_encode,
    code_lengths,
    codebook_indices,
    codebook_lookup,
    huffman_decode,
    huffman_encode,
    huffman_size,
    sparse_rel_decode,
    sparse_rel_encode,
)
from deepslim.format.codecs.bitio import pack_codes, windows16
from deepslim.format.errors import DsmFormatError


@st.composite
def symbol_streams(draw, max_bits=16):
    bits = draw(st.integers(1, max_bits))
    kind = draw(st.sampled_from(["uniform", "skewed", "constant", "sparse_alphabet"]))
    n = draw(st.integers(0, 300))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    top = 1 << bits
    if kind == "uniform":
        s = rng.integers(0, top, n)
    elif kind == "skewed":
        s = np.minimum(rng.geometric(0.5, n) - 1, top - 1)
    elif kind == "constant":
        s = np.full(n, rng.integers(0, top))
    else:
        alphabet = rng.integers(0, top, 5)
        s = alphabet[rng.integers(0, 5, n)]
    return bits, s.astype(np.int64)


@settings(max_examples=150, deadline=None)
@given(symbol_streams())
def test_bitpack_round_trip(stream):
    bits, s = stream
    data = bitpack_encode(s, bits)
    assert len(data) == (len(s) * bits + 7) // 8
    np.testing.assert_array_equal(bitpack_decode(data, len(s), bits), s)


def test_bitpack_is_msb_first():
    assert bitpack_encode(np.array([1, 0, 3]), 2) == bytes([0b01001100])
    assert bitpack_encode(np.array([0xABC]), 12) == bytes([0xAB, 0xC0])


def test_bitpack_rejects_symbol_too_wide_and_wrong_length():
    with pytest.raises(DsmFormatError, match="does not fit in 3 bits"):
        bitpack_encode(np.array([8]), 3)
    with pytest.raises(DsmFormatError, match="must be 2 bytes"):
        bitpack_decode(b"\0", 3, 5)


def test_pack_codes_and_windows():
    assert pack_codes(np.array([1, 0, 5]), np.array([1, 2, 3])) == bytes([0b10010100])
    w = windows16(bytes([0b10010100, 0xFF]), 16)
    assert w[0] == 0b1001010011111111 and w[15] == 0b1000000000000000


@settings(max_examples=150, deadline=None)
@given(symbol_streams())
def test_huffman_round_trip_and_size_estimate(stream):
    bits, s = stream
    data = huffman_encode(s, bits)
    assert huffman_size(s, bits) == len(data)
    np.testing.assert_array_equal(huffman_decode(data, len(s), bits), s)


def test_huffman_empty_and_single_symbol():
    assert huffman_encode(np.array([], dtype=np.int64), 4) == struct.pack("<I", 0)
    assert huffman_decode(struct.pack("<I", 0), 0, 4).size == 0
    data = huffman_encode(np.array([3, 3, 3]), 2)
    assert data == struct.pack("<I", 4) + bytes([0, 0, 0, 1]) + bytes([0])  # code "0", three times
    np.testing.assert_array_equal(huffman_decode(data, 3, 2), [3, 3, 3])


def test_huffman_canonical_codes_match_deflate_order():
    # lengths a:2 b:1 c:3 d:3 -> b=0, a=10, c=110, d=111
    s = np.array([1] * 4 + [0] * 2 + [2, 3])
    data = huffman_encode(s, 2)
    assert data[4:8] == bytes([2, 1, 3, 3])
    assert huffman_decode(data, len(s), 2).tolist() == s.tolist()
    assert data[8:] == bytes([0b00001010, 0b11011100])


def test_huffman_limits_fibonacci_frequencies_to_16_bits():
    fib = [1, 1]
    while len(fib) < 40:
        fib.append(fib[-1] + fib[-2])
    freqs = np.array(fib, dtype=np.int64)
    lengths = code_lengths(freqs)
    assert lengths.max() == 16
    assert np.sum(2.0 ** -lengths.astype(float)) <= 1.0
    assert np.all(np.diff(lengths[np.argsort(-freqs, kind="stable")].astype(int)) >= 0)
    s = np.repeat(np.arange(40), np.minimum(freqs, 50))  # the code still round-trips
    data = huffman_encode(s, 6)
    np.testing.assert_array_equal(huffman_decode(data, len(s), 6), s)


def test_huffman_unlimited_lengths_are_optimal_for_powers_of_two():
    lengths = code_lengths(np.array([8, 4, 2, 1, 1]))
    assert lengths.tolist() == [1, 2, 3, 4, 4]


def test_huffman_full_16_bit_alphabet():
    s = np.arange(1 << 16)
    data = huffman_encode(s, 16)
    assert np.all(np.frombuffer(data[4 : 4 + 65536], np.uint8) == 16)
    np.testing.assert_array_equal(huffman_decode(data, len(s), 16), s)


@pytest.mark.parametrize(
    "data, count, bits, message",
    [
        (b"\0\0", 1, 4, "too short"),
        (struct.pack("<I", 17) + bytes(17), 1, 4, "more than 2"),
        (struct.pack("<I", 4) + bytes([1, 1]), 1, 2, "run past"),
        (struct.pack("<I", 2) + bytes([17, 1]) + b"\0\0\0", 1, 1, "more than 16"),
        (struct.pack("<I", 3) + bytes([1, 1, 1]) + b"\0", 1, 2, "Kraft"),
        (struct.pack("<I", 2) + bytes([0, 0]) + b"\0", 1, 1, "no code lengths"),
        (struct.pack("<I", 2) + bytes([1, 1]) + b"\0", 9, 1, "cannot fit"),
        (struct.pack("<I", 2) + bytes([1, 2]) + b"\xff", 4, 1, "is no code"),
        (struct.pack("<I", 3) + bytes([1, 2, 2]) + b"\x7f", 5, 2, "past the stream's end"),
        (struct.pack("<I", 2) + bytes([1, 1]) + b"\0\0", 3, 1, "codes end in byte 1 of 2"),
        (struct.pack("<I", 0) + b"\0", 0, 1, "count 0"),
    ],
)
def test_huffman_rejects_malformed_streams(data, count, bits, message):
    with pytest.raises(DsmFormatError, match=message):
        huffman_decode(data, count, bits)


@settings(max_examples=150, deadline=None)
@given(
    index_bits=st.integers(1, 16),
    size=st.integers(0, 3000),
    density=st.floats(0, 1),
    seed=st.integers(0, 2**32 - 1),
)
def test_sparse_rel_round_trip(index_bits, size, density, seed):
    rng = np.random.default_rng(seed)
    flat = (rng.standard_normal(size) * (rng.random(size) < density)).astype(np.float32)
    idx, vals, fillers = sparse_rel_encode(flat, index_bits)
    assert idx.max(initial=0) < 1 << index_bits
    assert len(idx) == np.count_nonzero(flat) + fillers
    assert np.count_nonzero(vals == 0) == fillers
    assert np.all(idx[vals == 0] == (1 << index_bits) - 1)
    np.testing.assert_array_equal(sparse_rel_decode(idx, vals, size), flat)


def test_sparse_rel_fillers_bridge_long_gaps():
    flat = np.zeros(20, dtype=np.float32)
    flat[[0, 9, 19]] = [1, 2, 3]
    idx, vals, fillers = sparse_rel_encode(flat, 2)  # gaps of 8 and 9 zeros, range 0..3
    assert fillers == 4
    assert idx.tolist() == [0, 3, 3, 0, 3, 3, 1]
    assert vals.tolist() == [1, 0, 0, 2, 0, 0, 3]


def test_sparse_rel_rejects_overflow():
    with pytest.raises(DsmFormatError, match="past the element count 5"):
        sparse_rel_decode(np.array([2, 2]), np.array([1.0, 2.0]), 5, "conv1.weight")


def test_codebook_indices_exact_match_and_errors():
    book = np.array([0.5, -1.0, 0.0], dtype=np.float32)
    idx = codebook_indices(np.array([0.0, 0.5, -1.0, 0.5]), book)
    assert idx.tolist() == [2, 0, 1, 0]
    with pytest.raises(DsmFormatError, match="fc.weight: value 0.25"):
        codebook_indices(np.array([0.25]), book, "fc.weight")
    with pytest.raises(DsmFormatError, match="cluster index 3"):
        codebook_lookup(np.array([0, 3]), book, "fc.weight")
