"""Structural validation of an ONNX model before it is imported.

Every file goes through the same checks, whatever its size or exporter, before anything is read
from it; a problem is one line naming the file, the node (`#index 'name' (domain::op_type)`) or
field, and what is wrong:

* the model header: `ir_version` present and not newer than the installed ONNX knows;
* the graph's structure (ONNX's IR rules, checked here with messages that name nodes): at least
  one output, no name listed twice among the outputs, inputs or initializers, one producer per
  tensor (SSA), every node input defined before the node reads it (ONNX requires topological
  order), every graph output defined, initializers listed as inputs when `ir_version` < 4,
  initializer data as long as its type and shape say;
* external data: a location relative to the model's folder that stays inside it (no absolute
  path, no `..`, no symbolic link out), an offset and length that fit the file when it is there
  (a weight-stripped model whose data files are absent still imports, by shape);
* ONNX's own checker (`onnx.checker.check_model`): each node against its operator schema (number
  of inputs and outputs, required, unknown and wrongly typed attributes), attribute encodings,
  value infos, sub-graphs. It runs on a light copy (`_checker_copy`) in which initializers with
  large or external data are graph inputs of their type (their sizes are checked above), so a
  model with megabytes of weights costs the checker no more than its graph. Nodes of the
  standard domains that ONNX has no schema for at the model's opset (ONNX Runtime's training ops
  such as `MaxPoolGrad` in the default domain) are left to the importer, which maps or refuses
  them by name.

`onnx` is imported on first use.
"""

from __future__ import annotations

import math
import os
import re
from typing import Any

from monet_ir.frontend.attrs import node_name

# An initializer whose raw data is at least this many bytes is given to ONNX's checker as a typed
# graph input (its length is checked here instead): serializing weights for the checker would
# cost more than checking the graph.
CHECKER_INLINE_BYTES = 4096

# Standard domains ONNX's checker knows schemas of: a node there without a schema fails it.
_ONNX_SCHEMA_DOMAINS = ("", "ai.onnx", "ai.onnx.ml", "ai.onnx.training", "ai.onnx.preview.training")
_UNCHECKED_DOMAIN = "monet.unchecked"


def describe_node(index: int, node: Any) -> str:
    """How a problem names a node: position, name (or first output) and domain::op_type."""
    return f"node #{index} '{short(node_name(node))}' ({node.domain or 'ai.onnx'}::{node.op_type})"


def short(name: str, limit: int = 120) -> str:
    """A name as a message quotes it: a very long one is cut (the line keeps saying what is
    wrong within the error net's bound on a line's length)."""
    return name if len(name) <= limit else f"{name[:limit]}...({len(name):,} characters)"


def validate_model(model: Any, file: str, base_dir: str | None) -> list[str]:
    """Every structural problem of `model` (read from `file`, whose folder is `base_dir`, or None
    when it came from bytes or a stream), one line each; empty when the model is valid."""
    problems = [f"{file}: {p}" for p in _header_problems(model)]
    problems += [f"{file}: {p}" for p in _graph_problems(model.graph, model.ir_version)]
    problems += [f"{file}: {p}" for p in _initializer_problems(model.graph, base_dir)]
    if problems:
        return problems
    problems = [f"{file}: {p}" for p in _node_problems(model)]
    if problems or not _has_subgraphs_or_functions(model):
        return problems
    # what the checks above do not reach (nodes inside If/Loop/Scan bodies, local functions)
    checker = _checker_problem(model)
    return [f"{file}: {checker}"] if checker else []


# ---------------------------------------------------------------------- header


def _header_problems(model: Any) -> list[str]:
    import onnx

    if not model.ir_version:
        return ["ir_version is missing: an ONNX model states the IR version it was written for"]
    if model.ir_version > onnx.IR_VERSION:
        return [f"ir_version {model.ir_version} is newer than this ONNX {onnx.__version__} reads "
                f"(up to {onnx.IR_VERSION})"]
    if model.ir_version < 0:
        return [f"ir_version {model.ir_version} is not a version"]
    declared = {"" if e.domain == "ai.onnx" else e.domain for e in model.opset_import}
    if model.ir_version >= 3 and "" not in declared:
        return ["opset_import names no version of the default ONNX domain"]
    for i, node in enumerate(model.graph.node):
        domain = "" if node.domain == "ai.onnx" else node.domain
        if domain not in declared:
            return [f"{describe_node(i, node)}: its domain '{node.domain}' has no opset_import entry"]
    return []


# ---------------------------------------------------------------------- graph structure


def _graph_problems(graph: Any, ir_version: int) -> list[str]:
    problems: list[str] = []
    if not graph.output:
        problems.append("the graph has no outputs: a model must compute at least one")
    defined: dict[str, Any] = {}  # tensor name -> what defines it: a phrase, or the producing node's index
    input_names = set()
    for i, value in enumerate(graph.input):
        if not value.name:
            problems.append(f"graph input #{i} has no name")
        elif value.name in input_names:
            problems.append(f"graph input '{value.name}' is listed twice")
        else:
            input_names.add(value.name)
            defined[value.name] = "a graph input"
    seen_initializers: set[str] = set()
    stated = {v.name: v for v in graph.input} if graph.initializer else {}
    for i, init in enumerate(graph.initializer):
        if not init.name:
            problems.append(f"initializer #{i} has no name")
        elif init.name in seen_initializers:
            problems.append(f"initializer '{init.name}' is defined twice: which data is meant is ambiguous")
        else:
            seen_initializers.add(init.name)
            if init.name not in input_names:
                defined[init.name] = "an initializer"
        value = stated.get(init.name)
        if value is not None and not _type_matches(value, init):
            problems.append(f"graph input '{init.name}' states a type other than its initializer's "
                            f"({_type_text(value)} vs {_init_text(init)})")
        if ir_version and ir_version < 4 and init.name and init.name not in input_names:
            problems.append(f"initializer '{init.name}' is not a graph input, which ir_version {ir_version} (< 4) "
                            "requires")
    for i, sparse in enumerate(graph.sparse_initializer):
        name = sparse.values.name
        problems.append(f"sparse initializer '{name or i}': sparse initializers are not supported (MONET reads "
                        "dense initializers)")
    problem = _order_problem(graph, defined)
    if problem:
        return [*problems, problem]
    output_names = set()
    for i, value in enumerate(graph.output):
        if not value.name:
            problems.append(f"graph output #{i} has no name")
        elif value.name in output_names:
            problems.append(f"graph output '{value.name}' is listed twice")
        elif value.name not in defined:
            problems.append(f"graph output '{value.name}' is not produced by any node, input or initializer")
        output_names.add(value.name)
    return problems


def _type_matches(value: Any, init: Any) -> bool:
    """Whether a graph input's stated tensor type agrees with its initializer (a dimension left
    symbolic or unstated agrees with any size)."""
    t = value.type.tensor_type
    if t.elem_type and t.elem_type != init.data_type:
        return False
    if not t.HasField("shape"):
        return True
    dims = t.shape.dim
    if len(dims) != len(init.dims):
        return False
    return all(not d.HasField("dim_value") or d.dim_value == size for d, size in zip(dims, init.dims))


def _type_text(value: Any) -> str:
    from onnx import TensorProto

    t = value.type.tensor_type
    dims = "x".join(str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in t.shape.dim)
    return f"{TensorProto.DataType.Name(t.elem_type) if t.elem_type in TensorProto.DataType.values() else t.elem_type}" \
        f"[{dims}]"


def _init_text(init: Any) -> str:
    from onnx import TensorProto

    name = TensorProto.DataType.Name(init.data_type) if init.data_type in TensorProto.DataType.values() \
        else init.data_type
    return f"{name}[{'x'.join(str(d) for d in init.dims)}]"


def _order_problem(graph: Any, defined: dict[str, Any]) -> str | None:
    """The first node that reads a tensor nothing defined before it (ONNX requires the nodes in
    topological order) or writes a tensor already defined (one producer per tensor); `defined`
    holds the graph's inputs and initializers and gets the node outputs."""
    nodes = graph.node
    for i, node in enumerate(nodes):
        for name in node.input:
            if name and name not in defined:
                return _undefined_input(nodes, i, name)
        for out in node.output:
            if out:
                if out in defined:
                    earlier = defined[out]
                    if isinstance(earlier, int):
                        earlier = f"produced by {describe_node(earlier, nodes[earlier])}"
                    return (f"{describe_node(i, node)}: output '{short(out)}' is already {earlier}: a tensor has one "
                            "producer in ONNX (static single assignment)")
                defined[out] = i
    return None


def _undefined_input(nodes: Any, i: int, name: str) -> str:
    later = next((j for j in range(i, len(nodes)) if name in nodes[j].output), None)
    if later is None:
        return f"{describe_node(i, nodes[i])}: input '{short(name)}' is not defined by any node, input or initializer"
    what = "itself" if later == i else f"{describe_node(later, nodes[later])}, which comes later"
    return (f"{describe_node(i, nodes[i])}: input '{short(name)}' is produced by {what}: ONNX requires the nodes of a graph "
            "in topological order")


# ---------------------------------------------------------------------- initializers and external data


# element types packed below a byte (ONNX 1.16+), by name: older ONNX versions lack some
_SUB_BYTE_TYPES = (("INT4", 4), ("UINT4", 4), ("FLOAT4E2M1", 4), ("INT2", 2), ("UINT2", 2))


_ELEMENT_BITS: dict[int, int | None] = {}


def _element_bits(data_type: int) -> int | None:
    """Bits of one element of an ONNX tensor type (None for strings and unknown types)."""
    if data_type in _ELEMENT_BITS:
        return _ELEMENT_BITS[data_type]
    import onnx

    sub_byte = {getattr(onnx.TensorProto, name, None): bits for name, bits in _SUB_BYTE_TYPES}
    if data_type in sub_byte:
        bits = sub_byte[data_type]
    elif data_type in (onnx.TensorProto.STRING, onnx.TensorProto.UNDEFINED):
        bits = None
    else:
        try:
            bits = onnx.helper.tensor_dtype_to_np_dtype(data_type).itemsize * 8
        except (KeyError, TypeError, ValueError):
            bits = None
    _ELEMENT_BITS[data_type] = bits
    return bits


def data_bytes(init: Any) -> int | None:
    """Bytes of an initializer's data by its type and dims (None when not fixed-size)."""
    bits = _element_bits(init.data_type)
    dims = init.dims
    if bits is None or min(dims, default=0) < 0:
        return None
    return (math.prod(dims) * bits + 7) // 8


def _initializer_problems(graph: Any, base_dir: str | None) -> list[str]:
    from onnx import TensorProto

    problems = []
    files: dict[str, Any] = {}  # external data file -> what `_data_file` found (many tensors share one)
    for init in graph.initializer:
        if init.data_location == TensorProto.EXTERNAL:
            problem = external_data_problem(init, base_dir, files)
        else:
            problem = tensor_data_problem(init)
        if problem:
            problems.append(f"initializer '{init.name}': {problem}")
    return problems


# the typed field that holds each element type's data when it is not raw, and the entries per element
_TYPED_FIELDS = {1: ("float_data", 1), 2: ("int32_data", 1), 3: ("int32_data", 1), 4: ("int32_data", 1),
                 5: ("int32_data", 1), 6: ("int32_data", 1), 7: ("int64_data", 1), 8: ("string_data", 1),
                 9: ("int32_data", 1), 10: ("int32_data", 1), 11: ("double_data", 1), 12: ("uint64_data", 1),
                 13: ("uint64_data", 1), 14: ("float_data", 2), 15: ("double_data", 2), 16: ("int32_data", 1),
                 17: ("int32_data", 1), 18: ("int32_data", 1), 19: ("int32_data", 1), 20: ("int32_data", 1)}


def tensor_data_problem(tensor: Any) -> str | None:
    """What is wrong with the data a tensor holds in the file (not external): raw bytes of the
    length its type and shape need, or as many typed values as it has elements."""
    if min(tensor.dims, default=0) < 0:
        return f"has a negative dimension in its shape {list(tensor.dims)}"
    if tensor.data_type == 0:
        return "has no element type"
    count = math.prod(tensor.dims)
    if tensor.HasField("raw_data"):
        expected = data_bytes(tensor)
        if expected is not None and len(tensor.raw_data) != expected:
            return (f"holds {len(tensor.raw_data)} bytes of data, but its type and shape {list(tensor.dims)} "
                    f"need {expected}")
        return None
    field = _TYPED_FIELDS.get(tensor.data_type)
    if field is None:
        return None  # a type packed in int32_data by two (int4) or newer: ONNX's own reader checks it
    held = len(getattr(tensor, field[0]))
    if held != count * field[1] and (held or count):
        if not held:
            return f"holds no data for its {count} elements (neither raw_data nor {field[0]}, nor external)"
        return f"holds {held} values in {field[0]}, but its shape {list(tensor.dims)} has {count} elements"
    return None


_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")


def external_data_problem(init: Any, base_dir: str | None, files: dict[str, Any] | None = None) -> str | None:
    """What is wrong with an initializer's external-data reference, or None. The location must be
    relative and stay inside the model's folder (`base_dir`); when the file is there, `offset` and
    `length` must fit it and match the tensor's type and shape. A missing file is not a problem
    (weight-stripped models import by shape)."""
    if min(init.dims, default=0) < 0:
        return f"has a negative dimension in its shape {list(init.dims)}"
    info = {entry.key: entry.value for entry in init.external_data}
    location = info.get("location", "")
    if not location:
        return "its external data has no location"
    if os.path.isabs(location) or location.startswith(("/", "\\")) or _WINDOWS_DRIVE.match(location):
        return (f"its external data location '{location}' is an absolute path; ONNX locations are relative "
                "to the model's folder")
    parts = re.split(r"[\\/]+", location)
    if ".." in parts:
        return f"its external data location '{location}' points outside the model's folder"
    numbers = {}
    for key in ("offset", "length"):
        if key in info:
            text = info[key].strip()
            if not text.isdigit():
                return f"its external data {key} '{info[key]}' is not a non-negative integer"
            numbers[key] = int(text)
    offset = numbers.get("offset", 0)
    length = numbers.get("length")
    expected = data_bytes(init)
    if length is not None and expected is not None and length != expected:
        return (f"its external data length {length} bytes does not match its type and shape "
                f"{list(init.dims)} ({expected} bytes)")
    if base_dir is None:
        return None
    found = (files or {}).get(location)
    if found is None:
        found = _data_file(base_dir, location)
        if files is not None:
            files[location] = found
    if isinstance(found, str):
        return found
    if found < 0:
        return None  # weight-stripped: the importer needs shapes only
    size = found
    need = length if length is not None else expected
    if need is None:
        return None
    if offset + need > size:
        return (f"its external data needs bytes {offset}..{offset + need} of '{location}', which has "
                f"{size} bytes")
    if length is None and size - offset != need:
        return (f"its external data runs from offset {offset} to the end of '{location}' ({size - offset} "
                f"bytes), but its type and shape {list(init.dims)} need {need}")
    return None


def _data_file(base_dir: str, location: str) -> int | str:
    """The size of an external data file, -1 when it is absent, or what is wrong with it."""
    path = os.path.join(base_dir, location)
    if not os.path.lexists(path):
        return -1
    folder = os.path.realpath(base_dir)
    real = os.path.realpath(path)
    if os.path.commonpath([folder, real]) != folder:
        return f"its external data location '{location}' is a link to '{real}', outside the model's folder"
    if not os.path.isfile(real):
        return f"its external data location '{location}' is not a regular file"
    return os.path.getsize(real)


# ---------------------------------------------------------------------- nodes


def _node_problems(model: Any) -> list[str]:
    """Each node against ONNX's schema of its operator at the model's opset (`onnx_schemas`), and
    the encoding of every node's attributes and of the tensors they hold. A node of the default
    domain that ONNX has no operator for is left to the importer, which maps it (ONNX Runtime's
    training ops) or refuses it as unsupported."""
    from monet_ir.frontend.onnx_schemas import TENSOR, attribute_encoding_problem, node_problem, schema_of

    opset = _opsets(model).get("", 0)
    schemas: dict[str, Any] = {}
    for i, node in enumerate(model.graph.node):
        if not node.op_type:
            return [f"node #{i} has no op_type"]
        schema = None
        if node.domain in ("", "ai.onnx"):
            schema = schemas.get(node.op_type, False)
            if schema is False:
                schema = schemas[node.op_type] = schema_of(node.op_type, opset)
            problem = node_problem(node, schema) if schema is not None else None
        else:
            # no schema to check against (ONNX Runtime's ops): what ONNX's checker asks of any node
            problem = None
            names: set[str] = set()
            for attribute in node.attribute:
                problem = attribute_encoding_problem(attribute)
                if not problem and attribute.name in names:
                    problem = f"attribute '{attribute.name}' is given twice"
                if problem:
                    break
                names.add(attribute.name)
        if problem is None and (schema is None or schema.tensor_attributes):
            for attribute in node.attribute:
                if attribute.type == TENSOR:
                    bad = tensor_data_problem(attribute.t)
                    if bad:
                        problem = f"the tensor of attribute '{attribute.name}' {bad}"
                        break
        if problem:
            return [f"{describe_node(i, node)}: {problem}"]
    return []


def _has_subgraphs_or_functions(model: Any) -> bool:
    from monet_ir.frontend.onnx_schemas import GRAPH

    graphs = (GRAPH, 10)  # GRAPH, GRAPHS
    return bool(model.functions) or any(a.type in graphs for n in model.graph.node for a in n.attribute)


# ---------------------------------------------------------------------- ONNX's checker


def _opsets(model: Any) -> dict[str, int]:
    versions = {}
    for entry in model.opset_import:
        versions["" if entry.domain == "ai.onnx" else entry.domain] = entry.version
    return versions


def _schema_known(op_type: str, version: int, domain: str, cache: dict) -> bool:
    import onnx

    key = (op_type, version, domain)
    known = cache.get(key)
    if known is None:
        known = cache[key] = onnx.defs.has(op_type, version, "" if domain == "ai.onnx" else domain)
    return known


_SCHEMA_CACHE: dict[tuple[str, int, str], bool] = {}


def _full_tensor_type(value: Any) -> bool:
    """Whether a graph input/output states what ONNX's checker requires of the main graph's:
    a type and, for a tensor, its element type and a shape."""
    if not value.HasField("type"):
        return False
    t = value.type
    if t.HasField("tensor_type"):
        return t.tensor_type.elem_type != 0 and t.tensor_type.HasField("shape")
    return t.WhichOneof("value") is not None


def _checker_copy(model: Any) -> Any:
    """`model` as ONNX's checker should see it (`model` itself when nothing differs): initializers
    with large or external data become graph inputs of their type and dims; inputs and outputs
    without a full type (the importer infers or refuses those) get a placeholder type; nodes of
    a standard domain that ONNX has no schema for at the model's opset go to a private domain,
    which the checker skips."""
    import onnx
    from onnx import TensorProto, helper

    graph = model.graph
    heavy = [i for i, t in enumerate(graph.initializer)
             if t.data_location == TensorProto.EXTERNAL or len(t.raw_data) >= CHECKER_INLINE_BYTES]
    untyped = [v.name for v in (*graph.input, *graph.output) if not _full_tensor_type(v)]
    versions = _opsets(model)
    unknown = [i for i, n in enumerate(graph.node)
               if n.domain in _ONNX_SCHEMA_DOMAINS and not _schema_known(
                   n.op_type, versions.get("" if n.domain == "ai.onnx" else n.domain, 0), n.domain, _SCHEMA_CACHE)]
    if not heavy and not untyped and not unknown:
        return model
    copy = onnx.ModelProto()
    copy_fields(model, copy, ("graph",))
    copy_fields(graph, copy.graph, ("initializer", "input", "output"))
    heavy_set = set(heavy)
    input_names = {v.name for v in graph.input}
    for i, t in enumerate(graph.initializer):
        if i not in heavy_set:
            copy.graph.initializer.append(t)
        elif t.name not in input_names:
            copy.graph.input.append(helper.make_tensor_value_info(t.name, t.data_type or TensorProto.FLOAT,
                                                                  list(t.dims)))
    placeholder = set(untyped)
    for source, target in ((graph.input, copy.graph.input), (graph.output, copy.graph.output)):
        for v in source:
            if v.name in placeholder:
                target.append(helper.make_tensor_value_info(v.name, TensorProto.FLOAT, []))
            else:
                target.append(v)
    if unknown:
        for i in unknown:
            copy.graph.node[i].domain = _UNCHECKED_DOMAIN
        copy.opset_import.append(helper.make_opsetid(_UNCHECKED_DOMAIN, 1))
    return copy


def copy_fields(source: Any, target: Any, skip: tuple[str, ...]) -> None:
    """Copy every field set in the protobuf message `source` into `target`, except those in
    `skip` (a light copy of a model leaves out the fields it rebuilds)."""
    for fd, value in source.ListFields():
        if fd.name in skip:
            continue
        repeated = fd.is_repeated if hasattr(fd, "is_repeated") else fd.label == fd.LABEL_REPEATED
        if repeated:
            getattr(target, fd.name).extend(value)
        elif fd.message_type is not None:
            getattr(target, fd.name).CopyFrom(value)
        else:
            setattr(target, fd.name, value)


_CONTEXT = re.compile(r"==> Context: Bad node spec for node\. Name: (.*) OpType: (\S*)")
_ARITY = re.compile(r"^Node\(.*?\) with schema\((.*?)::(\w+):(\d+)\) has (input|output) size (\d+) not in range "
                    r"\[min=(\d+), max=(\d+)\]")
_NODE_PREFIX = re.compile(r"^Node\(.*?\) with schema\((.*?)\) ")
_PLAIN = (
    (re.compile(r"^Unrecognized attribute: (\S+) for operator (\S+)"),
     "unknown attribute '{0}': ONNX's {1} has no attribute of that name"),
    (re.compile(r"^Required attribute '(\S+)' is missing"), "the required attribute '{0}' is missing"),
    (re.compile(r"^Mismatched attribute type in '.* : (\S+)'\. Expected: '(\w+)', actual: '(\w+)'"),
     "attribute '{0}' is of type {2}, ONNX's schema wants {1}"),
)


def _checker_problem(model: Any) -> str | None:
    """ONNX's checker's first complaint about `model` as one line naming the node, or None."""
    import onnx

    copy = _checker_copy(model)
    try:
        onnx.checker.check_model(copy)
    except (onnx.checker.ValidationError, ValueError) as e:
        text = str(e)
    else:
        return None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    message = _plain(lines[0] if lines else "ONNX's checker refuses the model")
    found = _CONTEXT.search(text)
    if found is None:
        return f"invalid ONNX model: {message}"
    index = _failing_node(copy, found.group(1), found.group(2))
    if index is None:
        return f"node '{found.group(1)}' (::{found.group(2)}): {message}"
    return f"{describe_node(index, model.graph.node[index])}: {message}"


def _plain(message: str) -> str:
    """ONNX's checker's wording of the common problems, said plainly."""
    arity = _ARITY.match(message)
    if arity:
        _, op, version, kind, count, low, high = arity.groups()
        low_n, high_n = int(low), int(high)
        if low_n == high_n:
            takes = f"exactly {low_n}"
        elif high_n >= 2**31 - 1:
            takes = f"at least {low_n}"
        else:
            takes = f"{low_n} to {high_n}"
        return f"{count} {kind}s, but ONNX's {op} (opset {version}) takes {takes}"
    for pattern, template in _PLAIN:
        found = pattern.match(message)
        if found:
            return template.format(*found.groups())
    prefix = _NODE_PREFIX.match(message)
    if prefix:
        message = f"{message[prefix.end():]} (ONNX's schema {prefix.group(1).lstrip(':')})"
    return message.rstrip(".")


def _failing_node(model: Any, name: str, op_type: str) -> int | None:
    """The index of the node the checker's context names: the only node with that name and
    op type, or the first of them ONNX's node check refuses on its own."""
    import onnx
    from onnx import checker

    candidates = [i for i, n in enumerate(model.graph.node) if n.name == name and n.op_type == op_type]
    if len(candidates) <= 1:
        return candidates[0] if candidates else None
    ctx = checker.C.CheckerContext()
    ctx.ir_version = model.ir_version
    ctx.opset_imports = {e.domain: e.version for e in model.opset_import}
    for i in candidates:
        try:
            checker.check_node(model.graph.node[i], ctx, checker.C.LexicalScopeContext())
        except (onnx.checker.ValidationError, ValueError):
            return i
    return candidates[0]
