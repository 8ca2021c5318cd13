"""Reading an ONNX node: its name and attributes, shared by the importer and the op converters.

`monet_ir.frontend.onnx_import` (the driver) and `monet_ir.frontend.onnx_ops` (one converter per
ONNX op) both read nodes; these helpers sit below both so neither imports the other's helpers.
`onnx` is imported on first use.
"""

from __future__ import annotations

from typing import Any


def node_name(node: Any) -> str:
    return node.name or (node.output[0] if node.output else node.op_type)


def attr(node: Any, name: str, default: Any = None) -> Any:
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            value = helper.get_attribute_value(a)
            return value.decode(errors="replace") if isinstance(value, bytes) else value
    return default


def attrs_of(node: Any) -> dict[str, Any]:
    from onnx import helper

    out = {}
    for a in node.attribute:
        value = helper.get_attribute_value(a)
        out[a.name] = value.decode(errors="replace") if isinstance(value, bytes) else value
    return out
