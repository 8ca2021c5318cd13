"""ZigZag's workload YAML as a model: `monet report workload.yaml ...` (the ONNX importer reads
the ONNX graph this module writes from it).

A ZigZag workload is a list of layers, each an einsum-like `equation` over `loop_dims` of
`loop_sizes`, e.g.

```yaml
- id: 2
  name: conv2_1
  operator_type: Conv
  equation: O[b][k][oy][ox]+=W[k][c][fy][fx]*I[b][c][iy][ix]
  dimension_relations: [ix=1*ox+1*fx, iy=1*oy+1*fy]
  loop_dims: [B, K, C, OY, OX, FY, FX]
  loop_sizes: [1, 64, 64, 56, 56, 3, 3]
  operand_precision: {W: 8, I: 8, O: 16, O_final: 8}
  operand_source: {I: 1, W: 2}        # I from layer 1; W from itself: a weight
  pr_loop_dims: [IX, IY]               # optional: the input's extent and padding per window dim
  pr_loop_sizes: [58, 58]
  padding: [[1, 1], [1, 1]]
```

Each loop dim's role follows from which operands index it: in O and I only, a batch row; in O
and W only, an output channel; in W and I only, a reduction; in all three, a group; in a
`dimension_relations` window (``ix = s*ox + d*fx``), an output position and a filter tap. A
contraction (``+=`` with ``*``) with windows becomes a Conv, without a MatMul; ``+`` of two
operands an Add; ZigZag's `Pooling` (a constant W over the window) a MaxPool. An operand whose
`operand_source` is the layer itself is a graph input (I) or a weight (W); another layer's id
takes that layer's output, reshaped when only its shape differs; rows and columns a window
reaches past it are this layer's padding (ZigZag sizes each layer on its own). What cannot be read this way is a
one-line error naming the layer and field.
"""

from __future__ import annotations

import re
from typing import Any

from monet_ir.errors import MonetError

_EQUATION = re.compile(r"^\s*O((?:\[\w+\])+)\s*(\+?=)\s*(\w+)((?:\[\w+\])*)\s*([*+])\s*(\w+)((?:\[\w+\])*)\s*$")
_RELATION = re.compile(r"^\s*(\w+)\s*=\s*(?:(\d+)\s*\*\s*)?(\w+)\s*\+\s*(?:(\d+)\s*\*\s*)?(\w+)\s*$")


class WorkloadError(MonetError):
    """A ZigZag workload MONET cannot read; str() is one line naming the file, layer and field."""


def is_zigzag_workload(path: str) -> bool:
    return str(path).endswith((".yaml", ".yml"))


def _indices(text: str) -> list[str]:
    return re.findall(r"\[(\w+)\]", text)


class _Layer:
    """One layer's equation read into operands and loop roles."""

    def __init__(self, raw: Any, index: int, file: str):
        self.where = f"{file}: layer [{index}]"
        if not isinstance(raw, dict):
            raise WorkloadError(f"{self.where}: expected a mapping")
        for key in ("id", "equation", "loop_dims", "loop_sizes"):
            if key not in raw:
                raise WorkloadError(f"{self.where}: needs '{key}'")
        self.id = raw["id"]
        self.where = f"{file}: layer {self.id}"
        self.name = str(raw.get("name") or f"layer{self.id}")
        self.type = str(raw.get("operator_type", ""))
        dims, sizes = raw["loop_dims"], raw["loop_sizes"]
        if not isinstance(dims, list) or not isinstance(sizes, list) or len(dims) != len(sizes) or not all(
                isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in sizes):
            raise WorkloadError(f"{self.where}: loop_dims and loop_sizes must be lists of the same length, sizes "
                                "positive integers")
        self.sizes = {str(d).lower(): s for d, s in zip(dims, sizes)}
        match = _EQUATION.match(str(raw["equation"]))
        if not match:
            raise WorkloadError(f"{self.where}: equation {raw['equation']!r}: expected O[..](+)=X[..]*Y[..] or "
                                "O[..]=X[..]+Y[..]")
        out, assign, first, first_idx, operator, second, second_idx = match.groups()
        operands = {first: _indices(first_idx), second: _indices(second_idx)}
        if set(operands) != {"W", "I"}:
            raise WorkloadError(f"{self.where}: equation: the operands must be W and I, got {first} and {second}")
        self.out = _indices(out)
        self.w, self.i = operands["W"], operands["I"]
        self.contraction = operator == "*" and assign == "+="
        self.relations: dict[str, tuple[str, int, str, int]] = {}
        for text in raw.get("dimension_relations") or []:
            rel = _RELATION.match(str(text))
            if not rel:
                raise WorkloadError(f"{self.where}: dimension_relations {text!r}: expected ix=S*ox+D*fx")
            target, stride, out_dim, dilation, filter_dim = rel.groups()
            self.relations[target.lower()] = (out_dim.lower(), int(stride or 1), filter_dim.lower(), int(dilation or 1))
        for dim in self.out + self.w + [d for d in self.i if d not in self.relations]:
            if dim not in self.sizes:
                raise WorkloadError(f"{self.where}: equation index '{dim}' is not in loop_dims")
        self.precision = raw.get("operand_precision") or {}
        self.source = raw.get("operand_source") or {}
        pr_dims = [str(d).lower() for d in raw.get("pr_loop_dims") or []]
        self.pr_sizes = dict(zip(pr_dims, raw.get("pr_loop_sizes") or []))
        padding = raw.get("padding") or []
        self.padding = {d: tuple(p) for d, p in zip(pr_dims, padding) if isinstance(p, list) and len(p) == 2}

    def size(self, dims: list[str]) -> list[int]:
        return [self.sizes[d] for d in dims]


def workload_model(path: str) -> Any:
    """The ONNX model of a ZigZag workload YAML."""
    import numpy as np
    import yaml
    from onnx import TensorProto, helper, numpy_helper

    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except OSError as e:
        raise WorkloadError(f"{path}: cannot read file: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise WorkloadError(f"{path}: not valid YAML ({getattr(e, 'problem', e)})") from None
    if not isinstance(data, list) or not data:
        raise WorkloadError(f"{path}: expected a ZigZag workload: a list of layers with id, equation, loop_dims, "
                            "loop_sizes")
    layers = [_Layer(raw, index, path) for index, raw in enumerate(data)]
    nodes, inputs, initializers = [], [], []
    outputs: dict[Any, tuple[str, list[int]]] = {}  # layer id -> its output's name and shape
    consumed: set[Any] = set()
    padded: dict[Any, list[int]] = {}  # layer id -> rows and columns its input lacks (padding)

    def operand(layer: _Layer, role: str, shape: list[int], weight: bool, allow_pad: bool = False) -> str:
        """The tensor feeding `role` of `layer` with `shape` (NCHW order for a conv input)."""
        source = layer.source.get(role, layer.id)
        name = f"{layer.name}.{role}"
        if source == layer.id or source is None:
            if weight:
                initializers.append(_empty_initializer(name, shape))
            else:
                inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
            return name
        if source not in outputs:
            raise WorkloadError(f"{layer.where}: operand_source {role}: {source} is no earlier layer's id")
        consumed.add(source)
        produced, produced_shape = outputs[source]
        if produced_shape == shape:
            return produced
        if allow_pad and len(produced_shape) == 4 and produced_shape[:2] == shape[:2] and all(
                a <= b for a, b in zip(produced_shape[2:], shape[2:])):
            # a window reaching past the producer's rows and columns: padding of this layer
            padded[layer.id] = [b - a for a, b in zip(produced_shape[2:], shape[2:])]
            return produced
        if _count(produced_shape) != _count(shape):
            raise WorkloadError(f"{layer.where}: operand_source {role}: layer {source} gives {produced_shape}, this "
                                f"layer reads {shape}")
        shape_name = f"{name}.shape"
        initializers.append(numpy_helper.from_array(np.array(shape, dtype=np.int64), shape_name))
        nodes.append(helper.make_node("Reshape", [produced, shape_name], [f"{name}.reshaped"], name=f"{name}.reshape"))
        return f"{name}.reshaped"

    for layer in layers:
        result = layer.name
        if layer.contraction and layer.relations and layer.type != "Pooling":
            node, shape = _conv(layer, operand, padded)
        elif layer.contraction and layer.type == "Pooling":
            node, shape = _pool(layer, operand, padded)
        elif layer.contraction:
            node, shape = _matmul(layer, operand)
        elif not layer.relations and sorted(layer.w) == sorted(layer.out) == sorted(layer.i):
            shape = layer.size(layer.out)
            node = helper.make_node("Add", [operand(layer, "I", shape, False), operand(layer, "W", shape, False)],
                                    [result], name=layer.name)
        else:
            raise WorkloadError(f"{layer.where}: operator_type {layer.type or '?'} with equation over "
                                f"{layer.out}: MONET reads contractions (Conv, Gemm, MatMul), Pooling and Add")
        nodes.append(node)
        outputs[layer.id] = (result, shape)
    graph_outputs = [helper.make_tensor_value_info(outputs[l.id][0], TensorProto.FLOAT, outputs[l.id][1])
                     for l in layers if l.id not in consumed]
    graph = helper.make_graph(nodes, path.rsplit("/", 1)[-1], inputs, graph_outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _count(shape: list[int]) -> int:
    total = 1
    for size in shape:
        total *= size
    return total


def _empty_initializer(name: str, shape: list[int]) -> Any:
    """A weight with its shape and no data (MONET costs shapes; ZigZag's workloads carry none)."""
    from onnx import TensorProto

    tensor = TensorProto()
    tensor.name = name
    tensor.data_type = TensorProto.FLOAT
    tensor.dims.extend(shape)
    tensor.data_location = TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", f"{name}.absent"
    return tensor


def _roles(layer: _Layer) -> dict[str, list[str]]:
    """Loop dims by role: batch (O, I), out (O, W), reduce (W, I), group (all), window pairs."""
    in_i = set(layer.i) | {d for rel in layer.relations.values() for d in (rel[0], rel[2])}
    window = {d for rel in layer.relations.values() for d in (rel[0], rel[2])}
    roles: dict[str, list[str]] = {"batch": [], "out": [], "reduce": [], "group": []}
    for dim in layer.sizes:
        if dim in window:
            continue
        o, w, i = dim in layer.out, dim in layer.w, dim in in_i
        role = {(True, False, True): "batch", (True, True, False): "out", (False, True, True): "reduce",
                (True, True, True): "group"}.get((o, w, i))
        if role is None:
            if layer.sizes[dim] == 1:
                continue
            raise WorkloadError(f"{layer.where}: loop dim {dim.upper()} indexes "
                                f"{'/'.join(n for n, x in (('O', o), ('W', w), ('I', i)) if x) or 'no operand'}: "
                                "not a role of a contraction MONET reads")
        roles[role].append(dim)
    return roles


def _product(layer: _Layer, dims: list[str]) -> int:
    return _count(layer.size(dims)) if dims else 1


def _extra_padding(node: Any, extra: list[int] | None) -> None:
    """Add the rows and columns the input lacks to the node's padding (half before, half after)."""
    if not extra:
        return
    from onnx import helper

    pads = next((list(a.ints) for a in node.attribute if a.name == "pads"), [0, 0, 0, 0])
    pads = [pads[0] + extra[0] // 2, pads[1] + extra[1] // 2, pads[2] + extra[0] - extra[0] // 2,
            pads[3] + extra[1] - extra[1] // 2]
    kept = [a for a in node.attribute if a.name != "pads"]
    del node.attribute[:]
    node.attribute.extend(kept + [helper.make_attribute("pads", pads)])


def _conv(layer: _Layer, operand, padded: dict) -> tuple[Any, list[int]]:
    from onnx import helper

    roles = _roles(layer)
    windows = [d for d in layer.i if d in layer.relations]
    if not 1 <= len(windows) <= 2:
        raise WorkloadError(f"{layer.where}: dimension_relations: MONET reads 1-D and 2-D windows, got {len(windows)}")
    if len(windows) == 1:
        windows = [None] + windows
    batch, group = _product(layer, roles["batch"]), _product(layer, roles["group"])
    out_ch, in_ch = _product(layer, roles["out"]), _product(layer, roles["reduce"])
    outs, kernel, strides, dilations, extents, begins, ends = [], [], [], [], [], [], []
    for window in windows:
        if window is None:
            outs.append(1), kernel.append(1), strides.append(1), dilations.append(1), extents.append(1)
            begins.append(0), ends.append(0)
            continue
        out_dim, stride, filter_dim, dilation = layer.relations[window]
        out, taps = layer.sizes.get(out_dim, 1), layer.sizes.get(filter_dim, 1)
        span = stride * (out - 1) + dilation * (taps - 1) + 1
        begin, end = layer.padding.get(window, (0, 0))
        extent = int(layer.pr_sizes.get(window, span - begin - end))
        outs.append(out), kernel.append(taps), strides.append(stride), dilations.append(dilation)
        extents.append(extent), begins.append(begin), ends.append(max(0, span - begin - extent))
    x_shape = [batch, group * in_ch, *extents]
    w_shape = [group * out_ch, in_ch, *kernel]
    x = operand(layer, "I", x_shape, False, allow_pad=True)
    w = operand(layer, "W", w_shape, True)
    node = helper.make_node("Conv", [x, w], [layer.name], name=layer.name, kernel_shape=kernel, strides=strides,
                            dilations=dilations, pads=begins + ends, group=group)
    _extra_padding(node, padded.get(layer.id))
    return node, [batch, group * out_ch, *outs]


def _pool(layer: _Layer, operand, padded: dict) -> tuple[Any, list[int]]:
    from onnx import helper

    windows = [d for d in layer.i if d in layer.relations]
    if len(windows) != 2:
        raise WorkloadError(f"{layer.where}: Pooling needs two window dimension_relations")
    # the output's dims outside the windows: the first is the batch, the others channels
    window_outs = {rel[0] for rel in layer.relations.values()}
    plain = [d for d in layer.out if d not in window_outs]
    batch, channels = _product(layer, plain[:1]), _product(layer, plain[1:])
    outs, kernel, strides, extents = [], [], [], []
    for window in windows:
        out_dim, stride, filter_dim, dilation = layer.relations[window]
        out, taps = layer.sizes.get(out_dim, 1), layer.sizes.get(filter_dim, 1)
        outs.append(out), kernel.append(taps), strides.append(stride)
        extents.append(int(layer.pr_sizes.get(window, stride * (out - 1) + taps)))
    x = operand(layer, "I", [batch, channels, *extents], False, allow_pad=True)
    node = helper.make_node("MaxPool", [x], [layer.name], name=layer.name, kernel_shape=kernel, strides=strides)
    _extra_padding(node, padded.get(layer.id))
    return node, [batch, channels, *outs]


def _matmul(layer: _Layer, operand) -> tuple[Any, list[int]]:
    from onnx import helper

    roles = _roles(layer)
    rows, cols = _product(layer, roles["batch"]), _product(layer, roles["out"])
    inner, group = _product(layer, roles["reduce"]), _product(layer, roles["group"])
    lead = [group] if roles["group"] else []
    a = operand(layer, "I", [*lead, rows, inner], False)
    b = operand(layer, "W", [*lead, inner, cols], not roles["group"])
    node = helper.make_node("MatMul", [a, b], [layer.name], name=layer.name)
    return node, [*lead, rows, cols]
