"""Converters of ONNX's indexing and routing operators: Tile, TopK, OneHot, ScatterElements and
NonZero, whose output count depends on the data (bounded statically by `monet_ir.frontend.routing`).
"""

from __future__ import annotations

import math
from typing import Any

from xdsl.dialects.builtin import StringAttr, TensorType, i64

from dialects import nn
from dialects.base import bool_attr, float_attr, int_attr, ints_attr
from monet_ir.frontend.attrs import attr, node_name
from monet_ir.frontend.onnx_ops import Unsupported, const_input, const_ints, converts, emit, same_type
from monet_ir.frontend.routing import balanced_choices


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@converts("Tile")
def convert_tile(imp: Any, node: Any) -> None:
    repeats = const_ints(imp, node, 1, "repeats")
    x = imp.value(node.input[0])
    if all(r == 1 for r in repeats):
        imp.bind(node.output[0], x)
        return
    emit(imp, node, nn.TileOp, [x], same_type(imp, node), {"repeats": ints_attr(repeats)})


@converts("ScatterElements", "Scatter")
def convert_scatter_elements(imp: Any, node: Any) -> None:
    reduction = _text(attr(node, "reduction", "none"))
    if reduction not in nn.ScatterElementsOp.REDUCTIONS:
        raise Unsupported(f"reduction '{reduction}' is not an ONNX value")
    emit(imp, node, nn.ScatterElementsOp, [imp.value(n) for n in node.input[:3]], same_type(imp, node), {
        "axis": int_attr(attr(node, "axis", 0)),
        "reduction": StringAttr(reduction) if reduction != "none" else None,
    })


@converts("TopK")
def convert_topk(imp: Any, node: Any) -> None:
    k = const_ints(imp, node, 1, "k") if imp.opset >= 10 else [attr(node, "k")]
    if k is None or len(k) != 1 or k[0] is None:
        raise Unsupported("k must be one constant integer")
    x = imp.value(node.input[0])
    types = [imp.result_type(node.output[0]), imp.result_type(node.output[1])]
    axis = attr(node, "axis", -1)
    emit(imp, node, nn.TopKOp, [x], types, {
        "k": int_attr(k[0]),
        "axis": int_attr(axis),
        "largest": bool_attr(False) if not attr(node, "largest", 1) else None,
    })
    imp.routing.set_decisions(node.output[1], balanced_choices(list(x.type.get_shape()), axis, k[0]))


@converts("OneHot")
def convert_one_hot(imp: Any, node: Any) -> None:
    depth = const_input(imp, node, 1, "depth")
    values = const_input(imp, node, 2, "values")
    if depth is None or depth.size != 1:
        raise Unsupported("depth must be one constant")
    if values is None or values.size != 2:
        raise Unsupported("values must be two constants [off, on]")
    flat = values.reshape(-1)
    emit(imp, node, nn.OneHotOp, [imp.value(node.input[0])], same_type(imp, node), {
        "depth": int_attr(int(depth.reshape(-1)[0])),
        "axis": int_attr(attr(node, "axis", -1)),
        "off_value": float_attr(float(flat[0])),
        "on_value": float_attr(float(flat[1])),
    })


@converts("NonZero")
def convert_nonzero(imp: Any, node: Any) -> None:
    x = imp.value(node.input[0])
    shape = list(x.type.get_shape())
    bound = imp.routing.bound(node, node.input[0], math.prod(shape))
    t = TensorType(i64, [len(shape), bound])
    imp.value_types[node.output[0]] = t
    emit(imp, node, nn.NonZeroOp, [x], [t])
