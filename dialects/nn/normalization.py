"""Normalization ops of the `nn` dialect: batch and layer normalization."""

from __future__ import annotations

from xdsl.dialects.builtin import BoolAttr, FloatAttr, IntegerAttr, TensorType
from xdsl.irdl import operand_def, opt_operand_def, opt_prop_def, result_def, traits_def
from xdsl.traits import Pure

from dialects.base import (
    MonetOp,
    bool_of,
    broadcast_shapes,
    expect,
    expect_float,
    expect_shape,
    int_of,
    irdl_op_definition,
    normalize_axis,
    operands_format,
    raise_verify,
    shape_of,
)
from dialects.interfaces import OnnxNames, SameRowsOfFirst, VectorWork
from dialects.sharding import IndexMap, Sharding


@irdl_op_definition
class BatchNormOp(MonetOp, SameRowsOfFirst, Sharding):
    """Batch normalization over all axes but 1 (ONNX BatchNormalization).

    With `training = true` it normalizes with the batch statistics (training_mode=1); the update
    of the running statistics is not modelled as a value (it does not feed the loss).

    ```mlir
    %y = nn.batch_norm %x, %g, %b, %m, %v {epsilon = 1.0e-05 : f64, training = true}
        : (tensor<1x64x56x56xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x64x56x56xf32>
    ```
    """

    name = "nn.batch_norm"
    input = operand_def(TensorType)
    scale = operand_def(TensorType)
    bias = operand_def(TensorType)
    mean = operand_def(TensorType)
    var = operand_def(TensorType)
    epsilon = opt_prop_def(FloatAttr)
    momentum = opt_prop_def(FloatAttr)
    training = opt_prop_def(BoolAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), VectorWork(6, "norm"), OnnxNames("BatchNormalization"))
    assembly_format = operands_format("input", "scale", "bias", "mean", "var")

    def waits_for_all_rows(self) -> bool:
        # a tile normalizes its own rows, but the batch statistics need every row first
        return bool_of(self.training)

    def verify_semantics(self) -> None:
        x = shape_of(self.input.type)
        expect(len(x) >= 2, self, "input must have rank >= 2")
        for what, v in (("scale", self.scale), ("bias", self.bias), ("mean", self.mean), ("var", self.var)):
            expect_shape(self, what, shape_of(v.type), (x[1],))
        expect_shape(self, "result", shape_of(self.result.type), x)
        expect_float(self, "input", self.input.type)

    def index_map(self) -> IndexMap | None:
        rank = len(shape_of(self.input.type))  # statistics per channel (axis 1)
        return IndexMap([list(range(rank))] + [[1]] * 4, [list(range(rank))], norm={0} | set(range(2, rank)))

@irdl_op_definition
class LayerNormOp(MonetOp, SameRowsOfFirst, Sharding):
    """Layer normalization over axes [axis, rank) (ONNX LayerNormalization).

    ```mlir
    %y = nn.layer_norm %x, %g, %b {axis = -1 : i64, epsilon = 1.0e-05 : f64}
        : (tensor<1x128x256xf32>, tensor<256xf32>, tensor<256xf32>) -> tensor<1x128x256xf32>
    ```
    """

    name = "nn.layer_norm"
    input = operand_def(TensorType)
    scale = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    axis = opt_prop_def(IntegerAttr)
    epsilon = opt_prop_def(FloatAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), VectorWork(8, "norm"), OnnxNames("LayerNormalization"))
    assembly_format = operands_format("input", "scale", "bias?")

    def norm_axis(self) -> int:
        return normalize_axis(int_of(self.axis, -1), len(shape_of(self.input.type)))

    def fuses_along(self, axis: int) -> bool:
        return axis < self.norm_axis()  # not along the normalized axes

    def verify_semantics(self) -> None:
        x = shape_of(self.input.type)
        try:
            axis = self.norm_axis()
        except ValueError as e:
            raise_verify(self, str(e))
            return
        normalized = x[axis:]
        for what, v in (("scale", self.scale), ("bias", self.bias)):
            if v is not None:
                try:
                    ok = broadcast_shapes(shape_of(v.type), normalized) == tuple(normalized)
                except ValueError:
                    ok = False
                expect(ok, self, f"{what} shape {list(shape_of(v.type))} does not broadcast to {list(normalized)}")
        expect_shape(self, "result", shape_of(self.result.type), x)
        expect_float(self, "input", self.input.type)

    def index_map(self) -> IndexMap | None:
        rank = len(shape_of(self.input.type))
        full, tail = list(range(rank)), list(range(self.norm_axis(), rank))
        return IndexMap([full] + [tail] * (len(self.operands) - 1), [full] * len(self.results), norm=set(tail))
