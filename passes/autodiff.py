"""`autodiff`: turn a forward graph into forward + loss + backward (reverse-mode autodiff).

    autodiff{loss=cross-entropy|mse|sum|none labels=<input name> reduction=mean|sum}

Options:
- `loss` (default `cross-entropy`): the loss appended to the function's first result when the
  graph has none. `cross-entropy` adds an integer labels input (classes on axis 1 for rank-2
  logits, on the last axis otherwise, like `logits.view(-1, V)` for a language model); `mse`
  adds a target input of the output's shape; `sum` sums the output; `none` takes the first
  result as the loss (it must be a scalar). A graph whose first result already comes from
  `nn.softmax_cross_entropy` or `nn.mse_loss` keeps its loss whatever this option says.
- `labels` (default `labels`): name of the labels/target input the loss adds.
- `reduction` (default `mean`): reduction of the appended cross-entropy or MSE loss.

After the pass the function returns the loss (result attribute `monet.loss`) and then one
gradient per trainable parameter, in argument order (`monet.grad = "<param>"`); parameters the
loss does not depend on get no gradient. Backward ops are `grad` ops, or `nn` ops tagged
`phase = "backward"`, each tagged with the forward node it derives from. Gradients flow only to
float values that depend on a trainable parameter: data inputs, integer tensors and frozen
parameters get none (so the first convolution has no input gradient). Where a value has several
uses (residual connections, a tied embedding read by a gather and by the LM head) the
contributions are summed with one `nn.sum`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    BytesAttr,
    DictionaryAttr,
    ModuleOp,
    StringAttr,
    TensorType,
    UnitAttr,
    f32,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from dialects import grad, nn
from dialects.base import (
    MonetOp,
    bool_attr,
    bool_of,
    float_of,
    ints_attr,
    ints_of,
    is_float_type,
    num_elements,
    shape_of,
    str_of,
)
from monet_ir import graph
from monet_ir.errors import internal_errors_at

LOSS_OPS = (nn.SoftmaxCrossEntropyOp, nn.MseLossOp)


@dataclass(frozen=True)
class AutodiffPass(ModulePass):
    name = "autodiff"

    loss: Literal["cross-entropy", "mse", "sum", "none"] = "cross-entropy"
    labels: str = "labels"
    reduction: Literal["mean", "sum"] = "mean"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        self.differentiate(op)

    def differentiate(self, module: ModuleOp) -> dict[SSAValue, SSAValue]:
        """Apply the pass; returns the gradient of every forward value that has one."""
        return Differentiator(graph.step_function(module), self).run()


class Differentiator:
    """Reverse-mode differentiation of one step function (see the module docstring)."""

    def __init__(self, fn: func.FuncOp, options: AutodiffPass):
        self.fn = fn
        self.options = options
        self.block = fn.body.block
        ret = self.block.last_op
        if not isinstance(ret, func.ReturnOp):
            raise PassFailedException("autodiff: the step function must end with func.return")
        self.ret = ret
        self.grads: dict[SSAValue, list[SSAValue]] = {}
        self.origin = ""

    # ------------------------------------------------------------------ driver

    def run(self) -> dict[SSAValue, SSAValue]:
        for op in graph.compute_ops(self.fn):
            phase = graph.op_phase(op)
            if phase != "forward":
                raise PassFailedException(
                    f"autodiff: the function already has {phase} ops ({op.name}); it is differentiated once"
                )
        for op in list(graph.compute_ops(self.fn)):
            if isinstance(op, nn.SoftmaxCrossEntropyOp):
                self.with_log_prob(op)
        loss = self.append_loss()
        needs = self.values_needing_gradients()
        if loss not in needs:
            raise PassFailedException("autodiff: the loss does not depend on any trainable parameter")
        forward_ops = [o for o in graph.compute_ops(self.fn)]
        self.origin = graph.op_node(loss.owner) if isinstance(loss.owner, Operation) else ""
        if loss.name_hint is None:
            loss.name_hint = "loss"
        seed = self.constant(1.0, loss.type)
        seed.name_hint = "d_loss"
        self.grads[loss] = [seed]
        for op in reversed(forward_ops):
            if not any(r in self.grads for r in op.results):
                continue
            wanted = [v in needs for v in op.operands]
            if not any(wanted):
                continue
            self.origin = graph.op_node(op)
            dys = [self.total_grad(r) if r in self.grads else None for r in op.results]
            rule = RULES.get(type(op))
            if rule is None:
                raise PassFailedException(f"autodiff: no backward rule for {op.name} (node '{graph.op_node(op)}')")
            with internal_errors_at(f"autodiff of {op.name} (node '{graph.op_node(op)}')"):
                grads = rule(self, op, dys, wanted)
            for operand, g in zip(op.operands, grads, strict=True):
                if g is not None and operand in needs:
                    if g.name_hint is None and operand.name_hint:
                        g.name_hint = f"d_{operand.name_hint}"
                    self.grads.setdefault(operand, []).append(g)
        self.finish(loss)
        # every value's contributions were summed when its producer was visited
        return {v: parts[0] for v, parts in self.grads.items() if len(parts) == 1}

    def finish(self, loss: SSAValue) -> None:
        infos = graph.arg_infos(self.fn)
        results: list[SSAValue] = [loss]
        res_attrs: list[DictionaryAttr] = [DictionaryAttr({"monet.loss": UnitAttr()})]
        for info, arg in zip(infos, self.block.args, strict=True):
            if info.role == "param" and info.trainable and arg in self.grads:
                self.origin = info.name
                results.append(self.total_grad(arg))
                res_attrs.append(DictionaryAttr({"monet.grad": StringAttr(info.name)}))
        new_ret = func.ReturnOp(*results)
        self.block.insert_op_before(new_ret, self.ret)
        self.block.erase_op(self.ret)
        self.ret = new_ret
        self.fn.res_attrs = ArrayAttr(res_attrs)
        self.fn.update_function_type()

    # ------------------------------------------------------------------ loss

    def append_loss(self) -> SSAValue:
        outputs = list(self.ret.operands)
        if not outputs:
            raise PassFailedException("autodiff: the step function returns nothing to differentiate")
        out = outputs[0]
        if isinstance(out.owner, LOSS_OPS):
            return self.with_log_prob(out.owner)
        if not is_float_type(out.type):
            raise PassFailedException(f"autodiff: the first result has type {out.type}, not a float tensor")
        self.origin = "loss"
        kind = self.options.loss
        if kind == "none":
            if shape_of(out.type) != ():
                raise PassFailedException(
                    f"autodiff{{loss=none}}: the first result must be a scalar loss, it has shape {list(shape_of(out.type))}"
                )
            return out
        if kind == "sum":
            op = self.emit(nn.ReduceSumOp, [out], [TensorType(out.type.get_element_type(), [])],
                           {"keepdims": bool_attr(False)}, phase="forward")
            return op.results[0]
        if kind == "mse":
            target = self.add_input(self.options.labels, out.type)
            op = self.emit(nn.MseLossOp, [out, target], [TensorType(out.type.get_element_type(), [])],
                           {"reduction": StringAttr(self.options.reduction)}, phase="forward")
            return op.results[0]
        return self.cross_entropy(out)

    def cross_entropy(self, logits: SSAValue) -> SSAValue:
        shape = shape_of(logits.type)
        if len(shape) < 2:
            raise PassFailedException(f"autodiff: cross-entropy needs logits of rank >= 2, got {list(shape)}")
        elem = logits.type.get_element_type()
        if len(shape) == 2:
            scores = logits
            labels = self.add_input(self.options.labels, TensorType(i64, [shape[0]]))
        else:
            # classes on the last axis (a language model's [B, T, V]): flatten like logits.view(-1, V)
            rows = num_elements(shape[:-1])
            labels_in = self.add_input(self.options.labels, TensorType(i64, list(shape[:-1])))
            scores = self.emit(nn.ReshapeOp, [logits], [TensorType(elem, [rows, shape[-1]])], phase="forward").results[0]
            labels = self.emit(nn.ReshapeOp, [labels_in], [TensorType(i64, [rows])], phase="forward").results[0]
        op = self.emit(
            nn.SoftmaxCrossEntropyOp, [scores, labels, None],
            [TensorType(elem, []), [scores.type]], {"reduction": StringAttr(self.options.reduction)}, phase="forward",
        )
        op.results[1].name_hint = "log_prob"
        return op.results[0]

    def with_log_prob(self, op: Operation) -> SSAValue:
        """The loss of an existing loss op; a cross-entropy without its log_prob result is rebuilt
        with it, since the backward reads it (as PyTorch and ONNX Runtime do)."""
        if not isinstance(op, nn.SoftmaxCrossEntropyOp) or len(op.log_prob) == 1:
            return op.results[0]
        new = nn.SoftmaxCrossEntropyOp.build(
            operands=[op.scores, op.labels, op.weights], result_types=[op.loss.type, [op.scores.type]],
            properties=dict(op.properties),
        )
        self.block.insert_op_before(new, op)
        op.loss.replace_all_uses_with(new.loss)
        new.loss.name_hint = op.loss.name_hint
        new.log_prob[0].name_hint = "log_prob"
        self.block.erase_op(op)
        return new.loss

    def add_input(self, name: str, t: TensorType) -> SSAValue:
        infos = graph.arg_infos(self.fn)
        if any(i.name == name for i in infos):
            raise PassFailedException(f"autodiff: the function already has an argument named '{name}'")
        arg = self.block.insert_arg(t, len(self.block.args))
        arg.name_hint = name
        infos.append(graph.ArgInfo(len(infos), "input", name, False))
        graph.set_arg_infos(self.fn, infos)
        self.fn.update_function_type()
        return arg

    # ------------------------------------------------------------------ analysis

    def values_needing_gradients(self) -> set[SSAValue]:
        needs: set[SSAValue] = set()
        for info, arg in zip(graph.arg_infos(self.fn), self.block.args, strict=True):
            if info.role == "param" and info.trainable and is_float_type(arg.type):
                needs.add(arg)
        for op in graph.compute_ops(self.fn):
            if type(op) in NON_DIFFERENTIABLE:
                continue
            if any(v in needs for v in op.operands):
                needs.update(r for r in op.results if is_float_type(r.type))
        return needs

    # ------------------------------------------------------------------ building

    def emit(
        self,
        op_class: type[Operation],
        operands: Sequence[SSAValue | None | Sequence[SSAValue]],
        result_types: Sequence[Attribute | Sequence[Attribute]],
        properties: dict[str, Attribute | None] | None = None,
        phase: str = "backward",
    ) -> Operation:
        props = {k: v for k, v in (properties or {}).items() if v is not None}
        op = op_class.build(operands=list(operands), result_types=list(result_types), properties=props)
        assert isinstance(op, MonetOp)
        op.set_origin(self.origin, phase)
        self.block.insert_op_before(op, self.ret)
        return op

    def one(self, op_class: type[Operation], operands: Sequence[SSAValue | None], result: Attribute,
            properties: dict[str, Attribute | None] | None = None) -> SSAValue:
        return self.emit(op_class, operands, [result], properties).results[0]

    def constant(self, value: float, like: Attribute) -> SSAValue:
        import struct

        t = TensorType(like.get_element_type() if isinstance(like, TensorType) else f32, [])
        fmt = {32: "<f", 64: "<d"}.get(getattr(t.get_element_type(), "bitwidth", 32), "<f")
        raw = struct.pack(fmt, value)
        return self.one(nn.ConstantOp, [], t, {"value": nn.constant_data(t, raw)})

    def zeros(self, t: TensorType) -> SSAValue:
        from monet_ir.types import tensor_bytes

        return self.one(nn.ConstantOp, [], t, {"value": nn.TensorDataAttr(t, BytesAttr(bytes(tensor_bytes(t))))})

    def total_grad(self, value: SSAValue) -> SSAValue:
        parts = self.grads[value]
        if len(parts) == 1:
            return parts[0]
        total = self.one(nn.SumOp, [parts], value.type)
        if value.name_hint:
            total.name_hint = f"d_{value.name_hint}"
        self.grads[value] = [total]
        return total

    def unbroadcast(self, g: SSAValue, like: SSAValue) -> SSAValue:
        if g.type == like.type:
            return g
        return self.one(grad.UnbroadcastOp, [g], like.type)


# ---------------------------------------------------------------------- rules
# A rule takes the differentiator, the forward op, the gradients of its results (None where a
# result has none) and which operands need a gradient; it returns one gradient (or None) per
# operand.

Rule = Callable[[Differentiator, Operation, list[SSAValue | None], list[bool]], list[SSAValue | None]]
RULES: dict[type[Operation], Rule] = {}
NON_DIFFERENTIABLE = {nn.EqualOp, nn.LessOp, nn.GreaterOp, nn.AndOp, nn.NotOp, nn.ConstantOp, nn.RandomOp}


def rule(*op_classes: type[Operation]) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for c in op_classes:
            RULES[c] = fn
        return fn

    return register


def copy_props(op: Operation, *names: str) -> dict[str, Attribute | None]:
    return {n: op.properties.get(n) for n in names}


def elementwise_rule(op_class: type[Operation], grad_class: type[Operation], reads: str,
                     props: tuple[str, ...] = ()) -> None:
    """Register the gradient of an element-wise op as `grad_class(dy, saved)`, the saved value
    being the forward op's input (`reads="input"`) or its result ("result"), with the op's
    properties `props` copied."""

    @rule(op_class)
    def elementwise(d: Differentiator, op, dys, wanted):
        saved = op.input if reads == "input" else op.result
        return [d.one(grad_class, [dys[0], saved], op.input.type, copy_props(op, *props))]


elementwise_rule(nn.LeakyReluOp, grad.LeakyReluGradOp, "input", ("alpha",))
elementwise_rule(nn.ClipOp, grad.ClipGradOp, "input", ("min", "max"))
elementwise_rule(nn.HardSigmoidOp, grad.HardSigmoidGradOp, "input", ("alpha", "beta"))
elementwise_rule(nn.HardSwishOp, grad.HardSwishGradOp, "input")
elementwise_rule(nn.ErfOp, grad.ErfGradOp, "input")
elementwise_rule(nn.GeluOp, grad.GeluGradOp, "input", ("approximate",))
elementwise_rule(nn.LogOp, grad.LogGradOp, "input")
# relu's mask is the same from x or y; PyTorch saves the output, so do we
elementwise_rule(nn.ReluOp, grad.ReluGradOp, "result")
elementwise_rule(nn.SigmoidOp, grad.SigmoidGradOp, "result")
elementwise_rule(nn.TanhOp, grad.TanhGradOp, "result")
elementwise_rule(nn.SqrtOp, grad.SqrtGradOp, "result")
elementwise_rule(nn.ExpOp, grad.ExpGradOp, "result")
elementwise_rule(nn.SoftmaxOp, grad.SoftmaxGradOp, "result", ("axis",))
elementwise_rule(nn.LogSoftmaxOp, grad.LogSoftmaxGradOp, "result", ("axis",))


@rule(nn.NegOp)
def neg_rule(d: Differentiator, op, dys, wanted):
    return [d.one(nn.NegOp, [dys[0]], op.input.type)]


@rule(nn.AddOp, nn.SubOp)
def add_sub_rule(d: Differentiator, op, dys, wanted):
    dy = dys[0]
    da = d.unbroadcast(dy, op.lhs) if wanted[0] else None
    db = None
    if wanted[1]:
        db = dy if isinstance(op, nn.AddOp) else d.one(nn.NegOp, [dy], dy.type)
        db = d.unbroadcast(db, op.rhs)
    return [da, db]


@rule(nn.MulOp)
def mul_rule(d: Differentiator, op, dys, wanted):
    dy = dys[0]
    da = d.unbroadcast(d.one(nn.MulOp, [dy, op.rhs], dy.type), op.lhs) if wanted[0] else None
    db = d.unbroadcast(d.one(nn.MulOp, [dy, op.lhs], dy.type), op.rhs) if wanted[1] else None
    return [da, db]


@rule(nn.DivOp)
def div_rule(d: Differentiator, op, dys, wanted):
    dy = dys[0]
    da = d.unbroadcast(d.one(nn.DivOp, [dy, op.rhs], dy.type), op.lhs) if wanted[0] else None
    db = d.unbroadcast(d.one(grad.DivRhsGradOp, [dy, op.lhs, op.rhs], dy.type), op.rhs) if wanted[1] else None
    return [da, db]


@rule(nn.PowOp)
def pow_rule(d: Differentiator, op, dys, wanted):
    dy = dys[0]
    da = d.unbroadcast(d.one(grad.PowBaseGradOp, [dy, op.lhs, op.rhs], dy.type), op.lhs) if wanted[0] else None
    db = d.unbroadcast(d.one(grad.PowExponentGradOp, [dy, op.lhs, op.rhs], dy.type), op.rhs) if wanted[1] else None
    return [da, db]


@rule(nn.WhereOp)
def where_rule(d: Differentiator, op, dys, wanted):
    dy = dys[0]
    zero = d.constant(0.0, dy.type) if (wanted[1] or wanted[2]) else None
    da = d.unbroadcast(d.one(nn.WhereOp, [op.condition, dy, zero], dy.type), op.lhs) if wanted[1] else None
    db = d.unbroadcast(d.one(nn.WhereOp, [op.condition, zero, dy], dy.type), op.rhs) if wanted[2] else None
    return [None, da, db]


@rule(nn.SumOp)
def sum_rule(d: Differentiator, op, dys, wanted):
    return [d.unbroadcast(dys[0], v) if w else None for v, w in zip(op.inputs, wanted, strict=True)]


@rule(nn.CastOp)
def cast_rule(d: Differentiator, op, dys, wanted):
    if not is_float_type(op.input.type):
        return [None]
    return [d.one(nn.CastOp, [dys[0]], op.input.type)]


@rule(nn.ConvOp)
def conv_rule(d: Differentiator, op, dys, wanted):
    dy = dys[0]
    geometry = copy_props(op, "strides", "pads", "dilations", "group")
    dx = d.one(grad.ConvInputGradOp, [dy, op.weight], op.input.type, geometry) if wanted[0] else None
    dw = d.one(grad.ConvWeightGradOp, [dy, op.input], op.weight.type, geometry) if wanted[1] else None
    db = d.one(grad.ConvBiasGradOp, [dy], op.bias.type) if op.bias is not None and wanted[2] else None
    return [dx, dw, db] if op.bias is not None else [dx, dw]


@rule(nn.ConvTransposeOp)
def conv_transpose_rule(d: Differentiator, op, dys, wanted):
    # conv_transpose(x, w) is the input gradient of a convolution of its result with w
    dy = dys[0]
    geometry = copy_props(op, "strides", "pads", "dilations", "group")
    dx = d.one(nn.ConvOp, [dy, op.weight, None], op.input.type, geometry) if wanted[0] else None
    dw = d.one(grad.ConvWeightGradOp, [op.input, dy], op.weight.type, geometry) if wanted[1] else None
    db = d.one(grad.ConvBiasGradOp, [dy], op.bias.type) if op.bias is not None and wanted[2] else None
    return [dx, dw, db] if op.bias is not None else [dx, dw]


def matmul_props(op) -> dict[str, Attribute | None]:
    return copy_props(op, "trans_a", "trans_b", "alpha")


@rule(nn.MatMulOp, nn.GemmOp)
def matmul_rule(d: Differentiator, op, dys, wanted):
    dy = dys[0]
    props = matmul_props(op)
    da = d.one(grad.MatMulLhsGradOp, [dy, op.rhs], op.lhs.type, props) if wanted[0] else None
    db = d.one(grad.MatMulRhsGradOp, [dy, op.lhs], op.rhs.type, props) if wanted[1] else None
    if isinstance(op, nn.MatMulOp):
        return [da, db]
    dc = None
    if op.bias is not None and wanted[2]:
        scaled = dy
        beta = float_of(op.beta, 1.0)
        if beta != 1.0:
            scaled = d.one(nn.MulOp, [dy, d.constant(beta, dy.type)], dy.type)
        dc = d.unbroadcast(scaled, op.bias)
    return [da, db, dc] if op.bias is not None else [da, db]


@rule(nn.BatchNormOp)
def batch_norm_rule(d: Differentiator, op, dys, wanted):
    if not bool_of(op.training):
        return frozen_batch_norm_grads(d, op, dys[0], wanted)
    results = d.emit(grad.BatchNormGradOp, [dys[0], op.input, op.scale],
                     [op.input.type, op.scale.type, op.bias.type], copy_props(op, "epsilon")).results
    return [results[0] if wanted[0] else None, results[1] if wanted[1] else None,
            results[2] if wanted[2] else None, None, None]


def frozen_batch_norm_grads(d: Differentiator, op, dy, wanted):
    """Batch normalization with fixed statistics (training = false: what the dynamo exporter
    writes, PyTorch's frozen batch norm) is per-channel affine, y = (x - mean) * scale / s + bias
    with s = sqrt(var + eps); mean and var get no gradient. Written with element-wise ops:
    dx = dy * (scale / s), dscale = sum(dy * (x - mean) / s), dbias = sum(dy) over all axes
    but 1."""
    x_type = op.input.type
    shape = shape_of(x_type)
    elem = x_type.get_element_type()
    channel = op.var.type
    per_channel = TensorType(elem, [shape[1]] + [1] * (len(shape) - 2))
    axes = {"axes": ints_attr([a for a in range(len(shape)) if a != 1]), "keepdims": bool_attr(False)}

    def spread(v: SSAValue) -> SSAValue:  # [C] -> [C, 1, ..., 1], broadcasting over N, H, W
        return v if per_channel == channel else d.one(nn.ReshapeOp, [v], per_channel)

    eps = d.constant(float_of(op.epsilon, 1e-5), channel)
    var_eps = d.one(nn.AddOp, [op.var, eps], channel)
    std = d.one(nn.SqrtOp, [var_eps], channel)
    dx = dscale = dbias = dmean = dvar = None
    if wanted[0]:
        dx = d.one(nn.MulOp, [dy, spread(d.one(nn.DivOp, [op.scale, std], channel))], x_type)
    if wanted[1] or wanted[4]:
        centered = d.one(nn.SubOp, [op.input, spread(op.mean)], x_type)
        xhat = d.one(nn.DivOp, [centered, spread(std)], x_type)
        dscale = d.one(nn.ReduceSumOp, [d.one(nn.MulOp, [dy, xhat], x_type)], channel, axes)
        if wanted[4]:  # dvar = sum(dy * xhat) * (-scale / (2 (var + eps)))
            half = d.one(nn.DivOp, [d.one(nn.NegOp, [op.scale], channel),
                                    d.one(nn.MulOp, [var_eps, d.constant(2.0, channel)], channel)], channel)
            dvar = d.one(nn.MulOp, [dscale, half], channel)
    if wanted[2] or wanted[3]:
        dbias = d.one(nn.ReduceSumOp, [dy], channel, axes)
        if wanted[3]:  # dmean = -sum(dy) * scale / s
            dmean = d.one(nn.NegOp, [d.one(nn.MulOp, [dbias, d.one(nn.DivOp, [op.scale, std], channel)], channel)],
                          channel)
    return [dx, dscale if wanted[1] else None, dbias if wanted[2] else None, dmean, dvar]


@rule(nn.LayerNormOp)
def layer_norm_rule(d: Differentiator, op, dys, wanted):
    bias_type = op.bias.type if op.bias is not None else op.scale.type
    results = d.emit(grad.LayerNormGradOp, [dys[0], op.input, op.scale],
                     [op.input.type, op.scale.type, bias_type], copy_props(op, "axis", "epsilon")).results
    grads = [results[0] if wanted[0] else None, results[1] if wanted[1] else None]
    if op.bias is not None:
        grads.append(results[2] if wanted[2] else None)
    return grads


POOL_PROPS = ("kernel_shape", "strides", "pads", "dilations", "ceil_mode")


@rule(nn.MaxPoolOp)
def max_pool_rule(d: Differentiator, op, dys, wanted):
    return [d.one(grad.MaxPoolGradOp, [dys[0], op.input], op.input.type, copy_props(op, *POOL_PROPS))]


@rule(nn.AvgPoolOp)
def avg_pool_rule(d: Differentiator, op, dys, wanted):
    return [d.one(grad.AvgPoolGradOp, [dys[0]], op.input.type, copy_props(op, *POOL_PROPS, "count_include_pad"))]


@rule(nn.GlobalAvgPoolOp)
def global_avg_pool_rule(d: Differentiator, op, dys, wanted):
    return [d.one(grad.GlobalAvgPoolGradOp, [dys[0]], op.input.type)]


@rule(nn.ReduceSumOp, nn.ReduceMeanOp)
def reduce_rule(d: Differentiator, op, dys, wanted):
    grad_class = grad.ReduceSumGradOp if isinstance(op, nn.ReduceSumOp) else grad.ReduceMeanGradOp
    return [d.one(grad_class, [dys[0]], op.input.type, copy_props(op, "axes", "keepdims"))]


@rule(nn.ReshapeOp)
def reshape_rule(d: Differentiator, op, dys, wanted):
    return [d.one(nn.ReshapeOp, [dys[0]], op.input.type)]


@rule(nn.TransposeOp)
def transpose_rule(d: Differentiator, op, dys, wanted):
    perm = ints_of(op.perm)
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    return [d.one(nn.TransposeOp, [dys[0]], op.input.type, {"perm": ints_attr(inverse)})]


@rule(nn.ExpandOp)
def expand_rule(d: Differentiator, op, dys, wanted):
    return [d.unbroadcast(dys[0], op.input)]


@rule(nn.ConcatOp)
def concat_rule(d: Differentiator, op, dys, wanted):
    pieces = d.emit(nn.SplitOp, [dys[0]], [[v.type for v in op.inputs]], {"axis": op.axis}).results
    return [p if w else None for p, w in zip(pieces, wanted, strict=True)]


@rule(nn.SplitOp)
def split_rule(d: Differentiator, op, dys, wanted):
    parts = [g if g is not None else d.zeros(r.type) for g, r in zip(dys, op.outputs, strict=True)]
    return [d.one(nn.ConcatOp, [parts], op.input.type, {"axis": op.axis})]


@rule(nn.SliceOp)
def slice_rule(d: Differentiator, op, dys, wanted):
    return [d.one(grad.SliceGradOp, [dys[0]], op.input.type, copy_props(op, "starts", "ends", "axes", "steps"))]


@rule(nn.GatherOp)
def gather_rule(d: Differentiator, op, dys, wanted):
    return [d.one(grad.GatherGradOp, [dys[0], op.indices], op.data.type, copy_props(op, "axis")), None]


@rule(nn.PadOp)
def pad_rule(d: Differentiator, op, dys, wanted):
    mode = str_of(op.mode, "constant")
    if mode != "constant":
        raise PassFailedException(f"autodiff: no backward rule for nn.pad in '{mode}' mode (node '{graph.op_node(op)}')")
    x = shape_of(op.input.type)
    pads = ints_of(op.pads)
    starts = [pads[i] for i in range(len(x))]
    ends = [pads[i] + x[i] for i in range(len(x))]
    return [d.one(nn.SliceOp, [dys[0]], op.input.type, {"starts": ints_attr(starts), "ends": ints_attr(ends)})]


@rule(nn.GatherNDOp)
def gather_nd_rule(d: Differentiator, op, dys, wanted):
    """dy goes back to the gathered slices, adding up where index tuples repeat."""
    zeros = d.zeros(op.data.type)
    return [d.one(nn.ScatterNDOp, [zeros, op.indices, dys[0]], op.data.type, {"reduction": StringAttr("add")}), None]


@rule(nn.ScatterNDOp)
def scatter_nd_rule(d: Differentiator, op, dys, wanted):
    """Replaced slices of data get no gradient (added ones do); updates get dy's slices."""
    dy = dys[0]
    ddata = dupdates = None
    if wanted[0]:
        ddata = dy
        if str_of(op.reduction, "none") != "add":
            ddata = d.one(nn.ScatterNDOp, [dy, op.indices, d.zeros(op.updates.type)], op.data.type)
    if wanted[2]:
        dupdates = d.one(nn.GatherNDOp, [dy, op.indices], op.updates.type)
    return [ddata, None, dupdates]


@rule(nn.ResizeOp)
def resize_rule(d: Differentiator, op, dys, wanted):
    return [d.one(grad.ResizeGradOp, [dys[0]], op.input.type,
                  copy_props(op, "mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a",
                             "exclude_outside", "scales"))]


@rule(nn.CumSumOp)
def cumsum_rule(d: Differentiator, op, dys, wanted):
    """Each input element adds to every later (earlier, when reversed) sum: the gradient is the
    cumulative sum of dy in the other direction, with the same exclusivity."""
    return [d.one(nn.CumSumOp, [dys[0]], op.input.type, {
        "axis": op.axis, "exclusive": op.exclusive,
        "reverse": None if bool_of(op.reverse) else bool_attr(True),
    })]


@rule(nn.DropoutOp)
def dropout_rule(d: Differentiator, op, dys, wanted):
    return [d.one(grad.DropoutGradOp, [dys[0], op.mask], op.input.type, copy_props(op, "ratio"))]


@rule(nn.SoftmaxCrossEntropyOp)
def cross_entropy_rule(d: Differentiator, op, dys, wanted):
    if not op.log_prob:
        raise PassFailedException("autodiff: internal error: cross-entropy without its log_prob result")
    weights = op.weights
    ds = d.one(grad.SoftmaxCrossEntropyGradOp, [dys[0], op.log_prob[0], op.labels, weights], op.scores.type,
               copy_props(op, "reduction", "ignore_index", "class_axis"))
    return [ds, None] + ([None] if weights is not None else [])


@rule(nn.MseLossOp)
def mse_rule(d: Differentiator, op, dys, wanted):
    dp = d.one(grad.MseLossGradOp, [dys[0], op.prediction, op.target], op.prediction.type, copy_props(op, "reduction"))
    dt = d.one(nn.NegOp, [dp], dp.type) if wanted[1] else None
    return [dp if wanted[0] else None, dt]



# ---------------------------------------------------------------------- rules written with forward ops
# The derivatives below are element-wise expressions of the forward values, emitted as the `nn`
# ops that compute them (phase backward): no dedicated gradient op, kernel or cost entry.

NON_DIFFERENTIABLE.update({
    # zero gradient almost everywhere (PyTorch's derivatives of floor, ceil, round and sign are
    # zeros); integer or boolean results
    nn.SignOp, nn.FloorOp, nn.CeilOp, nn.RoundOp, nn.ArgMaxOp, nn.ArgMinOp, nn.OneHotOp, nn.NonZeroOp,
    nn.OrOp, nn.XorOp,
})


def _bool_like(t: TensorType) -> TensorType:
    from xdsl.dialects.builtin import i1

    return TensorType(i1, t.get_shape())


def _mask(d: Differentiator, op_class: type[Operation], a: SSAValue, b: SSAValue, shape_of_type: TensorType,
          **props) -> SSAValue:
    """A boolean comparison of a and b, broadcast to `shape_of_type`'s shape."""
    return d.one(op_class, [a, b], _bool_like(shape_of_type), props or None)


@rule(nn.SoftplusOp)
def softplus_rule(d: Differentiator, op, dys, wanted):
    return [d.one(nn.MulOp, [dys[0], d.one(nn.SigmoidOp, [op.input], op.input.type)], op.input.type)]


@rule(nn.SoftsignOp)
def softsign_rule(d: Differentiator, op, dys, wanted):
    t = op.input.type
    denom = d.one(nn.AddOp, [d.one(nn.AbsOp, [op.input], t), d.constant(1.0, t)], t)
    return [d.one(nn.DivOp, [dys[0], d.one(nn.MulOp, [denom, denom], t)], t)]


@rule(nn.AbsOp)
def abs_rule(d: Differentiator, op, dys, wanted):
    return [d.one(nn.MulOp, [dys[0], d.one(nn.SignOp, [op.input], op.input.type)], op.input.type)]


@rule(nn.SinOp)
def sin_rule(d: Differentiator, op, dys, wanted):
    return [d.one(nn.MulOp, [dys[0], d.one(nn.CosOp, [op.input], op.input.type)], op.input.type)]


@rule(nn.CosOp)
def cos_rule(d: Differentiator, op, dys, wanted):
    t = op.input.type
    return [d.one(nn.NegOp, [d.one(nn.MulOp, [dys[0], d.one(nn.SinOp, [op.input], t)], t)], t)]


def _where_positive(d: Differentiator, op, positive: SSAValue, negative: SSAValue) -> SSAValue:
    t = op.input.type
    return d.one(nn.WhereOp, [_mask(d, nn.GreaterOp, op.input, d.constant(0.0, t), t), positive, negative], t)


@rule(nn.EluOp)
def elu_rule(d: Differentiator, op, dys, wanted):
    # x <= 0: y = alpha (e^x - 1), so dy/dx = y + alpha
    t, dy = op.input.type, dys[0]
    slope = d.one(nn.AddOp, [op.result, d.constant(float_of(op.alpha, 1.0), t)], t)
    return [_where_positive(d, op, dy, d.one(nn.MulOp, [dy, slope], t))]


@rule(nn.CeluOp)
def celu_rule(d: Differentiator, op, dys, wanted):
    # x <= 0: y = alpha (e^(x / alpha) - 1), so dy/dx = e^(x / alpha) = y / alpha + 1
    t, dy = op.input.type, dys[0]
    alpha = float_of(op.alpha, 1.0)
    slope = d.one(nn.AddOp, [d.one(nn.DivOp, [op.result, d.constant(alpha, t)], t), d.constant(1.0, t)], t)
    return [_where_positive(d, op, dy, d.one(nn.MulOp, [dy, slope], t))]


@rule(nn.SeluOp)
def selu_rule(d: Differentiator, op, dys, wanted):
    # x <= 0: y = gamma alpha (e^x - 1), so dy/dx = y + gamma alpha; x > 0: gamma
    t, dy = op.input.type, dys[0]
    alpha, gamma = float_of(op.alpha, 1.6732632423543772), float_of(op.gamma, 1.0507009873554805)
    slope = d.one(nn.AddOp, [op.result, d.constant(alpha * gamma, t)], t)
    return [_where_positive(d, op, d.one(nn.MulOp, [dy, d.constant(gamma, t)], t), d.one(nn.MulOp, [dy, slope], t))]


@rule(nn.MishOp)
def mish_rule(d: Differentiator, op, dys, wanted):
    # d/dx x tanh(sp(x)) = tanh(sp) + x (1 - tanh(sp)^2) sigmoid(x)
    t, x = op.input.type, op.input
    th = d.one(nn.TanhOp, [d.one(nn.SoftplusOp, [x], t)], t)
    one_minus = d.one(nn.SubOp, [d.constant(1.0, t), d.one(nn.MulOp, [th, th], t)], t)
    inner = d.one(nn.MulOp, [d.one(nn.MulOp, [x, one_minus], t), d.one(nn.SigmoidOp, [x], t)], t)
    return [d.one(nn.MulOp, [dys[0], d.one(nn.AddOp, [th, inner], t)], t)]


@rule(nn.MaxOp, nn.MinOp)
def max_min_rule(d: Differentiator, op, dys, wanted):
    """dy goes to the operand that is larger (smaller); ties split it in halves (PyTorch's
    `maximum`/`minimum`)."""
    dy = dys[0]
    t = dy.type
    zero, half = d.constant(0.0, t), d.one(nn.MulOp, [dy, d.constant(0.5, t)], t)
    tie = _mask(d, nn.EqualOp, op.lhs, op.rhs, t)
    lhs_wins = _mask(d, nn.GreaterOp if isinstance(op, nn.MaxOp) else nn.LessOp, op.lhs, op.rhs, t)
    rhs_wins = _mask(d, nn.LessOp if isinstance(op, nn.MaxOp) else nn.GreaterOp, op.lhs, op.rhs, t)
    grads = []
    for operand, wins, want in ((op.lhs, lhs_wins, wanted[0]), (op.rhs, rhs_wins, wanted[1])):
        if not want:
            grads.append(None)
            continue
        share = d.one(nn.WhereOp, [wins, dy, d.one(nn.WhereOp, [tie, half, zero], t)], t)
        grads.append(d.unbroadcast(share, operand))
    return grads


@rule(nn.ModOp)
def mod_rule(d: Differentiator, op, dys, wanted):
    # y = a - b q with q = floor(a / b) (trunc for fmod) = (a - y) / b, piecewise constant
    dy = dys[0]
    da = d.unbroadcast(dy, op.lhs) if wanted[0] else None
    db = None
    if wanted[1]:
        t = dy.type
        quotient = d.one(nn.DivOp, [d.one(nn.SubOp, [op.lhs, op.result], t), op.rhs], t)
        db = d.unbroadcast(d.one(nn.NegOp, [d.one(nn.MulOp, [dy, quotient], t)], t), op.rhs)
    return [da, db]


@rule(nn.PReluOp)
def prelu_rule(d: Differentiator, op, dys, wanted):
    dy = dys[0]
    t = dy.type
    negative = _mask(d, nn.LessOp, op.lhs, d.constant(0.0, op.lhs.type), t)
    dx = dslope = None
    if wanted[0]:
        dx = d.unbroadcast(d.one(nn.WhereOp, [negative, d.one(nn.MulOp, [dy, op.rhs], t), dy], t), op.lhs)
    if wanted[1]:
        scaled = d.one(nn.WhereOp, [negative, d.one(nn.MulOp, [dy, op.lhs], t), d.constant(0.0, t)], t)
        dslope = d.unbroadcast(scaled, op.rhs)
    return [dx, dslope]


def _keepdims(d: Differentiator, op, value: SSAValue) -> SSAValue:
    """A reduction's result (or its gradient) with the reduced axes kept as size 1."""
    x = shape_of(op.input.type)
    axes = op.reduced_axes()
    kept = TensorType(value.type.get_element_type(), [1 if i in axes else n for i, n in enumerate(x)])
    return value if value.type == kept else d.one(nn.ReshapeOp, [value], kept)


@rule(nn.ReduceMaxOp, nn.ReduceMinOp)
def reduce_max_min_rule(d: Differentiator, op, dys, wanted):
    """dy goes to the elements equal to the result, split evenly between ties (PyTorch's
    `amax`/`amin`)."""
    t = op.input.type
    y, dy = _keepdims(d, op, op.result), _keepdims(d, op, dys[0])
    hit = d.one(nn.CastOp, [_mask(d, nn.EqualOp, op.input, y, t)], t)
    count = d.one(nn.ReduceSumOp, [hit], y.type, {"axes": ints_attr(op.reduced_axes()), "keepdims": bool_attr(True)})
    return [d.one(nn.MulOp, [hit, d.one(nn.DivOp, [dy, count], y.type)], t)]


@rule(nn.TileOp)
def tile_rule(d: Differentiator, op, dys, wanted):
    """Each input element is read once per tile: dy, cut into [r0, d0, r1, d1, ...], summed over
    the repeat axes."""
    x = shape_of(op.input.type)
    repeats = ints_of(op.repeats)
    elem = op.input.type.get_element_type()
    split = TensorType(elem, [n for r, dim in zip(repeats, x, strict=True) for n in (r, dim)])
    cut = d.one(nn.ReshapeOp, [dys[0]], split)
    return [d.one(nn.ReduceSumOp, [cut], op.input.type,
                  {"axes": ints_attr(range(0, 2 * len(x), 2)), "keepdims": bool_attr(False)})]


@rule(nn.TopKOp)
def topk_rule(d: Differentiator, op, dys, wanted):
    """The values' gradient goes back to the positions they were taken from (distinct per row)."""
    if dys[0] is None:
        return [None]
    return [d.one(nn.ScatterElementsOp, [d.zeros(op.input.type), op.indices, dys[0]], op.input.type,
                  {"axis": op.axis})]


@rule(nn.GatherElementsOp)
def gather_elements_rule(d: Differentiator, op, dys, wanted):
    """dy goes back to the positions read, adding up where an index repeats."""
    return [d.one(nn.ScatterElementsOp, [d.zeros(op.data.type), op.indices, dys[0]], op.data.type,
                  {"axis": op.axis, "reduction": StringAttr("add")}), None]


@rule(nn.ScatterElementsOp)
def scatter_elements_rule(d: Differentiator, op, dys, wanted):
    """Replaced positions of data get no gradient, added ones dy; each update the gradient at
    the position it went to. With max (min), the data elements and updates equal to the result
    share dy evenly (PyTorch's `scatter_reduce` amax/amin with include_self)."""
    reduction = str_of(op.reduction, "none")
    dy = dys[0]
    props = {"axis": op.axis}
    if reduction in ("none", "add"):
        ddata = dupdates = None
        if wanted[0]:
            ddata = dy if reduction == "add" else d.one(
                nn.ScatterElementsOp, [dy, op.indices, d.zeros(op.updates.type)], op.data.type, props)
        if wanted[2]:
            dupdates = d.one(nn.GatherElementsOp, [dy, op.indices], op.updates.type, props)
        return [ddata, None, dupdates]
    if reduction not in ("max", "min"):
        raise PassFailedException(f"autodiff: no backward rule for nn.scatter_elements with reduction "
                                  f"'{reduction}' (node '{graph.op_node(op)}')")
    t, ut = op.data.type, op.updates.type
    data_hit = d.one(nn.CastOp, [_mask(d, nn.EqualOp, op.data, op.result, t)], t)
    reached = d.one(nn.GatherElementsOp, [op.result, op.indices], ut, props)
    update_hit = d.one(nn.CastOp, [_mask(d, nn.EqualOp, op.updates, reached, ut)], ut)
    count = d.one(nn.ScatterElementsOp, [data_hit, op.indices, update_hit], t,
                  {**props, "reduction": StringAttr("add")})
    share = d.one(nn.DivOp, [dy, d.one(nn.MaxOp, [count, d.constant(1.0, t)], t)], t)
    ddata = d.one(nn.MulOp, [share, data_hit], t) if wanted[0] else None
    dupdates = None
    if wanted[2]:
        dupdates = d.one(nn.MulOp, [d.one(nn.GatherElementsOp, [share, op.indices], ut, props), update_hit], ut)
    return [ddata, None, dupdates]
