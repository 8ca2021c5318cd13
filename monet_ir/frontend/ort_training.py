"""Conventions of ONNX Runtime training graphs (what the MONET paper's experiments consume).

An ORT training graph holds forward, backward (`com.microsoft` gradient ops and standard ops
named `..._Grad/...`) and optimizer nodes in one graph. Parameters, gradient-accumulation
buffers and optimizer moments are graph inputs; ORT names them after the parameter
(`P_grad.accumulation.buffer`, `P_optimizer_first_moment`, ...) and writes the updated parameter
to an output `P_optimizer_end`. This module reads those conventions:

- `classify_inputs`: data inputs, parameters (trainable when they have optimizer state or an
  accumulation buffer), optimizer state, and constants;
- `origin_of`: phase and originating forward node from the node name;
- `add_missing_shapes`: output shapes of `com.microsoft` ops that ONNX shape inference does not
  know;
- `collapse_decomposed_adam`: an Adam update written out as element-wise nodes becomes one
  `train.adam` op (its cost is then that of our optimizer op, not of a dozen anonymous nodes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

STATE_SUFFIXES = ("_optimizer_first_moment", "_optimizer_second_moment", "_grad.accumulation.buffer")
ORT_GRAD_OPS = {
    "ReluGrad", "ConvGrad", "AveragePoolGrad", "MaxPoolGrad", "SoftmaxCrossEntropyLossGrad", "GeluGrad",
    "FastGeluGrad", "SoftmaxGrad", "SoftmaxGrad_13", "LogSoftmaxGrad", "LogSoftmaxGrad_13",
    "LayerNormalizationGrad", "BatchNormalizationGrad", "GatherGrad", "InPlaceAccumulator",
    "InPlaceAccumulatorV2", "BiasGeluGrad_dX", "BiasFastGeluGrad_dX", "SigmoidGrad", "TanhGrad",
    "LeakyReluGrad", "DropoutGrad", "QuickGeluGrad", "ConvTransposeGrad", "SplitTraining", "LSTMGrad", "GRUGrad",
    "SimplifiedLayerNormalizationGrad", "SliceGrad",
}
ORT_OPTIMIZER_OPS = {"AdamOptimizer", "SGDOptimizer", "AdamWOptimizer", "SGDOptimizerV2"}


def detect(graph: Any) -> bool:
    """Whether the graph is an ONNX Runtime training graph."""
    # ORT registers MaxPoolGrad and AveragePoolGrad in the standard domain, others in its own
    if any(n.domain in ("com.microsoft", "", "ai.onnx") and (n.op_type in ORT_GRAD_OPS or n.op_type in ORT_OPTIMIZER_OPS)
           for n in graph.node):
        return True
    return any(o.name.endswith("_optimizer_end") for o in graph.output) or any(
        i.name.endswith(STATE_SUFFIXES) for i in graph.input
    )


def classify_inputs(graph: Any, initializers: dict[str, Any]) -> dict[str, tuple[str, bool]]:
    """(role, trainable) of every graph input; role is input | param | state | const.

    Parameters are recognised by their optimizer state or accumulation buffer; ORT lists the
    data inputs before the parameters, so float inputs before the first recognised parameter
    are data and float inputs after it are (frozen) parameters.
    """
    names = {i.name for i in graph.input} | set(initializers)
    outputs = {o.name for o in graph.output}
    roles: dict[str, tuple[str, bool]] = {}
    seen_param = False
    for value in graph.input:
        name = value.name
        elem = value.type.tensor_type.elem_type
        if name.endswith(STATE_SUFFIXES):
            roles[name] = ("state", False)
        elif any(name + s in names for s in STATE_SUFFIXES) or name + "_optimizer_end" in outputs:
            roles[name] = ("param", True)
            seen_param = True
        elif name in initializers:
            roles[name] = ("const", False)
        elif elem in (1, 10, 11, 16) and seen_param:
            roles[name] = ("param", False)
        else:
            roles[name] = ("input", False)
    return roles


def origin_of(node: Any, producers: dict[str, Any]) -> tuple[str, str]:
    """(forward node name, phase) of an ORT training-graph node.

    ORT names optimizer nodes `Adam_...`, gradient nodes `<forward node>_Grad/...` and gradient
    tensors `<tensor>_grad[...]`; a gradient node without a name derives from the forward node
    that produced the primal of its first gradient input.
    """
    name = node.name or (node.output[0] if node.output else node.op_type)
    if name.startswith(("Adam_", "SGD_", "Optimizer")) or node.op_type in ORT_OPTIMIZER_OPS:
        match = re.match(r"(?:Adam_Optimizer_|Adam_Update_|SGD_\w+?_)(.+?)(?:_[A-Z]\w*)?$", name)
        return (match.group(1) if match else name), "optimizer"
    if "_Grad" in name:
        return name.split("_Grad", 1)[0], "backward"
    if name.startswith("AccumulateGrad_"):
        return _primal_producer(name.removeprefix("AccumulateGrad_"), producers, name), "backward"
    grads = [t for t in list(node.input) + list(node.output) if "_grad" in t]
    if grads or node.op_type in ORT_GRAD_OPS:
        return _primal_producer(grads[0] if grads else name, producers, name), "backward"
    return name, "forward"


def _primal_producer(gradient: str, producers: dict[str, Any], fallback: str) -> str:
    primal = gradient.split("_grad", 1)[0]
    producer = producers.get(primal)
    return (producer.name or fallback) if producer is not None else fallback


def other_reader(imp: Any, name: str, op_type: str) -> str | None:
    """Who reads the tensor `name` besides nodes of `op_type` ("node 'X'", "a graph output"),
    or None. ORT's gradient ops read the statistics a forward normalization saves; the `grad`
    ops re-derive them, so such outputs need no value as long as nothing else reads them."""
    readers = getattr(imp, "_ort_readers", None)
    if readers is None:
        readers = {}
        for n in imp.graph.node:
            for i in n.input:
                readers.setdefault(i, []).append(n)
        imp._ort_readers = readers
    others = [r for r in readers.get(name, []) if r.op_type != op_type]
    if others:
        return f"node '{others[0].name or others[0].output[0]}'"
    if any(o.name == name for o in imp.graph.output):
        return "a graph output"
    return None


def statistics_read_only_by_gradient(imp: Any, node: Any) -> bool:
    """Whether every statistics output of a LayerNormalization in an ORT graph is read only by
    LayerNormalizationGrad (which `grad.layer_norm` models from the input)."""
    return imp.ort and all(other_reader(imp, o, "LayerNormalizationGrad") is None for o in node.output[1:] if o)


# Standard ops whose first output has the first input's shape and type; ONNX shape inference
# leaves some of them unshaped (BatchNormalization in training mode).
SHAPE_PRESERVING = {"BatchNormalization", "LayerNormalization", "Dropout", "Identity"}
# ORT's own ops that it writes in the standard domain
ORT_STANDARD_DOMAIN = {"SimplifiedLayerNormalization"}


def add_missing_shapes(graph: Any) -> int:
    """Add value_info for outputs of ORT ops whose shapes ONNX inference leaves unknown.

    The gradient of a tensor has the tensor's shape, and ORT names gradients `<tensor>_grad`, so
    the rule is: `X_grad` (and ORT ops that mirror an input's shape) take that shape. Returns how
    many shapes were added.
    """
    from onnx import helper

    known = {v.name: v for v in list(graph.input) + list(graph.value_info) + list(graph.output)
             if v.type.tensor_type.HasField("shape")}
    known.update({t.name: helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                  for t in graph.initializer})
    added = 0
    for node in graph.node:
        if node.domain not in ("com.microsoft",) and not (
                node.domain in ("", "ai.onnx") and node.op_type in SHAPE_PRESERVING | ORT_STANDARD_DOMAIN):
            continue
        for i, out in enumerate(node.output):
            if not out or out in known:
                continue
            source = _shape_source(node, i, known)
            if source is None:
                continue
            tt = source.type.tensor_type
            vi = helper.make_tensor_value_info(out, tt.elem_type, [d.dim_value for d in tt.shape.dim])
            graph.value_info.append(vi)
            known[out] = vi
            added += 1
    return added


_GRAD_NAME = re.compile(r"^(.*)_grad(?:_\d+)?$")

# com.microsoft ops whose first output has the shape of one input: op type -> input index
MIRRORS = {
    "ReluGrad": 1, "GeluGrad": 1, "FastGeluGrad": 1, "SoftmaxGrad": 1, "SoftmaxGrad_13": 1,
    "LogSoftmaxGrad": 1, "LogSoftmaxGrad_13": 1, "SoftmaxCrossEntropyLossGrad": 1, "SigmoidGrad": 1,
    "TanhGrad": 1, "LeakyReluGrad": 1, "DropoutGrad": 0, "QuickGelu": 0, "QuickGeluGrad": 1, "BiasGelu": 0,
    "BiasGeluGrad_dX": 1, "BiasFastGeluGrad_dX": 1, "Scale": 0, "FastGelu": 0,
}


def _shape_source(node: Any, output_index: int, known: dict[str, Any]) -> Any:
    from onnx import TensorProto, helper

    out = node.output[output_index]
    if node.op_type in SHAPE_PRESERVING and node.domain in ("", "ai.onnx"):
        return known.get(node.input[0]) if output_index == 0 else None
    if node.op_type == "SimplifiedLayerNormalization":  # Y, then inv_std_var: the normalized axes kept as 1
        x = known.get(node.input[0])
        if x is None or output_index > 1:
            return None
        if output_index == 0:
            return x
        dims = [d.dim_value for d in x.type.tensor_type.shape.dim]
        axis = next((a.i for a in node.attribute if a.name == "axis"), -1) % len(dims)
        return helper.make_tensor_value_info(out, TensorProto.FLOAT, dims[:axis] + [1] * (len(dims) - axis))
    # ORT names a gradient `<tensor>_grad`, and the partial gradients it sums `<tensor>_grad_<i>`
    match = _GRAD_NAME.match(out)
    if match and match.group(1) in known:
        return known[match.group(1)]

    def vector(values_of: Any, index: int) -> Any:  # a 1-D output of the length of an input's axis
        source = known.get(node.input[index]) if len(node.input) > index and node.input[index] else None
        if source is None:
            return None
        tt = source.type.tensor_type
        return helper.make_tensor_value_info(out, tt.elem_type, [values_of(tt.shape.dim)])

    if node.op_type == "ConvGrad":
        if output_index == 2:
            return vector(lambda dims: dims[0].dim_value, 2)
        return known.get(node.input[[1, 2][output_index]]) if output_index < 2 else None
    if node.op_type == "ConvTransposeGrad":  # ConvTranspose weights are (C_in, C_out / group, k...)
        if output_index == 2:
            group = next((a.i for a in node.attribute if a.name == "group"), 1) or 1
            return vector(lambda dims: dims[1].dim_value * group, 2)
        return known.get(node.input[[1, 2][output_index]]) if output_index < 2 else None
    if node.op_type in ("LayerNormalizationGrad", "BatchNormalizationGrad"):
        return known.get(node.input[[1, 2, 2][output_index]]) if output_index < 3 else None
    if node.op_type == "BatchNormInternal":  # Y, then running mean/var and saved mean/inv-std (C,)
        if output_index == 0:
            return known.get(node.input[0])
        return vector(lambda dims: dims[1].dim_value, 0)
    if node.op_type == "ConcatTraining":
        return _concat_training_shape(node, output_index, known)
    index = MIRRORS.get(node.op_type)
    if index is not None and output_index == 0 and len(node.input) > index:
        return known.get(node.input[index])
    return None


def _concat_training_shape(node: Any, output_index: int, known: dict[str, Any]) -> Any:
    """ConcatTraining: the concatenation, and (output 1) the length of each input along the axis."""
    from onnx import TensorProto, helper

    sources = [known.get(i) for i in node.input if i]
    if not sources or any(s is None for s in sources):
        return None
    out = node.output[output_index]
    if output_index == 1:
        return helper.make_tensor_value_info(out, TensorProto.INT64, [len(sources)])
    dims = [[d.dim_value if d.HasField("dim_value") else None for d in s.type.tensor_type.shape.dim] for s in sources]
    axis = next((a.i for a in node.attribute if a.name == "axis"), 0) % len(dims[0])
    if any(None in d for d in dims):
        return None
    shape = list(dims[0])
    shape[axis] = sum(d[axis] for d in dims)
    return helper.make_tensor_value_info(out, sources[0].type.tensor_type.elem_type, shape)


@dataclass
class FusedNode:
    """Several ONNX nodes that import as one op (a decomposed Adam update of one parameter)."""

    param: str
    grad: str
    exp_avg: str
    exp_avg_sq: str
    nodes: list[Any] = field(default_factory=list)
    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.0

    def emit(self, imp: Any) -> None:
        from dialects.base import float_attr
        from dialects.train import AdamOp
        from xdsl.dialects.builtin import TensorType, f32

        # ORT's decomposed form keeps no step count; our op's step becomes persistent state
        step = imp.add_state_argument(f"{self.param}.step", TensorType(f32, []))
        operands = [imp.value(n) for n in (self.param, self.grad, self.exp_avg, self.exp_avg_sq)] + [step]
        op = AdamOp.build(operands=operands, properties={
            "lr": float_attr(self.lr), "beta1": float_attr(self.beta1), "beta2": float_attr(self.beta2),
            "eps": float_attr(self.eps), "weight_decay": float_attr(self.weight_decay),
        })
        op.set_origin(self.param, "optimizer")
        imp.add(op)


def collapse_decomposed_adam(imp: Any, nodes: list[Any]) -> list[Any]:
    """Replace each parameter's element-wise Adam nodes by one FusedNode (see module docstring).

    A parameter's cluster is every node named `Adam_Optimizer_<P>...` or `Adam_Update_<P>`; it
    is collapsed only when it reads exactly one tensor besides the parameter, its two moments
    and scalar constants (that tensor is the gradient). Otherwise the nodes import one by one.
    """
    params = [o.name[: -len("_optimizer_end")] for o in imp.graph.output if o.name.endswith("_optimizer_end")]
    by_param: dict[str, list[Any]] = {p: [] for p in params}
    names = [(p, f"Adam_Update_{p}", f"Adam_Optimizer_{p}", f"Adam_Optimizer_{p}_") for p in params]
    for node in nodes:
        name = node.name
        if not name.startswith("Adam_"):  # every cluster node's name does
            continue
        for p, update, optimizer, prefix in names:  # the first parameter that matches, in output order
            if name == update or name == optimizer or name.startswith(prefix):
                by_param[p].append(node)
                break
    # the nodes reading each value, indexed once (`nodes` keeps the graph's node objects alive, so
    # protobuf hands out these same objects and a node is its identity)
    readers: dict[str, list[Any]] = {}
    for node in imp.graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    replaced: dict[int, FusedNode | None] = {}
    for p, cluster in by_param.items():
        fused = _fuse_adam(imp, p, cluster, readers)
        if fused is None:
            continue
        for i, node in enumerate(cluster):
            replaced[id(node)] = fused if i == len(cluster) - 1 else None
    out: list[Any] = []
    for node in nodes:
        if id(node) in replaced:
            if replaced[id(node)] is not None:
                out.append(replaced[id(node)])
            continue
        out.append(node)
    return out


def _fuse_adam(imp: Any, param: str, cluster: list[Any], readers: dict[str, list[Any]]) -> FusedNode | None:
    if not cluster:
        return None
    produced = {o for n in cluster for o in n.output}
    m, v = param + "_optimizer_first_moment", param + "_optimizer_second_moment"
    external = [i for n in cluster for i in n.input if i and i not in produced]
    scalars: dict[str, float] = {}
    others = set()
    for name in external:
        if name in (param, m, v):
            continue
        t = imp.known(name)
        if t is not None and t.const is not None:
            value = imp.const_array(name)
            if value.size == 1:
                scalars[name] = float(value.reshape(-1)[0])
                continue
        others.add(name)
    if len(others) != 1 or m not in external or v not in external:
        return None
    # intermediate values must not be read outside the cluster
    members = {id(n) for n in cluster}
    outputs = {o.name for o in imp.graph.output}
    for o in produced:
        if any(id(r) not in members for r in readers.get(o, ())) or (o in outputs and not o.endswith("_optimizer_end")):
            return None
    return FusedNode(
        param=param, grad=others.pop(), exp_avg=m, exp_avg_sq=v, nodes=cluster,
        lr=scalars.get("learning_rate", 1e-3), beta1=min(scalars.get("beta1", 0.9), 0.999999),
        beta2=min(scalars.get("beta2", 0.999), 0.999999), eps=scalars.get("epsilon", 1e-8),
        weight_decay=scalars.get("weight_decay", 0.0),
    )
