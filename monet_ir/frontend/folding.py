"""Evaluation of constant ONNX sub-graphs at import time.

PyTorch exports compute shapes with small sub-graphs (`Shape -> Gather -> Unsqueeze -> Concat ->
Reshape`) and build masks and position indices from `Constant` nodes. Every node whose inputs are
all known at import is evaluated here with numpy, so these sub-graphs never reach the IR: their
results become properties (a reshape's target shape) or `nn.constant` ops (a mask).

The common shape-arithmetic ops have numpy folders here (`FOLDERS`); any other operator of the
standard domain whose inputs are all known is evaluated by ONNX's reference implementation of
that operator (`onnx.reference`), at the model's opset: element-wise math of constants (the
`Cos`/`Sin` of a rotary table, a `Softplus` of a constant), `TopK` or `OneHot` of constants,
whatever the file holds. Random and stateful ops (`NEVER_FOLD`) and ops with sub-graphs are never
folded. So what the importer supports is decided after every constant sub-graph is folded: an
operator it has no converter for is refused only where it computes on data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Array = np.ndarray
Attrs = dict[str, Any]


class NotFoldable(Exception):
    """The node cannot be evaluated at import (unknown op or a value it needs is missing)."""


def _axes(inputs: list[Array | None], attrs: Attrs, position: int = 1) -> list[int] | None:
    if len(inputs) > position and inputs[position] is not None:
        return [int(a) for a in np.asarray(inputs[position]).reshape(-1)]
    if "axes" in attrs:
        return [int(a) for a in attrs["axes"]]
    return None


def _unsqueeze(ins: list[Array | None], attrs: Attrs) -> Array:
    x = ins[0]
    axes = _axes(ins, attrs) or []
    rank = x.ndim + len(axes)
    for a in sorted(a % rank for a in axes):
        x = np.expand_dims(x, a)
    return x


def _squeeze(ins: list[Array | None], attrs: Attrs) -> Array:
    x = ins[0]
    axes = _axes(ins, attrs)
    if axes is None:
        return np.squeeze(x)
    return np.squeeze(x, axis=tuple(a % x.ndim for a in axes))


def _reshape(ins: list[Array | None], attrs: Attrs) -> Array:
    x, shape = ins[0], [int(d) for d in ins[1]]
    if not attrs.get("allowzero", 0):
        shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return x.reshape(shape)


def _flatten(ins: list[Array | None], attrs: Attrs) -> Array:
    """ONNX Flatten: axis in [-r, r]; axis == r gives [N, 1] (a causal mask flattened whole),
    so a negative axis counts from the end but a positive one is never wrapped."""
    x = ins[0]
    axis = int(attrs.get("axis", 1))
    if axis < 0:
        axis += x.ndim
    return x.reshape(int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:])))


def _slice(ins: list[Array | None], attrs: Attrs) -> Array:
    x = ins[0]
    starts, ends = list(ins[1]), list(ins[2])
    axes = list(ins[3]) if len(ins) > 3 and ins[3] is not None else list(range(len(starts)))
    steps = list(ins[4]) if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
    index = [slice(None)] * x.ndim
    for a, s, e, st in zip(axes, starts, ends, steps, strict=True):
        index[int(a)] = slice(int(s), int(e), int(st))
    return x[tuple(index)]


def _gather(ins: list[Array | None], attrs: Attrs) -> Array:
    return np.take(ins[0], ins[1].astype(np.int64), axis=attrs.get("axis", 0))


def _concat(ins: list[Array | None], attrs: Attrs) -> Array:
    return np.concatenate([np.asarray(a) for a in ins], axis=attrs["axis"])


def _cast(ins: list[Array | None], attrs: Attrs) -> Array:
    from onnx import helper

    return ins[0].astype(helper.tensor_dtype_to_np_dtype(attrs["to"]))


def _constant_of_shape(ins: list[Array | None], attrs: Attrs) -> Array:
    from onnx import numpy_helper

    value = numpy_helper.to_array(attrs["value"]) if "value" in attrs else np.zeros(1, np.float32)
    return np.full([int(d) for d in ins[0]], value.reshape(-1)[0], dtype=value.dtype)


def _range(ins: list[Array | None], attrs: Attrs) -> Array:
    start, limit, delta = (np.asarray(a).reshape(()) for a in ins)
    return np.arange(start, limit, delta, dtype=start.dtype)


def _expand(ins: list[Array | None], attrs: Attrs) -> Array:
    shape = np.broadcast_shapes(ins[0].shape, tuple(int(d) for d in ins[1]))
    return np.broadcast_to(ins[0], shape).copy()


def _where(ins: list[Array | None], attrs: Attrs) -> Array:
    return np.where(ins[0], ins[1], ins[2])


def _binary(fn: Callable[[Array, Array], Array]) -> Callable[[list[Array | None], Attrs], Array]:
    def run(ins: list[Array | None], attrs: Attrs) -> Array:
        a, b = ins[0], ins[1]
        out = fn(a, b)
        # integer division in shape arithmetic truncates as ONNX does for integer tensors
        return out.astype(np.result_type(a, b)) if out.dtype != np.bool_ else out

    return run


def _div(a: Array, b: Array) -> Array:
    if np.issubdtype(np.result_type(a, b), np.integer):
        return np.trunc(a / b).astype(np.result_type(a, b))
    return a / b


def _mod(ins: list[Array | None], attrs: Attrs) -> Array:
    a, b = ins[0], ins[1]
    out = np.fmod(a, b) if attrs.get("fmod", 0) else np.mod(a, b)
    return out.astype(np.result_type(a, b))


def _tile(ins: list[Array | None], attrs: Attrs) -> Array:
    return np.tile(ins[0], [int(r) for r in ins[1]])


def _scatter_nd(ins: list[Array | None], attrs: Attrs) -> Array:
    data, indices, updates = ins[0].copy(), ins[1].astype(np.int64), ins[2]
    reduction = attrs.get("reduction", "none")
    reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
    ops = {"none": None, "add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}
    if reduction not in ops:
        raise NotFoldable(f"ScatterND reduction {reduction}")
    for index in np.ndindex(indices.shape[:-1]):
        at = tuple(indices[index])
        fn = ops[reduction]
        data[at] = updates[index] if fn is None else fn(data[at], updates[index])
    return data


def _gather_nd(ins: list[Array | None], attrs: Attrs) -> Array:
    data, indices = ins[0], ins[1].astype(np.int64)
    batch = attrs.get("batch_dims", 0)
    if batch:
        raise NotFoldable("GatherND with batch_dims")
    out = [data[tuple(indices[i])] for i in np.ndindex(indices.shape[:-1])]
    return np.asarray(out).reshape(indices.shape[:-1] + data.shape[indices.shape[-1]:])


def _trilu(ins: list[Array | None], attrs: Attrs) -> Array:
    k = int(ins[1]) if len(ins) > 1 and ins[1] is not None else 0
    return np.triu(ins[0], k) if attrs.get("upper", 1) else np.tril(ins[0], k)


def _cumsum(ins: list[Array | None], attrs: Attrs) -> Array:
    x, axis = ins[0], int(np.asarray(ins[1]).reshape(-1)[0])
    if attrs.get("reverse", 0):
        x = np.flip(x, axis)
    out = np.cumsum(x, axis=axis, dtype=x.dtype)
    if attrs.get("exclusive", 0):
        out = out - x
    return np.flip(out, axis) if attrs.get("reverse", 0) else out


def _reduce(fn: Callable[..., Array]) -> Callable[[list[Array | None], Attrs], Array]:
    def run(ins: list[Array | None], attrs: Attrs) -> Array:
        axes = _axes(ins, attrs)
        if not axes and attrs.get("noop_with_empty_axes", 0):
            return ins[0]
        return fn(ins[0], axis=tuple(axes or range(ins[0].ndim)), keepdims=bool(attrs.get("keepdims", 1)))

    return run


FOLDERS: dict[str, Callable[[list[Array | None], Attrs], Array]] = {
    "Identity": lambda ins, attrs: ins[0],
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Reshape": _reshape,
    "Flatten": _flatten,
    "Slice": _slice,
    "Gather": _gather,
    "Concat": _concat,
    "Cast": _cast,
    "ConstantOfShape": _constant_of_shape,
    "Range": _range,
    "Expand": _expand,
    "Where": _where,
    "Transpose": lambda ins, attrs: np.transpose(ins[0], attrs.get("perm")),
    "Add": _binary(np.add),
    "Sub": _binary(np.subtract),
    "Mul": _binary(np.multiply),
    "Div": _binary(_div),
    "Pow": _binary(np.power),
    "Equal": _binary(np.equal),
    "Less": _binary(np.less),
    "Greater": _binary(np.greater),
    "And": _binary(np.logical_and),
    "Or": _binary(np.logical_or),
    "Not": lambda ins, attrs: np.logical_not(ins[0]),
    "Neg": lambda ins, attrs: np.negative(ins[0]),
    "Sqrt": lambda ins, attrs: np.sqrt(ins[0]),
    "Abs": lambda ins, attrs: np.abs(ins[0]),
    "Min": lambda ins, attrs: np.minimum.reduce([np.asarray(a) for a in ins]),
    "Max": lambda ins, attrs: np.maximum.reduce([np.asarray(a) for a in ins]),
    "ReduceProd": _reduce(np.prod),
    "ReduceSum": _reduce(np.sum),
    "ReduceMax": _reduce(np.max),
    "ReduceMin": _reduce(np.min),
    "Mod": _mod,
    "Floor": lambda ins, attrs: np.floor(ins[0]),
    "Ceil": lambda ins, attrs: np.ceil(ins[0]),
    "Sign": lambda ins, attrs: np.sign(ins[0]),
    "Reciprocal": lambda ins, attrs: np.reciprocal(ins[0]),
    "Exp": lambda ins, attrs: np.exp(ins[0]),
    "Log": lambda ins, attrs: np.log(ins[0]),
    "LessOrEqual": _binary(np.less_equal),
    "GreaterOrEqual": _binary(np.greater_equal),
    "Xor": _binary(np.logical_xor),
    "Tile": _tile,
    "ScatterND": _scatter_nd,
    "GatherND": _gather_nd,
    "GatherElements": lambda ins, attrs: np.take_along_axis(ins[0], ins[1].astype(np.int64), attrs.get("axis", 0)),
    "Trilu": _trilu,
    "CumSum": _cumsum,
    "CastLike": lambda ins, attrs: ins[0].astype(ins[1].dtype),
    "NonZero": lambda ins, attrs: np.array(np.nonzero(ins[0]), dtype=np.int64),
    "Size": lambda ins, attrs: np.array(ins[0].size, dtype=np.int64),
}

# Ops whose result is random or has side effects must never be folded.
NEVER_FOLD = {"Dropout", "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
              "Bernoulli"}


def fold(op_type: str, inputs: list[Array | None], attrs: Attrs, node: Any = None, opset: int = 17) -> list[Array]:
    """Evaluate one node on constant inputs; raises NotFoldable when it cannot. `node` (the
    NodeProto, standard domain) lets an operator without a numpy folder here be evaluated by
    ONNX's reference implementation at `opset`."""
    if op_type in NEVER_FOLD:
        raise NotFoldable(op_type)
    folder = FOLDERS.get(op_type)
    if folder is None:
        if node is None:
            raise NotFoldable(op_type)
        return _reference_fold(node, inputs, opset)
    try:
        # PyTorch's own arithmetic on these values overflows the same way (T5's log-spaced
        # position buckets take log(0) and cast -inf, then discard it with Where)
        with np.errstate(all="ignore"):
            return [np.asarray(folder(inputs, attrs))]
    except (ValueError, IndexError, TypeError, KeyError) as e:
        raise NotFoldable(f"{op_type}: {e}") from e


def _quiet(*_args: Any) -> None:
    """onnx.reference's log hook (it logs nothing at verbosity 0, but calls the hook)."""


def _reference_fold(node: Any, inputs: list[Array | None], opset: int) -> list[Array]:
    """One standard-domain node evaluated by onnx.reference's kernel of its op (a numpy
    implementation of the ONNX specification)."""
    from onnx import AttributeProto

    if node.domain not in ("", "ai.onnx"):
        raise NotFoldable(f"{node.domain}::{node.op_type}")
    if any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in node.attribute):
        raise NotFoldable(f"{node.op_type} has a sub-graph")
    if any(isinstance(v, np.ndarray) and v.dtype == object for v in inputs):
        raise NotFoldable(f"{node.op_type}: a string input")
    try:
        from onnx.reference.ops import load_op

        kernel = load_op("", node.op_type, opset)(
            node, {"opsets": {"": opset}, "verbose": 0, "new_ops": None, "log": _quiet})
        with np.errstate(all="ignore"):
            outs = kernel.run(*inputs)
    except Exception as e:  # an op onnx.reference lacks, or inputs its kernel rejects
        raise NotFoldable(f"{node.op_type}: {type(e).__name__}: {e}") from e
    if not isinstance(outs, (tuple, list)):
        outs = (outs,)
    if any(not isinstance(o, np.ndarray | np.generic) for o in outs):
        raise NotFoldable(f"{node.op_type}: a result that is not a tensor (a sequence?)")
    return [np.asarray(o) for o in outs]
