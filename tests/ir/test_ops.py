"""Op specs: every op id has a spec; attributes are checked and normalised."""

import pytest

from deepslim.ir import OP_SPECS, OPS, OPS_BY_ID, check_node


def test_every_op_has_a_spec_and_a_unique_id():
    assert set(OP_SPECS) == set(OPS)
    assert len(OPS_BY_ID) == len(OPS)
    assert all(OP_SPECS[name].id == op_id for op_id, name in OPS_BY_ID.items())


def test_check_node_normalises_and_rejects():
    assert check_node("conv2d", ["x", "w"], {"pads": (1, 1, 1, 1), "group": True}) == {"pads": [1, 1, 1, 1], "group": 1}
    with pytest.raises(ValueError, match="needs 2 values"):
        check_node("conv2d", ["x", "w"], {"strides": [1]})
    with pytest.raises(ValueError, match="must be of kind int"):
        check_node("dense", ["x", "w"], {"activation": 1.0})
    with pytest.raises(ValueError, match="takes 2 to 3 inputs"):
        check_node("dense", ["x"], {})
    with pytest.raises(ValueError, match="'kernel' is required"):
        check_node("avgpool2d", ["x"], {"count_include_pad": 1})
    with pytest.raises(ValueError, match="unknown attribute 'axis'"):
        check_node("relu", ["x"], {"axis": 1})
