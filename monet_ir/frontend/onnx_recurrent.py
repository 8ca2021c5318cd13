"""ONNX LSTM and GRU, unrolled over the (static) sequence into the ops each step computes.

The input projection of every step is one product (`X · Wᵀ`, shape `(T, B, G·H)` for G gates),
split into the steps; each step then multiplies the previous hidden state by `Rᵀ`, splits the
gate pre-activations and applies the cell's element-wise equations (ONNX's default activations:
sigmoid for the gates, tanh for the cell). `Y` is the steps' hidden states concatenated,
`Y_h`/`Y_c` the last ones; only the outputs the graph reads are built. An initial state that
is absent, a constant of zeros, or an initializer of zeros (the state PyTorch's RNNs start from
when none is given: both exporters write it so) starts from zero and costs nothing.

For T steps the unrolled graph has O(T) ops: it is what a training step computes (the backward
pass runs through every step), and `autodiff` differentiates it op by op. Refused, with the
reason: bidirectional direction, `layout = 1`, `sequence_lens`, peepholes, `clip`,
`input_forget`, non-default activations.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue

from dialects import nn
from dialects.base import bool_attr, int_attr
from monet_ir.frontend.attrs import attr
from monet_ir.frontend.onnx_ops import Unsupported, converts, emit, imp_uses, opt_input, required_attr

DEFAULT_ACTIVATIONS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"]}


class _Steps:
    """Emits the unrolled ops of one recurrent node (all tagged with the node's name)."""

    def __init__(self, imp: Any, node: Any, elem: Any) -> None:
        self.imp, self.node, self.elem = imp, node, elem

    def op(self, cls: type, operands: list[SSAValue | None], shape: list[int], props: dict | None = None) -> SSAValue:
        return emit(self.imp, self.node, cls, operands, [TensorType(self.elem, shape)], props, outputs=[]).results[0]

    def split(self, x: SSAValue, axis: int, pieces: list[list[int]]) -> list[SSAValue]:
        types = [TensorType(self.elem, s) for s in pieces]
        return list(emit(self.imp, self.node, nn.SplitOp, [x], [types], {"axis": int_attr(axis)}, outputs=[]).results)

    def reshape(self, x: SSAValue, shape: list[int]) -> SSAValue:
        if list(x.type.get_shape()) == shape:  # type: ignore[attr-defined]
            return x
        return self.op(nn.ReshapeOp, [x], shape)

    def matmul_t(self, x: SSAValue, w: SSAValue, shape: list[int]) -> SSAValue:
        """x · wᵀ"""
        return self.op(nn.MatMulOp, [x, w], shape, {"trans_b": bool_attr(True)})


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def kind_of(node: Any) -> str:
    """LSTM or GRU (ONNX Runtime's LSTMTraining/GRUTraining are the same forward op)."""
    return node.op_type.removesuffix("Training")


def _check_attributes(node: Any) -> str:
    direction = _text(attr(node, "direction", "forward"))
    if direction not in ("forward", "reverse"):
        raise Unsupported(f"direction '{direction}' is not modelled (forward and reverse are)")
    if attr(node, "layout", 0):
        raise Unsupported("layout = 1 (batch-major) is not modelled")
    if attr(node, "clip") is not None:
        raise Unsupported("clip is not modelled")
    if attr(node, "input_forget", 0):
        raise Unsupported("input_forget = 1 is not modelled")
    activations = attr(node, "activations")
    if activations is not None and [_text(a) for a in activations] != DEFAULT_ACTIVATIONS[kind_of(node)]:
        raise Unsupported(f"activations {[_text(a) for a in activations]} are not modelled "
                          f"(the default {DEFAULT_ACTIVATIONS[kind_of(node)]} is)")
    if opt_input(node, 4) is not None:
        raise Unsupported("sequence_lens (input 4) is not modelled")
    if kind_of(node) == "LSTM" and opt_input(node, 7) is not None:
        raise Unsupported("peepholes (input 7, P) are not modelled")
    return direction


def _is_zero(imp: Any, name: str) -> bool:
    import numpy as np

    known = imp.known(name)
    if known is not None and known.const is not None:
        return bool(np.all(imp.const_array(name) == 0))
    if known is not None and name in imp.initializer_protos:
        data = imp.parameter_data(name)  # dropped as a parameter if nothing else reads it
        if data is not None and np.all(data == 0):
            return True
        imp.read_as_constant.discard(name)
    return False


def _initial(imp: Any, node: Any, s: _Steps, i: int, batch: int, hidden: int) -> SSAValue | None:
    name = opt_input(node, i)
    if name is None or _is_zero(imp, name):
        return None
    return s.reshape(imp.value(name), [batch, hidden])


@converts("LSTM", "GRU")
def convert_recurrent(imp: Any, node: Any) -> None:
    unroll(imp, node)


def unroll(imp: Any, node: Any) -> dict[str, Any]:
    """Emit the unrolled steps of an LSTM/GRU node and bind its outputs; returns what the steps
    computed (for ONNX Runtime's LSTMGrad/GRUGrad, which read the forward's saved gates):
    `steps` (one dict of SSA values per step, in the order computed), the reshaped operands
    `x`, `w`, `r` and `rb` (GRU's recurrent bias), and the sizes."""
    kind = kind_of(node)
    direction = _check_attributes(node)
    x = imp.value(node.input[0])
    shape = list(x.type.get_shape())  # type: ignore[attr-defined]
    if len(shape) != 3:
        raise Unsupported(f"input X of rank {len(shape)}: (seq_length, batch, input_size) expected")
    steps_n, batch, _ = shape
    hidden = int(required_attr(node, "hidden_size"))
    gates = 4 if kind == "LSTM" else 3
    elem = x.type.get_element_type()  # type: ignore[attr-defined]
    s = _Steps(imp, node, elem)
    w = imp.value(node.input[1])
    r = imp.value(node.input[2])
    if list(w.type.get_shape())[:2] != [1, gates * hidden] or list(r.type.get_shape()) != [1, gates * hidden, hidden]:
        raise Unsupported(f"W {list(w.type.get_shape())} / R {list(r.type.get_shape())} do not match "
                          f"one direction of {gates} gates of hidden_size {hidden}")
    w = s.reshape(w, [gates * hidden, shape[2]])
    r = s.reshape(r, [gates * hidden, hidden])
    wb = rb = None
    bias_name = opt_input(node, 3)
    if bias_name is not None and not _is_zero(imp, bias_name):
        wb, rb = s.split(s.reshape(imp.value(bias_name), [2 * gates * hidden]), 0, [[gates * hidden]] * 2)
    # the input projection of all steps at once, then one slice per step
    xw = s.matmul_t(x, w, [steps_n, batch, gates * hidden])
    if wb is not None:
        xw = s.op(nn.AddOp, [xw, wb if kind == "GRU" else s.op(nn.AddOp, [wb, rb], [gates * hidden])],
                  [steps_n, batch, gates * hidden])
        if kind == "LSTM":
            rb = None  # folded into the input projection
    per_step = s.split(xw, 0, [[1, batch, gates * hidden]] * steps_n) if steps_n > 1 else [xw]
    h = _initial(imp, node, s, 5, batch, hidden)
    c = _initial(imp, node, s, 6, batch, hidden) if kind == "LSTM" else None
    order = range(steps_n) if direction == "forward" else range(steps_n - 1, -1, -1)
    outputs: dict[int, SSAValue] = {}
    step = _lstm_step if kind == "LSTM" else _gru_step
    steps: list[dict[str, Any]] = []
    for t in order:
        xt = s.reshape(per_step[t], [batch, gates * hidden])
        saved: dict[str, Any] = {"t": t, "h_prev": h, "c_prev": c}
        h, c = step(s, node, xt, h, c, r, rb, batch, hidden, saved)
        steps.append(saved)
        outputs[t] = h
    _bind_outputs(imp, node, s, outputs, h, c, steps_n, batch, hidden)
    return {"steps": steps, "x": x, "w": w, "r": r, "rb": rb, "has_bias": wb is not None, "batch": batch,
            "hidden": hidden, "steps_n": steps_n, "elem": elem, "direction": direction,
            "linear_before_reset": bool(attr(node, "linear_before_reset", 0))}


def _lstm_step(s: _Steps, node: Any, xt, h, c, r, rb, batch: int, hidden: int, saved: dict):
    bh = [batch, hidden]
    pre = xt if h is None else s.op(nn.AddOp, [xt, s.matmul_t(h, r, [batch, 4 * hidden])], [batch, 4 * hidden])
    gi, go, gf, gc = s.split(pre, 1, [bh] * 4)  # ONNX's gate order: input, output, forget, cell
    i, o = s.op(nn.SigmoidOp, [gi], bh), s.op(nn.SigmoidOp, [go], bh)
    cand = s.op(nn.TanhOp, [gc], bh)
    c_new = s.op(nn.MulOp, [i, cand], bh)
    f = None
    if c is not None:
        f = s.op(nn.SigmoidOp, [gf], bh)
        c_new = s.op(nn.AddOp, [s.op(nn.MulOp, [f, c], bh), c_new], bh)
    tanh_c = s.op(nn.TanhOp, [c_new], bh)
    h_new = s.op(nn.MulOp, [o, tanh_c], bh)
    saved.update(i=i, o=o, f=f, cand=cand, tanh_c=tanh_c)
    return h_new, c_new


def _gru_step(s: _Steps, node: Any, xt, h, c, r, rb, batch: int, hidden: int, saved: dict):
    bh = [batch, hidden]
    xz, xr, xh = s.split(xt, 1, [bh] * 3)  # ONNX's gate order: update, reset, hidden
    linear_before_reset = bool(attr(node, "linear_before_reset", 0))
    if h is None:  # zero state: R·h vanishes, only the recurrent bias remains
        if rb is not None:
            bz, br, bhh = s.split(rb, 0, [[hidden]] * 3)
            z = s.op(nn.SigmoidOp, [s.op(nn.AddOp, [xz, bz], bh)], bh)
            # r ⊙ (0·Rhᵀ + Rbh) when linear before reset, (r ⊙ 0)·Rhᵀ + Rbh otherwise
            inner = bhh
            if linear_before_reset:
                rg = s.op(nn.SigmoidOp, [s.op(nn.AddOp, [xr, br], bh)], bh)
                saved.update(rg=rg, hh=bhh)
                inner = s.op(nn.MulOp, [rg, bhh], bh)
            xh = s.op(nn.AddOp, [xh, inner], bh)
        else:
            z = s.op(nn.SigmoidOp, [xz], bh)
        cand = s.op(nn.TanhOp, [xh], bh)
        saved.update(z=z, cand=cand)
        return s.op(nn.SubOp, [cand, s.op(nn.MulOp, [z, cand], bh)], bh), None  # (1 - z) ⊙ h̃
    rz_r, r_h = s.split(r, 0, [[2 * hidden, hidden], [hidden, hidden]])
    saved.update(rz_r=rz_r, r_h=r_h)
    hr = s.matmul_t(h, rz_r, [batch, 2 * hidden])
    if rb is not None:
        bzr, bhh = s.split(rb, 0, [[2 * hidden], [hidden]])
        hr = s.op(nn.AddOp, [hr, bzr], [batch, 2 * hidden])
    hz, hrr = s.split(hr, 1, [bh] * 2)
    z = s.op(nn.SigmoidOp, [s.op(nn.AddOp, [xz, hz], bh)], bh)
    rg = s.op(nn.SigmoidOp, [s.op(nn.AddOp, [xr, hrr], bh)], bh)
    if linear_before_reset:
        hh = s.matmul_t(h, r_h, bh)
        if rb is not None:
            hh = s.op(nn.AddOp, [hh, bhh], bh)
        inner = s.op(nn.MulOp, [rg, hh], bh)
        saved.update(hh=hh)
    else:
        rh = s.op(nn.MulOp, [rg, h], bh)
        inner = s.matmul_t(rh, r_h, bh)
        if rb is not None:
            inner = s.op(nn.AddOp, [inner, bhh], bh)
        saved.update(rh=rh)
    cand = s.op(nn.TanhOp, [s.op(nn.AddOp, [xh, inner], bh)], bh)
    saved.update(z=z, rg=rg, cand=cand)
    # (1 - z) ⊙ h̃ + z ⊙ h = h̃ + z ⊙ (h - h̃)
    return s.op(nn.AddOp, [cand, s.op(nn.MulOp, [z, s.op(nn.SubOp, [h, cand], bh)], bh)], bh), None


def _bind_outputs(imp: Any, node: Any, s: _Steps, outputs: dict[int, SSAValue], h, c, steps_n: int, batch: int,
                  hidden: int) -> None:
    names = list(node.output) + [""] * (3 - len(node.output))
    y_name, yh_name, yc_name = names[:3]
    if y_name and imp_uses(imp, y_name):
        pieces = [s.reshape(outputs[t], [1, 1, batch, hidden]) for t in range(steps_n)]
        y = pieces[0] if steps_n == 1 else emit(
            imp, node, nn.ConcatOp, [pieces], [TensorType(s.elem, [steps_n, 1, batch, hidden])],
            {"axis": int_attr(0)}, outputs=[]).results[0]
        imp.bind(y_name, y)
    if yh_name and imp_uses(imp, yh_name):
        imp.bind(yh_name, s.reshape(h, [1, batch, hidden]))
    if yc_name and kind_of(node) == "LSTM" and imp_uses(imp, yc_name):
        imp.bind(yc_name, s.reshape(c, [1, batch, hidden]))
