"""`quantize`: insert the microscaling (MX) casts of a training step.

Under a precision policy (`monet_ir.precision`), every contraction (every `LoopNestOp`:
`nn.matmul`, `nn.gemm`, `nn.conv`, `nn.conv_transpose`, `grad.matmul_lhs`, `grad.matmul_rhs`,
`grad.conv_input`, `grad.conv_weight`: the ops the cost model prices as loop nests) reads its
operands in their class's MX format, grouped along the axis it reduces (each op's
`reduction_axes`, `dialects.interfaces`):

| op | operand: reduction axis |
|---|---|
| `nn.matmul`/`nn.gemm` Y = A B | A: K (its last axis), B: K (its first matrix axis) (swapped by `trans_a`/`trans_b`) |
| `grad.matmul_lhs` dA = dY B^T | dY: N (last), B: N (its last axis) |
| `grad.matmul_rhs` dB = A^T dY | A: M (its first matrix axis), dY: M |
| `nn.conv` | X: C (1), W: C (1) |
| `grad.conv_input` | dY: K (1), W: K (0) |
| `nn.conv_transpose` | X: C (1), W: C (0) (the input gradient of a convolution, as `grad.conv_input`) |
| `grad.conv_weight` | dY: N (0), X: N (0) |

For each such operand whose class (weights: a parameter; activations: a forward value;
gradients: a backward value) has an MX format, the pass puts an `mx` cast before the op and
makes the op read it:

- the first use of a value gets `mx.quantize` (forward casts of W and X, the backward cast of
  dY for dX);
- a later use along an axis an earlier cast already serves reuses it. A square group R x R
  serves both axes of its tile: W for W and W^T, X for X and X^T, dY for dX and dW;
- a later use along another axis: a gradient is cast again from its high-precision value
  (`mx.quantize`: dY once for dX, once for dW), a weight or activation is re-encoded from the
  cast the backward pass keeps (`mx.requantize`: W^T for dX, X^T for dW).

After each optimizer update of a parameter cast in the forward pass, an `mx.quantize` of the
updated parameter (phase `optimizer`) re-encodes it for the next step, as the forward cast did.
Casts carry the consumer's `node` and phase. Values in plain formats are left alone; with no MX
format in the policy the pass changes nothing, and a step already holding `mx` casts is left
unchanged.

Options: `policy` (required: `--precision` text, a format name or
`weights=F,activations=F,gradients=F,master=F,state=F`, optionally `;mx-block=K;mx-group=G`),
`block` (elements of a vector group, default 32), `group` (`vector` or `square:RxC`, default
vector): `-p 'quantize{policy="mxfp8_e4m3" group="square:8x8"}'`.

```mlir
%xq = mx.quantize %x {format = "mxfp8_e4m3", axis = 1 : i64, group = array<i64: 1, 32>, node = "mm"} : tensor<8x64xf32>
%wq = mx.quantize %w {format = "mxfp8_e4m3", axis = 0 : i64, group = array<i64: 1, 32>, node = "mm"} : tensor<64x32xf32>
%y = nn.matmul %xq, %wq {node = "mm"} : (tensor<8x64xf32>, tensor<64x32xf32>) -> tensor<8x32xf32>
```
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import PassFailedException

from dialects import mx, train
from dialects.interfaces import LoopNestOp
from monet_ir import graph


@dataclass(frozen=True)
class QuantizePass(ModulePass):
    name = "quantize"

    policy: str = ""
    block: int = 32
    group: str = "vector"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from monet_ir.analysis.ir_signatures import value_class
        from monet_ir.precision import MX_ELEMENTS, PrecisionError, parse_precision

        if not self.policy:
            raise PassFailedException("quantize: the policy option is required (e.g. policy=\"mxfp8_e4m3\")")
        try:
            policy = parse_precision(self.policy, self.block, self.group)
        except PrecisionError as e:
            raise PassFailedException(f"quantize: {e}") from None
        fn = graph.step_function(op)
        ops = list(graph.compute_ops(fn))
        if not policy.has_mx or any(isinstance(o, mx.CastOp) for o in ops):
            return
        shape = policy.group
        group = (shape.rows, shape.cols)
        casts: dict[SSAValue, list[mx.CastOp]] = {}
        forward_weight_casts: dict[SSAValue, mx.CastOp] = {}
        for consumer in ops:
            if not isinstance(consumer, LoopNestOp):
                continue
            for index, axis, partner in consumer.reduction_axes():
                value = consumer.operands[index]
                cls = value_class(value, stored=False)
                fmt = getattr(policy, cls)
                if fmt not in MX_ELEMENTS:
                    continue
                cast = self._cast_for(value, cls, fmt, axis, partner if group[0] > 1 else None, group,
                                      casts, consumer)
                consumer.operands[index] = cast.result
                if cls == "weights" and graph.op_phase(consumer) == "forward":
                    forward_weight_casts.setdefault(value, cast)
        for update in ops:
            if isinstance(update, train.OptimizerOp) and update.operands[0] in forward_weight_casts:
                first = forward_weight_casts[update.operands[0]]
                again = mx.QuantizeOp(update.operands[0], first.get_format(), first.get_axis(), group,
                                      first.partner.value.data if first.partner is not None else None)
                again.set_origin(update.get_node(), "optimizer")
                again.result.name_hint = f"{first.result.name_hint or 'param'}_next"
                Rewriter.insert_op(again, InsertPoint.after(update))

    @staticmethod
    def _cast_for(value: SSAValue, cls: str, fmt: str, axis: int, partner: int | None, group: tuple[int, int],
                  casts: dict[SSAValue, list[mx.CastOp]], consumer: Operation) -> mx.CastOp:
        known = casts.setdefault(value, [])
        for cast in known:
            if cast.covers(axis):
                return cast
        if known and cls != "gradients":
            new: mx.CastOp = mx.RequantizeOp(known[0].result, fmt, axis, group, partner)
        else:
            new = mx.QuantizeOp(value, fmt, axis, group, partner)
        new.set_origin(graph.op_node(consumer), graph.op_phase(consumer))
        if value.name_hint:
            new.result.name_hint = f"{value.name_hint}_mx{'t' if isinstance(new, mx.RequantizeOp) else ''}{axis}"
        Rewriter.insert_op(new, InsertPoint.before(consumer))
        known.append(new)
        return new
