"""Errors shared by the front ends (importing this module does not import torch or onnx)."""


class UnsupportedModelError(ValueError):
    """The model uses an op, module, attribute or shape that deepslim cannot represent.

    The message names the offending node, what it is (module type, function or method) and what is
    supported instead.
    """
