"""Graph passes: each a function Graph -> Graph that leaves its argument unchanged.

    optimize(graph)   dead_nodes, then remove_identity, then fuse_activation
"""

from deepslim.ir.graph import Graph
from deepslim.ir.passes.dead_nodes import dead_nodes
from deepslim.ir.passes.fuse_activation import fuse_activation
from deepslim.ir.passes.remove_identity import remove_identity

# Dead readers and identities go first: both would otherwise keep a relu from being fused
# (dense -> unused relu, dense -> flatten(no-op) -> relu). Neither later pass creates dead nodes.
PIPELINE = (dead_nodes, remove_identity, fuse_activation)


def optimize(graph: Graph) -> Graph:
    """Run every pass of PIPELINE in order; returns a new graph."""
    for p in PIPELINE:
        graph = p(graph)
    return graph


__all__ = ["PIPELINE", "dead_nodes", "fuse_activation", "optimize", "remove_identity"]
