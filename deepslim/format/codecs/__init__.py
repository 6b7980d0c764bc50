"""Stream codecs of the .dsm format: bit I/O, bitpack, canonical Huffman, relative sparse indexing."""

import zlib

from deepslim.format.codecs.bitpack import bitpack_decode, bitpack_encode, bitpack_size
from deepslim.format.codecs.codebook import codebook_indices, codebook_lookup
from deepslim.format.codecs.huffman import code_lengths, huffman_decode, huffman_encode, huffman_size
from deepslim.format.codecs.sparse_rel import sparse_rel_decode, sparse_rel_encode


def crc32(data: bytes) -> int:
    """CRC-32 (IEEE 802.3), as stored in .dsm headers and stream records."""
    return zlib.crc32(data) & 0xFFFFFFFF


__all__ = [
    "bitpack_decode", "bitpack_encode", "bitpack_size", "code_lengths", "codebook_indices",
    "codebook_lookup", "crc32", "huffman_decode", "huffman_encode", "huffman_size",
    "sparse_rel_decode", "sparse_rel_encode",
]
