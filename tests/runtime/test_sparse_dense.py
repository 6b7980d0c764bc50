"""A pruned dense layer (the runtime may run it through its CSR kernel at batch 1, when that
measured faster) gives the reference's outputs at batch 1 and at larger batches."""

import numpy as np
import pytest

from deepslim.format.dsm import write_dsm
from deepslim.frontends.reference import run_graph
from deepslim.runtime import Session
from tests.format.dsm_graphs import dense_net


@pytest.mark.parametrize("density", [0.02, 0.08, 0.2, 1.0])
def test_pruned_dense_matches_the_reference(tmp_path, density):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((300, 784)).astype(np.float32)
    w[rng.random(w.shape) >= density] = 0.0
    graph = dense_net(w)
    path = tmp_path / "fc.dsm"
    write_dsm(graph, path)
    for threads in (1, 2):
        s = Session(path, threads=threads)
        for batch in (1, 2, 5):
            x = rng.standard_normal((batch, 784)).astype(np.float32)
            np.testing.assert_allclose(s.run(x), run_graph(graph, x), rtol=1e-4, atol=1e-6)
