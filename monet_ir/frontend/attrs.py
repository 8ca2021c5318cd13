"""Reading an ONNX node: its name and attributes, shared by the importer and the op converters.

`monet_ir.frontend.onnx_import` (the driver) and `monet_ir.frontend.onnx_ops` (one converter per
ONNX op) both read nodes; these helpers sit below both so neither imports the other's helpers.
`onnx` is imported on first use.
"""

from __future__ import annotations

from typing import Any


def node_name(node: Any) -> str:
    return node.name or (node.output[0] if node.output else node.op_type)


class WrongAttributeType(ValueError):
    """An attribute of a node ONNX has no schema for is not of the type its converter reads."""


# AttributeProto types a converter's default value stands for (FLOAT, INT, STRING, FLOATS, INTS)
_KIND_OF_DEFAULT = {float: (1, "FLOAT"), int: (2, "INT"), bool: (2, "INT"), str: (3, "STRING")}
_LIST_KINDS = {float: (6, "FLOATS"), int: (7, "INTS")}


def attr(node: Any, name: str, default: Any = None) -> Any:
    """The value of attribute `name`, or `default`. On a node of a domain ONNX has no schemas
    for (ONNX Runtime's), whose attributes validation could not type, the attribute must be of
    the type of `default`: a FLOAT where an INT is read (a corrupted file) is refused, not
    rounded."""
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            if default is not None and node.domain not in ("", "ai.onnx"):
                _check_type(node, a, default)
            value = helper.get_attribute_value(a)
            return value.decode(errors="replace") if isinstance(value, bytes) else value
    return default


def _check_type(node: Any, attribute: Any, default: Any) -> None:
    if isinstance(default, (list, tuple)):
        kinds = {_LIST_KINDS.get(type(v)) for v in default} - {None}
        expected = next(iter(kinds)) if len(kinds) == 1 else None
    else:
        expected = _KIND_OF_DEFAULT.get(type(default))
    if expected is not None and attribute.type != expected[0]:
        from monet_ir.frontend.onnx_schemas import ATTRIBUTE_TYPE_NAMES

        raise WrongAttributeType(f"attribute '{attribute.name}' is of type "
                                 f"{ATTRIBUTE_TYPE_NAMES.get(attribute.type, attribute.type)}, where {node.op_type} "
                                 f"takes {expected[1]}")


def attrs_of(node: Any) -> dict[str, Any]:
    from onnx import helper

    out = {}
    for a in node.attribute:
        value = helper.get_attribute_value(a)
        out[a.name] = value.decode(errors="replace") if isinstance(value, bytes) else value
    return out
