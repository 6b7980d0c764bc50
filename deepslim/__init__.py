"""deepslim: make a trained CNN small (pruning, weight sharing, Huffman coding, int8) and run it fast."""

__version__ = "0.1.0"
