"""The graph section of a .dsm file: values, graph inputs/outputs, nodes with attributes."""

from __future__ import annotations

from deepslim.format.binio import ByteReader, ByteWriter
from deepslim.format.errors import DsmFormatError
from deepslim.ir.graph import DTYPES as IR_DTYPES
from deepslim.ir.graph import OPS, Graph, Node, Value
from deepslim.ir.ops import OP_SPECS, OPS_BY_ID, check_attr, check_node

MAX_VALUES = 1_000_000
MAX_NODES = 1_000_000
MAX_RANK = 8
MAX_ATTR_ITEMS = 65536
ABSENT = 0xFFFFFFFF
DTYPES = dict(IR_DTYPES)  # docs/format.md, "dtypes"
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
ACTIVATION_DTYPES = ("f32", "u8", "i16")
ATTR_TYPES = {"int": 1, "float": 2, "ints": 3, "floats": 4, "string": 5}
ATTR_KINDS = {v: k for k, v in ATTR_TYPES.items()}


def encode_graph_section(graph: Graph, tensor_index: dict[str, int]) -> bytes:
    """Serialise `graph` (already validated); `tensor_index` maps constant names to table records."""
    ids = {name: i for i, name in enumerate(graph.values)}
    w = ByteWriter()
    w.put("u32", len(graph.values))
    for value in graph.values.values():
        w.put_str(value.name, f"value {value.name!r}: name")
        w.put("u8", DTYPES[value.dtype])
        w.put("u8", len(value.shape))
        shape = list(value.shape)
        if shape[:1] == [-1] and value.name not in graph.inputs:
            shape[0] = 1  # an activation is stored with its shape at batch 1
        w.put_array("i64", shape)
        w.put("i32", tensor_index.get(value.name, -1))
    for names in (graph.inputs, graph.outputs):
        w.put("u32", len(names))
        w.put_array("u32", [ids[n] for n in names])
    w.put("u32", len(graph.nodes))
    for node in graph.nodes:
        w.put("u16", OPS[node.op])
        w.put_str(node.name, f"node {node.name!r}: name")
        w.put("u8", len(node.inputs))
        w.put_array("u32", [ids[n] if n else ABSENT for n in node.inputs])
        w.put("u8", len(node.outputs))
        w.put_array("u32", [ids[n] for n in node.outputs])
        w.put("u16", len(node.attrs))
        for key, value in node.attrs.items():
            kind = OP_SPECS[node.op].attrs[key].kind
            value = check_attr(node.op, key, value)
            w.put_str(key, f"node {node.name!r}: attribute name")
            w.put("u8", ATTR_TYPES[kind])
            if kind == "int":
                w.put("i64", value)
            elif kind == "float":
                w.put("f32", value)
            elif kind == "string":
                w.put_str(value, f"node {node.name!r}: attribute {key!r}")
            else:
                if len(value) > MAX_ATTR_ITEMS:
                    raise DsmFormatError(f"node {node.name!r}: attribute {key!r} has more than {MAX_ATTR_ITEMS} items")
                w.put("u32", len(value))
                w.put_array("i64" if kind == "ints" else "f32", value)
    return w.bytes()


def decode_graph_section(data: bytes, tensor_count: int) -> tuple[Graph, dict[str, int]]:
    """Parse and validate a graph section. Returns the graph (constants still without data) and
    the map from constant value names to their tensor-table records."""
    r = ByteReader(data, "graph section")
    graph = Graph()
    names: list[str] = []
    tensor_of: dict[str, int] = {}
    used_records: dict[int, str] = {}
    n_values = r.get_count("u32", MAX_VALUES, "value_count")
    for i in range(n_values):
        field = f"value {i}"
        name = r.get_str(f"{field} name")
        if not name:
            raise r.fail(f"{field} name", "is empty")
        if name in graph.values:
            raise r.fail(f"{field} name", f"{name!r} is not unique")
        field = f"value {i} ({name!r})"
        dtype = r.get("u8", f"{field} dtype")
        if dtype not in DTYPE_NAMES:
            raise r.fail(f"{field} dtype", f"{dtype} is not a known dtype")
        rank = r.get_count("u8", MAX_RANK, f"{field} rank")
        dims = tuple(r.get_array("i64", rank, f"{field} dims"))
        for d in dims:
            if d < 1 and d != -1:
                raise r.fail(f"{field} dims", f"{dims} has a dimension that is neither >= 1 nor -1")
        if any(d == -1 for d in dims[1:]):
            raise r.fail(f"{field} dims", f"{dims}: only dims[0] of a graph input (the batch) may be -1")
        index = r.get("i32", f"{field} tensor_index")
        if index != -1:
            if not 0 <= index < tensor_count:
                raise r.fail(f"{field} tensor_index", f"{index} is not a record of the {tensor_count} in the tensor table")
            if index in used_records:
                raise r.fail(f"{field} tensor_index", f"{index} is already used by {used_records[index]!r}")
            if -1 in dims:
                raise r.fail(f"{field} dims", f"{dims}: a constant's dims must all be >= 1")
            used_records[index] = name
            tensor_of[name] = index
        elif DTYPE_NAMES[dtype] not in ACTIVATION_DTYPES:
            raise r.fail(f"{field} dtype", f"{DTYPE_NAMES[dtype]} is not an activation dtype (f32 or u8)")
        graph.add_value(Value(name, dims, DTYPE_NAMES[dtype]))
        names.append(name)

    def value_ids(field: str, n: int) -> list[str]:
        ids = r.get_array("u32", n, field)
        for v in ids:
            if v >= n_values:
                raise r.fail(field, f"value id {v} is not less than value_count {n_values}")
        return [names[v] for v in ids]

    graph.inputs = value_ids("input_values", r.get_count("u32", n_values, "input_count"))
    graph.outputs = value_ids("output_values", r.get_count("u32", n_values, "output_count"))
    for name in graph.inputs:
        if name in tensor_of:
            raise r.fail("input_values", f"{name!r} is a constant, not an activation")
    for name, value in graph.values.items():
        if value.shape[:1] == (-1,) and name not in graph.inputs:
            raise r.fail(f"value {name!r} dims", f"{value.shape}: only dims[0] of a graph input may be -1")

    n_nodes = r.get_count("u32", MAX_NODES, "node_count")
    for i in range(n_nodes):
        graph.nodes.append(_read_node(r, i, names, tensor_of))
    r.expect_end()
    _check_dataflow(graph, set(tensor_of))
    return graph, tensor_of


def _check_dataflow(graph: Graph, constants: set[str]) -> None:
    """Inputs come from graph inputs, constants or earlier nodes; each activation is produced once."""
    available = set(graph.inputs) | constants
    if len(set(graph.inputs)) != len(graph.inputs):
        raise DsmFormatError("graph section: input_values lists a value twice")
    for node in graph.nodes:
        for name in node.inputs:
            if name and name not in available:
                raise DsmFormatError(f"graph section: node {node.name!r} ({node.op}) reads {name!r} before it is produced")
        for name in node.outputs:
            if name in available:
                raise DsmFormatError(f"graph section: value {name!r} is produced twice (by {node.name!r})")
            available.add(name)
    for name in graph.outputs:
        if name not in available:
            raise DsmFormatError(f"graph section: graph output {name!r} is never produced")


def _read_node(r: ByteReader, i: int, names: list[str], tensor_of: dict[str, int]) -> Node:
    op_id = r.get("u16", f"node {i} op")
    if op_id not in OPS_BY_ID:
        raise r.fail(f"node {i} op", f"{op_id} is not a known op id")
    op = OPS_BY_ID[op_id]
    name = r.get_str(f"node {i} name")
    field = f"node {i} ({name!r}, {op})"
    inputs = []
    for v in r.get_array("u32", r.get("u8", f"{field} input_count"), f"{field} inputs"):
        if v != ABSENT and v >= len(names):
            raise r.fail(f"{field} inputs", f"value id {v} is not less than value_count {len(names)}")
        inputs.append("" if v == ABSENT else names[v])
    outputs = []
    for v in r.get_array("u32", r.get("u8", f"{field} output_count"), f"{field} outputs"):
        if v >= len(names):
            raise r.fail(f"{field} outputs", f"value id {v} is not less than value_count {len(names)}")
        if names[v] in tensor_of:
            raise r.fail(f"{field} outputs", f"{names[v]!r} is a constant")
        outputs.append(names[v])
    attrs = {}
    for j in range(r.get("u16", f"{field} attr_count")):
        key = r.get_str(f"{field} attribute {j} name")
        afield = f"{field} attribute {key!r}"
        atype = r.get("u8", f"{afield} type")
        kind = ATTR_KINDS.get(atype)
        if kind is None:
            raise r.fail(f"{afield} type", f"{atype} is not an attribute type")
        if kind == "int":
            value = r.get("i64", afield)
        elif kind == "float":
            value = r.get("f32", afield)
        elif kind == "string":
            value = r.get_str(afield)
        else:
            n = r.get_count("u32", MAX_ATTR_ITEMS, f"{afield} count")
            value = r.get_array("i64" if kind == "ints" else "f32", n, afield)
        spec = OP_SPECS[op].attrs.get(key)
        if spec is not None and spec.kind != kind:
            raise r.fail(f"{afield} type", f"is {kind}, the op needs {spec.kind}")
        if key in attrs:
            raise r.fail(afield, "appears twice")
        attrs[key] = value
    try:
        attrs = check_node(op, inputs, attrs)
    except ValueError as e:
        raise r.fail(field, str(e)) from None
    if not outputs:
        raise r.fail(field, "has no outputs")
    return Node(op, name, inputs, outputs, attrs)
