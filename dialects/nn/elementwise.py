"""Element-wise ops of the `nn` dialect: activations, arithmetic with broadcasting, `where`, `sum`, `cast`."""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import BoolAttr, FloatAttr, IntegerAttr, StringAttr, TensorType, i1
from xdsl.irdl import (
    AnyAttr,
    VarConstraint,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import Pure

from dialects.base import (
    FUNCTIONAL,
    MonetOp,
    broadcast_shapes,
    elem_of,
    expect,
    expect_float,
    expect_same_elem,
    expect_shape,
    int_of,
    irdl_op_definition,
    normalize_axis,
    operands_format,
    raise_verify,
    shape_of,
    str_of,
)
from dialects.interfaces import OnnxNames, SameRowsOfFirst, Tiling, VectorWork
from dialects.sharding import IndexMap, Sharding, normalizing_map


class UnaryOp(MonetOp, Tiling, Sharding):
    """An element-wise op whose result has the operand's type."""

    T: ClassVar = VarConstraint("T", AnyAttr())
    input = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input)"
    FLOAT_ONLY: ClassVar[bool] = True

    def verify_semantics(self) -> None:
        if self.FLOAT_ONLY:
            expect_float(self, "operand", self.input.type)


@irdl_op_definition
class ReluOp(UnaryOp):
    """max(x, 0). `%y = nn.relu %x : tensor<4x8xf32>`"""

    name = "nn.relu"
    traits = traits_def(VectorWork(1), OnnxNames("Relu"))


@irdl_op_definition
class LeakyReluOp(UnaryOp):
    """x if x > 0 else alpha * x. `%y = nn.leaky_relu %x {alpha = 0.01 : f64} : tensor<8xf32>`"""

    name = "nn.leaky_relu"
    traits = traits_def(VectorWork(2))
    alpha = opt_prop_def(FloatAttr)


@irdl_op_definition
class ClipOp(UnaryOp):
    """Clamp to [min, max] (either bound optional). `%y = nn.clip %x {min = 0.0 : f64, max = 6.0 : f64} : tensor<8xf32>`"""

    name = "nn.clip"
    traits = traits_def(VectorWork(2))
    min = opt_prop_def(FloatAttr)
    max = opt_prop_def(FloatAttr)


@irdl_op_definition
class SigmoidOp(UnaryOp):
    """1 / (1 + exp(-x)). `%y = nn.sigmoid %x : tensor<8xf32>`"""

    name = "nn.sigmoid"
    traits = traits_def(VectorWork(4))


@irdl_op_definition
class HardSigmoidOp(UnaryOp):
    """max(0, min(1, alpha * x + beta)). `%y = nn.hard_sigmoid %x {alpha = 0.2 : f64, beta = 0.5 : f64} : tensor<8xf32>`"""

    name = "nn.hard_sigmoid"
    traits = traits_def(VectorWork(3))
    alpha = opt_prop_def(FloatAttr)
    beta = opt_prop_def(FloatAttr)


@irdl_op_definition
class HardSwishOp(UnaryOp):
    """x * hard_sigmoid(x; 1/6, 1/2). `%y = nn.hard_swish %x : tensor<8xf32>`"""

    name = "nn.hard_swish"
    traits = traits_def(VectorWork(4))


@irdl_op_definition
class TanhOp(UnaryOp):
    """`%y = nn.tanh %x : tensor<8xf32>`"""

    name = "nn.tanh"
    traits = traits_def(VectorWork(5), OnnxNames("Tanh"))


@irdl_op_definition
class ErfOp(UnaryOp):
    """The Gauss error function. `%y = nn.erf %x : tensor<8xf32>`"""

    name = "nn.erf"
    traits = traits_def(VectorWork(8))


@irdl_op_definition
class GeluOp(UnaryOp):
    """GELU, exact or tanh-approximated. `%y = nn.gelu %x {approximate = "tanh"} : tensor<8xf32>`"""

    name = "nn.gelu"
    traits = traits_def(VectorWork(8), OnnxNames("Gelu"))
    approximate = opt_prop_def(StringAttr)

    def verify_semantics(self) -> None:
        super().verify_semantics()
        expect(str_of(self.approximate, "none") in ("none", "tanh"), self,
               "approximate must be 'none' or 'tanh'")


@irdl_op_definition
class SqrtOp(UnaryOp):
    """`%y = nn.sqrt %x : tensor<8xf32>`"""

    name = "nn.sqrt"
    traits = traits_def(VectorWork(1))


@irdl_op_definition
class NegOp(UnaryOp):
    """`%y = nn.neg %x : tensor<8xf32>`"""

    name = "nn.neg"
    traits = traits_def(VectorWork(1))
    FLOAT_ONLY: ClassVar[bool] = False


@irdl_op_definition
class ExpOp(UnaryOp):
    """`%y = nn.exp %x : tensor<8xf32>`"""

    name = "nn.exp"
    traits = traits_def(VectorWork(4))


@irdl_op_definition
class LogOp(UnaryOp):
    """Natural logarithm. `%y = nn.log %x : tensor<8xf32>`"""

    name = "nn.log"
    traits = traits_def(VectorWork(4))


@irdl_op_definition
class NotOp(UnaryOp):
    """Logical not of a boolean tensor. `%y = nn.not %m : tensor<8xi1>`"""

    name = "nn.not"
    traits = traits_def(VectorWork(1))
    FLOAT_ONLY: ClassVar[bool] = False

    def verify_semantics(self) -> None:
        expect(elem_of(self.input.type) == i1, self, "operand must be a tensor of i1")


@irdl_op_definition
class SoftplusOp(UnaryOp):
    """log(1 + exp(x)) (ONNX Softplus; Mamba's step sizes). `%y = nn.softplus %x : tensor<8xf32>`"""

    name = "nn.softplus"
    traits = traits_def(VectorWork(5))


@irdl_op_definition
class SoftsignOp(UnaryOp):
    """x / (1 + |x|). `%y = nn.softsign %x : tensor<8xf32>`"""

    name = "nn.softsign"
    traits = traits_def(VectorWork(3))


@irdl_op_definition
class AbsOp(UnaryOp):
    """|x|. `%y = nn.abs %x : tensor<8xf32>`"""

    name = "nn.abs"
    traits = traits_def(VectorWork(1))
    FLOAT_ONLY: ClassVar[bool] = False


@irdl_op_definition
class SignOp(UnaryOp):
    """-1, 0 or 1 by the sign of x (its gradient is zero). `%y = nn.sign %x : tensor<8xf32>`"""

    name = "nn.sign"
    traits = traits_def(VectorWork(1))
    FLOAT_ONLY: ClassVar[bool] = False


@irdl_op_definition
class SinOp(UnaryOp):
    """sin(x) (sinusoidal time and position embeddings computed on data). `%y = nn.sin %t : tensor<2x64xf32>`"""

    name = "nn.sin"
    traits = traits_def(VectorWork(8))


@irdl_op_definition
class CosOp(UnaryOp):
    """cos(x). `%y = nn.cos %t : tensor<2x64xf32>`"""

    name = "nn.cos"
    traits = traits_def(VectorWork(8))


@irdl_op_definition
class FloorOp(UnaryOp):
    """Round down (its gradient is zero: stochastic depth's keep mask is floor(p + u)).
    `%y = nn.floor %x : tensor<2x1x1x1xf32>`"""

    name = "nn.floor"
    traits = traits_def(VectorWork(1))


@irdl_op_definition
class CeilOp(UnaryOp):
    """Round up (zero gradient). `%y = nn.ceil %x : tensor<8xf32>`"""

    name = "nn.ceil"
    traits = traits_def(VectorWork(1))


@irdl_op_definition
class RoundOp(UnaryOp):
    """Round half to even, as ONNX Round (zero gradient). `%y = nn.round %x : tensor<8xf32>`"""

    name = "nn.round"
    traits = traits_def(VectorWork(1))


@irdl_op_definition
class EluOp(UnaryOp):
    """x if x > 0 else alpha * (exp(x) - 1). `%y = nn.elu %x {alpha = 1.0 : f64} : tensor<8xf32>`"""

    name = "nn.elu"
    traits = traits_def(VectorWork(5))
    alpha = opt_prop_def(FloatAttr)


@irdl_op_definition
class CeluOp(UnaryOp):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)). `%y = nn.celu %x {alpha = 1.0 : f64} : tensor<8xf32>`"""

    name = "nn.celu"
    traits = traits_def(VectorWork(6))
    alpha = opt_prop_def(FloatAttr)


@irdl_op_definition
class SeluOp(UnaryOp):
    """gamma * (x if x > 0 else alpha * (exp(x) - 1)), ONNX's default alpha and gamma.
    `%y = nn.selu %x : tensor<8xf32>`"""

    name = "nn.selu"
    traits = traits_def(VectorWork(6))
    alpha = opt_prop_def(FloatAttr)
    gamma = opt_prop_def(FloatAttr)


@irdl_op_definition
class MishOp(UnaryOp):
    """x * tanh(softplus(x)). `%y = nn.mish %x : tensor<8xf32>`"""

    name = "nn.mish"
    traits = traits_def(VectorWork(12))


class AxisUnaryOp(UnaryOp, SameRowsOfFirst):
    axis = prop_def(IntegerAttr)

    def fuses_along(self, axis: int) -> bool:
        return self.axis.value.data % len(shape_of(self.result.type)) != axis  # not the softmax's own axis

    def verify_semantics(self) -> None:
        super().verify_semantics()
        rank = len(shape_of(self.input.type))
        try:
            normalize_axis(int_of(self.axis), rank)
        except ValueError as e:
            raise_verify(self, str(e))

    def index_map(self) -> IndexMap | None:
        rank = len(shape_of(self.result.type))
        return normalizing_map(self, {normalize_axis(int_of(self.axis, -1), rank)})  # not split along its axis

@irdl_op_definition
class SoftmaxOp(AxisUnaryOp):
    """Softmax along one axis. `%y = nn.softmax %x {axis = -1 : i64} : tensor<2x4x8x8xf32>`"""

    name = "nn.softmax"
    traits = traits_def(VectorWork(7, "softmax"), OnnxNames("Softmax"))


@irdl_op_definition
class LogSoftmaxOp(AxisUnaryOp):
    """Log-softmax along one axis. `%y = nn.log_softmax %x {axis = 1 : i64} : tensor<4x10xf32>`"""

    name = "nn.log_softmax"
    traits = traits_def(VectorWork(7, "softmax"))


class BinaryOp(MonetOp, Tiling, Sharding):
    """An element-wise op with ONNX (numpy) multidirectional broadcasting."""

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = operands_format("lhs", "rhs")
    RESULT_IS_BOOL: ClassVar[bool] = False

    def verify_semantics(self) -> None:
        expect_same_elem(self, self.lhs.type, self.rhs.type)
        try:
            want = broadcast_shapes(shape_of(self.lhs.type), shape_of(self.rhs.type))
        except ValueError as e:
            raise_verify(self, str(e))
            return
        expect_shape(self, "result", shape_of(self.result.type), want)
        want_elem = i1 if self.RESULT_IS_BOOL else elem_of(self.lhs.type)
        expect(elem_of(self.result.type) == want_elem, self,
               f"result element type must be {want_elem}")


@irdl_op_definition
class AddOp(BinaryOp):
    """`%z = nn.add %x, %y : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>`"""

    name = "nn.add"
    traits = traits_def(VectorWork(1), OnnxNames("Add"))


@irdl_op_definition
class SubOp(BinaryOp):
    """`%z = nn.sub %x, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>`"""

    name = "nn.sub"
    traits = traits_def(VectorWork(1), OnnxNames("Sub"))


@irdl_op_definition
class MulOp(BinaryOp):
    """`%z = nn.mul %x, %s : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>`"""

    name = "nn.mul"
    traits = traits_def(VectorWork(1), OnnxNames("Mul"))


@irdl_op_definition
class DivOp(BinaryOp):
    """`%z = nn.div %x, %y : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>`"""

    name = "nn.div"
    traits = traits_def(VectorWork(1), OnnxNames("Div"))


@irdl_op_definition
class PowOp(BinaryOp):
    """x ** y. `%z = nn.pow %x, %e : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>`"""

    name = "nn.pow"
    traits = traits_def(VectorWork(4))


@irdl_op_definition
class EqualOp(BinaryOp):
    """`%m = nn.equal %a, %b : (tensor<8xi64>, tensor<8xi64>) -> tensor<8xi1>`"""

    name = "nn.equal"
    traits = traits_def(VectorWork(1))
    RESULT_IS_BOOL: ClassVar[bool] = True


@irdl_op_definition
class LessOp(BinaryOp):
    """`%m = nn.less %r, %p : (tensor<2x16xf32>, tensor<f32>) -> tensor<2x16xi1>` (ONNX Less);
    with `or_equal = true`, ONNX LessOrEqual."""

    name = "nn.less"
    traits = traits_def(VectorWork(1))
    or_equal = opt_prop_def(BoolAttr)
    RESULT_IS_BOOL: ClassVar[bool] = True


@irdl_op_definition
class GreaterOp(BinaryOp):
    """`%m = nn.greater %a, %b : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xi1>` (ONNX Greater);
    with `or_equal = true`, ONNX GreaterOrEqual."""

    name = "nn.greater"
    traits = traits_def(VectorWork(1))
    or_equal = opt_prop_def(BoolAttr)
    RESULT_IS_BOOL: ClassVar[bool] = True


@irdl_op_definition
class AndOp(BinaryOp):
    """Logical and. `%m = nn.and %a, %b : (tensor<8xi1>, tensor<8xi1>) -> tensor<8xi1>`"""

    name = "nn.and"
    traits = traits_def(VectorWork(1))
    RESULT_IS_BOOL: ClassVar[bool] = True


@irdl_op_definition
class OrOp(BinaryOp):
    """Logical or. `%m = nn.or %a, %b : (tensor<8xi1>, tensor<8xi1>) -> tensor<8xi1>`"""

    name = "nn.or"
    traits = traits_def(VectorWork(1))
    RESULT_IS_BOOL: ClassVar[bool] = True


@irdl_op_definition
class XorOp(BinaryOp):
    """Logical exclusive or. `%m = nn.xor %a, %b : (tensor<8xi1>, tensor<8xi1>) -> tensor<8xi1>`"""

    name = "nn.xor"
    traits = traits_def(VectorWork(1))
    RESULT_IS_BOOL: ClassVar[bool] = True


@irdl_op_definition
class MaxOp(BinaryOp):
    """Element-wise maximum with broadcasting (ONNX Max of two operands; RWKV's clamps). Ties send
    half the gradient to each operand, as PyTorch's `maximum` does.
    `%z = nn.max %x, %y : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>`"""

    name = "nn.max"
    traits = traits_def(VectorWork(1))


@irdl_op_definition
class MinOp(BinaryOp):
    """Element-wise minimum with broadcasting (ONNX Min of two operands).
    `%z = nn.min %x, %y : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>`"""

    name = "nn.min"
    traits = traits_def(VectorWork(1))


@irdl_op_definition
class ModOp(BinaryOp):
    """Remainder: the divisor's sign (Python's %, ONNX Mod fmod = 0) or the dividend's
    (`fmod = true`). `%z = nn.mod %a, %b : (tensor<8xi64>, tensor<i64>) -> tensor<8xi64>`"""

    name = "nn.mod"
    traits = traits_def(VectorWork(3))
    fmod = opt_prop_def(BoolAttr)


@irdl_op_definition
class PReluOp(BinaryOp):
    """x if x >= 0 else slope * x, the slope (a parameter) broadcast to x (ONNX PRelu).
    `%y = nn.prelu %x, %slope : (tensor<2x8x4x4xf32>, tensor<8x1x1xf32>) -> tensor<2x8x4x4xf32>`"""

    name = "nn.prelu"
    traits = traits_def(VectorWork(2))


@irdl_op_definition
class WhereOp(MonetOp, Tiling, Sharding):
    """Select by a boolean condition, with broadcasting.

    `%z = nn.where %m, %a, %b : (tensor<8x8xi1>, tensor<f32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>`
    """

    name = "nn.where"
    condition = operand_def(TensorType)
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), VectorWork(1))
    assembly_format = operands_format("condition", "lhs", "rhs")

    def verify_semantics(self) -> None:
        expect(elem_of(self.condition.type) == i1, self, "condition must be a tensor of i1")
        expect_same_elem(self, self.lhs.type, self.rhs.type, self.result.type)
        try:
            want = broadcast_shapes(*(shape_of(v.type) for v in (self.condition, self.lhs, self.rhs)))
        except ValueError as e:
            raise_verify(self, str(e))
            return
        expect_shape(self, "result", shape_of(self.result.type), want)


@irdl_op_definition
class SumOp(MonetOp, Tiling, Sharding):
    """Element-wise sum of any number of tensors, with broadcasting.

    `%s = nn.sum %a, %b, %c : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>`
    """

    name = "nn.sum"
    inputs = var_operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), VectorWork(1), OnnxNames("Sum"))
    assembly_format = "$inputs " + FUNCTIONAL

    def verify_semantics(self) -> None:
        expect(len(self.inputs) >= 1, self, "needs at least one operand")
        expect_same_elem(self, *(v.type for v in self.inputs), self.result.type)
        try:
            want = broadcast_shapes(*(shape_of(v.type) for v in self.inputs))
        except ValueError as e:
            raise_verify(self, str(e))
            return
        expect_shape(self, "result", shape_of(self.result.type), want)


@irdl_op_definition
class CastOp(MonetOp, Tiling, Sharding):
    """Element type conversion; the result type names the target type.

    `%y = nn.cast %m : (tensor<8x8xi1>) -> tensor<8x8xf32>`
    """

    name = "nn.cast"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), VectorWork(1))
    assembly_format = operands_format("input")

    def verify_semantics(self) -> None:
        expect_shape(self, "result", shape_of(self.result.type), shape_of(self.input.type))
