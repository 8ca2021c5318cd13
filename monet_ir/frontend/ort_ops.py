"""Converters for the ONNX Runtime training ops that `generate_artifacts` writes beyond those in
`onnx_ops` (the gradient ops of activations, dropout, transposed convolutions and concatenation,
ORT's fused forward ops and its internal batch normalization).

Each maps onto `nn`/`grad` ops with ORT's semantics (the contrib-op schemas of
orttraining/core/graph/training_op_defs.cc and the gradient builders that emit them):

- `SigmoidGrad(dY, Y)`, `TanhGrad(dY, Y)`: from the forward output, as `grad.sigmoid`/`grad.tanh`;
- `LeakyReluGrad(dY, Y)`: `grad.leaky_relu`; it reads the output, whose sign is the input's for
  `alpha >= 0` (a negative alpha is refused);
- `DropoutGrad(dY, mask, ratio, training_mode)`: `grad.dropout` (the identity when
  training_mode is false);
- `Scale(X, s)`: `X * s`, or `X / s` with `scale_down`;
- `QuickGelu(X)` = `X * sigmoid(alpha * X)` (ORT's fusion of PyTorch's SiLU, alpha = 1) and its
  gradient `dY * (s + alpha * X * s * (1 - s))`, written as the element-wise ops they are (the
  gradient recomputes `s`, as ORT's kernel does);
- `BiasGelu(A, B)` = `gelu(A + B)`: `nn.add` then `nn.gelu`;
- `ConvTransposeGrad(dY, X, W)`: as `autodiff` differentiates a transposed convolution: dX a
  convolution of dY with W, dW `grad.conv_weight` with the operands' roles swapped, dB the sum
  of dY;
- `ConcatTraining` / `SplitTraining`: `nn.concat` / `nn.split`; the per-input lengths are known
  at import;
- `SliceGrad(dY, shape, starts, ends, axes, steps)`: `grad.slice` (dY into zeros of the shape);
- `SimplifiedLayerNormalization` (ORT's fusion of RMSNorm, in the standard domain) and its
  gradient: the element-wise ops and means of `x * r * scale`, `r = 1 / sqrt(mean(x^2) + eps)`,
  with `r` the saved statistic the gradient reads (`dX = r * (g - x̂ * mean(g * x̂))`,
  `g = dY * scale`, `x̂ = X * r`; `dscale` the sum of `dY * x̂`);
- `BatchNormInternal`: a training-mode `nn.batch_norm`; its saved statistics are read only by
  `BatchNormalizationGrad`, which `grad.batch_norm` models from the input (the running
  statistics' update does not feed the loss; any other reader is refused).

- `LSTMTraining`/`GRUTraining`: the forward LSTM/GRU unrolled as `onnx_recurrent` unrolls ONNX's;
  their extra outputs (the gates and cell states ORT saves) are the unrolled steps' values, read
  only by `LSTMGrad`/`GRUGrad`, which run backward through the same steps from those saved
  values (no recomputation, as ORT's kernels): per step the gates' pre-activation gradients,
  dh of the previous step and the step's recurrent-weight term, then dX and dW of the input
  projection of all steps at once and dB as sums. GRUGrad with linear_before_reset = 0 and
  gradients of the initial states are refused naming the node.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import StringAttr, TensorType

from dialects import grad, nn
from dialects.base import bool_attr, float_attr, int_attr, ints_attr
from monet_ir.frontend.attrs import attr, node_name
from monet_ir.frontend.onnx_ops import (
    InputFailed,
    Unsupported,
    conv_geometry,
    const_float,
    const_input,
    const_ints,
    converts,
    emit,
    opt_input,
    required_attr,
    same_type,
)

MS = "com.microsoft"


def _scalar(imp: Any, node: Any, what: str, value: float, like: TensorType) -> Any:
    import numpy as np

    from monet_ir.types import numpy_dtype_of

    elem = like.get_element_type()
    return imp.materialize(f"{node_name(node)}/{what}", np.array(value, numpy_dtype_of(elem)), TensorType(elem, []))


def _tmp(imp: Any, node: Any, op_class: type, operands: list, like: TensorType, props: dict | None = None) -> Any:
    """One op of a composite, its result not bound to an ONNX name."""
    return emit(imp, node, op_class, operands, [like], props, outputs=[]).results[0]


@converts("SigmoidGrad", "TanhGrad", domain=MS)
def convert_output_activation_grad(imp: Any, node: Any) -> None:
    op = grad.SigmoidGradOp if node.op_type == "SigmoidGrad" else grad.TanhGradOp
    emit(imp, node, op, [imp.value(node.input[0]), imp.value(node.input[1])], same_type(imp, node))


@converts("LeakyReluGrad", domain=MS)
def convert_leaky_relu_grad(imp: Any, node: Any) -> None:
    alpha = float(attr(node, "alpha", 0.01))
    if alpha < 0:
        raise Unsupported(f"alpha = {alpha}: the gradient from the output's sign is not the input's for a negative alpha")
    emit(imp, node, grad.LeakyReluGradOp, [imp.value(node.input[0]), imp.value(node.input[1])], same_type(imp, node),
         {"alpha": float_attr(alpha)})


@converts("DropoutGrad", domain=MS)
def convert_dropout_grad(imp: Any, node: Any) -> None:
    ratio = const_float(imp, node, 2, "ratio")
    ratio = 0.5 if ratio is None else ratio
    training = const_input(imp, node, 3, "training_mode")
    dy = imp.value(node.input[0])
    if (training is not None and not bool(training.reshape(-1)[0])) or ratio == 0.0:
        imp.bind(node.output[0], dy)  # inference-mode dropout (or p = 0) passes the gradient through
        return
    emit(imp, node, grad.DropoutGradOp, [dy, imp.value(node.input[1])], same_type(imp, node),
         {"ratio": float_attr(ratio)})


@converts("Scale", domain=MS)
def convert_scale(imp: Any, node: Any) -> None:
    s = const_float(imp, node, 1, "scale")
    if s is None:
        raise Unsupported("the scale input is required")
    x = imp.value(node.input[0])
    op = nn.DivOp if attr(node, "scale_down", 0) else nn.MulOp
    emit(imp, node, op, [x, _scalar(imp, node, "scale", s, x.type)], same_type(imp, node))


@converts("QuickGelu", domain=MS)
def convert_quick_gelu(imp: Any, node: Any) -> None:
    x = imp.value(node.input[0])
    alpha = float(attr(node, "alpha", 1.702))
    z = x if alpha == 1.0 else _tmp(imp, node, nn.MulOp, [x, _scalar(imp, node, "alpha", alpha, x.type)], x.type)
    s = _tmp(imp, node, nn.SigmoidOp, [z], x.type)
    emit(imp, node, nn.MulOp, [x, s], same_type(imp, node))


@converts("QuickGeluGrad", domain=MS)
def convert_quick_gelu_grad(imp: Any, node: Any) -> None:
    """dY * s + dY * alpha * X * s * (1 - s) with s = sigmoid(alpha * X), recomputed."""
    dy, x = imp.value(node.input[0]), imp.value(node.input[1])
    alpha = float(attr(node, "alpha", 1.702))
    t = x.type
    a = None if alpha == 1.0 else _scalar(imp, node, "alpha", alpha, t)
    z = x if a is None else _tmp(imp, node, nn.MulOp, [x, a], t)
    s = _tmp(imp, node, nn.SigmoidOp, [z], t)
    through_x = _tmp(imp, node, nn.MulOp, [dy, s], t)  # d(x * s) / dx, s held
    through_s = _tmp(imp, node, nn.MulOp, [dy, x], t)  # d(x * s) / ds
    dz = _tmp(imp, node, grad.SigmoidGradOp, [through_s, s], t)
    if a is not None:
        dz = _tmp(imp, node, nn.MulOp, [dz, a], t)
    emit(imp, node, nn.AddOp, [through_x, dz], same_type(imp, node))


@converts("BiasGelu", "FastGelu", domain=MS)
def convert_bias_gelu(imp: Any, node: Any) -> None:
    x = imp.value(node.input[0])
    bias = opt_input(node, 1)
    if bias:
        x = _tmp(imp, node, nn.AddOp, [x, imp.value(bias)], imp.result_type(node.output[0]))
    approximate = "tanh" if node.op_type == "FastGelu" else "none"
    emit(imp, node, nn.GeluOp, [x], same_type(imp, node), {"approximate": StringAttr(approximate)})


@converts("ConvTransposeGrad", domain=MS)
def convert_conv_transpose_grad(imp: Any, node: Any) -> None:
    w = imp.type_of(node.input[2]).get_shape()
    props = conv_geometry(imp, node, len(w) - 2, w[2:], transpose=True)
    dy, x, wv = (imp.value(n) for n in node.input[:3])
    outs = list(node.output) + [""] * (3 - len(node.output))
    if outs[0]:
        emit(imp, node, nn.ConvOp, [dy, wv, None], [imp.result_type(outs[0])], props, outputs=outs[:1])
    if outs[1]:
        emit(imp, node, grad.ConvWeightGradOp, [x, dy], [imp.result_type(outs[1])], props, outputs=outs[1:2])
    if outs[2]:
        emit(imp, node, grad.ConvBiasGradOp, [dy], [imp.result_type(outs[2])], outputs=outs[2:3])


@converts("ConcatTraining", domain=MS)
def convert_concat_training(imp: Any, node: Any) -> None:
    import numpy as np

    axis = int(required_attr(node, "axis"))
    inputs = [n for n in node.input if n]
    values = [imp.value(n) for n in inputs]
    emit(imp, node, nn.ConcatOp, [values], same_type(imp, node), {"axis": int_attr(axis)}, outputs=node.output[:1])
    if len(node.output) > 1 and node.output[1]:
        rank = len(values[0].type.get_shape())
        lengths = np.array([v.type.get_shape()[axis % rank] for v in values], dtype=np.int64)
        imp.bind_constant(node.output[1], lengths)


@converts("SplitTraining", domain=MS)
def convert_split_training(imp: Any, node: Any) -> None:
    axis = int(attr(node, "axis", 0))
    x = imp.value(node.input[0])
    sizes = const_ints(imp, node, 1, "split")
    rank = len(x.type.get_shape())
    types = [imp.result_type(o) for o in node.output]
    if sizes is not None and [t.get_shape()[axis % rank] for t in types] != sizes:
        raise Unsupported(f"split sizes {sizes} differ from the outputs' lengths along axis {axis}")
    emit(imp, node, nn.SplitOp, [x], [types], {"axis": int_attr(axis)})


@converts("SliceGrad", domain=MS)
def convert_slice_grad(imp: Any, node: Any) -> None:
    """dX: dY written into zeros of X's shape (input 1) at the slice's starts, ends, axes and
    steps (inputs 2..5), as `grad.slice`."""
    shape = const_ints(imp, node, 1, "shape")
    starts, ends = const_ints(imp, node, 2, "starts"), const_ints(imp, node, 3, "ends")
    axes, steps = const_ints(imp, node, 4, "axes"), const_ints(imp, node, 5, "steps")
    if shape is None or starts is None or ends is None:
        raise Unsupported("shape, starts and ends (inputs 1..3) are required")
    dy = imp.value(node.input[0])
    clamp = 2**62  # as the forward Slice: INT64_MAX means "to the end"
    emit(imp, node, grad.SliceGradOp, [dy], [TensorType(dy.type.get_element_type(), shape)], {
        "starts": ints_attr([max(min(v, clamp), -clamp) for v in starts]),
        "ends": ints_attr([max(min(v, clamp), -clamp) for v in ends]),
        "axes": ints_attr(axes) if axes is not None else None,
        "steps": ints_attr(steps) if steps is not None else None,
    })

@converts("BatchNormInternal", domain=MS)
def convert_batch_norm_internal(imp: Any, node: Any) -> None:
    if not attr(node, "training_mode", 1):
        raise Unsupported("training_mode = 0 is not modelled (ORT writes this op for training-mode batch norm)")
    for i, extra in enumerate(node.output[1:], start=1):
        if extra:
            _only_read_by(imp, extra, "BatchNormalizationGrad", "running statistics" if i < 3 else "saved statistics")
    emit(imp, node, nn.BatchNormOp, [imp.value(n) for n in node.input[:5]], same_type(imp, node), {
        "epsilon": float_attr(attr(node, "epsilon", 1e-5)),
        "momentum": float_attr(attr(node, "momentum", 0.9)),
        "training": bool_attr(True),
    }, outputs=node.output[:1])


def _only_read_by(imp: Any, name: str, op_type: str, what: str) -> None:
    """Refuse a statistics output that a node other than `op_type` reads (its value is not
    modelled: the gradient op re-derives it from the forward input)."""
    from monet_ir.frontend.ort_training import other_reader

    who = other_reader(imp, name, op_type)
    if who is not None:
        raise Unsupported(f"the {what} output '{name}' is read by {who}; it is not modelled as a value")


@converts("SimplifiedLayerNormalization")  # ORT's RMSNorm fusion writes it in the standard domain
@converts("SimplifiedLayerNormalization", domain=MS)
def convert_simplified_layer_norm(imp: Any, node: Any) -> None:
    """RMS normalization over axes [axis, rank): y = x * r * scale with r = 1 / sqrt(mean(x^2) +
    epsilon), as the element-wise ops and mean it is; r is the op's saved `inv_std_var` output,
    which SimplifiedLayerNormalizationGrad reads."""
    if attr(node, "stash_type", 1) != 1:
        raise Unsupported("stash_type other than float32 is not modelled")
    x, scale = imp.value(node.input[0]), imp.value(node.input[1])
    t, reduced, axes = _rms_types(x.type, int(attr(node, "axis", -1)))
    square = _tmp(imp, node, nn.MulOp, [x, x], t)
    mean = _tmp(imp, node, nn.ReduceMeanOp, [square], reduced, {"axes": ints_attr(axes), "keepdims": bool_attr(True)})
    shifted = _tmp(imp, node, nn.AddOp, [mean, _scalar(imp, node, "epsilon", float(attr(node, "epsilon", 1e-5)), t)],
                   reduced)
    rms = _tmp(imp, node, nn.SqrtOp, [shifted], reduced)
    inv = _tmp(imp, node, nn.DivOp, [_scalar(imp, node, "one", 1.0, t), rms], reduced)
    normalized = _tmp(imp, node, nn.MulOp, [x, inv], t)
    emit(imp, node, nn.MulOp, [normalized, scale], same_type(imp, node), outputs=node.output[:1])
    if len(node.output) > 1 and node.output[1]:
        declared = imp.result_type(node.output[1])
        if declared != reduced:
            raise Unsupported(f"inv_std_var output of type {declared} differs from the statistics' {reduced}")
        imp.bind(node.output[1], inv)


@converts("SimplifiedLayerNormalizationGrad", domain=MS)
def convert_simplified_layer_norm_grad(imp: Any, node: Any) -> None:
    """From dY, X, scale and the saved r: with g = dY * scale and x̂ = X * r,
    dX = r * (g - x̂ * mean(g * x̂)) and dscale = sum of dY * x̂ over the axes before `axis`."""
    dy, x, scale, inv = (imp.value(n) for n in node.input[:4])
    t, reduced, axes = _rms_types(x.type, int(attr(node, "axis", -1)))
    if inv.type != reduced:
        raise Unsupported(f"inv_std_var of type {inv.type} is not the statistics' {reduced}")
    normalized = _tmp(imp, node, nn.MulOp, [x, inv], t)
    g = _tmp(imp, node, nn.MulOp, [dy, scale], t)
    product = _tmp(imp, node, nn.MulOp, [g, normalized], t)
    mean = _tmp(imp, node, nn.ReduceMeanOp, [product], reduced, {"axes": ints_attr(axes), "keepdims": bool_attr(True)})
    projection = _tmp(imp, node, nn.MulOp, [normalized, mean], t)
    difference = _tmp(imp, node, nn.SubOp, [g, projection], t)
    if node.output[0]:
        emit(imp, node, nn.MulOp, [difference, inv], [t], outputs=node.output[:1])
    if len(node.output) > 1 and node.output[1]:
        weighted = _tmp(imp, node, nn.MulOp, [dy, normalized], t)
        leading = list(range(len(t.get_shape()) - len(axes)))
        emit(imp, node, nn.ReduceSumOp, [weighted], [imp.result_type(node.output[1])],
             {"axes": ints_attr(leading), "keepdims": bool_attr(False)}, outputs=node.output[1:2])


def _rms_types(t: TensorType, axis: int) -> tuple[TensorType, TensorType, list[int]]:
    """The input type, the statistics' type (the normalized axes kept as 1) and those axes."""
    shape = list(t.get_shape())
    rank = len(shape)
    if not -rank <= axis < rank:
        raise Unsupported(f"axis {axis} is out of range for rank {rank}")
    axis %= rank
    reduced = TensorType(t.get_element_type(), shape[:axis] + [1] * (rank - axis))
    return t, reduced, list(range(axis, rank))


@converts("LSTMTraining", "GRUTraining", domain=MS)
def convert_recurrent_training(imp: Any, node: Any) -> None:
    """The forward LSTM/GRU, unrolled as ONNX's (`onnx_recurrent`); its extra outputs (LSTM's
    all_cell_states and iofc gates, GRU's zrh gates) are the steps' saved values, which only
    the gradient op may read: it reads them from the unrolled steps."""
    from monet_ir.frontend.onnx_recurrent import unroll

    lstm = node.op_type == "LSTMTraining"
    saved = [o for o in node.output[3:5] if o] if lstm else [o for o in node.output[2:3] if o]
    grad_op = "LSTMGrad" if lstm else "GRUGrad"
    for name in saved:
        _only_read_by(imp, name, grad_op, "saved gates")
    record = unroll(imp, node)
    if not hasattr(imp, "ort_recurrent"):
        imp.ort_recurrent = {}
    for name in saved:
        imp.ort_recurrent[name] = record


def _recorded(imp: Any, node: Any, index: int) -> dict[str, Any]:
    name = opt_input(node, index)
    record = getattr(imp, "ort_recurrent", {}).get(name) if name else None
    if record is None:
        known = imp.known(name) if name else None
        if known is not None and known.ssa is None and known.const is None:
            raise InputFailed(f"input '{name}' comes from a node that could not be imported")
        raise Unsupported(f"input {index} ('{name}') is not the saved gates of an LSTMTraining/GRUTraining node")
    return record


def _recurrent_grad_steps(imp: Any, node: Any, record: dict[str, Any], dy_index: int) -> tuple[Any, list[Any]]:
    """The _Steps emitter and the incoming gradient of every step's hidden state, from the
    gradient of Y (seq_length, 1, batch, hidden)."""
    from monet_ir.frontend.onnx_recurrent import _Steps

    s = _Steps(imp, node, record["elem"])
    name = opt_input(node, dy_index)
    if name is None:
        raise Unsupported(f"{node.op_type} without the gradient of Y (input {dy_index}) is not modelled")
    n, b, h = record["steps_n"], record["batch"], record["hidden"]
    dy = imp.value(name)
    pieces = s.split(dy, 0, [[1, 1, b, h]] * n) if n > 1 else [dy]
    return s, [s.reshape(p, [b, h]) for p in pieces]


def _input_side_grads(imp: Any, node: Any, s: Any, record: dict[str, Any], dpre: dict[int, Any], gates: int) -> Any:
    """dX, dW (and the input bias gradient, returned) from the pre-activation gradients of the
    input projection `X · Wᵀ` of all steps; binds outputs 0 and 1."""
    n, b, h = record["steps_n"], record["batch"], record["hidden"]
    pieces = [s.reshape(dpre[t], [1, b, gates * h]) for t in range(n)]
    dxw = pieces[0] if n == 1 else emit(imp, node, nn.ConcatOp, [pieces], [TensorType(record["elem"], [n, b, gates * h])],
                                        {"axis": int_attr(0)}, outputs=[]).results[0]
    x, w = record["x"], record["w"]
    outs = list(node.output) + [""] * 6
    if outs[0]:
        dx = s.op(grad.MatMulLhsGradOp, [dxw, w], list(x.type.get_shape()), {"trans_b": bool_attr(True)})
        imp.bind(outs[0], s.reshape(dx, list(imp.result_type(outs[0]).get_shape())))
    if outs[1]:
        dw = s.op(grad.MatMulRhsGradOp, [dxw, x], list(w.type.get_shape()), {"trans_b": bool_attr(True)})
        imp.bind(outs[1], s.reshape(dw, list(imp.result_type(outs[1]).get_shape())))
    return s.op(nn.ReduceSumOp, [dxw], [gates * h], {"axes": ints_attr([0, 1]), "keepdims": bool_attr(False)})


def _sum(s: Any, terms: list[Any], shape: list[int]) -> Any:
    if len(terms) == 1:
        return terms[0]
    return emit(s.imp, s.node, nn.SumOp, [terms], [TensorType(s.elem, shape)], outputs=[]).results[0]


def _zeros(imp: Any, node: Any, elem: Any, shape: list[int]) -> Any:
    import numpy as np

    from monet_ir.types import numpy_dtype_of

    return imp.materialize(f"{node_name(node)}/zero", np.zeros(shape, numpy_dtype_of(elem)), TensorType(elem, shape))


def _no_initial_state_grads(node: Any, first: int) -> None:
    for i, out in enumerate(node.output[first:], start=first):
        if out:
            raise Unsupported(f"the gradient of an initial state (output {i}, '{out}') is not modelled")


@converts("LSTMGrad", domain=MS)
def convert_lstm_grad(imp: Any, node: Any) -> None:
    """Backward through the unrolled LSTM steps, last step first, from the saved gates (the
    ops `autodiff` derives for the same steps): per step the gate pre-activation gradients
    (sigmoid/tanh gradients of dh and dc), dh of the previous step (`· R`) and that step's
    `dR` term; then dX and dW from all steps at once and dB as the sum over steps and batch."""
    record = _recorded(imp, node, 8)
    _no_initial_state_grads(node, 4)
    if opt_input(node, 11) is not None:
        raise Unsupported("the gradient of Y_c (input 11) is not modelled")
    s, dys = _recurrent_grad_steps(imp, node, record, 9)
    b, h = record["batch"], record["hidden"]
    bh = [b, h]
    dh_next = dc_next = None
    if opt_input(node, 10) is not None:  # the gradient of Y_h reaches the last step
        dh_next = s.reshape(imp.value(node.input[10]), bh)
    dpre: dict[int, Any] = {}
    dr_terms: list[Any] = []
    for saved in reversed(record["steps"]):
        t = saved["t"]
        dh = dys[t] if dh_next is None else s.op(nn.AddOp, [dys[t], dh_next], bh)
        i, o, f, cand, tanh_c = (saved[k] for k in ("i", "o", "f", "cand", "tanh_c"))
        dpo = s.op(grad.SigmoidGradOp, [s.op(nn.MulOp, [dh, tanh_c], bh), o], bh)
        dc = s.op(grad.TanhGradOp, [s.op(nn.MulOp, [dh, o], bh), tanh_c], bh)
        if dc_next is not None:
            dc = s.op(nn.AddOp, [dc, dc_next], bh)
        dpi = s.op(grad.SigmoidGradOp, [s.op(nn.MulOp, [dc, cand], bh), i], bh)
        dpg = s.op(grad.TanhGradOp, [s.op(nn.MulOp, [dc, i], bh), cand], bh)
        if f is not None:
            dpf = s.op(grad.SigmoidGradOp, [s.op(nn.MulOp, [dc, saved["c_prev"]], bh), f], bh)
            dc_next = s.op(nn.MulOp, [dc, f], bh)
        else:  # a zero initial cell state: the forget gate multiplies nothing
            dpf, dc_next = _zeros(imp, node, record["elem"], bh), None
        gates = emit(imp, node, nn.ConcatOp, [[dpi, dpo, dpf, dpg]], [TensorType(record["elem"], [b, 4 * h])],
                     {"axis": int_attr(1)}, outputs=[]).results[0]
        dpre[t] = gates
        h_prev = saved["h_prev"]
        if h_prev is not None:
            dr_terms.append(s.op(grad.MatMulRhsGradOp, [gates, h_prev], [4 * h, h], {"trans_b": bool_attr(True)}))
            dh_next = s.op(grad.MatMulLhsGradOp, [gates, record["r"]], bh, {"trans_b": bool_attr(True)})
        else:
            dh_next = None
    db = _input_side_grads(imp, node, s, record, dpre, 4)
    outs = list(node.output) + [""] * 6
    if outs[2]:
        dr = _sum(s, dr_terms, [4 * h, h]) if dr_terms else _zeros(imp, node, record["elem"], [4 * h, h])
        imp.bind(outs[2], s.reshape(dr, list(imp.result_type(outs[2]).get_shape())))
    if outs[3]:  # W's and R's biases are added together: the same gradient
        both = emit(imp, node, nn.ConcatOp, [[db, db]], [TensorType(record["elem"], [8 * h])], {"axis": int_attr(0)},
                    outputs=[]).results[0]
        imp.bind(outs[3], s.reshape(both, list(imp.result_type(outs[3]).get_shape())))


@converts("GRUGrad", domain=MS)
def convert_gru_grad(imp: Any, node: Any) -> None:
    """Backward through the unrolled GRU steps (linear_before_reset = 1, PyTorch's), last step
    first, from the saved gates: per step the update, reset and candidate pre-activation
    gradients, dh of the previous step and that step's dR terms; then dX and dW from all steps
    at once; dB the sums of the input-side and recurrent-side gradients."""
    if not attr(node, "linear_before_reset", 0):
        raise Unsupported("linear_before_reset = 0 is not modelled (PyTorch's GRU exports 1)")
    record = _recorded(imp, node, 7)
    if not record["linear_before_reset"]:
        raise Unsupported("its forward GRUTraining has linear_before_reset = 0, the gradient 1")
    _no_initial_state_grads(node, 4)
    s, dys = _recurrent_grad_steps(imp, node, record, 8)
    b, h = record["batch"], record["hidden"]
    bh, elem = [b, h], record["elem"]
    dh_next = s.reshape(imp.value(node.input[9]), bh) if opt_input(node, 9) is not None else None
    dpre: dict[int, Any] = {}
    recurrent_bias: list[Any] = []
    drzr_terms: list[Any] = []
    drh_terms: list[Any] = []
    for saved in reversed(record["steps"]):
        t = saved["t"]
        dh = dys[t] if dh_next is None else s.op(nn.AddOp, [dys[t], dh_next], bh)
        z, cand, h_prev = saved["z"], saved["cand"], saved["h_prev"]
        # h' = cand + z * (h - cand)
        if h_prev is not None:
            dz = s.op(nn.MulOp, [dh, s.op(nn.SubOp, [h_prev, cand], bh)], bh)
        else:
            dz = s.op(nn.NegOp, [s.op(nn.MulOp, [dh, cand], bh)], bh)
        dh_z = s.op(nn.MulOp, [dh, z], bh)
        dpz = s.op(grad.SigmoidGradOp, [dz, z], bh)
        dpn = s.op(grad.TanhGradOp, [s.op(nn.SubOp, [dh, dh_z], bh), cand], bh)
        if "rg" in saved:  # cand = tanh(xh + r * hh)
            rg, hh = saved["rg"], saved["hh"]
            dpr = s.op(grad.SigmoidGradOp, [s.op(nn.MulOp, [dpn, hh], bh), rg], bh)
            dhh = s.op(nn.MulOp, [dpn, rg], bh)
        else:  # a zero initial state without a recurrent bias: no reset gate
            dpr, dhh = _zeros(imp, node, elem, bh), None
        dpre[t] = emit(imp, node, nn.ConcatOp, [[dpz, dpr, dpn]], [TensorType(elem, [b, 3 * h])], {"axis": int_attr(1)},
                       outputs=[]).results[0]
        recurrent_bias.append(emit(imp, node, nn.ConcatOp, [[dpz, dpr, dhh if dhh is not None else _zeros(imp, node, elem, bh)]],
                                   [TensorType(elem, [b, 3 * h])], {"axis": int_attr(1)}, outputs=[]).results[0])
        if h_prev is not None:
            dzr = emit(imp, node, nn.ConcatOp, [[dpz, dpr]], [TensorType(elem, [b, 2 * h])], {"axis": int_attr(1)},
                       outputs=[]).results[0]
            drzr_terms.append(s.op(grad.MatMulRhsGradOp, [dzr, h_prev], [2 * h, h], {"trans_b": bool_attr(True)}))
            drh_terms.append(s.op(grad.MatMulRhsGradOp, [dhh, h_prev], [h, h], {"trans_b": bool_attr(True)}))
            through_zr = s.op(grad.MatMulLhsGradOp, [dzr, saved["rz_r"]], bh, {"trans_b": bool_attr(True)})
            through_h = s.op(grad.MatMulLhsGradOp, [dhh, saved["r_h"]], bh, {"trans_b": bool_attr(True)})
            dh_next = _sum(s, [dh_z, through_zr, through_h], bh)
        else:
            dh_next = None
    dwb = _input_side_grads(imp, node, s, record, dpre, 3)
    outs = list(node.output) + [""] * 6
    if outs[2]:
        if drzr_terms:
            dr = emit(imp, node, nn.ConcatOp, [[_sum(s, drzr_terms, [2 * h, h]), _sum(s, drh_terms, [h, h])]],
                      [TensorType(elem, [3 * h, h])], {"axis": int_attr(0)}, outputs=[]).results[0]
        else:
            dr = _zeros(imp, node, elem, [3 * h, h])
        imp.bind(outs[2], s.reshape(dr, list(imp.result_type(outs[2]).get_shape())))
    if outs[3]:
        stacked = [s.reshape(v, [1, b, 3 * h]) for v in recurrent_bias]
        rb = stacked[0] if len(stacked) == 1 else emit(imp, node, nn.ConcatOp, [stacked],
                                                       [TensorType(elem, [len(stacked), b, 3 * h])],
                                                       {"axis": int_attr(0)}, outputs=[]).results[0]
        drb = s.op(nn.ReduceSumOp, [rb], [3 * h], {"axes": ints_attr([0, 1]), "keepdims": bool_attr(False)})
        both = emit(imp, node, nn.ConcatOp, [[dwb, drb]], [TensorType(elem, [6 * h])], {"axis": int_attr(0)},
                    outputs=[]).results[0]
        imp.bind(outs[3], s.reshape(both, list(imp.result_type(outs[3]).get_shape())))
