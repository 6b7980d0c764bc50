"""Graph passes: each a function Graph -> Graph that leaves its argument unchanged.

    optimize(graph)   every pass of PIPELINE, in order
"""

from deepslim.ir.graph import Graph
from deepslim.ir.passes.channel_shuffle import fuse_channel_shuffle
from deepslim.ir.passes.dead_nodes import dead_nodes
from deepslim.ir.passes.fold_batchnorm import fold_batchnorm
from deepslim.ir.passes.fold_constants import fold_constants
from deepslim.ir.passes.fuse_activation import fuse_activation
from deepslim.ir.passes.hardswish import fuse_hardswish
from deepslim.ir.passes.remove_identity import remove_identity

# - dead readers, constant subgraphs and identities go first: each would keep a later pattern from
#   matching (a value read twice, conv -> flatten(no-op) -> relu).
# - the channel-shuffle and hard-swish patterns are matched before fuse_activation, which could
#   otherwise fuse their clip into an add.
# - batchnorm folds before fuse_activation: conv -> batchnorm -> relu needs the batchnorm gone first.
# - a last dead_nodes drops constants the folds left unused.
PIPELINE = (
    dead_nodes, fold_constants, remove_identity, fuse_channel_shuffle, fuse_hardswish, fold_batchnorm,
    fuse_activation, dead_nodes,
)


def optimize(graph: Graph) -> Graph:
    """Run every pass of PIPELINE in order; returns a new graph."""
    for p in PIPELINE:
        graph = p(graph)
    return graph


__all__ = [
    "PIPELINE", "dead_nodes", "fold_batchnorm", "fold_constants", "fuse_activation", "fuse_channel_shuffle",
    "fuse_hardswish", "optimize", "remove_identity",
]
