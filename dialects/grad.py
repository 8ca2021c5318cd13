"""The `grad` dialect: first-class backward ops of a training step.

Each op computes the gradient of one forward op with respect to one (or, for normalizations,
all) of its inputs, from the incoming gradient `dy` and the forward values it saves. The
default phase is `backward`; `node` names the forward ONNX node the op derives from.

```mlir
%dx = grad.relu %dy, %x {node = "/Relu"} : tensor<4x256xf32>
%dw = grad.conv_weight %dy, %x {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, node = "/conv/Conv"}
    : (tensor<4x64x8x8xf32>, tensor<4x64x8x8xf32>) -> tensor<64x64x3x3xf32>
%dxi = grad.conv_input %dy, %w {pads = array<i64: 1, 1, 1, 1>, node = "/conv/Conv"}
    : (tensor<4x64x8x8xf32>, tensor<64x64x3x3xf32>) -> tensor<4x64x8x8xf32>
```

Convolution and matrix-product gradients are the forward loop nests with the operands in other
roles, so the cost model treats them as such. Ops that need no backward op of their own (the
gradient of a transpose is a transpose) reuse `nn` ops tagged `phase = "backward"`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from xdsl.dialects.builtin import BoolAttr, DenseArrayBase, FloatAttr, IntegerAttr, StringAttr, TensorType, i1
from xdsl.ir import Dialect
from xdsl.irdl import (
    AnyAttr,
    VarConstraint,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure

from dialects.base import (
    MonetOp,
    bool_of,
    broadcast_shapes,
    conv_output_shape,
    elem_of,
    expect,
    expect_same_elem,
    expect_shape,
    int_of,
    ints_of,
    irdl_op_definition,
    matmul_shape,
    normalize_axis,
    pool_output_shape,
    reduce_shape,
    shape_of,
    str_of,
)
from dialects.interfaces import LoopNestOp, LossWork, OnnxNames, PoolWork, ProductTiling, ReductionWork, Tiling, VectorWork, element_bits, matmul_loop_nest, matrix_axes
from dialects.sharding import IndexMap, Sharding, conv_maps, matmul_maps, normalizing_map, pool_map
from dialects.nn import ConvGeometry, operands_format
from dialects.nn.data_movement import ResizeOptions, verify_resize_options


class GradOp(MonetOp, Tiling):
    DEFAULT_PHASE: ClassVar[str] = "backward"

    def tiled_axes(self) -> tuple[int, ...]:
        # weight, bias and normalization gradients reduce over the rows, others have results
        # of other shapes: not tiled (element-wise gradients and dA of a product are)
        return ()


# ----------------------------------------------------------------------------- element-wise


class ElementwiseGradOp(GradOp, Sharding):
    """dx from dy and one saved forward value (the input x or the output y) of the same shape."""

    T: ClassVar = VarConstraint("T", AnyAttr())
    grad = operand_def(T)
    saved = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$grad `,` $saved attr-dict `:` type($grad)"
    SAVED_IS: ClassVar[str] = "x"

    def tiled_axes(self) -> tuple[int, ...]:
        return Tiling.tiled_axes(self)

    def verify_semantics(self) -> None:
        expect_shape(self, "saved value", shape_of(self.saved.type), shape_of(self.grad.type))


@irdl_op_definition
class ReluGradOp(ElementwiseGradOp):
    """dy * (x > 0). `%dx = grad.relu %dy, %x : tensor<8xf32>`"""

    name = "grad.relu"
    traits = traits_def(VectorWork(1), OnnxNames("ReluGrad", "Relu"))


@irdl_op_definition
class LeakyReluGradOp(ElementwiseGradOp):
    """dy * (x > 0 ? 1 : alpha). `%dx = grad.leaky_relu %dy, %x {alpha = 0.01 : f64} : tensor<8xf32>`"""

    name = "grad.leaky_relu"
    traits = traits_def(VectorWork(2))
    alpha = opt_prop_def(FloatAttr)


@irdl_op_definition
class ClipGradOp(ElementwiseGradOp):
    """dy where min <= x <= max. `%dx = grad.clip %dy, %x {min = 0.0 : f64, max = 6.0 : f64} : tensor<8xf32>`"""

    name = "grad.clip"
    traits = traits_def(VectorWork(2))
    min = opt_prop_def(FloatAttr)
    max = opt_prop_def(FloatAttr)


@irdl_op_definition
class SigmoidGradOp(ElementwiseGradOp):
    """dy * y * (1 - y), from the output y. `%dx = grad.sigmoid %dy, %y : tensor<8xf32>`"""

    name = "grad.sigmoid"
    traits = traits_def(VectorWork(3))
    SAVED_IS: ClassVar[str] = "y"


@irdl_op_definition
class HardSigmoidGradOp(ElementwiseGradOp):
    """dy * alpha inside the linear region. `%dx = grad.hard_sigmoid %dy, %x {alpha = 0.2 : f64, beta = 0.5 : f64} : tensor<8xf32>`"""

    name = "grad.hard_sigmoid"
    traits = traits_def(VectorWork(2))
    alpha = opt_prop_def(FloatAttr)
    beta = opt_prop_def(FloatAttr)


@irdl_op_definition
class HardSwishGradOp(ElementwiseGradOp):
    """`%dx = grad.hard_swish %dy, %x : tensor<8xf32>`"""

    name = "grad.hard_swish"
    traits = traits_def(VectorWork(4))


@irdl_op_definition
class TanhGradOp(ElementwiseGradOp):
    """dy * (1 - y^2), from the output y. `%dx = grad.tanh %dy, %y : tensor<8xf32>`"""

    name = "grad.tanh"
    traits = traits_def(VectorWork(3), OnnxNames("TanhGrad", "Tanh"))
    SAVED_IS: ClassVar[str] = "y"


@irdl_op_definition
class ErfGradOp(ElementwiseGradOp):
    """dy * 2/sqrt(pi) * exp(-x^2). `%dx = grad.erf %dy, %x : tensor<8xf32>`"""

    name = "grad.erf"
    traits = traits_def(VectorWork(6))


@irdl_op_definition
class GeluGradOp(ElementwiseGradOp):
    """GELU derivative (exact or tanh form); ONNX Runtime's GeluGrad/FastGeluGrad import as this.
    `%dx = grad.gelu %dy, %x {approximate = "tanh"} : tensor<8xf32>`"""

    name = "grad.gelu"
    traits = traits_def(VectorWork(12), OnnxNames("GeluGrad", "Gelu"))
    approximate = opt_prop_def(StringAttr)


@irdl_op_definition
class SqrtGradOp(ElementwiseGradOp):
    """dy / (2 y), from the output y. `%dx = grad.sqrt %dy, %y : tensor<8xf32>`"""

    name = "grad.sqrt"
    traits = traits_def(VectorWork(2))
    SAVED_IS: ClassVar[str] = "y"


@irdl_op_definition
class ExpGradOp(ElementwiseGradOp):
    """dy * y, from the output y. `%dx = grad.exp %dy, %y : tensor<8xf32>`"""

    name = "grad.exp"
    traits = traits_def(VectorWork(1))
    SAVED_IS: ClassVar[str] = "y"


@irdl_op_definition
class LogGradOp(ElementwiseGradOp):
    """dy / x. `%dx = grad.log %dy, %x : tensor<8xf32>`"""

    name = "grad.log"
    traits = traits_def(VectorWork(1))


@irdl_op_definition
class SoftmaxGradOp(ElementwiseGradOp):
    """y * (dy - sum(dy * y, axis)), from the output y. `%dx = grad.softmax %dy, %y {axis = -1 : i64} : tensor<2x8xf32>`"""

    name = "grad.softmax"
    traits = traits_def(VectorWork(4, "softmax"), OnnxNames("SoftmaxGrad", "Softmax"))
    axis = prop_def(IntegerAttr)
    SAVED_IS: ClassVar[str] = "y"

    def fuses_along(self, axis: int) -> bool:
        return self.axis.value.data % len(shape_of(self.result.type)) != axis  # not the softmax's own axis

    def index_map(self) -> IndexMap | None:
        return normalizing_map(self, {normalize_axis(int_of(self.axis, -1), len(shape_of(self.result.type)))})

@irdl_op_definition
class LogSoftmaxGradOp(ElementwiseGradOp):
    """dy - exp(y) * sum(dy, axis), from the output y. `%dx = grad.log_softmax %dy, %y {axis = 1 : i64} : tensor<4x10xf32>`"""

    name = "grad.log_softmax"
    traits = traits_def(VectorWork(4, "softmax"))
    axis = prop_def(IntegerAttr)
    SAVED_IS: ClassVar[str] = "y"

    def fuses_along(self, axis: int) -> bool:
        return self.axis.value.data % len(shape_of(self.result.type)) != axis  # not the softmax's own axis

    def index_map(self) -> IndexMap | None:
        return normalizing_map(self, {normalize_axis(int_of(self.axis, -1), len(shape_of(self.result.type)))})

@irdl_op_definition
class DropoutGradOp(ElementwiseGradOp):
    """dy * mask / (1 - ratio). `%dx = grad.dropout %dy, %mask {ratio = 0.1 : f64} : (tensor<8xf32>, tensor<8xi1>) -> tensor<8xf32>`"""

    name = "grad.dropout"
    traits = traits_def(VectorWork(2))
    grad = operand_def(TensorType)
    saved = operand_def(TensorType)
    result = result_def(TensorType)
    ratio = opt_prop_def(FloatAttr)
    SAVED_IS: ClassVar[str] = "mask"
    assembly_format = operands_format("grad", "saved")

    def verify_semantics(self) -> None:
        super().verify_semantics()
        expect(elem_of(self.saved.type) == i1, self, "mask must be a tensor of i1")


class BroadcastBinaryGradOp(GradOp, Sharding):
    """Gradient of a broadcasting binary op w.r.t. one operand, before un-broadcasting: the
    result has the broadcast (output) shape."""

    grad = operand_def(TensorType)
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = operands_format("grad", "lhs", "rhs")

    def verify_semantics(self) -> None:
        dy = shape_of(self.grad.type)
        expect_shape(self, "result", shape_of(self.result.type), dy)
        try:
            ok = broadcast_shapes(shape_of(self.lhs.type), shape_of(self.rhs.type), dy) == dy
        except ValueError:
            ok = False
        expect(ok, self, "operands do not broadcast to the gradient's shape")


@irdl_op_definition
class DivRhsGradOp(BroadcastBinaryGradOp):
    """d(a / b)/db * dy = -dy * a / b^2. `%db = grad.div_rhs %dy, %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>`"""

    name = "grad.div_rhs"
    traits = traits_def(VectorWork(3))


@irdl_op_definition
class PowBaseGradOp(BroadcastBinaryGradOp):
    """dy * b * a^(b-1). `%da = grad.pow_base %dy, %a, %b : (tensor<8xf32>, tensor<8xf32>, tensor<f32>) -> tensor<8xf32>`"""

    name = "grad.pow_base"
    traits = traits_def(VectorWork(6))


@irdl_op_definition
class PowExponentGradOp(BroadcastBinaryGradOp):
    """dy * a^b * log(a). `%db = grad.pow_exponent %dy, %a, %b : (tensor<8xf32>, tensor<8xf32>, tensor<f32>) -> tensor<8xf32>`"""

    name = "grad.pow_exponent"
    traits = traits_def(VectorWork(6))


@irdl_op_definition
class UnbroadcastOp(GradOp, Sharding):
    """Sum a gradient over the axes an operand was broadcast along, back to the operand's shape.

    `%db = grad.unbroadcast %dy : (tensor<4x128x256xf32>) -> tensor<256xf32>`
    """

    name = "grad.unbroadcast"
    grad = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), ReductionWork(1))
    assembly_format = operands_format("grad")

    def verify_semantics(self) -> None:
        dy, r = shape_of(self.grad.type), shape_of(self.result.type)
        try:
            ok = broadcast_shapes(r, dy) == dy
        except ValueError:
            ok = False
        expect(ok, self, f"{list(r)} does not broadcast to {list(dy)}")
        expect_same_elem(self, self.grad.type, self.result.type)

    def index_map(self) -> IndexMap | None:
        dy, r = tuple(shape_of(self.grad.type)), tuple(shape_of(self.result.type))
        off = len(dy) - len(r)
        return IndexMap([list(range(len(dy)))], [[i + off if d == dy[i + off] else None for i, d in enumerate(r)]])

# ----------------------------------------------------------------------------- contractions


@irdl_op_definition
class ConvInputGradOp(GradOp, ConvGeometry, LoopNestOp, Sharding):
    """Gradient of a convolution w.r.t. its input: a transposed convolution of dy with w.
    The result type is the forward input's type.

    `%dx = grad.conv_input %dy, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<4x64x8x8xf32>, tensor<64x64x3x3xf32>) -> tensor<4x64x8x8xf32>`
    """

    name = "grad.conv_input"
    grad = operand_def(TensorType)
    weight = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OnnxNames("ConvTranspose", "ConvGrad", "Conv"))
    assembly_format = operands_format("grad", "weight")
    NEST_ROLES: ClassVar[tuple[tuple[str, ...], str]] = (("O", "W"), "I")

    def loop_nest(self) -> Any:
        return self.conv_nest("conv_grad_input", shape_of(self.result.type), shape_of(self.weight.type), "I",
                              self.nest_values())

    def nest_values(self) -> tuple:
        return self.weight, self.result, self.grad

    def reduction_axes(self) -> list[tuple[int, int, int | None]]:
        return [(0, 1, 0), (1, 0, 1)]  # dY along K (1), W along K (0)

    def direct_macs(self) -> int:
        return self.conv_macs(shape_of(self.result.type), shape_of(self.weight.type))

    def verify_semantics(self) -> None:
        x, w = shape_of(self.result.type), shape_of(self.weight.type)
        self.check_geometry(len(x) - 2)
        strides, pads, dilations, group = self.geometry(len(x) - 2)
        expect(x[1] == w[1] * group, self, f"input channels {x[1]} != weight channels {w[1]} x group {group}")
        expect_shape(self, "gradient", shape_of(self.grad.type), conv_output_shape(x, w, strides, pads, dilations))

    def index_map(self) -> IndexMap | None:
        if int_of(self.group, 1) != 1:
            return None
        x, w, y, window, _, _ = conv_maps(len(shape_of(self.result.type)) - 2)
        return IndexMap([y, w], [x], norm=window)

@irdl_op_definition
class ConvWeightGradOp(GradOp, ConvGeometry, LoopNestOp, Sharding):
    """Gradient of a convolution w.r.t. its weight: a correlation of the saved input x with dy,
    reduced over the batch and output positions. The result type is the weight's type.

    `%dw = grad.conv_weight %dy, %x {strides = array<i64: 2, 2>} : (tensor<4x64x4x4xf32>, tensor<4x32x8x8xf32>) -> tensor<64x32x1x1xf32>`
    """

    name = "grad.conv_weight"
    grad = operand_def(TensorType)
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OnnxNames("ConvGrad", "Conv"))
    assembly_format = operands_format("grad", "input")
    NEST_ROLES: ClassVar[tuple[tuple[str, ...], str]] = (("O", "I"), "W")

    def loop_nest(self) -> Any:
        return self.conv_nest("conv_grad_weight", shape_of(self.input.type), shape_of(self.result.type), "W",
                              self.nest_values())

    def nest_values(self) -> tuple:
        return self.result, self.input, self.grad

    def reduction_axes(self) -> list[tuple[int, int, int | None]]:
        return [(0, 0, 1), (1, 0, 1)]  # dY and X along N (0)

    def direct_macs(self) -> int:
        return self.conv_macs(shape_of(self.input.type), shape_of(self.result.type))

    def verify_semantics(self) -> None:
        x, w = shape_of(self.input.type), shape_of(self.result.type)
        self.check_geometry(len(x) - 2)
        strides, pads, dilations, group = self.geometry(len(x) - 2)
        expect(x[1] == w[1] * group, self, f"input channels {x[1]} != weight channels {w[1]} x group {group}")
        expect_shape(self, "gradient", shape_of(self.grad.type), conv_output_shape(x, w, strides, pads, dilations))

    def index_map(self) -> IndexMap | None:
        if int_of(self.group, 1) != 1:
            return None
        x, w, y, window, _, _ = conv_maps(len(shape_of(self.input.type)) - 2)
        return IndexMap([y, x], [w], norm=window)

@irdl_op_definition
class ConvBiasGradOp(GradOp, Sharding):
    """Gradient of a convolution bias: dy summed over all axes but the channel axis 1.

    `%db = grad.conv_bias %dy : (tensor<4x64x8x8xf32>) -> tensor<64xf32>`
    """

    name = "grad.conv_bias"
    grad = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), ReductionWork(1), OnnxNames("ConvGrad", "Conv"))
    assembly_format = operands_format("grad")

    def verify_semantics(self) -> None:
        expect_shape(self, "result", shape_of(self.result.type), (shape_of(self.grad.type)[1],))

    def index_map(self) -> IndexMap | None:
        rank = len(shape_of(self.grad.type))
        return IndexMap([[0, 1] + list(range(3, rank + 1))], [[1]], norm=set(range(3, rank + 1)))

class MatMulGradOp(GradOp, LoopNestOp):
    """Properties of the forward product (transposes, alpha) that the operand gradients need."""

    alpha = opt_prop_def(FloatAttr)
    trans_a = opt_prop_def(BoolAttr)
    trans_b = opt_prop_def(BoolAttr)
    traits = traits_def(Pure())

    def check(self, lhs: tuple[int, ...], rhs: tuple[int, ...]) -> None:
        try:
            want = matmul_shape(lhs, rhs, bool_of(self.trans_a), bool_of(self.trans_b))
        except ValueError as e:
            expect(False, self, str(e))
            return
        expect_shape(self, "gradient", shape_of(self.grad.type), want)  # type: ignore[attr-defined]


@irdl_op_definition
class MatMulLhsGradOp(ProductTiling, MatMulGradOp, Sharding):
    """Gradient of alpha * op(A) @ op(B) w.r.t. A, summed over broadcast batch axes; the result
    type is A's type. Covers nn.matmul and nn.gemm.

    `%da = grad.matmul_lhs %dy, %b {trans_b = true} : (tensor<4x256xf32>, tensor<256x784xf32>) -> tensor<4x784xf32>`
    """

    name = "grad.matmul_lhs"
    grad = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    assembly_format = operands_format("grad", "rhs")
    traits = traits_def(OnnxNames("MatMul", "Gemm"))
    NEST_ROLES: ClassVar[tuple[tuple[str, ...], str]] = (("O", "W"), "I")

    def loop_nest(self) -> Any:
        return matmul_loop_nest("matmul_grad_lhs", shape_of(self.result.type), shape_of(self.rhs.type),
                                bool_of(self.trans_a), bool_of(self.trans_b), "I", element_bits(*self.nest_values()))

    def nest_values(self) -> tuple:
        return self.rhs, self.result, self.grad

    def reduction_axes(self) -> list[tuple[int, int, int | None]]:
        """dY along N (its last axis), B along N (swapped by trans_b)."""
        dy, b = (len(shape_of(v.type)) for v in self.operands)
        axes = [(0, dy - 1, dy - 2)] if dy >= 2 else []
        if b >= 2:
            k_b, n = matrix_axes(b, bool_of(self.trans_b))
            axes.append((1, n, k_b))
        return axes

    def verify_semantics(self) -> None:
        self.check(shape_of(self.result.type), shape_of(self.rhs.type))

    def index_map(self) -> IndexMap | None:
        dy, b, a = (tuple(shape_of(v.type)) for v in (self.grad, self.rhs, self.result))
        if len(a) < 2 or len(b) < 2 or len(dy) < 2:
            return None
        am, bm, out, _, _, _ = matmul_maps(bool_of(self.trans_a), bool_of(self.trans_b), a, b, dy)
        return IndexMap([out, bm], [am])

@irdl_op_definition
class MatMulRhsGradOp(MatMulGradOp, Sharding):
    """Gradient of alpha * op(A) @ op(B) w.r.t. B, summed over broadcast batch axes; the result
    type is B's type.

    `%db = grad.matmul_rhs %dy, %a {trans_b = true} : (tensor<4x256xf32>, tensor<4x784xf32>) -> tensor<256x784xf32>`
    """

    name = "grad.matmul_rhs"
    grad = operand_def(TensorType)
    lhs = operand_def(TensorType)
    result = result_def(TensorType)
    assembly_format = operands_format("grad", "lhs")
    traits = traits_def(OnnxNames("MatMul", "Gemm"))
    NEST_ROLES: ClassVar[tuple[tuple[str, ...], str]] = (("O", "I"), "W")

    def loop_nest(self) -> Any:
        return matmul_loop_nest("matmul_grad_rhs", shape_of(self.lhs.type), shape_of(self.result.type),
                                bool_of(self.trans_a), bool_of(self.trans_b), "W", element_bits(*self.nest_values()))

    def nest_values(self) -> tuple:
        return self.result, self.lhs, self.grad

    def reduction_axes(self) -> list[tuple[int, int, int | None]]:
        """dY along M (its first matrix axis), A along M (swapped by trans_a)."""
        dy, a = (len(shape_of(v.type)) for v in self.operands)
        axes = [(0, dy - 2, dy - 1)] if dy >= 2 else []
        if a >= 2:
            m, k = matrix_axes(a, bool_of(self.trans_a))
            axes.append((1, m, k))
        return axes

    def verify_semantics(self) -> None:
        self.check(shape_of(self.lhs.type), shape_of(self.result.type))

    def index_map(self) -> IndexMap | None:
        dy, a, b = (tuple(shape_of(v.type)) for v in (self.grad, self.lhs, self.result))
        if len(a) < 2 or len(b) < 2 or len(dy) < 2:
            return None
        am, bm, out, _, _, _ = matmul_maps(bool_of(self.trans_a), bool_of(self.trans_b), a, b, dy)
        return IndexMap([out, am], [bm])

# ----------------------------------------------------------------------------- normalization


@irdl_op_definition
class BatchNormGradOp(GradOp, Sharding):
    """Gradients of training-mode batch normalization w.r.t. input, scale and bias, from the
    saved input and scale (batch statistics are recomputed from x).

    ```mlir
    %dx, %dg, %db = grad.batch_norm %dy, %x, %g {epsilon = 1.0e-05 : f64}
        : (tensor<4x64x8x8xf32>, tensor<4x64x8x8xf32>, tensor<64xf32>) -> (tensor<4x64x8x8xf32>, tensor<64xf32>, tensor<64xf32>)
    ```
    """

    name = "grad.batch_norm"
    grad = operand_def(TensorType)
    input = operand_def(TensorType)
    scale = operand_def(TensorType)
    epsilon = opt_prop_def(FloatAttr)
    training = opt_prop_def(BoolAttr)
    input_grad = result_def(TensorType)
    scale_grad = result_def(TensorType)
    bias_grad = result_def(TensorType)
    traits = traits_def(Pure(), VectorWork(10, "norm"), OnnxNames("BatchNormalizationGrad", "BatchNormalization"))
    assembly_format = operands_format("grad", "input", "scale")

    def verify_semantics(self) -> None:
        x = shape_of(self.input.type)
        expect_shape(self, "gradient", shape_of(self.grad.type), x)
        expect_shape(self, "input gradient", shape_of(self.input_grad.type), x)
        for what, v in (("scale", self.scale), ("scale gradient", self.scale_grad), ("bias gradient", self.bias_grad)):
            expect_shape(self, what, shape_of(v.type), (x[1],))

    def index_map(self) -> IndexMap | None:
        rank = len(shape_of(self.input.type))
        full = list(range(rank))
        return IndexMap([full, full, [1]], [full, [1], [1]], norm={0} | set(range(2, rank)))

@irdl_op_definition
class LayerNormGradOp(GradOp, Sharding):
    """Gradients of layer normalization w.r.t. input, scale and bias (statistics recomputed
    from the saved input).

    ```mlir
    %dx, %dg, %db = grad.layer_norm %dy, %x, %g {axis = -1 : i64, epsilon = 1.0e-05 : f64}
        : (tensor<1x128x256xf32>, tensor<1x128x256xf32>, tensor<256xf32>) -> (tensor<1x128x256xf32>, tensor<256xf32>, tensor<256xf32>)
    ```
    """

    name = "grad.layer_norm"
    grad = operand_def(TensorType)
    input = operand_def(TensorType)
    scale = operand_def(TensorType)
    axis = opt_prop_def(IntegerAttr)
    epsilon = opt_prop_def(FloatAttr)
    input_grad = result_def(TensorType)
    scale_grad = result_def(TensorType)
    bias_grad = result_def(TensorType)
    traits = traits_def(Pure(), VectorWork(12, "norm"), OnnxNames("LayerNormalizationGrad", "LayerNormalization"))
    assembly_format = operands_format("grad", "input", "scale")

    def verify_semantics(self) -> None:
        x = shape_of(self.input.type)
        expect_shape(self, "gradient", shape_of(self.grad.type), x)
        expect_shape(self, "input gradient", shape_of(self.input_grad.type), x)
        expect_shape(self, "scale gradient", shape_of(self.scale_grad.type), shape_of(self.scale.type))
        expect_shape(self, "bias gradient", shape_of(self.bias_grad.type), shape_of(self.scale.type))
        try:
            normalize_axis(int_of(self.axis, -1), len(x))
        except ValueError as e:
            expect(False, self, str(e))

    def index_map(self) -> IndexMap | None:
        rank = len(shape_of(self.input.type))
        axis = normalize_axis(int_of(self.axis, -1), rank)
        full, tail = list(range(rank)), list(range(axis, rank))
        return IndexMap([full, full, tail], [full, tail, tail], norm=set(tail))

# ----------------------------------------------------------------------------- pooling


class PoolGradOp(GradOp, Sharding):
    kernel_shape = prop_def(DenseArrayBase)
    strides = opt_prop_def(DenseArrayBase)
    pads = opt_prop_def(DenseArrayBase)
    dilations = opt_prop_def(DenseArrayBase)
    ceil_mode = opt_prop_def(BoolAttr)
    traits = traits_def(Pure())

    def check_window(self, x: tuple[int, ...], dy: tuple[int, ...]) -> None:
        kernel = ints_of(self.kernel_shape)
        n = len(kernel)
        expect(len(x) == n + 2, self, f"kernel_shape needs {len(x) - 2} entries")
        want = pool_output_shape(
            x, kernel, ints_of(self.strides, (1,) * n), ints_of(self.pads, (0,) * (2 * n)),
            ints_of(self.dilations, (1,) * n), bool_of(self.ceil_mode),
        )
        expect_shape(self, "gradient", dy, want)

    def index_map(self) -> IndexMap | None:
        return pool_map(self, gradient=True)

@irdl_op_definition
class MaxPoolGradOp(PoolGradOp):
    """Route dy to the arg-max of each window of the saved input x.

    `%dx = grad.max_pool %dy, %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<4x6x14x14xf32>, tensor<4x6x28x28xf32>) -> tensor<4x6x28x28xf32>`
    """

    name = "grad.max_pool"
    traits = traits_def(PoolWork(1), OnnxNames("MaxPoolGrad", "MaxPool"))
    grad = operand_def(TensorType)
    input = operand_def(TensorType)
    result = result_def(TensorType)
    assembly_format = operands_format("grad", "input")

    def verify_semantics(self) -> None:
        expect_shape(self, "result", shape_of(self.result.type), shape_of(self.input.type))
        self.check_window(shape_of(self.input.type), shape_of(self.grad.type))


@irdl_op_definition
class AvgPoolGradOp(PoolGradOp):
    """Spread dy evenly over each window; needs no saved value (the result type gives x's shape).

    `%dx = grad.avg_pool %dy {kernel_shape = array<i64: 4, 4>, strides = array<i64: 4, 4>} : (tensor<4x512x1x1xf32>) -> tensor<4x512x4x4xf32>`
    """

    name = "grad.avg_pool"
    traits = traits_def(PoolWork(1), OnnxNames("AveragePoolGrad", "AveragePool"))
    grad = operand_def(TensorType)
    count_include_pad = opt_prop_def(BoolAttr)
    result = result_def(TensorType)
    assembly_format = operands_format("grad")

    def verify_semantics(self) -> None:
        self.check_window(shape_of(self.result.type), shape_of(self.grad.type))


@irdl_op_definition
class GlobalAvgPoolGradOp(GradOp, Sharding):
    """Spread dy over all spatial positions. `%dx = grad.global_avg_pool %dy : (tensor<1x512x1x1xf32>) -> tensor<1x512x7x7xf32>`"""

    name = "grad.global_avg_pool"
    grad = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), VectorWork(1, "pool"), OnnxNames("GlobalAveragePoolGrad", "GlobalAveragePool"))
    assembly_format = operands_format("grad")

    def verify_semantics(self) -> None:
        x = shape_of(self.result.type)
        expect_shape(self, "gradient", shape_of(self.grad.type), (x[0], x[1]) + (1,) * (len(x) - 2))

    def index_map(self) -> IndexMap | None:
        return pool_map(self, gradient=True)

# ----------------------------------------------------------------------------- reductions & data movement


class ReduceGradOp(GradOp):
    grad = operand_def(TensorType)
    axes = opt_prop_def(DenseArrayBase)
    keepdims = opt_prop_def(BoolAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = operands_format("grad")

    def verify_semantics(self) -> None:
        try:
            want = reduce_shape(shape_of(self.result.type), ints_of(self.axes), bool_of(self.keepdims, True))
        except ValueError as e:
            expect(False, self, str(e))
            return
        expect_shape(self, "gradient", shape_of(self.grad.type), want)


@irdl_op_definition
class ReduceSumGradOp(ReduceGradOp):
    """Broadcast dy back over the reduced axes. `%dx = grad.reduce_sum %dy {axes = array<i64: 1>} : (tensor<4x1xf32>) -> tensor<4x8xf32>`"""

    name = "grad.reduce_sum"
    traits = traits_def(VectorWork(0, "data_movement"))


@irdl_op_definition
class ReduceMeanGradOp(ReduceGradOp):
    """Broadcast dy / count back over the reduced axes. `%dx = grad.reduce_mean %dy {axes = array<i64: -1>} : (tensor<4x1xf32>) -> tensor<4x8xf32>`"""

    name = "grad.reduce_mean"
    traits = traits_def(VectorWork(1, "data_movement"))


@irdl_op_definition
class SliceGradOp(GradOp):
    """Scatter dy into zeros of the sliced input's shape (the result type).

    `%dx = grad.slice %dy {starts = array<i64: 0>, ends = array<i64: 4>, axes = array<i64: 1>} : (tensor<2x4xf32>) -> tensor<2x8xf32>`
    """

    name = "grad.slice"
    grad = operand_def(TensorType)
    starts = prop_def(DenseArrayBase)
    ends = prop_def(DenseArrayBase)
    axes = opt_prop_def(DenseArrayBase)
    steps = opt_prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure(), VectorWork(0, "data_movement"))
    assembly_format = operands_format("grad")

    def verify_semantics(self) -> None:
        expect(len(shape_of(self.grad.type)) == len(shape_of(self.result.type)), self,
               "gradient and result ranks differ")


@irdl_op_definition
class GatherGradOp(GradOp):
    """Scatter-add dy into zeros of the data's shape at the gathered indices (the embedding
    gradient; ONNX Runtime's GatherGrad). Repeated indices accumulate.

    `%dw = grad.gather %dy, %ids {axis = 0 : i64} : (tensor<1x128x256xf32>, tensor<1x128xi64>) -> tensor<8192x256xf32>`
    """

    name = "grad.gather"
    grad = operand_def(TensorType)
    indices = operand_def(TensorType)
    axis = opt_prop_def(IntegerAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), VectorWork(1, "data_movement"), OnnxNames("GatherGrad", "Gather"))
    assembly_format = operands_format("grad", "indices")

    def verify_semantics(self) -> None:
        d, idx = shape_of(self.result.type), shape_of(self.indices.type)
        try:
            axis = normalize_axis(int_of(self.axis), len(d))
        except ValueError as e:
            expect(False, self, str(e))
            return
        expect_shape(self, "gradient", shape_of(self.grad.type), (*d[:axis], *idx, *d[axis + 1 :]))


@irdl_op_definition
class ResizeGradOp(GradOp, ResizeOptions):
    """Gradient of `nn.resize`: each output gradient goes back to the input elements its value
    was taken or interpolated from, with the same weights (the transposed interpolation).

    `%dx = grad.resize %dy {mode = "linear", coordinate_transformation_mode = "half_pixel"} : (tensor<2x8x16x16xf32>) -> tensor<2x8x4x4xf32>`
    """

    name = "grad.resize"
    grad = operand_def(TensorType)
    mode = prop_def(StringAttr)
    coordinate_transformation_mode = opt_prop_def(StringAttr)
    nearest_mode = opt_prop_def(StringAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), VectorWork(3))
    assembly_format = operands_format("grad")

    def verify_semantics(self) -> None:
        verify_resize_options(self)
        dy, dx = shape_of(self.grad.type), shape_of(self.result.type)
        expect(len(dy) == len(dx), self, f"result rank {len(dx)} differs from gradient rank {len(dy)}")
        expect_same_elem(self, self.grad.type, self.result.type)


# ----------------------------------------------------------------------------- losses


@irdl_op_definition
class SoftmaxCrossEntropyGradOp(GradOp):
    """Gradient of softmax cross-entropy w.r.t. the scores, from the saved log-probabilities
    (ONNX Runtime's SoftmaxCrossEntropyLossGrad).

    `%ds = grad.softmax_cross_entropy %dl, %logp, %labels {reduction = "mean"} : (tensor<f32>, tensor<4x10xf32>, tensor<4xi64>) -> tensor<4x10xf32>`

    The classes lie on axis 1 (ONNX's layout, labels `(N, *d)`) unless `class_axis` names
    another axis; ONNX Runtime training graphs of language models put them last
    (`class_axis = 2` for `(B, T, V)` log-probabilities and `(B, T)` labels).
    """

    name = "grad.softmax_cross_entropy"
    grad = operand_def(TensorType)
    log_prob = operand_def(TensorType)
    labels = operand_def(TensorType)
    weights = opt_operand_def(TensorType)
    reduction = opt_prop_def(StringAttr)
    ignore_index = opt_prop_def(IntegerAttr)
    class_axis = opt_prop_def(IntegerAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), LossWork(3, scores=1), OnnxNames("SoftmaxCrossEntropyLossGrad", "SoftmaxCrossEntropyLoss"))
    assembly_format = operands_format("grad", "log_prob", "labels", "weights?")

    @property
    def class_axis_value(self) -> int:
        return 1 if self.class_axis is None else self.class_axis.value.data

    def verify_semantics(self) -> None:
        s = shape_of(self.log_prob.type)
        axis = self.class_axis_value
        expect(1 <= axis < len(s), self, f"class_axis {axis} is not an axis after the batch axis of log_prob")
        expect_shape(self, "result", shape_of(self.result.type), s)
        expect_shape(self, "labels", shape_of(self.labels.type), (*s[:axis], *s[axis + 1:]))
        reduction = str_of(self.reduction, "mean")
        expect(reduction in ("mean", "sum", "none"), self, "reduction must be mean, sum or none")


@irdl_op_definition
class MseLossGradOp(GradOp):
    """Gradient of the mean squared error w.r.t. the prediction.

    `%dp = grad.mse_loss %dl, %y, %t {reduction = "mean"} : (tensor<f32>, tensor<4x10xf32>, tensor<4x10xf32>) -> tensor<4x10xf32>`
    """

    name = "grad.mse_loss"
    grad = operand_def(TensorType)
    prediction = operand_def(TensorType)
    target = operand_def(TensorType)
    reduction = opt_prop_def(StringAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), LossWork(2, scores=1))
    assembly_format = operands_format("grad", "prediction", "target")

    def verify_semantics(self) -> None:
        expect_shape(self, "result", shape_of(self.result.type), shape_of(self.prediction.type))


GRAD = Dialect(
    "grad",
    [
        ReluGradOp, LeakyReluGradOp, ClipGradOp, SigmoidGradOp, HardSigmoidGradOp, HardSwishGradOp,
        TanhGradOp, ErfGradOp, GeluGradOp, SqrtGradOp, ExpGradOp, LogGradOp, SoftmaxGradOp,
        LogSoftmaxGradOp, DropoutGradOp, DivRhsGradOp, PowBaseGradOp, PowExponentGradOp,
        UnbroadcastOp, ConvInputGradOp, ConvWeightGradOp, ConvBiasGradOp, MatMulLhsGradOp,
        MatMulRhsGradOp, BatchNormGradOp, LayerNormGradOp, MaxPoolGradOp, AvgPoolGradOp,
        GlobalAvgPoolGradOp, ReduceSumGradOp, ReduceMeanGradOp, SliceGradOp, GatherGradOp,
        ResizeGradOp, SoftmaxCrossEntropyGradOp, MseLossGradOp,
    ],
    [],
)
