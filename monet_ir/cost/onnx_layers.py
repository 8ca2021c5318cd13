"""Read ONNX Conv/Gemm/MatMul nodes (with inferred shapes) into LoopNestSig.

`import onnx` happens inside the functions.  Shapes come from the graph's value_info after
``onnx.shape_inference.infer_shapes``; initializers give weight shapes even when their data is
external and absent (weight-stripped models load with ``load_external_data=False``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable

from .conv_nest import NotAConvNest, conv_loop_nest, same_pads
from .signature import LoopNestSig

LOOP_NEST_OPS = ("Conv", "Gemm", "MatMul")


def load_shaped_model(path: str) -> Any:
    """Load an ONNX file without external data and infer every static shape."""
    import onnx

    model = onnx.load(path, load_external_data=False)
    return onnx.shape_inference.infer_shapes(model, data_prop=True)


def tensor_shapes(model: Any) -> dict[str, list[int]]:
    """Static shapes of every named value: inputs, outputs, value_info and initializers."""
    shapes: dict[str, list[int]] = {}
    graph = model.graph
    for value in list(graph.input) + list(graph.output) + list(graph.value_info):
        tensor_type = value.type.tensor_type
        if tensor_type.HasField("shape"):
            shapes[value.name] = [d.dim_value if d.HasField("dim_value") else 0 for d in tensor_type.shape.dim]
    for init in graph.initializer:
        shapes[init.name] = list(init.dims)
    return shapes


def _attr(node: Any, name: str, default: Any) -> Any:
    import onnx

    for attribute in node.attribute:
        if attribute.name == name:
            return onnx.helper.get_attribute_value(attribute)
    return default


def conv_sig(node: Any, shapes: dict[str, list[int]], bits: tuple[int, int, int, int] = (8, 8, 8, 16)) -> LoopNestSig:
    """A Conv node (2-D, or 1-D treated as height 1) as a forward loop nest (`conv_nest`)."""
    x_shape = shapes.get(node.input[0])
    w_shape = shapes.get(node.input[1])
    if not x_shape or not w_shape or 0 in x_shape or 0 in w_shape:
        raise ValueError(f"Conv {node.name!r}: shapes of input and weight must be known")
    spatial = len(x_shape) - 2
    strides = list(_attr(node, "strides", [1] * spatial))
    dilations = list(_attr(node, "dilations", [1] * spatial))
    pads = list(_attr(node, "pads", [0] * (2 * spatial)))
    auto_pad = _attr(node, "auto_pad", "NOTSET")
    if isinstance(auto_pad, bytes):
        auto_pad = auto_pad.decode()
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = same_pads(x_shape[2:], w_shape[2:], strides, dilations, auto_pad == "SAME_UPPER")
    elif auto_pad == "VALID":
        pads = [0] * (2 * spatial)
    try:
        return conv_loop_nest("conv", x_shape, w_shape, strides, pads, dilations, int(_attr(node, "group", 1)), "O", bits)
    except NotAConvNest as error:
        raise ValueError(f"Conv {node.name!r}: {error}") from None


def matmul_sig(node: Any, shapes: dict[str, list[int]], bits: tuple[int, int, int, int] = (8, 8, 8, 16)) -> LoopNestSig:
    """Gemm/MatMul: Y[..., M, N] = A[..., M, K] . B[..., K, N] with leading dims folded.

    Leading dims that both operands have become G (batched, e.g. attention heads); leading dims
    only A has (B is a shared weight) fold into the row count M, as a Linear layer on a 3-D input.
    """
    a_shape = list(shapes.get(node.input[0]) or [])
    b_shape = list(shapes.get(node.input[1]) or [])
    if not a_shape or not b_shape:
        raise ValueError(f"{node.op_type} {node.name!r}: shapes of both inputs must be known")
    if node.op_type == "Gemm":
        if _attr(node, "transA", 0):
            a_shape = a_shape[::-1]
        if _attr(node, "transB", 0):
            b_shape = b_shape[::-1]
    if len(a_shape) == 1:
        a_shape = [1] + a_shape
    if len(b_shape) == 1:
        b_shape = b_shape + [1]
    rows, inner = a_shape[-2], a_shape[-1]
    cols = b_shape[-1]
    a_lead, b_lead = a_shape[:-2], b_shape[:-2]
    groups = 1
    for size in b_lead:
        groups *= max(1, size)
    a_lead_total = 1
    for size in a_lead:
        a_lead_total *= max(1, size)
    rows *= max(1, a_lead_total // groups)
    w_bits, i_bits, o_bits, psum_bits = bits
    kind = "gemm" if node.op_type == "Gemm" else "matmul"
    return LoopNestSig(kind=kind, b=max(1, rows), g=groups, k=max(1, cols), c=max(1, inner),
                       w_bits=w_bits, i_bits=i_bits, o_bits=o_bits, psum_bits=psum_bits)


def node_sig(node: Any, shapes: dict[str, list[int]], bits: tuple[int, int, int, int] = (8, 8, 8, 16)) -> LoopNestSig:
    if node.op_type == "Conv":
        return conv_sig(node, shapes, bits)
    if node.op_type in ("Gemm", "MatMul"):
        return matmul_sig(node, shapes, bits)
    raise ValueError(f"{node.op_type} {node.name!r} is not a loop-nest op")


def training_sigs(forward: LoopNestSig) -> tuple[LoopNestSig, LoopNestSig, LoopNestSig]:
    """Forward, input-gradient and weight-gradient nests of one layer (same loops, same MACs)."""
    base = forward.kind
    grad_input = replace(forward, kind=f"{base}_grad_input", output_operand="I")
    grad_weight = replace(forward, kind=f"{base}_grad_weight", output_operand="W")
    return forward, grad_input, grad_weight


def model_layer_sigs(model: Any, bits: tuple[int, int, int, int] = (8, 8, 8, 16)) -> list[tuple[str, LoopNestSig]]:
    """(node name, forward sig) for every Conv/Gemm/MatMul node of a shape-inferred model."""
    shapes = tensor_shapes(model)
    found = []
    for node in model.graph.node:
        if node.op_type in LOOP_NEST_OPS:
            found.append((node.name or node.output[0], node_sig(node, shapes, bits)))
    return found


def iter_nodes(model: Any, op_types: Iterable[str]) -> Iterable[Any]:
    wanted = set(op_types)
    return (node for node in model.graph.node if node.op_type in wanted)
