"""The graph IR that front ends produce, passes transform and the .dsm writer stores."""

from deepslim.ir.graph import Encoding, Graph, Node, Value, OPS
from deepslim.ir.ops import OP_SPECS, OPS_BY_ID, AttrSpec, OpSpec, check_node

__all__ = ["Encoding", "Graph", "Node", "Value", "OPS", "OP_SPECS", "OPS_BY_ID", "AttrSpec", "OpSpec", "check_node"]
