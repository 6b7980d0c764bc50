"""The graph IR that front ends produce, passes transform and the .dsm writer stores."""

from deepslim.ir.graph import Encoding, Graph, Node, Value, OPS

__all__ = ["Encoding", "Graph", "Node", "Value", "OPS"]
