"""Reference semantics of the `nn`, `grad` and `train` dialects on NumPy arrays.

`run_function(fn, args)` executes the body of one `func.func` op by op, in program order: a
table keyed by op class (`IMPLS`) maps each op to a small function that reads its operands from
the value table (SSA value -> ndarray) and computes its results with the reference kernels of
`monet_ir.interp.kernels` (the math lives there, not here).

Conventions
-----------
* Arrays keep the element type of the IR: every result is checked against its tensor type
  (shape must match, dtype is converted to `monet_ir.types.numpy_dtype_of` of the element type
  if a kernel widened it). float32 stays float32.
* Result shapes that an op does not carry as properties come from its result types:
  `nn.reshape`, `nn.expand` and `nn.split` (target shapes), `grad.conv_input`, `grad.avg_pool`,
  `grad.global_avg_pool`, `grad.reduce_*`, `grad.slice`, `grad.gather`, `grad.unbroadcast`,
  `grad.matmul_lhs/rhs` (the forward operand's shape).
* Results never alias operands: a kernel result that may share memory with an operand (a
  reshape view, an identity) is copied, so an in-place optimizer update of a parameter never
  changes values computed from it earlier.
* `nn.constant` values decode to read-only arrays (`np.frombuffer`, little-endian storage; `i1`
  is one byte per element, any non-zero byte is true).
* Defaults of absent optional properties follow ONNX (e.g. `nn.leaky_relu` alpha 0.01,
  `nn.dropout` ratio 0.5, `nn.reduce_*` keepdims true, `nn.batch_norm` training false) and
  PyTorch for the optimizers (Adam betas 0.9/0.999, eps 1e-8; weight_decay 0).

Statistics and indices that backward ops do not receive are recomputed from the saved input
with the forward kernel: `grad.batch_norm` / `grad.layer_norm` (mean and inverse std),
`grad.max_pool` (the arg-max indices of the windows of x).

Optimizer ops (`train.*`) have no results: they overwrite the arrays bound to their persistent
operands in place (`arr[...] = new`), so the caller sees the update in the arrays it passed.

* `train.adam` / `train.adamw`: the `step` operand (a scalar tensor, normally the f32
  `monet.state` `<param>.step`, zero before the first update) holds the number of updates done
  so far; the op increments it in place *before* the update and uses the new value for the bias
  corrections (PyTorch: the first update uses t = 1). A read-only step operand (an
  `nn.constant`, e.g. the unit step ONNX Runtime imports materialize) is not written; the op
  then uses its value + 1. Each op increments its own step operand: one step array shared by
  several Adam ops would be incremented once per op.
* `train.momentum`: the velocity buffer starts at zeros (`monet.state` default). PyTorch
  initializes the buffer with the gradient on the first step instead; without dampening (the
  dialect has none) `momentum * 0 + g == g`, so the two conventions give identical updates
  (see `kernels_optim.momentum`). An absent `momentum` property means 0.9.
* `train.sgd`: p -= lr * (g + weight_decay * p). `train.accumulate`: buffer += value.

`nn.dropout` draws its mask from `numpy.random.default_rng(seed)` (seed property, default 0), so
a run is deterministic; the mask is the op's second result.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, Operation, SSAValue

from dialects import grad as G
from dialects import nn as N
from dialects import train as T
from dialects.base import bool_of, float_of, int_of, ints_of, str_of
from monet_ir.errors import MonetError
from monet_ir.interp import kernels as K
from monet_ir.types import numpy_dtype_of

Env = dict[SSAValue, Any]
Impl = Callable[[Any, Env], Any]

#: The NumPy implementation of every op class, keyed by class.
IMPLS: dict[type[Operation], Impl] = {}


class InterpreterError(MonetError):
    """An op could not be executed (unsupported op, bad operand, kernel failure)."""


@dataclass
class RunResult:
    """What `run_function` returns.

    `outputs`: the function results in order. `values`: when run with `keep_values=True`, the
    array of every SSA value (function arguments included) keyed by the SSAValue; else None.
    """

    outputs: list[np.ndarray]
    values: dict[SSAValue, np.ndarray] | None = None
    kept: dict[SSAValue, np.ndarray] = field(default_factory=dict)
    """The arrays of the values asked for with `keep` (`run_function`)."""


# Arrays of nn.constant results are read-only views of the attribute's bytes; so is an output
# that is a constant. Copy before writing into one.


def impl(*op_classes: type[Operation]) -> Callable[[Impl], Impl]:
    """Register the decorated function as the implementation of the given op classes."""

    def register(fn: Impl) -> Impl:
        for cls in op_classes:
            IMPLS[cls] = fn
        return fn

    return register


# ----------------------------------------------------------------------------- driver


def run_function(fn: func.FuncOp, args: Sequence[np.ndarray], *, keep_values: bool = False,
                 keep: Collection[SSAValue] = ()) -> RunResult:
    """Execute `fn` on `args` (one array per block argument) and return its results.

    The argument arrays are used as they are (no copy): optimizer ops update them in place.
    Without `keep_values` each intermediate array is dropped after its last use, except the
    values in `keep`, returned in `RunResult.kept` (e.g. gradients an optimizer op consumes).
    """
    block = fn.body.block
    if len(args) != len(block.args):
        raise InterpreterError(f"@{fn.sym_name.data} takes {len(block.args)} arguments, got {len(args)}")
    env: Env = {}
    for i, (arg, value) in enumerate(zip(block.args, args)):
        env[arg] = _check_argument(fn, i, arg, value)
    kept: dict[SSAValue, np.ndarray] | None = dict(env) if keep_values else None
    drops = None if keep_values else _last_uses(block)
    outputs: list[np.ndarray] = []
    for index, op in enumerate(block.ops):
        if isinstance(op, func.ReturnOp):
            outputs = [env[v] for v in op.operands]
            break
        run = IMPLS.get(type(op))
        if run is None:
            raise InterpreterError(f"{_describe(op)}: no numpy implementation for '{op.name}'")
        try:
            produced = run(op, env)
        except InterpreterError:
            raise
        except Exception as e:  # a kernel rejected the operands
            raise InterpreterError(f"{_describe(op)}: {type(e).__name__}: {e}") from e
        results = op.results
        if results:
            if len(results) == 1:
                produced = (produced,)
            elif len(produced) != len(results):
                raise InterpreterError(f"{_describe(op)}: produced {len(produced)} values for {len(results)} results")
            for i, (res, value) in enumerate(zip(results, produced)):
                value = _conform(op, i, res.type, value)
                if _aliases(value, op, env):
                    value = value.copy()
                env[res] = value
                if kept is not None:
                    kept[res] = value
        if drops is not None:
            for v in drops.get(index, ()):
                if v not in keep:
                    env.pop(v, None)
    return RunResult(outputs, kept, {v: env[v] for v in keep if v in env})


def _describe(op: Operation) -> str:
    node = op.get_node() if hasattr(op, "get_node") else ""
    return f"{op.name} (node '{node}')" if node else op.name


def _last_uses(block: Any) -> dict[int, list[SSAValue]]:
    """For each op index, the values whose last reader (or, if unread, producer) it is."""
    last: dict[SSAValue, int] = {}
    for index, op in enumerate(block.ops):
        if isinstance(op, func.ReturnOp):
            for v in op.operands:
                last[v] = len(block.ops) + 1  # never dropped
            break
        for v in op.operands:
            last[v] = index
        for r in op.results:
            last.setdefault(r, index)
    drops: dict[int, list[SSAValue]] = {}
    for v, index in last.items():
        drops.setdefault(index, []).append(v)
    return drops


_TYPE_INFO: dict[Attribute, tuple[tuple[int, ...], np.dtype]] = {}


def _type_info(t: Attribute) -> tuple[tuple[int, ...], np.dtype]:
    info = _TYPE_INFO.get(t)
    if info is None:
        if not isinstance(t, TensorType):
            raise InterpreterError(f"values of type {t} are not supported (ranked tensors only)")
        info = (tuple(t.get_shape()), np.dtype(numpy_dtype_of(t.get_element_type())))
        _TYPE_INFO[t] = info
    return info


def _check_argument(fn: func.FuncOp, index: int, arg: SSAValue, value: Any) -> np.ndarray:
    shape, dtype = _type_info(arg.type)
    if not isinstance(value, np.ndarray):
        value = np.asarray(value, dtype=dtype)
    if value.shape != shape or value.dtype != dtype:
        raise InterpreterError(
            f"@{fn.sym_name.data} argument {index}: expected {dtype}{list(shape)}, got {value.dtype}{list(value.shape)}"
        )
    return value


def _conform(op: Operation, index: int, t: Attribute, value: Any) -> np.ndarray:
    shape, dtype = _type_info(t)
    if not isinstance(value, np.ndarray):
        value = np.asarray(value)
    if value.shape != shape:
        raise InterpreterError(
            f"{_describe(op)}: result {index} has shape {list(value.shape)}, its type says {list(shape)}"
        )
    if value.dtype != dtype:
        value = value.astype(dtype)
    return value


def _aliases(value: np.ndarray, op: Operation, env: Env) -> bool:
    if value.base is None and not any(env.get(v) is value for v in op.operands):
        return False  # owns its memory and is not an operand: nothing to share
    return any(np.may_share_memory(value, env[v]) for v in op.operands)


# ----------------------------------------------------------------------------- helpers


def _opt(env: Env, value: SSAValue | None) -> np.ndarray | None:
    return None if value is None else env[value]


def _shape(value: SSAValue) -> tuple[int, ...]:
    return _type_info(value.type)[0]


def _opt_float(attr: Any) -> float | None:
    return None if attr is None else float_of(attr)


def _ints_or_none(attr: Any) -> tuple[int, ...] | None:
    return None if attr is None else ints_of(attr)


def _swap_last(a: np.ndarray, trans: bool) -> np.ndarray:
    return np.swapaxes(a, -1, -2) if trans and a.ndim >= 2 else a


def _swapped_shape(shape: tuple[int, ...], trans: bool) -> tuple[int, ...]:
    if trans and len(shape) >= 2:
        return (*shape[:-2], shape[-1], shape[-2])
    return shape


def _scale(a: np.ndarray, alpha: float) -> np.ndarray:
    return a if alpha == 1.0 else (a * alpha).astype(a.dtype, copy=False)


def _conv_kwargs(op: Any, spatial_rank: int) -> dict[str, Any]:
    strides, pads, dilations, group = op.geometry(spatial_rank)
    return {"strides": strides, "pads": pads, "dilations": dilations, "group": group}


def _window(op: Any) -> dict[str, Any]:
    """Pooling properties (nn pooling ops and grad pooling ops) as kernel keywords."""
    kernel = ints_of(op.kernel_shape)
    n = len(kernel)
    return {
        "kernel_shape": kernel,
        "strides": ints_of(op.strides, (1,) * n),
        "pads": ints_of(op.pads, (0,) * (2 * n)),
        "dilations": ints_of(op.dilations, (1,) * n),
        "ceil_mode": int(bool_of(op.ceil_mode)),
    }


def _reduction(op: Any) -> str:
    return str_of(op.reduction, "mean")


def _ignore_index(op: Any) -> int | None:
    return None if op.ignore_index is None else int_of(op.ignore_index)


# ----------------------------------------------------------------------------- nn: element-wise


def _simple_unary(kernel: Callable[[np.ndarray], np.ndarray]) -> Impl:
    def run(op: Any, env: Env) -> np.ndarray:
        return kernel(env[op.input])

    return run


impl(N.ReluOp)(_simple_unary(K.relu))
impl(N.SigmoidOp)(_simple_unary(K.sigmoid))
impl(N.HardSwishOp)(_simple_unary(K.hard_swish))
impl(N.TanhOp)(_simple_unary(K.tanh))
impl(N.ErfOp)(_simple_unary(K.erf))
impl(N.SqrtOp)(_simple_unary(K.sqrt))
impl(N.NegOp)(_simple_unary(K.neg))
impl(N.ExpOp)(_simple_unary(K.exp))
impl(N.LogOp)(_simple_unary(K.log))
impl(N.NotOp)(_simple_unary(K.logical_not))
impl(N.SoftplusOp)(_simple_unary(K.softplus))
impl(N.SoftsignOp)(_simple_unary(K.softsign))
impl(N.AbsOp)(_simple_unary(np.abs))
impl(N.SignOp)(_simple_unary(K.sign))
impl(N.SinOp)(_simple_unary(np.sin))
impl(N.CosOp)(_simple_unary(np.cos))
impl(N.FloorOp)(_simple_unary(np.floor))
impl(N.CeilOp)(_simple_unary(np.ceil))
impl(N.RoundOp)(_simple_unary(np.round))
impl(N.MishOp)(_simple_unary(K.mish))


@impl(N.EluOp)
def _elu(op: N.EluOp, env: Env) -> np.ndarray:
    return K.elu(env[op.input], alpha=float_of(op.alpha, 1.0))


@impl(N.CeluOp)
def _celu(op: N.CeluOp, env: Env) -> np.ndarray:
    return K.celu(env[op.input], alpha=float_of(op.alpha, 1.0))


@impl(N.SeluOp)
def _selu(op: N.SeluOp, env: Env) -> np.ndarray:
    return K.selu(env[op.input], alpha=float_of(op.alpha, 1.6732632423543772),
                  gamma=float_of(op.gamma, 1.0507009873554805))


@impl(N.LeakyReluOp)
def _leaky_relu(op: N.LeakyReluOp, env: Env) -> np.ndarray:
    return K.leaky_relu(env[op.input], alpha=float_of(op.alpha, 0.01))


@impl(N.ClipOp)
def _clip(op: N.ClipOp, env: Env) -> np.ndarray:
    return K.clip(env[op.input], _opt_float(op.min), _opt_float(op.max))


@impl(N.HardSigmoidOp)
def _hard_sigmoid(op: N.HardSigmoidOp, env: Env) -> np.ndarray:
    return K.hard_sigmoid(env[op.input], alpha=float_of(op.alpha, 0.2), beta=float_of(op.beta, 0.5))


@impl(N.GeluOp)
def _gelu(op: N.GeluOp, env: Env) -> np.ndarray:
    return K.gelu(env[op.input], approximate=str_of(op.approximate, "none"))


@impl(N.SoftmaxOp)
def _softmax(op: N.SoftmaxOp, env: Env) -> np.ndarray:
    return K.softmax(env[op.input], axis=int_of(op.axis))


@impl(N.LogSoftmaxOp)
def _log_softmax(op: N.LogSoftmaxOp, env: Env) -> np.ndarray:
    return K.log_softmax(env[op.input], axis=int_of(op.axis))


def _binary(kernel: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Impl:
    def run(op: Any, env: Env) -> np.ndarray:
        return kernel(env[op.lhs], env[op.rhs])

    return run


impl(N.AddOp)(_binary(K.add))
impl(N.SubOp)(_binary(K.sub))
impl(N.MulOp)(_binary(K.mul))
impl(N.DivOp)(_binary(K.div))
impl(N.PowOp)(_binary(K.pow))
impl(N.EqualOp)(_binary(K.equal))
impl(N.AndOp)(_binary(K.logical_and))
impl(N.OrOp)(_binary(K.logical_or))
impl(N.XorOp)(_binary(np.logical_xor))
impl(N.MaxOp)(_binary(K.maximum))
impl(N.MinOp)(_binary(K.minimum))
impl(N.PReluOp)(_binary(K.prelu))


@impl(N.ModOp)
def _mod(op: N.ModOp, env: Env) -> np.ndarray:
    return K.mod(env[op.lhs], env[op.rhs], fmod=int(bool_of(op.fmod)))


@impl(N.LessOp)
@impl(N.GreaterOp)
def _compare(op: Any, env: Env) -> np.ndarray:
    less = isinstance(op, N.LessOp)
    if bool_of(op.or_equal):
        return (np.less_equal if less else np.greater_equal)(env[op.lhs], env[op.rhs])
    return (np.less if less else np.greater)(env[op.lhs], env[op.rhs])


@impl(N.WhereOp)
def _where_op(op: N.WhereOp, env: Env) -> np.ndarray:
    return K.where(env[op.condition], env[op.lhs], env[op.rhs])


@impl(N.SumOp)
def _sum(op: N.SumOp, env: Env) -> np.ndarray:
    return K.sum(*(env[v] for v in op.inputs))


@impl(N.CastOp)
def _cast(op: N.CastOp, env: Env) -> np.ndarray:
    return K.cast(env[op.input], to=_type_info(op.result.type)[1])


# ----------------------------------------------------------------------------- nn: contractions


@impl(N.ConvOp)
def _conv(op: N.ConvOp, env: Env) -> np.ndarray:
    x = env[op.input]
    return K.conv(x, env[op.weight], _opt(env, op.bias), **_conv_kwargs(op, x.ndim - 2))


@impl(N.ConvTransposeOp)
def _conv_transpose(op: N.ConvTransposeOp, env: Env) -> np.ndarray:
    x = env[op.input]
    return K.conv_transpose(x, env[op.weight], _opt(env, op.bias), **_conv_kwargs(op, x.ndim - 2),
                            output_padding=_ints_or_none(op.output_padding))


@impl(N.GemmOp)
def _gemm(op: N.GemmOp, env: Env) -> np.ndarray:
    return K.gemm(env[op.lhs], env[op.rhs], _opt(env, op.bias),
                  alpha=float_of(op.alpha, 1.0), beta=float_of(op.beta, 1.0),
                  trans_a=bool_of(op.trans_a), trans_b=bool_of(op.trans_b))


@impl(N.MatMulOp)
def _matmul(op: N.MatMulOp, env: Env) -> np.ndarray:
    a = _swap_last(env[op.lhs], bool_of(op.trans_a))
    b = _swap_last(env[op.rhs], bool_of(op.trans_b))
    return _scale(K.matmul(a, b), float_of(op.alpha, 1.0))


# ----------------------------------------------------------------------------- nn: normalization


@impl(N.BatchNormOp)
def _batch_norm(op: N.BatchNormOp, env: Env) -> np.ndarray:
    x, scale, bias = env[op.input], env[op.scale], env[op.bias]
    eps = float_of(op.epsilon, 1e-5)
    if bool_of(op.training):
        return K.batch_norm_train(x, scale, bias, epsilon=eps)[0]
    return K.batch_norm_infer(x, scale, bias, env[op.mean], env[op.var], epsilon=eps)


@impl(N.LayerNormOp)
def _layer_norm(op: N.LayerNormOp, env: Env) -> np.ndarray:
    return K.layer_norm(env[op.input], env[op.scale], _opt(env, op.bias),
                        axis=int_of(op.axis, -1), epsilon=float_of(op.epsilon, 1e-5))[0]


# ----------------------------------------------------------------------------- nn: pooling


@impl(N.MaxPoolOp)
def _max_pool(op: N.MaxPoolOp, env: Env) -> np.ndarray:
    return K.max_pool(env[op.input], **_window(op))[0]


@impl(N.AvgPoolOp)
def _avg_pool(op: N.AvgPoolOp, env: Env) -> np.ndarray:
    return K.average_pool(env[op.input], **_window(op), count_include_pad=int(bool_of(op.count_include_pad)))


@impl(N.GlobalAvgPoolOp)
def _global_avg_pool(op: N.GlobalAvgPoolOp, env: Env) -> np.ndarray:
    return K.global_average_pool(env[op.input])


# ----------------------------------------------------------------------------- nn: reductions


@impl(N.ReduceSumOp)
def _reduce_sum(op: N.ReduceSumOp, env: Env) -> np.ndarray:
    return K.reduce_sum(env[op.input], ints_of(op.axes) or None, keepdims=int(bool_of(op.keepdims, True)))


@impl(N.ReduceMeanOp)
def _reduce_mean(op: N.ReduceMeanOp, env: Env) -> np.ndarray:
    return K.reduce_mean(env[op.input], ints_of(op.axes) or None, keepdims=int(bool_of(op.keepdims, True)))


@impl(N.ReduceMaxOp)
def _reduce_max(op: N.ReduceMaxOp, env: Env) -> np.ndarray:
    return K.reduce_max(env[op.input], ints_of(op.axes) or None, keepdims=int(bool_of(op.keepdims, True)))


@impl(N.ReduceMinOp)
def _reduce_min(op: N.ReduceMinOp, env: Env) -> np.ndarray:
    return K.reduce_min(env[op.input], ints_of(op.axes) or None, keepdims=int(bool_of(op.keepdims, True)))


@impl(N.ArgMaxOp, N.ArgMinOp)
def _arg_reduce(op: Any, env: Env) -> np.ndarray:
    return K.arg_reduce(env[op.input], axis=int_of(op.axis), keepdims=int(bool_of(op.keepdims, True)),
                        select_last_index=int(bool_of(op.select_last_index)), largest=isinstance(op, N.ArgMaxOp))


# ----------------------------------------------------------------------------- nn: data movement


@impl(N.TileOp)
def _tile(op: N.TileOp, env: Env) -> np.ndarray:
    return K.tile(env[op.input], ints_of(op.repeats))


@impl(N.TopKOp)
def _topk(op: N.TopKOp, env: Env) -> tuple[np.ndarray, np.ndarray]:
    return K.topk(env[op.input], int_of(op.k), axis=int_of(op.axis, -1), largest=int(bool_of(op.largest, True)))


@impl(N.OneHotOp)
def _one_hot(op: N.OneHotOp, env: Env) -> np.ndarray:
    return K.one_hot(env[op.indices], int_of(op.depth), axis=int_of(op.axis, -1), off_value=float_of(op.off_value, 0.0),
                     on_value=float_of(op.on_value, 1.0), dtype=_type_info(op.result.type)[1])


@impl(N.NonZeroOp)
def _nonzero(op: N.NonZeroOp, env: Env) -> np.ndarray:
    return N.NonZeroOp.coordinates(env[op.input], _shape(op.result)[1])


@impl(N.ScatterElementsOp)
def _scatter_elements(op: N.ScatterElementsOp, env: Env) -> np.ndarray:
    return K.scatter_elements(env[op.data], env[op.indices], env[op.updates], axis=int_of(op.axis),
                              reduction=str_of(op.reduction, "none"))



@impl(N.ReshapeOp)
def _reshape(op: N.ReshapeOp, env: Env) -> np.ndarray:
    return K.reshape_grad(env[op.input], _shape(op.result))  # a reshape to the result type


@impl(N.TransposeOp)
def _transpose(op: N.TransposeOp, env: Env) -> np.ndarray:
    return K.transpose(env[op.input], perm=ints_of(op.perm))


@impl(N.ExpandOp)
def _expand(op: N.ExpandOp, env: Env) -> np.ndarray:
    return K.expand(env[op.input], _shape(op.result))


@impl(N.ConcatOp)
def _concat(op: N.ConcatOp, env: Env) -> np.ndarray:
    return K.concat([env[v] for v in op.inputs], axis=int_of(op.axis))


@impl(N.SplitOp)
def _split(op: N.SplitOp, env: Env) -> tuple[np.ndarray, ...]:
    x = env[op.input]
    axis = K.normalize_axis(int_of(op.axis), x.ndim)
    sizes = [_shape(r)[axis] for r in op.outputs]
    return tuple(K.split(x, sizes, axis=axis))


@impl(N.SliceOp)
def _slice(op: N.SliceOp, env: Env) -> np.ndarray:
    return K.slice(env[op.input], ints_of(op.starts), ints_of(op.ends),
                   _ints_or_none(op.axes), _ints_or_none(op.steps))


@impl(N.GatherOp)
def _gather(op: N.GatherOp, env: Env) -> np.ndarray:
    return K.gather(env[op.data], env[op.indices], axis=int_of(op.axis))


def _resize_options(op: Any) -> dict[str, Any]:
    return {"mode": str_of(op.mode), "coordinates": str_of(op.coordinate_transformation_mode, "half_pixel"),
            "nearest": str_of(op.nearest_mode, "round_prefer_floor"), "scales": op.scale_factors(),
            "cubic_coeff_a": float_of(op.cubic_coeff_a, -0.75), "exclude_outside": bool_of(op.exclude_outside)}


@impl(N.ResizeOp)
def _resize(op: N.ResizeOp, env: Env) -> np.ndarray:
    return K.resize(env[op.input], tuple(op.result.type.get_shape()), **_resize_options(op))


@impl(G.ResizeGradOp)
def _resize_grad(op: G.ResizeGradOp, env: Env) -> np.ndarray:
    return K.resize_grad(env[op.grad], tuple(op.result.type.get_shape()), **_resize_options(op))


@impl(N.GatherNDOp)
def _gather_nd(op: N.GatherNDOp, env: Env) -> np.ndarray:
    data, indices = env[op.data], env[op.indices].astype(np.int64)
    return data[tuple(np.moveaxis(indices, -1, 0))]


@impl(N.ScatterNDOp)
def _scatter_nd(op: N.ScatterNDOp, env: Env) -> np.ndarray:
    out = np.array(env[op.data], copy=True)
    at = tuple(np.moveaxis(env[op.indices].astype(np.int64), -1, 0))
    if str_of(op.reduction, "none") == "add":
        np.add.at(out, at, env[op.updates])
    else:
        out[at] = env[op.updates]
    return out


@impl(N.GatherElementsOp)
def _gather_elements(op: N.GatherElementsOp, env: Env) -> np.ndarray:
    data, indices = env[op.data], env[op.indices].astype(np.int64)
    axis = int_of(op.axis) % data.ndim
    indices = np.where(indices < 0, indices + data.shape[axis], indices)
    return np.take_along_axis(data, indices, axis=axis)


@impl(N.PadOp)
def _pad(op: N.PadOp, env: Env) -> np.ndarray:
    x = env[op.input]
    value = None if op.value is None else np.asarray(float_of(op.value), dtype=x.dtype)
    return K.pad(x, ints_of(op.pads), value, mode=str_of(op.mode, "constant"))


@impl(N.DropoutOp)
def _dropout(op: N.DropoutOp, env: Env) -> tuple[np.ndarray, np.ndarray]:
    return K.dropout_train(env[op.input], ratio=float_of(op.ratio, 0.5), seed=int_of(op.seed, 0))


@impl(N.RandomOp)
def _random(op: N.RandomOp, env: Env) -> np.ndarray:
    shape, dtype = _type_info(op.result.type)
    rng = np.random.default_rng(int_of(op.seed) if op.seed is not None else None)
    if str_of(op.distribution) == "uniform":
        values = rng.uniform(float_of(op.low, 0.0), float_of(op.high, 1.0), shape)
    else:
        values = rng.normal(float_of(op.mean, 0.0), float_of(op.scale, 1.0), shape)
    return values.astype(dtype)


@impl(N.CumSumOp)
def _cumsum(op: N.CumSumOp, env: Env) -> np.ndarray:
    x = env[op.input]
    axis = int_of(op.axis)
    if bool_of(op.reverse):
        x = np.flip(x, axis)
    y = np.cumsum(x, axis=axis, dtype=x.dtype)
    if bool_of(op.exclusive):
        y = y - x
    return np.flip(y, axis) if bool_of(op.reverse) else y


@impl(N.ConstantOp)
def _constant(op: N.ConstantOp, env: Env) -> np.ndarray:
    return decode_constant(op.value)


def decode_constant(value: Any) -> np.ndarray:
    """The array held by a `dense` or `#nn.data` attribute (read-only, no copy when possible)."""
    shape, dtype = _type_info(value.type)
    raw = value.data.data
    if dtype == np.bool_:
        flat = np.frombuffer(raw, dtype=np.uint8) != 0
    else:
        flat = np.frombuffer(raw, dtype=dtype.newbyteorder("<"))
        if flat.dtype != dtype:  # big-endian host
            flat = flat.astype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    if flat.size == 1 and count != 1:  # a splat stored once
        flat = np.full(count, flat[0], dtype=dtype)
    if flat.size != count:
        raise InterpreterError(f"constant of type {value.type} holds {flat.size} elements")
    out = flat.reshape(shape)
    out.flags.writeable = False
    return out


# ----------------------------------------------------------------------------- nn: losses


@impl(N.SoftmaxCrossEntropyOp)
def _softmax_cross_entropy(op: N.SoftmaxCrossEntropyOp, env: Env) -> Any:
    axis = op.class_axis_value
    loss, log_prob = K.softmax_cross_entropy_loss(
        np.moveaxis(env[op.scores], axis, 1), env[op.labels], reduction=_reduction(op),  # the kernel takes (N, C, *d)
        ignore_index=_ignore_index(op), weight=_opt(env, op.weights))
    return (loss, np.moveaxis(log_prob, 1, axis)) if len(op.log_prob) else loss


@impl(N.MseLossOp)
def _mse_loss(op: N.MseLossOp, env: Env) -> np.ndarray:
    return K.mse_loss(env[op.prediction], env[op.target], reduction=_reduction(op))


# ----------------------------------------------------------------------------- grad: element-wise


def _elementwise_grad(kernel: Callable[..., np.ndarray], **defaults: Any) -> Impl:
    """dx = kernel(dy, saved, **properties); `defaults` names the float/str properties."""

    def run(op: Any, env: Env) -> np.ndarray:
        kwargs = {}
        for name, default in defaults.items():
            attr = getattr(op, name)
            kwargs[name] = str_of(attr, default) if isinstance(default, str) else float_of(attr, default)
        return kernel(env[op.grad], env[op.saved], **kwargs)

    return run


# grad.relu saves x; ReLU's backward mask x > 0 equals relu(x) > 0, which the kernel tests.
impl(G.ReluGradOp)(_elementwise_grad(K.relu_grad))
impl(G.LeakyReluGradOp)(_elementwise_grad(K.leaky_relu_grad, alpha=0.01))
impl(G.HardSigmoidGradOp)(_elementwise_grad(K.hard_sigmoid_grad, alpha=0.2, beta=0.5))
impl(G.GeluGradOp)(_elementwise_grad(K.gelu_grad, approximate="none"))
impl(G.DropoutGradOp)(_elementwise_grad(K.dropout_grad, ratio=0.5))
impl(G.SigmoidGradOp)(_elementwise_grad(K.sigmoid_grad))
impl(G.HardSwishGradOp)(_elementwise_grad(K.hard_swish_grad))
impl(G.TanhGradOp)(_elementwise_grad(K.tanh_grad))
impl(G.ErfGradOp)(_elementwise_grad(K.erf_grad))
impl(G.SqrtGradOp)(_elementwise_grad(K.sqrt_grad))
impl(G.ExpGradOp)(_elementwise_grad(K.exp_grad))
impl(G.LogGradOp)(_elementwise_grad(K.log_grad))


@impl(G.ClipGradOp)
def _clip_grad(op: G.ClipGradOp, env: Env) -> np.ndarray:
    return K.clip_grad(env[op.grad], env[op.saved], _opt_float(op.min), _opt_float(op.max))


@impl(G.SoftmaxGradOp)
def _softmax_grad(op: G.SoftmaxGradOp, env: Env) -> np.ndarray:
    return K.softmax_grad(env[op.grad], env[op.saved], axis=int_of(op.axis))


@impl(G.LogSoftmaxGradOp)
def _log_softmax_grad(op: G.LogSoftmaxGradOp, env: Env) -> np.ndarray:
    return K.log_softmax_grad(env[op.grad], env[op.saved], axis=int_of(op.axis))


def _broadcast_operands(op: Any, env: Env) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dy and both forward operands broadcast to dy's shape: the kernels' per-operand reduction
    is then the identity, which gives these ops' gradient at the broadcast shape."""
    dy = env[op.grad]
    return dy, np.broadcast_to(env[op.lhs], dy.shape), np.broadcast_to(env[op.rhs], dy.shape)


@impl(G.DivRhsGradOp)
def _div_rhs_grad(op: G.DivRhsGradOp, env: Env) -> np.ndarray:
    return K.div_grad(*_broadcast_operands(op, env))[1]


@impl(G.PowBaseGradOp)
def _pow_base_grad(op: G.PowBaseGradOp, env: Env) -> np.ndarray:
    return K.pow_grad(*_broadcast_operands(op, env))[0]


@impl(G.PowExponentGradOp)
def _pow_exponent_grad(op: G.PowExponentGradOp, env: Env) -> np.ndarray:
    return K.pow_grad(*_broadcast_operands(op, env))[1]


@impl(G.UnbroadcastOp)
def _unbroadcast(op: G.UnbroadcastOp, env: Env) -> np.ndarray:
    return K.reduce_to_shape(env[op.grad], _shape(op.result))


# ----------------------------------------------------------------------------- grad: contractions


@impl(G.ConvInputGradOp)
def _conv_input_grad(op: G.ConvInputGradOp, env: Env) -> np.ndarray:
    x_shape = _shape(op.result)
    return K.conv_grad_input(env[op.grad], env[op.weight], x_shape, **_conv_kwargs(op, len(x_shape) - 2))


@impl(G.ConvWeightGradOp)
def _conv_weight_grad(op: G.ConvWeightGradOp, env: Env) -> np.ndarray:
    x = env[op.input]
    return K.conv_grad_weight(env[op.grad], x, _shape(op.result), **_conv_kwargs(op, x.ndim - 2))


@impl(G.ConvBiasGradOp)
def _conv_bias_grad(op: G.ConvBiasGradOp, env: Env) -> np.ndarray:
    return K.conv_grad_bias(env[op.grad])


@impl(G.MatMulLhsGradOp)
def _matmul_lhs_grad(op: G.MatMulLhsGradOp, env: Env) -> np.ndarray:
    """d/dA of alpha * op(A) @ op(B): with A' = op(A), dA' = alpha * dY @ op(B)^T summed over
    A's broadcast batch axes (the MatMul kernel rule), and dA = op^-1(dA')."""
    trans_a, trans_b = bool_of(op.trans_a), bool_of(op.trans_b)
    b = _swap_last(env[op.rhs], trans_b)
    a_shape = _swapped_shape(_shape(op.result), trans_a)
    da = K.matmul_grad_a(env[op.grad], b, a_shape)
    return _swap_last(_scale(da, float_of(op.alpha, 1.0)), trans_a)


@impl(G.MatMulRhsGradOp)
def _matmul_rhs_grad(op: G.MatMulRhsGradOp, env: Env) -> np.ndarray:
    """d/dB of alpha * op(A) @ op(B): dB' = alpha * op(A)^T @ dY summed over B's broadcast batch
    axes, and dB = op^-1(dB')."""
    trans_a, trans_b = bool_of(op.trans_a), bool_of(op.trans_b)
    a = _swap_last(env[op.lhs], trans_a)
    b_shape = _swapped_shape(_shape(op.result), trans_b)
    db = K.matmul_grad_b(env[op.grad], a, b_shape)
    return _swap_last(_scale(db, float_of(op.alpha, 1.0)), trans_b)


# ----------------------------------------------------------------------------- grad: normalization


@impl(G.BatchNormGradOp)
def _batch_norm_grad(op: G.BatchNormGradOp, env: Env) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not bool_of(op.training, True):
        raise InterpreterError(
            f"{_describe(op)}: training = false (inference-mode statistics) is not modelled: the op "
            "has no running mean/var operands")
    x, scale = env[op.input], env[op.scale]
    _, mean, invstd = K.batch_norm_train(x, scale, np.zeros_like(scale), epsilon=float_of(op.epsilon, 1e-5))
    return K.batch_norm_train_grad(env[op.grad], x, scale, mean, invstd)


@impl(G.LayerNormGradOp)
def _layer_norm_grad(op: G.LayerNormGradOp, env: Env) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x, scale = env[op.input], env[op.scale]
    axis = int_of(op.axis, -1)
    _, mean, invstd = K.layer_norm(x, scale, None, axis=axis, epsilon=float_of(op.epsilon, 1e-5))
    return K.layer_norm_grad(env[op.grad], x, scale, mean, invstd, axis=axis)


# ----------------------------------------------------------------------------- grad: pooling


@impl(G.MaxPoolGradOp)
def _max_pool_grad(op: G.MaxPoolGradOp, env: Env) -> np.ndarray:
    x = env[op.input]
    _, indices = K.max_pool(x, **_window(op))
    return K.max_pool_grad(env[op.grad], indices, x.shape)


@impl(G.AvgPoolGradOp)
def _avg_pool_grad(op: G.AvgPoolGradOp, env: Env) -> np.ndarray:
    return K.average_pool_grad(env[op.grad], _shape(op.result), **_window(op),
                               count_include_pad=int(bool_of(op.count_include_pad)))


@impl(G.GlobalAvgPoolGradOp)
def _global_avg_pool_grad(op: G.GlobalAvgPoolGradOp, env: Env) -> np.ndarray:
    return K.global_average_pool_grad(env[op.grad], _shape(op.result))


# ----------------------------------------------------------------------------- grad: reductions, data movement


@impl(G.ReduceSumGradOp)
def _reduce_sum_grad(op: G.ReduceSumGradOp, env: Env) -> np.ndarray:
    return K.reduce_sum_grad(env[op.grad], _shape(op.result), ints_of(op.axes) or None,
                             keepdims=int(bool_of(op.keepdims, True)))


@impl(G.ReduceMeanGradOp)
def _reduce_mean_grad(op: G.ReduceMeanGradOp, env: Env) -> np.ndarray:
    return K.reduce_mean_grad(env[op.grad], _shape(op.result), ints_of(op.axes) or None,
                              keepdims=int(bool_of(op.keepdims, True)))


@impl(G.SliceGradOp)
def _slice_grad(op: G.SliceGradOp, env: Env) -> np.ndarray:
    return K.slice_grad(env[op.grad], _shape(op.result), ints_of(op.starts), ints_of(op.ends),
                        _ints_or_none(op.axes), _ints_or_none(op.steps))


@impl(G.GatherGradOp)
def _gather_grad(op: G.GatherGradOp, env: Env) -> np.ndarray:
    return K.gather_grad(env[op.grad], env[op.indices], _shape(op.result), axis=int_of(op.axis))


# ----------------------------------------------------------------------------- grad: losses


@impl(G.SoftmaxCrossEntropyGradOp)
def _softmax_cross_entropy_grad(op: G.SoftmaxCrossEntropyGradOp, env: Env) -> np.ndarray:
    axis = op.class_axis_value
    log_prob = np.moveaxis(env[op.log_prob], axis, 1)  # the kernel takes ONNX's (N, C, *d) layout
    dscores = K.softmax_cross_entropy_loss_grad(
        env[op.grad], log_prob, env[op.labels], reduction=_reduction(op),
        ignore_index=_ignore_index(op), weight=_opt(env, op.weights))
    return np.moveaxis(dscores, 1, axis)


@impl(G.MseLossGradOp)
def _mse_loss_grad(op: G.MseLossGradOp, env: Env) -> np.ndarray:
    return K.mse_loss_grad(env[op.grad], env[op.prediction], env[op.target], reduction=_reduction(op))[0]


# ----------------------------------------------------------------------------- train


def _write(op: Operation, operand: SSAValue, env: Env, new: np.ndarray) -> None:
    """Overwrite the array bound to `operand` with `new`, in place."""
    target = env[operand]
    if not target.flags.writeable:
        raise InterpreterError(
            f"{_describe(op)}: updates operand {operand.index} in place, but its value is read-only "
            "(an nn.constant?)")
    target[...] = new


def _next_step(op: Any, env: Env) -> int:
    """Increment the Adam step operand in place and return the new count (see module doc)."""
    step = env[op.step]
    if step.flags.writeable:
        step[...] = step + 1
        return int(step)
    return int(step) + 1


def _hyper(op: Any) -> dict[str, float]:
    return {"lr": float_of(op.lr), "weight_decay": float_of(op.weight_decay, 0.0)}


@impl(T.SgdOp)
def _sgd(op: T.SgdOp, env: Env) -> None:
    (p,) = K.sgd(env[op.param], env[op.grad], **_hyper(op))
    _write(op, op.param, env, p)


@impl(T.MomentumOp)
def _momentum(op: T.MomentumOp, env: Env) -> None:
    p, v = K.momentum(env[op.param], env[op.grad], env[op.velocity], **_hyper(op),
                      momentum=float_of(op.momentum, 0.9), nesterov=bool_of(op.nesterov))
    _write(op, op.param, env, p)
    _write(op, op.velocity, env, v)


def _adam_like(kernel: Callable[..., tuple[np.ndarray, np.ndarray, np.ndarray]]) -> Impl:
    def run(op: Any, env: Env) -> None:
        p, m, v = kernel(env[op.param], env[op.grad], env[op.exp_avg], env[op.exp_avg_sq],
                         step=_next_step(op, env), **_hyper(op), beta1=float_of(op.beta1, 0.9),
                         beta2=float_of(op.beta2, 0.999), eps=float_of(op.eps, 1e-8))
        _write(op, op.param, env, p)
        _write(op, op.exp_avg, env, m)
        _write(op, op.exp_avg_sq, env, v)

    return run


impl(T.AdamOp)(_adam_like(K.adam))
impl(T.AdamWOp)(_adam_like(K.adamw))


@impl(T.AccumulateOp)
def _accumulate(op: T.AccumulateOp, env: Env) -> None:
    _write(op, op.buffer, env, K.add(env[op.buffer], env[op.value]))


# ----------------------------------------------------------------------------- mx


def _mx_cast(op: Any, env: Env) -> np.ndarray:
    """An MX cast computes with what the format stores: quantize, then dequantize
    (`monet_ir.interp.mx`); a requantize re-encodes the decoded values along its axis."""
    from monet_ir.interp.mx import quantize_dequantize
    from monet_ir.precision import MXGroup

    rows, cols = op.get_group()
    group = MXGroup("vector" if rows == 1 else "square", rows, cols)
    partner = op.get_partner() if rows > 1 else None
    return quantize_dequantize(env[op.input], op.get_format(), group, axis=op.get_axis(), partner=partner)


def _register_mx() -> None:
    from dialects import mx as M

    impl(M.QuantizeOp, M.RequantizeOp)(_mx_cast)


_register_mx()
