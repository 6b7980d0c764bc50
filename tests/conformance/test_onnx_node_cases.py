"""The onnx package's node test cases for every supported op, run in the native runtime."""

import pytest

from deepslim.conformance import cases, run_case
from deepslim.frontends.errors import UnsupportedModelError

CASES = cases()


def test_the_supported_ops_have_cases_in_scope():
    assert sum(1 for c in CASES if not c.out_of_scope) >= 170


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_node_case(case):
    if case.refused:
        # outside the op contract: refused with an error that names the node, never a wrong answer
        with pytest.raises(UnsupportedModelError, match="node"):
            run_case(case)
        return
    if case.out_of_scope:
        pytest.skip(f"out of scope: {case.out_of_scope}")
    run_case(case)
