"""Loss ops of the `nn` dialect: softmax cross-entropy and mean squared error."""

from __future__ import annotations

from xdsl.dialects.builtin import IntegerAttr, StringAttr, TensorType
from xdsl.irdl import (
    operand_def,
    opt_operand_def,
    opt_prop_def,
    result_def,
    traits_def,
    var_result_def,
)
from xdsl.traits import Pure

from dialects.base import (
    MonetOp,
    expect,
    expect_shape,
    irdl_op_definition,
    is_float_type,
    operands_format,
    shape_of,
    str_of,
)
from dialects.interfaces import LossWork, OnnxNames


@irdl_op_definition
class SoftmaxCrossEntropyOp(MonetOp):
    """Softmax cross-entropy of scores [N, C, *D] against integer labels [N, *D]
    (ONNX SoftmaxCrossEntropyLoss); optional class weights [C]; optional log_prob result.

    ```mlir
    %loss = nn.softmax_cross_entropy %logits, %labels {reduction = "mean"}
        : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
    ```

    The classes lie on axis 1 unless `class_axis` names another axis, as on
    `grad.softmax_cross_entropy` (ONNX Runtime's training graphs of language models and
    channels-last segmentation put them last: `class_axis = 2` for `(B, T, V)` scores and
    `(B, T)` labels).
    """

    name = "nn.softmax_cross_entropy"
    scores = operand_def(TensorType)
    labels = operand_def(TensorType)
    weights = opt_operand_def(TensorType)
    reduction = opt_prop_def(StringAttr)
    ignore_index = opt_prop_def(IntegerAttr)
    class_axis = opt_prop_def(IntegerAttr)
    loss = result_def(TensorType)
    log_prob = var_result_def(TensorType)
    traits = traits_def(Pure(), LossWork(8), OnnxNames("SoftmaxCrossEntropyLoss"))
    assembly_format = operands_format("scores", "labels", "weights?")

    @property
    def class_axis_value(self) -> int:
        return 1 if self.class_axis is None else self.class_axis.value.data

    def verify_semantics(self) -> None:
        s, lab = shape_of(self.scores.type), shape_of(self.labels.type)
        expect(len(s) >= 2, self, "scores must have rank >= 2")
        axis = self.class_axis_value
        expect(1 <= axis < len(s), self, f"class_axis {axis} is not an axis after the batch axis of scores")
        expect(lab == (*s[:axis], *s[axis + 1:]), self, f"labels shape {list(lab)} does not match scores {list(s)}")
        expect(not is_float_type(self.labels.type), self, "labels must be integers")
        reduction = str_of(self.reduction, "mean")
        expect(reduction in ("mean", "sum", "none"), self, "reduction must be mean, sum or none")
        want = lab if reduction == "none" else ()
        expect_shape(self, "loss", shape_of(self.loss.type), want)
        expect(len(self.log_prob) <= 1, self, "at most one log_prob result")
        for lp in self.log_prob:
            expect_shape(self, "log_prob", shape_of(lp.type), s)


@irdl_op_definition
class MseLossOp(MonetOp):
    """Mean squared error between prediction and target of the same shape.

    `%loss = nn.mse_loss %y, %t {reduction = "mean"} : (tensor<4x10xf32>, tensor<4x10xf32>) -> tensor<f32>`
    """

    name = "nn.mse_loss"
    prediction = operand_def(TensorType)
    target = operand_def(TensorType)
    reduction = opt_prop_def(StringAttr)
    loss = result_def(TensorType)
    traits = traits_def(Pure(), LossWork(3))
    assembly_format = operands_format("prediction", "target")

    def verify_semantics(self) -> None:
        p = shape_of(self.prediction.type)
        expect_shape(self, "target", shape_of(self.target.type), p)
        reduction = str_of(self.reduction, "mean")
        expect(reduction in ("mean", "sum", "none"), self, "reduction must be mean, sum or none")
        expect_shape(self, "loss", shape_of(self.loss.type), p if reduction == "none" else ())
