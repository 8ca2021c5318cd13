"""The `train` dialect: optimizer steps that update persistent state in place.

Parameters and optimizer state are function arguments marked persistent (`monet.param`,
`monet.state`); an optimizer op reads the gradient and overwrites its persistent operands, so it
has no results and is not `Pure` (gradients feeding it survive `dce` and `canonicalize`). One
op updates one parameter; its default phase is `optimizer`.

```mlir
func.func @step(%w: tensor<256x784xf32> {monet.param = "fc1.weight", monet.trainable},
                %m: tensor<256x784xf32> {monet.state = "fc1.weight.exp_avg"},
                %v: tensor<256x784xf32> {monet.state = "fc1.weight.exp_avg_sq"},
                %t: tensor<f32> {monet.state = "fc1.weight.step"}, %g: tensor<256x784xf32>) {
  train.adam %w, %g, %m, %v, %t {lr = 1.0e-03 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64}
      : tensor<256x784xf32>, tensor<256x784xf32>, tensor<256x784xf32>, tensor<256x784xf32>, tensor<f32>
  func.return
}
```
"""

from __future__ import annotations

from xdsl.dialects.builtin import BoolAttr, FloatAttr, TensorType
from xdsl.ir import Dialect
from xdsl.irdl import operand_def, opt_prop_def, prop_def, traits_def
from xdsl.traits import MemoryWriteEffect

from typing import ClassVar

from dialects.base import MonetOp, elem_of, expect, expect_shape, float_of, irdl_op_definition, is_float_type, shape_of
from dialects.interfaces import InPlaceUpdate, OnnxNames, VectorWork
from dialects.sharding import Sharding


class OptimizerOp(MonetOp, InPlaceUpdate, Sharding):
    """A per-parameter update; `param` and the state operands are overwritten in place.

    Subclasses declare their operands themselves, `param` and `grad` first: xDSL orders the
    operands of a subclass before those inherited from a base class.
    """

    DEFAULT_PHASE: ClassVar[str] = "optimizer"
    lr = prop_def(FloatAttr)
    weight_decay = opt_prop_def(FloatAttr)
    """Absent means 0 for every kind (`insert-optimizer` writes AdamW's PyTorch default, 0.01)."""

    def state_operands(self) -> tuple:
        """The persistent optimizer-state operands (besides the parameter)."""
        return ()

    def updated_operands(self) -> tuple:
        return (self.param, *self.state_operands())

    def verify_semantics(self) -> None:
        p = shape_of(self.param.type)
        expect_shape(self, "gradient", shape_of(self.grad.type), p)
        expect(float_of(self.lr) >= 0.0, self, "lr must be non-negative")
        expect(float_of(self.weight_decay) >= 0.0, self, "weight_decay must be non-negative")


@irdl_op_definition
class SgdOp(OptimizerOp):
    """p -= lr * (g + weight_decay * p).

    `train.sgd %w, %g {lr = 0.01 : f64} : tensor<8xf32>, tensor<8xf32>`
    """

    name = "train.sgd"
    param = operand_def(TensorType)
    grad = operand_def(TensorType)
    traits = traits_def(MemoryWriteEffect(), VectorWork(3, "optimizer"), OnnxNames("SGD", "SGDOptimizer"))
    assembly_format = "$param `,` $grad attr-dict `:` type($param) `,` type($grad)"


@irdl_op_definition
class MomentumOp(OptimizerOp):
    """PyTorch SGD with momentum: v = momentum * v + (g + wd * p); p -= lr * v (or the Nesterov
    form). The velocity buffer is persistent state.

    `train.momentum %w, %g, %v {lr = 0.01 : f64, momentum = 0.9 : f64} : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>`
    """

    name = "train.momentum"
    param = operand_def(TensorType)
    grad = operand_def(TensorType)
    velocity = operand_def(TensorType)
    momentum = opt_prop_def(FloatAttr)
    nesterov = opt_prop_def(BoolAttr)
    traits = traits_def(MemoryWriteEffect(), VectorWork(5, "optimizer"), OnnxNames("Momentum", "SGDOptimizer"))
    assembly_format = "$param `,` $grad `,` $velocity attr-dict `:` type($param) `,` type($grad) `,` type($velocity)"

    def state_operands(self) -> tuple:
        return (self.velocity,)

    def verify_semantics(self) -> None:
        super().verify_semantics()
        expect_shape(self, "velocity", shape_of(self.velocity.type), shape_of(self.param.type))
        expect(float_of(self.momentum, 0.0) >= 0.0, self, "momentum must be non-negative")


class AdamLikeOp(OptimizerOp):
    param = operand_def(TensorType)
    grad = operand_def(TensorType)
    exp_avg = operand_def(TensorType)
    exp_avg_sq = operand_def(TensorType)
    step = operand_def(TensorType)
    beta1 = opt_prop_def(FloatAttr)
    beta2 = opt_prop_def(FloatAttr)
    eps = opt_prop_def(FloatAttr)
    traits = traits_def(MemoryWriteEffect())
    assembly_format = (
        "$param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $step attr-dict `:` "
        "type($param) `,` type($grad) `,` type($exp_avg) `,` type($exp_avg_sq) `,` type($step)"
    )

    def state_operands(self) -> tuple:
        return (self.exp_avg, self.exp_avg_sq, self.step)

    def verify_semantics(self) -> None:
        super().verify_semantics()
        p = shape_of(self.param.type)
        expect_shape(self, "exp_avg", shape_of(self.exp_avg.type), p)
        expect_shape(self, "exp_avg_sq", shape_of(self.exp_avg_sq.type), p)
        expect_shape(self, "step", shape_of(self.step.type), ())
        for what, beta, default in (("beta1", self.beta1, 0.9), ("beta2", self.beta2, 0.999)):
            expect(0.0 <= float_of(beta, default) < 1.0, self, f"{what} must be in [0, 1)")
        expect(float_of(self.eps, 1e-8) >= 0.0, self, "eps must be non-negative")
        expect(is_float_type(self.step.type), self, "step must be a float scalar (PyTorch keeps it as float32)")
        for what, state in (("exp_avg", self.exp_avg), ("exp_avg_sq", self.exp_avg_sq)):
            expect(elem_of(state.type) == elem_of(self.param.type), self,
                   f"{what} element type {elem_of(state.type)} differs from the parameter's")


@irdl_op_definition
class AdamOp(AdamLikeOp):
    """torch.optim.Adam: L2 weight decay added to the gradient, bias-corrected moments.

    `train.adam %w, %g, %m, %v, %t {lr = 1.0e-03 : f64} : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>`
    """

    name = "train.adam"
    traits = traits_def(VectorWork(12, "optimizer"), OnnxNames("Adam", "AdamOptimizer"))


@irdl_op_definition
class AdamWOp(AdamLikeOp):
    """torch.optim.AdamW: decoupled weight decay (p *= 1 - lr * wd), bias-corrected moments.

    `train.adamw %w, %g, %m, %v, %t {lr = 1.0e-03 : f64, weight_decay = 0.01 : f64} : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>`
    """

    name = "train.adamw"
    traits = traits_def(VectorWork(13, "optimizer"), OnnxNames("AdamW", "AdamWOptimizer"))


@irdl_op_definition
class AccumulateOp(MonetOp, InPlaceUpdate):
    """buffer += value, in place on a persistent buffer (gradient accumulation across
    micro-batches; ONNX Runtime's InPlaceAccumulator).

    `train.accumulate %acc, %g : tensor<8xf32>, tensor<8xf32>`
    """

    name = "train.accumulate"
    DEFAULT_PHASE: ClassVar[str] = "backward"
    buffer = operand_def(TensorType)
    value = operand_def(TensorType)
    traits = traits_def(MemoryWriteEffect(), VectorWork(1))
    assembly_format = "$buffer `,` $value attr-dict `:` type($buffer) `,` type($value)"

    def updated_operands(self) -> tuple:
        return (self.buffer,)

    def verify_semantics(self) -> None:
        expect_shape(self, "value", shape_of(self.value.type), shape_of(self.buffer.type))


TRAIN = Dialect("train", [SgdOp, MomentumOp, AdamOp, AdamWOp, AccumulateOp], [])
