"""ONNX's operator schemas for the default domain, as a table, and the node check ONNX's checker
makes with them.

ONNX's checker (`onnx.checker.check_node`) verifies a node against its operator's schema: how many
inputs and outputs it has, that an input or output the schema marks single is not left empty,
that every attribute is one the schema knows, of the schema's type and encoded in that type's
field, and that required attributes are present. The schemas live in ONNX's C++ registry, whose
first use in a process sets up every operator (20-50 ms), more than importing a dynamo export
takes. `onnx_schema_data.SCHEMAS` holds the facts that check needs, written from ONNX's own
schemas by `python -m monet_ir.frontend.onnx_schemas` (a released operator version never changes,
so the table stays right as ONNX grows; `tests/unit/test_onnx_validation.py` compares it with the
installed ONNX). `node_problem` makes ONNX's check from the table and gives ONNX's verdict in
plain words; an operator version the table lacks is looked up in ONNX's registry.

Each table entry is one string per operator: its versions separated by ``;``, each
``since deprecated min_in max_in min_out max_out inputs outputs attributes [iN,..] [oN,..]`` where
inputs and outputs are one letter per formal parameter (S single, O optional, V variadic), ``*``
is no upper bound, attributes are ``name:type`` (``!`` when required; ``+`` alone when the schema
accepts attributes it does not list), ``-`` for none, and ``i``/``o`` list counts of inputs or
outputs within [min, max] that ONNX refuses all the same.
"""

from __future__ import annotations

import sys
from typing import Any

# the newest default-domain opset the table holds (the importer's MAX_OPSET)
TABLE_MAX_OPSET = 22
UNBOUNDED = 2**31 - 1

# AttributeProto.AttributeType values (onnx.proto), so that reading a node needs no onnx import
FLOAT, INT, STRING, TENSOR, GRAPH = 1, 2, 3, 4, 5
ATTRIBUTE_TYPE_NAMES = {
    0: "UNDEFINED", 1: "FLOAT", 2: "INT", 3: "STRING", 4: "TENSOR", 5: "GRAPH", 6: "FLOATS", 7: "INTS",
    8: "STRINGS", 9: "TENSORS", 10: "GRAPHS", 11: "SPARSE_TENSOR", 12: "SPARSE_TENSORS", 13: "TYPE_PROTO",
    14: "TYPE_PROTOS",
}
# the field that holds an attribute's value, by its type
_VALUE_FIELD = {1: "f", 2: "i", 3: "s", 4: "t", 5: "g", 6: "floats", 7: "ints", 8: "strings", 9: "tensors",
                10: "graphs", 11: "sparse_tensor", 12: "sparse_tensors", 13: "tp", 14: "type_protos"}
_VALUES = frozenset(_VALUE_FIELD.values())
# types whose value is one message (a tensor, a graph...): unlike a number or a list, it cannot
# be left out
_MESSAGE_TYPES = (4, 5, 11, 13)


class Schema:
    """What ONNX's node check needs of one operator version: the number of inputs and outputs,
    one letter per formal input and output (S single, O optional, V variadic), the attributes
    (name -> (AttributeProto type, required)) and whether it accepts attributes it does not
    list, and counts of inputs or outputs inside [min, max] it refuses all the same. (A plain
    class: a dataclass would compile its methods when this module loads.)"""

    __slots__ = ("name", "since_version", "deprecated", "min_inputs", "max_inputs", "min_outputs", "max_outputs",
                 "inputs", "outputs", "attributes", "unchecked_attributes", "required", "tensor_attributes",
                 "banned_inputs", "banned_outputs")

    def __init__(self, name: str, since_version: int, deprecated: bool, min_inputs: int, max_inputs: int,
                 min_outputs: int, max_outputs: int, inputs: str, outputs: str,
                 attributes: dict[str, tuple[int, bool]], unchecked_attributes: bool = False,
                 banned_inputs: tuple[int, ...] = (), banned_outputs: tuple[int, ...] = ()):
        self.name = name
        self.since_version = since_version
        self.deprecated = deprecated
        self.min_inputs, self.max_inputs = min_inputs, max_inputs
        self.min_outputs, self.max_outputs = min_outputs, max_outputs
        self.inputs, self.outputs = inputs, outputs
        self.attributes = attributes
        self.unchecked_attributes = unchecked_attributes
        self.required = tuple(n for n, (_, required) in attributes.items() if required)
        self.tensor_attributes = any(kind == TENSOR for kind, _ in attributes.values())
        # counts inside [min, max] the schema still refuses (BatchNormalization: 1 or 5 outputs)
        self.banned_inputs, self.banned_outputs = banned_inputs, banned_outputs


_PARSED: dict[str, list[Schema]] = {}


def _versions(op_type: str) -> list[Schema] | None:
    parsed = _PARSED.get(op_type)
    if parsed is not None:
        return parsed
    from monet_ir.frontend.onnx_schema_data import SCHEMAS

    text = SCHEMAS.get(op_type)
    if text is None:
        return None
    parsed = _PARSED[op_type] = [_parse(op_type, record) for record in text.split(";")]
    return parsed


def _parse(op_type: str, record: str) -> Schema:
    since, deprecated, min_in, max_in, min_out, max_out, ins, outs, attrs, *banned = record.split(" ")
    banned_counts: dict[str, tuple[int, ...]] = {"i": (), "o": ()}
    for item in banned:
        banned_counts[item[0]] = tuple(int(c) for c in item[1:].split(","))
    attributes: dict[str, tuple[int, bool]] = {}
    unchecked = False
    if attrs != "-":
        for item in attrs.split(","):
            if item == "+":
                unchecked = True
                continue
            name, _, kind = item.partition(":")
            attributes[name] = (int(kind.rstrip("!")), kind.endswith("!"))

    def bound(v: str) -> int:
        return UNBOUNDED if v == "*" else int(v)

    return Schema(op_type, int(since), deprecated == "1", int(min_in), bound(max_in), int(min_out), bound(max_out),
                  "" if ins == "-" else ins, "" if outs == "-" else outs, attributes, unchecked, banned_counts["i"],
                  banned_counts["o"])


def schema_of(op_type: str, opset: int) -> Schema | None:
    """The default-domain schema of `op_type` at `opset` (the newest version not after it), or
    None when ONNX defines no such operator there."""
    if opset > TABLE_MAX_OPSET:
        return _registry_schema(op_type, opset)
    versions = _versions(op_type)
    if versions is None:
        return None
    found = None
    for schema in versions:
        if schema.since_version > opset:
            break
        found = schema
    return found


def _registry_schema(op_type: str, opset: int) -> Schema | None:
    """A schema from ONNX's registry (an opset newer than the table)."""
    import onnx

    try:
        schema = onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        return None
    return _from_onnx(schema)


def _from_onnx(schema: Any) -> Schema:
    from onnx.defs import OpSchema

    letters = {OpSchema.FormalParameterOption.Single: "S", OpSchema.FormalParameterOption.Optional: "O",
               OpSchema.FormalParameterOption.Variadic: "V"}
    return Schema(
        schema.name, schema.since_version, bool(schema.deprecated), schema.min_input, min(schema.max_input, UNBOUNDED),
        schema.min_output, min(schema.max_output, UNBOUNDED), "".join(letters[p.option] for p in schema.inputs),
        "".join(letters[p.option] for p in schema.outputs),
        {name: (int(a.type), bool(a.required)) for name, a in schema.attributes.items()},
        _accepts_unlisted_attributes(schema), _refused_counts(schema, "input"), _refused_counts(schema, "output"),
    )


def _accepts_unlisted_attributes(schema: Any) -> bool:
    """Whether ONNX's node check lets an attribute the schema does not list through (its
    registry does not say so directly)."""
    from onnx import checker, helper

    node = helper.make_node(schema.name, [f"i{k}" for k in range(schema.min_input)],
                            [f"o{k}" for k in range(max(schema.min_output, 1))])
    for name, (kind, required) in {n: (int(a.type), a.required) for n, a in schema.attributes.items()}.items():
        if required:
            node.attribute.append(_placeholder_attribute(name, kind))
    node.attribute.append(helper.make_attribute("zz_not_an_attribute", 1))
    ctx = checker.C.CheckerContext()
    ctx.ir_version = 10
    ctx.opset_imports = {"": schema.since_version}
    try:
        checker.check_node(node, ctx, checker.C.LexicalScopeContext())
    except checker.ValidationError:
        return False  # refused: for the unknown attribute, or (deprecated) before looking
    return True


def _refused_counts(schema: Any, kind: str) -> tuple[int, ...]:
    """Counts of inputs or outputs inside the schema's [min, max] that ONNX's node check still
    refuses ("not in allowed ... sizes"; the registry does not list them), probed up to 10
    above the minimum."""
    from onnx import checker, helper

    low, high = (schema.min_input, schema.max_input) if kind == "input" else (schema.min_output, schema.max_output)
    refused = []
    for count in range(low, min(high, low + 10) + 1):
        inputs = count if kind == "input" else schema.min_input
        outputs = count if kind == "output" else max(schema.min_output, 1)
        node = helper.make_node(schema.name, [f"i{k}" for k in range(inputs)], [f"o{k}" for k in range(outputs)])
        for name, attribute in schema.attributes.items():
            if attribute.required:
                node.attribute.append(_placeholder_attribute(name, int(attribute.type)))
        ctx = checker.C.CheckerContext()
        ctx.ir_version = 10
        ctx.opset_imports = {"": schema.since_version}
        try:
            checker.check_node(node, ctx, checker.C.LexicalScopeContext())
        except checker.ValidationError as e:
            if f"not in allowed {kind} sizes" in str(e):
                refused.append(count)
    return tuple(refused)


def _placeholder_attribute(name: str, kind: int) -> Any:
    from onnx import AttributeProto, helper

    values = {FLOAT: 1.0, INT: 1, STRING: "x", 6: [1.0], 7: [1], 8: ["x"]}
    if kind in values:
        return helper.make_attribute(name, values[kind])
    if kind == TENSOR:
        return helper.make_attribute(name, helper.make_tensor("t", 1, [1], [1.0]))
    if kind == GRAPH:
        return helper.make_attribute(name, helper.make_graph([], "g", [], []))
    attribute = AttributeProto(name=name, type=kind)
    return attribute


def node_problem(node: Any, schema: Schema) -> str | None:
    """What ONNX's checker finds wrong with `node` against `schema` (the first problem, in plain
    words), or None. Written for speed: it runs on every node of every model."""
    if schema.deprecated:
        return f"ONNX's {schema.name}-{schema.since_version} is deprecated at this opset: ONNX's checker refuses it"
    inputs, outputs = node.input, node.output
    n_in, n_out = len(inputs), len(outputs)
    if not n_in and not n_out:
        return "a node without inputs and outputs"
    if n_in in schema.banned_inputs:
        return f"{n_in} inputs, which ONNX's {schema.name}-{schema.since_version} does not allow"
    if n_out in schema.banned_outputs:
        return f"{n_out} outputs, which ONNX's {schema.name}-{schema.since_version} does not allow"
    if not schema.min_inputs <= n_in <= schema.max_inputs or n_in > len(schema.inputs) and schema.inputs[-1:] != "V" \
            or "" in inputs:
        problem = _arity_problem("input", list(inputs), schema.min_inputs, schema.max_inputs, schema.inputs, schema)
        if problem:
            return problem
    if not schema.min_outputs <= n_out <= schema.max_outputs or n_out > len(schema.outputs) and \
            schema.outputs[-1:] != "V" or "" in outputs:
        problem = _arity_problem("output", list(outputs), schema.min_outputs, schema.max_outputs, schema.outputs,
                                 schema)
        if problem:
            return problem
    attributes = node.attribute
    if not attributes:
        return f"the required attribute '{schema.required[0]}' is missing" if schema.required else None
    seen = set()
    known = schema.attributes
    for attribute in attributes:
        name = attribute.name
        kind = attribute.type
        fields = [fd.name for fd, _ in attribute.ListFields()]
        # the usual encoding, in field-number order: name, the value of the type's field, type
        if len(fields) != 3 or fields[1] != _VALUE_FIELD.get(kind) or not name or name in seen:
            problem = _attribute_problem(attribute, fields, seen, schema)
            if problem:
                return problem
        seen.add(name)
        expected = known.get(name)
        if expected is None:
            if schema.unchecked_attributes or name.startswith("__"):
                continue
            return f"unknown attribute '{name}': ONNX's {schema.name}-{schema.since_version} has no attribute of that name"
        if kind != expected[0]:
            return (f"attribute '{name}' is of type {ATTRIBUTE_TYPE_NAMES.get(kind, kind)}, but ONNX's "
                    f"{schema.name}-{schema.since_version} takes {ATTRIBUTE_TYPE_NAMES.get(expected[0], expected[0])}")
    for name in schema.required:
        if name not in seen:
            return f"the required attribute '{name}' is missing"
    return None


def _arity_problem(kind: str, names: list[str], low: int, high: int, formal: str, schema: Schema) -> str | None:
    op = f"ONNX's {schema.name}-{schema.since_version}"
    count = len(names)
    if not low <= count <= high:
        return f"{count} {kind}s, but {op} takes {_range(low, high)}"
    for index, name in enumerate(names):
        if index >= len(formal):
            if formal and formal[-1] == "V":
                break
            return f"{count} {kind}s, but {op} declares {len(formal)}"
        if not name and formal[index] == "S":
            return f"{kind} {index} is empty, but {op} requires it"
    return None


def _attribute_problem(attribute: Any, fields: list[str], seen: set[str], schema: Schema) -> str | None:
    """The slow path of `node_problem` for an attribute whose fields are not the usual name,
    value and type (a writer may leave out a value of 0, "" or an empty list: ONNX's checker lets
    that through)."""
    name = attribute.name
    if not name:
        return "an attribute without a name"
    if name in seen:
        return f"attribute '{name}' is given twice"
    problem = attribute_encoding_problem(attribute, fields)
    if problem:
        return problem
    expected = schema.attributes.get(name)
    if expected is not None and expected[0] in _MESSAGE_TYPES and _VALUE_FIELD[expected[0]] not in fields \
            and not attribute.ref_attr_name:
        return f"attribute '{name}' of type {ATTRIBUTE_TYPE_NAMES[expected[0]]} holds no value"
    return None


def _range(low: int, high: int) -> str:
    if low == high:
        return f"exactly {low}"
    if high >= UNBOUNDED:
        return f"at least {low}"
    return f"{low} to {high}"


def attribute_encoding_problem(attribute: Any, fields: list[str] | None = None) -> str | None:
    """ONNX's check of an attribute's encoding: a type, and at most one value field, the one of
    that type. `fields` are the names of its set fields when the caller has them."""
    if fields is None:
        fields = [fd.name for fd, _ in attribute.ListFields()]
    if "type" not in fields:
        return f"attribute '{attribute.name}' has no type"
    field = _VALUE_FIELD.get(attribute.type)
    if field is None:
        return f"attribute '{attribute.name}' has an unknown type {attribute.type}"
    used = [f for f in fields if f in _VALUES]
    if len(used) > 1:
        return f"attribute '{attribute.name}' holds more than one value field ({', '.join(used)})"
    if used and used[0] != field:
        return (f"attribute '{attribute.name}' is of type {ATTRIBUTE_TYPE_NAMES[attribute.type]} but holds its value "
                f"in field '{used[0]}'")
    return None


# ---------------------------------------------------------------------- writing the table


def table_from_onnx(max_opset: int = TABLE_MAX_OPSET) -> dict[str, str]:
    """The table, from the installed ONNX's registry: default-domain operators up to `max_opset`."""
    import onnx

    versions: dict[str, list[Schema]] = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        if schema.domain == "" and schema.since_version <= max_opset:
            versions.setdefault(schema.name, []).append(_from_onnx(schema))
    return {name: ";".join(_record(s) for s in sorted(found, key=lambda s: s.since_version))
            for name, found in sorted(versions.items())}


def _record(s: Schema) -> str:
    def bound(v: int) -> str:
        return "*" if v >= UNBOUNDED else str(v)

    attrs = [f"{n}:{t}{'!' if r else ''}" for n, (t, r) in sorted(s.attributes.items())]
    if s.unchecked_attributes:
        attrs.append("+")
    fields = [str(s.since_version), str(int(s.deprecated)), str(s.min_inputs), bound(s.max_inputs),
              str(s.min_outputs), bound(s.max_outputs), s.inputs or "-", s.outputs or "-", ",".join(attrs) or "-"]
    fields += [f"{letter}{','.join(str(c) for c in counts)}"
               for letter, counts in (("i", s.banned_inputs), ("o", s.banned_outputs)) if counts]
    return " ".join(fields)


def write_table(path: str) -> None:
    import onnx

    table = table_from_onnx()
    lines = [f'"""ONNX {onnx.__version__}\'s default-domain operator schemas up to opset {TABLE_MAX_OPSET}, as',
             "`monet_ir.frontend.onnx_schemas` reads them. Written by `python -m monet_ir.frontend.onnx_schemas`;",
             'do not edit."""', "", "SCHEMAS = {"]
    lines += [f"    {name!r}: {record!r}," for name, record in table.items()]
    lines += ["}", ""]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    import os

    target = os.path.join(os.path.dirname(os.path.abspath(__file__)), "onnx_schema_data.py")
    write_table(target)
    print(f"wrote {target}", file=sys.stderr)
