"""A synthetic training-step signature set from a forward ONNX model (for benchmarks and
sanity checks; the real backward graph comes from the autodiff pass).

Per Conv/Gemm/MatMul: the forward, input-gradient and weight-gradient loop nests (the input
gradient of a node fed by the graph input is kept: it is cheap to drop later).  Per other
compute node: a VectorSig for the forward op and one for its gradient.  Per parameter
(initializer that feeds a compute node): one Adam update (reads w, g, m, v; writes w, m, v in
fp32; about 10 ops per element).  Shape-only ops (Reshape, Flatten, Shape, Constant...) are free.
"""

from __future__ import annotations

from typing import Any

from .onnx_layers import LOOP_NEST_OPS, load_shaped_model, node_sig, tensor_shapes, training_sigs
from .signature import LoopNestSig, VectorSig

# op type -> (kind, ops per output element of the forward op, ops per element of its gradient)
VECTOR_OPS = {
    "Relu": ("elementwise", 1, 1),
    "LeakyRelu": ("elementwise", 2, 2),
    "Sigmoid": ("elementwise", 4, 3),
    "Tanh": ("elementwise", 4, 3),
    "Exp": ("elementwise", 4, 1),
    "Erf": ("elementwise", 4, 4),
    "Gelu": ("elementwise", 8, 10),
    "Sqrt": ("elementwise", 4, 2),
    "Pow": ("elementwise", 2, 3),
    "Add": ("elementwise", 1, 0),
    "Sub": ("elementwise", 1, 1),
    "Mul": ("elementwise", 1, 2),
    "Div": ("elementwise", 4, 6),
    "Neg": ("elementwise", 1, 1),
    "Where": ("elementwise", 1, 1),
    "Cast": ("elementwise", 1, 1),
    "BatchNormalization": ("norm", 8, 12),
    "LayerNormalization": ("norm", 8, 12),
    "Softmax": ("softmax", 5, 3),
    "MaxPool": ("pool", 1, 1),
    "AveragePool": ("pool", 1, 1),
    "GlobalAveragePool": ("reduction", 1, 1),
    "ReduceMean": ("reduction", 1, 1),
    "ReduceSum": ("reduction", 1, 1),
    "Transpose": ("data_movement", 0, 0),
    "Gather": ("data_movement", 0, 1),
    "Concat": ("data_movement", 0, 0),
    "Split": ("data_movement", 0, 0),
    "Slice": ("data_movement", 0, 0),
    "Expand": ("data_movement", 0, 0),
}


def _numel(shape: list[int] | None) -> int:
    total = 1
    for size in shape or []:
        total *= max(1, size)
    return total


def _window(node: Any, shapes: dict[str, list[int]]) -> int:
    from .onnx_layers import _attr

    if node.op_type in ("MaxPool", "AveragePool"):
        window = 1
        for size in _attr(node, "kernel_shape", [1]):
            window *= size
        return window
    if node.op_type in ("GlobalAveragePool", "ReduceMean", "ReduceSum"):
        return max(1, _numel(shapes.get(node.input[0])) // max(1, _numel(shapes.get(node.output[0]))))
    return 1


def vector_sigs(node: Any, shapes: dict[str, list[int]], bits: int) -> list[VectorSig]:
    """Forward and gradient VectorSig of one non-loop-nest node (empty for free ops)."""
    if node.op_type not in VECTOR_OPS:
        return []
    kind, forward_ops, backward_ops = VECTOR_OPS[node.op_type]
    width = bits // 8 or 1
    out = _numel(shapes.get(node.output[0]))
    read = sum(_numel(shapes.get(name)) for name in node.input if name)
    window = _window(node, shapes)
    per_output = forward_ops if window == 1 else 1
    forward = VectorSig(kind, out, per_output, read * width, out * width, window, bits)
    # The gradient reads dY and the saved tensors of the forward op and writes one gradient per
    # differentiable input.
    backward = VectorSig(kind, read, max(backward_ops, 0), (out + read) * width, read * width, 1, bits)
    return [forward, backward]


def adam_sig(elements: int) -> VectorSig:
    return VectorSig("optimizer", elements, 10, elements * 16, elements * 12, 1, 32)


def training_step_sigs(model_or_path: Any, bits: int = 16, psum_bits: int = 32) -> list[tuple[str, LoopNestSig | VectorSig]]:
    """(label, sig) for a whole training step of a forward ONNX model, at `bits` precision."""
    model = load_shaped_model(model_or_path) if isinstance(model_or_path, str) else model_or_path
    shapes = tensor_shapes(model)
    precision = (bits, bits, bits, psum_bits)
    sigs: list[tuple[str, LoopNestSig | VectorSig]] = []
    for node in model.graph.node:
        name = node.name or node.output[0]
        if node.op_type in LOOP_NEST_OPS:
            try:
                forward = node_sig(node, shapes, precision)
            except ValueError:
                continue
            for label, sig in zip(("fwd", "dx", "dw"), training_sigs(forward)):
                sigs.append((f"{name}:{label}", sig))
        else:
            for label, sig in zip(("fwd", "bwd"), vector_sigs(node, shapes, bits)):
                sigs.append((f"{name}:{label}", sig))
    parameters = {init.name: _numel(list(init.dims)) for init in model.graph.initializer}
    used = {name for node in model.graph.node for name in node.input if name in parameters}
    for name in sorted(used):
        if parameters[name] > 1:
            sigs.append((f"{name}:adam", adam_sig(parameters[name])))
    return sigs
