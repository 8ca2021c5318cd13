"""The `nn` dialect: tensor-level forward ops of a neural network.

The ops mirror ONNX semantics on statically shaped tensors. ONNX attributes and the values of
attribute-like inputs (a Reshape's shape, a Slice's starts, ...) become properties, printed in
the attribute dictionary; data inputs are operands. Shape-only ONNX ops (`Shape`, `Unsqueeze`,
`Flatten`, `Squeeze`, `Identity`, ...) are folded into `nn.reshape` or away at import.

A function is one training step: data inputs, parameters and persistent optimizer state are
function arguments with argument attributes (see `monet_ir.graph`), weights never enter the IR:

```mlir
func.func @main(%x: tensor<4x784xf32> {monet.input = "x"},
                %w: tensor<256x784xf32> {monet.param = "fc1.weight", monet.trainable},
                %b: tensor<256xf32> {monet.param = "fc1.bias", monet.trainable}) -> tensor<4x256xf32> {
  %h = nn.gemm %x, %w, %b {trans_b = true, node = "/fc1/Gemm"}
      : (tensor<4x784xf32>, tensor<256x784xf32>, tensor<256xf32>) -> tensor<4x256xf32>
  %r = nn.relu %h {node = "/Relu"} : tensor<4x256xf32>
  func.return %r : tensor<4x256xf32>
}
```

Every op carries optional `node` (ONNX node name) and `phase` properties (see
`dialects.base.MonetOp`); an `nn` op cloned for recomputation has `phase = "recompute"`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    BoolAttr,
    BytesAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    i1,
)
from xdsl.ir import Attribute, Dialect, ParametrizedAttribute
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.irdl import (
    AnyAttr,
    VarConstraint,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import Pure

from dialects.base import (
    MonetOp,
    bool_of,
    broadcast_shapes,
    conv_output_shape,
    conv_transpose_output_shape,
    elem_of,
    expect,
    expect_float,
    expect_same_elem,
    expect_shape,
    float_of,
    int_of,
    is_float_type,
    ints_of,
    matmul_shape,
    normalize_axis,
    num_elements,
    pool_output_shape,
    reduce_shape,
    shape_of,
    str_of,
)

FUNCTIONAL = "attr-dict `:` functional-type(operands, results)"


def operands_format(*names: str) -> str:
    """Declarative format `$a, $b (, $c^)? attr-dict : (...) -> (...)`; `c?` marks optional."""
    parts: list[str] = []
    for i, name in enumerate(names):
        sep = "`,` " if i else ""
        if name.endswith("?"):
            parts.append(f"({sep}${name[:-1]}^)?")
        else:
            parts.append(f"{sep}${name}")
    return " ".join(parts) + " " + FUNCTIONAL


# ----------------------------------------------------------------------------- element-wise


class UnaryOp(MonetOp):
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


@irdl_op_definition
class LeakyReluOp(UnaryOp):
    """x if x > 0 else alpha * x. `%y = nn.leaky_relu %x {alpha = 0.01 : f64} : tensor<8xf32>`"""

    name = "nn.leaky_relu"
    alpha = opt_prop_def(FloatAttr)


@irdl_op_definition
class ClipOp(UnaryOp):
    """Clamp to [min, max] (either bound optional). `%y = nn.clip %x {min = 0.0 : f64, max = 6.0 : f64} : tensor<8xf32>`"""

    name = "nn.clip"
    min = opt_prop_def(FloatAttr)
    max = opt_prop_def(FloatAttr)


@irdl_op_definition
class SigmoidOp(UnaryOp):
    """1 / (1 + exp(-x)). `%y = nn.sigmoid %x : tensor<8xf32>`"""

    name = "nn.sigmoid"


@irdl_op_definition
class HardSigmoidOp(UnaryOp):
    """max(0, min(1, alpha * x + beta)). `%y = nn.hard_sigmoid %x {alpha = 0.2 : f64, beta = 0.5 : f64} : tensor<8xf32>`"""

    name = "nn.hard_sigmoid"
    alpha = opt_prop_def(FloatAttr)
    beta = opt_prop_def(FloatAttr)


@irdl_op_definition
class HardSwishOp(UnaryOp):
    """x * hard_sigmoid(x; 1/6, 1/2). `%y = nn.hard_swish %x : tensor<8xf32>`"""

    name = "nn.hard_swish"


@irdl_op_definition
class TanhOp(UnaryOp):
    """`%y = nn.tanh %x : tensor<8xf32>`"""

    name = "nn.tanh"


@irdl_op_definition
class ErfOp(UnaryOp):
    """The Gauss error function. `%y = nn.erf %x : tensor<8xf32>`"""

    name = "nn.erf"


@irdl_op_definition
class GeluOp(UnaryOp):
    """GELU, exact or tanh-approximated. `%y = nn.gelu %x {approximate = "tanh"} : tensor<8xf32>`"""

    name = "nn.gelu"
    approximate = opt_prop_def(StringAttr)

    def verify_semantics(self) -> None:
        super().verify_semantics()
        expect(str_of(self.approximate, "none") in ("none", "tanh"), self,
               "approximate must be 'none' or 'tanh'")


@irdl_op_definition
class SqrtOp(UnaryOp):
    """`%y = nn.sqrt %x : tensor<8xf32>`"""

    name = "nn.sqrt"


@irdl_op_definition
class NegOp(UnaryOp):
    """`%y = nn.neg %x : tensor<8xf32>`"""

    name = "nn.neg"
    FLOAT_ONLY: ClassVar[bool] = False


@irdl_op_definition
class ExpOp(UnaryOp):
    """`%y = nn.exp %x : tensor<8xf32>`"""

    name = "nn.exp"


@irdl_op_definition
class LogOp(UnaryOp):
    """Natural logarithm. `%y = nn.log %x : tensor<8xf32>`"""

    name = "nn.log"


@irdl_op_definition
class NotOp(UnaryOp):
    """Logical not of a boolean tensor. `%y = nn.not %m : tensor<8xi1>`"""

    name = "nn.not"
    FLOAT_ONLY: ClassVar[bool] = False

    def verify_semantics(self) -> None:
        expect(elem_of(self.input.type) == i1, self, "operand must be a tensor of i1")


class AxisUnaryOp(UnaryOp):
    axis = prop_def(IntegerAttr)

    def verify_semantics(self) -> None:
        super().verify_semantics()
        rank = len(shape_of(self.input.type))
        try:
            normalize_axis(int_of(self.axis), rank)
        except ValueError as e:
            raise_verify(self, str(e))


@irdl_op_definition
class SoftmaxOp(AxisUnaryOp):
    """Softmax along one axis. `%y = nn.softmax %x {axis = -1 : i64} : tensor<2x4x8x8xf32>`"""

    name = "nn.softmax"


@irdl_op_definition
class LogSoftmaxOp(AxisUnaryOp):
    """Log-softmax along one axis. `%y = nn.log_softmax %x {axis = 1 : i64} : tensor<4x10xf32>`"""

    name = "nn.log_softmax"


def raise_verify(op: MonetOp, message: str) -> None:
    expect(False, op, message)


class BinaryOp(MonetOp):
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


@irdl_op_definition
class SubOp(BinaryOp):
    """`%z = nn.sub %x, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>`"""

    name = "nn.sub"


@irdl_op_definition
class MulOp(BinaryOp):
    """`%z = nn.mul %x, %s : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>`"""

    name = "nn.mul"


@irdl_op_definition
class DivOp(BinaryOp):
    """`%z = nn.div %x, %y : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>`"""

    name = "nn.div"


@irdl_op_definition
class PowOp(BinaryOp):
    """x ** y. `%z = nn.pow %x, %e : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>`"""

    name = "nn.pow"


@irdl_op_definition
class EqualOp(BinaryOp):
    """`%m = nn.equal %a, %b : (tensor<8xi64>, tensor<8xi64>) -> tensor<8xi1>`"""

    name = "nn.equal"
    RESULT_IS_BOOL: ClassVar[bool] = True


@irdl_op_definition
class AndOp(BinaryOp):
    """Logical and. `%m = nn.and %a, %b : (tensor<8xi1>, tensor<8xi1>) -> tensor<8xi1>`"""

    name = "nn.and"
    RESULT_IS_BOOL: ClassVar[bool] = True


@irdl_op_definition
class WhereOp(MonetOp):
    """Select by a boolean condition, with broadcasting.

    `%z = nn.where %m, %a, %b : (tensor<8x8xi1>, tensor<f32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>`
    """

    name = "nn.where"
    condition = operand_def(TensorType)
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
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
class SumOp(MonetOp):
    """Element-wise sum of any number of tensors, with broadcasting.

    `%s = nn.sum %a, %b, %c : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>`
    """

    name = "nn.sum"
    inputs = var_operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
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
class CastOp(MonetOp):
    """Element type conversion; the result type names the target type.

    `%y = nn.cast %m : (tensor<8x8xi1>) -> tensor<8x8xf32>`
    """

    name = "nn.cast"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = operands_format("input")

    def verify_semantics(self) -> None:
        expect_shape(self, "result", shape_of(self.result.type), shape_of(self.input.type))


# ----------------------------------------------------------------------------- contractions


class ConvGeometry(MonetOp):
    """Properties shared by convolution-like ops (ONNX names; pads in begin..end order)."""

    strides = opt_prop_def(DenseArrayBase)
    pads = opt_prop_def(DenseArrayBase)
    dilations = opt_prop_def(DenseArrayBase)
    group = opt_prop_def(IntegerAttr)

    def geometry(self, spatial_rank: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], int]:
        """(strides, pads, dilations, group) with ONNX defaults filled in."""
        return (
            ints_of(self.strides, (1,) * spatial_rank),
            ints_of(self.pads, (0,) * (2 * spatial_rank)),
            ints_of(self.dilations, (1,) * spatial_rank),
            int_of(self.group, 1),
        )

    def check_geometry(self, spatial_rank: int) -> None:
        strides, pads, dilations, group = self.geometry(spatial_rank)
        expect(len(strides) == spatial_rank and len(dilations) == spatial_rank, self,
               f"strides and dilations need {spatial_rank} entries")
        expect(len(pads) == 2 * spatial_rank, self, f"pads needs {2 * spatial_rank} entries")
        expect(all(s > 0 for s in strides) and all(d > 0 for d in dilations), self,
               "strides and dilations must be positive")
        expect(all(p >= 0 for p in pads), self, "pads must be non-negative")
        expect(group >= 1, self, "group must be at least 1")


@irdl_op_definition
class ConvOp(ConvGeometry):
    """N-d convolution (ONNX Conv): x [N, C, *S], w [M, C/group, *K], optional bias [M].

    ```mlir
    %y = nn.conv %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 3, 3, 3, 3>, node = "/conv1/Conv"}
        : (tensor<1x3x224x224xf32>, tensor<64x3x7x7xf32>) -> tensor<1x64x112x112xf32>
    ```
    """

    name = "nn.conv"
    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = operands_format("input", "weight", "bias?")

    def verify_semantics(self) -> None:
        x, w = shape_of(self.input.type), shape_of(self.weight.type)
        expect(len(x) >= 3 and len(w) == len(x), self, "input and weight must have the same rank >= 3")
        self.check_geometry(len(x) - 2)
        strides, pads, dilations, group = self.geometry(len(x) - 2)
        expect(x[1] == w[1] * group, self,
               f"input channels {x[1]} != weight channels {w[1]} x group {group}")
        expect(w[0] % group == 0, self, f"output channels {w[0]} not divisible by group {group}")
        if self.bias is not None:
            expect_shape(self, "bias", shape_of(self.bias.type), (w[0],))
        expect_same_elem(self, self.input.type, self.weight.type, self.result.type)
        expect_shape(self, "result", shape_of(self.result.type),
                     conv_output_shape(x, w, strides, pads, dilations))


@irdl_op_definition
class ConvTransposeOp(ConvGeometry):
    """N-d transposed convolution (ONNX ConvTranspose): x [N, C, *S], w [C, M/group, *K].

    ```mlir
    %y = nn.conv_transpose %dy, %w {pads = array<i64: 1, 1, 1, 1>}
        : (tensor<4x64x8x8xf32>, tensor<64x64x3x3xf32>) -> tensor<4x64x8x8xf32>
    ```
    """

    name = "nn.conv_transpose"
    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    output_padding = opt_prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = operands_format("input", "weight", "bias?")

    def verify_semantics(self) -> None:
        x, w = shape_of(self.input.type), shape_of(self.weight.type)
        expect(len(x) >= 3 and len(w) == len(x), self, "input and weight must have the same rank >= 3")
        nsp = len(x) - 2
        self.check_geometry(nsp)
        strides, pads, dilations, group = self.geometry(nsp)
        expect(x[1] == w[0], self, f"input channels {x[1]} != weight dim 0 {w[0]}")
        out_pad = ints_of(self.output_padding, (0,) * nsp)
        expect_same_elem(self, self.input.type, self.weight.type, self.result.type)
        expect_shape(self, "result", shape_of(self.result.type),
                     conv_transpose_output_shape(x, w, group, strides, pads, dilations, out_pad))


@irdl_op_definition
class GemmOp(MonetOp):
    """alpha * op(A) @ op(B) + beta * C for 2-D A, B (ONNX Gemm), C broadcast to the result.

    ```mlir
    %y = nn.gemm %x, %w, %b {trans_b = true} : (tensor<4x784xf32>, tensor<256x784xf32>, tensor<256xf32>) -> tensor<4x256xf32>
    ```
    """

    name = "nn.gemm"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    alpha = opt_prop_def(FloatAttr)
    beta = opt_prop_def(FloatAttr)
    trans_a = opt_prop_def(BoolAttr)
    trans_b = opt_prop_def(BoolAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = operands_format("lhs", "rhs", "bias?")

    def verify_semantics(self) -> None:
        a, b = shape_of(self.lhs.type), shape_of(self.rhs.type)
        expect(len(a) == 2 and len(b) == 2, self, "operands must be 2-D")
        try:
            want = matmul_shape(a, b, bool_of(self.trans_a), bool_of(self.trans_b))
        except ValueError as e:
            raise_verify(self, str(e))
            return
        expect_shape(self, "result", shape_of(self.result.type), want)
        if self.bias is not None:
            try:
                ok = broadcast_shapes(shape_of(self.bias.type), want) == want
            except ValueError:
                ok = False
            expect(ok, self, f"bias shape {list(shape_of(self.bias.type))} does not broadcast to {list(want)}")
        expect_same_elem(self, self.lhs.type, self.rhs.type, self.result.type)


@irdl_op_definition
class MatMulOp(MonetOp):
    """numpy.matmul (batched, broadcast), optionally transposing the last two axes of an operand
    and scaling by alpha (ONNX MatMul; ONNX Runtime's FusedMatMul).

    ```mlir
    %s = nn.matmul %q, %k : (tensor<1x4x128x64xf32>, tensor<1x4x64x128xf32>) -> tensor<1x4x128x128xf32>
    ```
    """

    name = "nn.matmul"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    alpha = opt_prop_def(FloatAttr)
    trans_a = opt_prop_def(BoolAttr)
    trans_b = opt_prop_def(BoolAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = operands_format("lhs", "rhs")

    def verify_semantics(self) -> None:
        try:
            want = matmul_shape(shape_of(self.lhs.type), shape_of(self.rhs.type),
                                bool_of(self.trans_a), bool_of(self.trans_b))
        except ValueError as e:
            raise_verify(self, str(e))
            return
        expect_shape(self, "result", shape_of(self.result.type), want)
        expect_same_elem(self, self.lhs.type, self.rhs.type, self.result.type)


# ----------------------------------------------------------------------------- normalization


@irdl_op_definition
class BatchNormOp(MonetOp):
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
    traits = traits_def(Pure())
    assembly_format = operands_format("input", "scale", "bias", "mean", "var")

    def verify_semantics(self) -> None:
        x = shape_of(self.input.type)
        expect(len(x) >= 2, self, "input must have rank >= 2")
        for what, v in (("scale", self.scale), ("bias", self.bias), ("mean", self.mean), ("var", self.var)):
            expect_shape(self, what, shape_of(v.type), (x[1],))
        expect_shape(self, "result", shape_of(self.result.type), x)
        expect_float(self, "input", self.input.type)


@irdl_op_definition
class LayerNormOp(MonetOp):
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
    traits = traits_def(Pure())
    assembly_format = operands_format("input", "scale", "bias?")

    def norm_axis(self) -> int:
        return normalize_axis(int_of(self.axis, -1), len(shape_of(self.input.type)))

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


# ----------------------------------------------------------------------------- pooling


class PoolOp(MonetOp):
    input = operand_def(TensorType)
    kernel_shape = prop_def(DenseArrayBase)
    strides = opt_prop_def(DenseArrayBase)
    pads = opt_prop_def(DenseArrayBase)
    dilations = opt_prop_def(DenseArrayBase)
    ceil_mode = opt_prop_def(BoolAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = operands_format("input")

    def window(self) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...], bool]:
        """(kernel, strides, pads, dilations, ceil_mode) with ONNX defaults."""
        kernel = ints_of(self.kernel_shape)
        n = len(kernel)
        return (
            kernel,
            ints_of(self.strides, (1,) * n),
            ints_of(self.pads, (0,) * (2 * n)),
            ints_of(self.dilations, (1,) * n),
            bool_of(self.ceil_mode),
        )

    def verify_semantics(self) -> None:
        x = shape_of(self.input.type)
        kernel, strides, pads, dilations, ceil_mode = self.window()
        expect(len(x) == len(kernel) + 2, self, f"kernel_shape needs {len(x) - 2} entries")
        expect(len(strides) == len(kernel) and len(dilations) == len(kernel)
               and len(pads) == 2 * len(kernel), self, "strides/pads/dilations do not match kernel_shape")
        expect_shape(self, "result", shape_of(self.result.type),
                     pool_output_shape(x, kernel, strides, pads, dilations, ceil_mode))


@irdl_op_definition
class MaxPoolOp(PoolOp):
    """Max pooling (ONNX MaxPool, first output).

    `%y = nn.max_pool %x {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x64x112x112xf32>) -> tensor<1x64x56x56xf32>`
    """

    name = "nn.max_pool"


@irdl_op_definition
class AvgPoolOp(PoolOp):
    """Average pooling (ONNX AveragePool).

    `%y = nn.avg_pool %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x8x8x8xf32>) -> tensor<1x8x4x4xf32>`
    """

    name = "nn.avg_pool"
    count_include_pad = opt_prop_def(BoolAttr)


@irdl_op_definition
class GlobalAvgPoolOp(MonetOp):
    """Mean over all spatial axes, kept as size 1 (ONNX GlobalAveragePool).

    `%y = nn.global_avg_pool %x : (tensor<1x512x7x7xf32>) -> tensor<1x512x1x1xf32>`
    """

    name = "nn.global_avg_pool"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = operands_format("input")

    def verify_semantics(self) -> None:
        x = shape_of(self.input.type)
        expect(len(x) >= 3, self, "input must have rank >= 3")
        expect_shape(self, "result", shape_of(self.result.type), (x[0], x[1]) + (1,) * (len(x) - 2))


# ----------------------------------------------------------------------------- reductions


class ReduceOp(MonetOp):
    input = operand_def(TensorType)
    axes = opt_prop_def(DenseArrayBase)
    keepdims = opt_prop_def(BoolAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = operands_format("input")

    def reduced_axes(self) -> tuple[int, ...]:
        rank = len(shape_of(self.input.type))
        axes = ints_of(self.axes)
        return tuple(sorted({normalize_axis(a, rank) for a in axes})) if axes else tuple(range(rank))

    def verify_semantics(self) -> None:
        try:
            want = reduce_shape(shape_of(self.input.type), ints_of(self.axes), bool_of(self.keepdims, True))
        except ValueError as e:
            raise_verify(self, str(e))
            return
        expect_shape(self, "result", shape_of(self.result.type), want)


@irdl_op_definition
class ReduceSumOp(ReduceOp):
    """Sum over `axes` (all when absent); keepdims defaults to true as in ONNX.

    `%s = nn.reduce_sum %x {axes = array<i64: 0>, keepdims = false} : (tensor<4x8xf32>) -> tensor<8xf32>`
    """

    name = "nn.reduce_sum"


@irdl_op_definition
class ReduceMeanOp(ReduceOp):
    """Mean over `axes` (all when absent).

    `%m = nn.reduce_mean %x {axes = array<i64: -1>} : (tensor<4x8xf32>) -> tensor<4x1xf32>`
    """

    name = "nn.reduce_mean"


# ----------------------------------------------------------------------------- data movement


@irdl_op_definition
class ReshapeOp(MonetOp):
    """Reshape to the result type, which has the same number of elements. ONNX Reshape, Flatten,
    Squeeze and Unsqueeze all import as this op.

    `%y = nn.reshape %x : (tensor<1x512x1x1xf32>) -> tensor<1x512xf32>`
    """

    name = "nn.reshape"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = operands_format("input")

    def verify_semantics(self) -> None:
        a, b = shape_of(self.input.type), shape_of(self.result.type)
        expect(num_elements(a) == num_elements(b), self,
               f"cannot reshape {list(a)} ({num_elements(a)} elements) to {list(b)} ({num_elements(b)} elements)")
        expect_same_elem(self, self.input.type, self.result.type)


@irdl_op_definition
class TransposeOp(MonetOp):
    """Permute axes (ONNX Transpose).

    `%y = nn.transpose %x {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x128x4x64xf32>) -> tensor<1x4x128x64xf32>`
    """

    name = "nn.transpose"
    input = operand_def(TensorType)
    perm = prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = operands_format("input")

    def verify_semantics(self) -> None:
        x = shape_of(self.input.type)
        perm = ints_of(self.perm)
        expect(sorted(perm) == list(range(len(x))), self, f"perm {list(perm)} is not a permutation of {len(x)} axes")
        expect_shape(self, "result", shape_of(self.result.type), tuple(x[p] for p in perm))
        expect_same_elem(self, self.input.type, self.result.type)


@irdl_op_definition
class ExpandOp(MonetOp):
    """Broadcast to the result type (ONNX Expand).

    `%y = nn.expand %x : (tensor<1x8xf32>) -> tensor<4x8xf32>`
    """

    name = "nn.expand"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = operands_format("input")

    def verify_semantics(self) -> None:
        a, b = shape_of(self.input.type), shape_of(self.result.type)
        try:
            ok = broadcast_shapes(a, b) == b
        except ValueError:
            ok = False
        expect(ok, self, f"{list(a)} does not broadcast to {list(b)}")
        expect_same_elem(self, self.input.type, self.result.type)


@irdl_op_definition
class ConcatOp(MonetOp):
    """Concatenate along `axis` (ONNX Concat).

    `%y = nn.concat %a, %b {axis = 1 : i64} : (tensor<1x8xf32>, tensor<1x4xf32>) -> tensor<1x12xf32>`
    """

    name = "nn.concat"
    inputs = var_operand_def(TensorType)
    axis = prop_def(IntegerAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$inputs " + FUNCTIONAL

    def verify_semantics(self) -> None:
        expect(len(self.inputs) >= 1, self, "needs at least one operand")
        shapes = [shape_of(v.type) for v in self.inputs]
        rank = len(shapes[0])
        try:
            axis = normalize_axis(int_of(self.axis), rank)
        except ValueError as e:
            raise_verify(self, str(e))
            return
        for s in shapes:
            expect(len(s) == rank and all(s[i] == shapes[0][i] for i in range(rank) if i != axis), self,
                   f"operand shapes {[list(s) for s in shapes]} differ outside axis {axis}")
        want = list(shapes[0])
        want[axis] = sum(s[axis] for s in shapes)
        expect_shape(self, "result", shape_of(self.result.type), want)
        expect_same_elem(self, *(v.type for v in self.inputs), self.result.type)


@irdl_op_definition
class SplitOp(MonetOp):
    """Split along `axis` into pieces of the result sizes (ONNX Split).

    `%a, %b = nn.split %x {axis = 2 : i64} : (tensor<1x128x768xf32>) -> (tensor<1x128x256xf32>, tensor<1x128x512xf32>)`
    """

    name = "nn.split"
    input = operand_def(TensorType)
    axis = prop_def(IntegerAttr)
    outputs = var_result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = operands_format("input")

    def verify_semantics(self) -> None:
        x = shape_of(self.input.type)
        try:
            axis = normalize_axis(int_of(self.axis), len(x))
        except ValueError as e:
            raise_verify(self, str(e))
            return
        shapes = [shape_of(r.type) for r in self.outputs]
        expect(len(shapes) >= 1, self, "needs at least one result")
        for s in shapes:
            expect(len(s) == len(x) and all(s[i] == x[i] for i in range(len(x)) if i != axis), self,
                   f"result shape {list(s)} differs from input {list(x)} outside axis {axis}")
        expect(sum(s[axis] for s in shapes) == x[axis], self,
               f"result sizes along axis {axis} do not add up to {x[axis]}")


@irdl_op_definition
class SliceOp(MonetOp):
    """Strided slice (ONNX Slice) with the starts/ends/axes/steps as properties.

    `%y = nn.slice %x {starts = array<i64: 0>, ends = array<i64: 4>, axes = array<i64: 1>, steps = array<i64: 1>} : (tensor<2x8xf32>) -> tensor<2x4xf32>`
    """

    name = "nn.slice"
    input = operand_def(TensorType)
    starts = prop_def(DenseArrayBase)
    ends = prop_def(DenseArrayBase)
    axes = opt_prop_def(DenseArrayBase)
    steps = opt_prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = operands_format("input")

    def normalized(self) -> list[tuple[int, int, int, int]]:
        """(axis, start, end, step) per sliced axis, clamped as ONNX specifies."""
        x = shape_of(self.input.type)
        starts, ends = ints_of(self.starts), ints_of(self.ends)
        axes = ints_of(self.axes, range(len(starts)))
        steps = ints_of(self.steps, (1,) * len(starts))
        out = []
        for a, s, e, st in zip(axes, starts, ends, steps, strict=True):
            a = normalize_axis(a, len(x))
            n = x[a]
            if st == 0:
                raise ValueError("slice step must not be 0")
            s = s + n if s < 0 else s
            e = e + n if e < 0 else e
            if st > 0:
                s, e = min(max(s, 0), n), min(max(e, 0), n)
            else:
                s, e = min(max(s, 0), n - 1), min(max(e, -1), n - 1)
            out.append((a, s, e, st))
        return out

    def verify_semantics(self) -> None:
        x = list(shape_of(self.input.type))
        try:
            for a, s, e, st in self.normalized():
                x[a] = max(0, -(-(e - s) // st))
        except ValueError as e:
            raise_verify(self, str(e))
            return
        expect_shape(self, "result", shape_of(self.result.type), x)
        expect_same_elem(self, self.input.type, self.result.type)


@irdl_op_definition
class GatherOp(MonetOp):
    """Gather slices of `data` along `axis` at integer `indices` (ONNX Gather), e.g. an embedding.

    `%e = nn.gather %wte, %ids {axis = 0 : i64} : (tensor<8192x256xf32>, tensor<1x128xi64>) -> tensor<1x128x256xf32>`
    """

    name = "nn.gather"
    data = operand_def(TensorType)
    indices = operand_def(TensorType)
    axis = opt_prop_def(IntegerAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = operands_format("data", "indices")

    def verify_semantics(self) -> None:
        d, idx = shape_of(self.data.type), shape_of(self.indices.type)
        try:
            axis = normalize_axis(int_of(self.axis), len(d))
        except ValueError as e:
            raise_verify(self, str(e))
            return
        expect(not is_float_type(self.indices.type), self, "indices must be integers")
        expect_shape(self, "result", shape_of(self.result.type), (*d[:axis], *idx, *d[axis + 1 :]))
        expect_same_elem(self, self.data.type, self.result.type)


@irdl_op_definition
class PadOp(MonetOp):
    """Pad (ONNX Pad) with `pads` in begin..end order over all axes.

    `%y = nn.pad %x {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>, mode = "constant", value = 0.0 : f64} : (tensor<1x3x4x4xf32>) -> tensor<1x3x6x6xf32>`
    """

    name = "nn.pad"
    input = operand_def(TensorType)
    pads = prop_def(DenseArrayBase)
    mode = opt_prop_def(StringAttr)
    value = opt_prop_def(FloatAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = operands_format("input")

    def verify_semantics(self) -> None:
        x = shape_of(self.input.type)
        pads = ints_of(self.pads)
        expect(len(pads) == 2 * len(x), self, f"pads needs {2 * len(x)} entries")
        expect(str_of(self.mode, "constant") in ("constant", "reflect", "edge", "wrap"), self,
               "mode must be constant, reflect, edge or wrap")
        want = tuple(d + pads[i] + pads[len(x) + i] for i, d in enumerate(x))
        expect_shape(self, "result", shape_of(self.result.type), want)


@irdl_op_definition
class DropoutOp(MonetOp):
    """Dropout in training mode (ONNX Dropout): y = x * mask / (1 - ratio), mask ~ Bernoulli.

    `%y, %mask = nn.dropout %x {ratio = 0.1 : f64, seed = 0 : i64} : (tensor<1x128x256xf32>) -> (tensor<1x128x256xf32>, tensor<1x128x256xi1>)`
    """

    name = "nn.dropout"
    input = operand_def(TensorType)
    ratio = opt_prop_def(FloatAttr)
    seed = opt_prop_def(IntegerAttr)
    result = result_def(TensorType)
    mask = result_def(TensorType)
    assembly_format = operands_format("input")

    def verify_semantics(self) -> None:
        x = shape_of(self.input.type)
        expect_shape(self, "result", shape_of(self.result.type), x)
        expect_shape(self, "mask", shape_of(self.mask.type), x)
        expect(elem_of(self.mask.type) == i1, self, "mask must be a tensor of i1")
        expect(0.0 <= float_of(self.ratio, 0.5) < 1.0, self, "ratio must be in [0, 1)")


@irdl_attr_definition
class TensorDataAttr(ParametrizedAttribute):
    """Raw little-endian bytes of a constant tensor, printed as hex:
    `#nn.data<tensor<2xf32>, "0x0000803F000080FF">`.

    Used instead of a builtin `dense` attribute for large constants (printing and parsing a
    hex string is fast) and for floats that are not finite (xDSL's generic printer writes them
    in a form its parser reads back as integers).
    """

    name = "nn.data"
    type: TensorType
    data: BytesAttr

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            t = parser.parse_type()
            parser.parse_punctuation(",")
            text = parser.parse_str_literal()
        if not isinstance(t, TensorType) or not text.startswith("0x"):
            parser.raise_error("expected a tensor type and a \"0x...\" hex string")
        return (t, BytesAttr(bytes.fromhex(text[2:])))

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_attribute(self.type)
            printer.print_string(f', "0x{self.data.data.hex().upper()}"')


@irdl_op_definition
class ConstantOp(MonetOp):
    """A constant tensor that is not a parameter: a scale, a mask, position indices.

    `%c = nn.constant dense<1.250000e-01> : tensor<f32> {node = "/attn/Constant_10"}`

    Large constants, and constants holding infinities or NaNs, are held as `#nn.data` and print
    their bytes as a hex string (`dense<"0x000080FF"> : tensor<f32>`), which re-parses exactly.
    """

    name = "nn.constant"
    value = prop_def(base(DenseIntOrFPElementsAttr) | base(TensorDataAttr))
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def verify_semantics(self) -> None:
        expect(self.value.type == self.result.type, self,
               f"value type {self.value.type} differs from result type {self.result.type}")
        if isinstance(self.value, TensorDataAttr):
            want = tensor_storage_bytes(self.value.type)
            expect(len(self.value.data.data) == want, self,
                   f"value holds {len(self.value.data.data)} bytes, {self.value.type} needs {want}")

    def raw_bytes(self) -> bytes:
        return self.value.data.data

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        if isinstance(self.value, TensorDataAttr):
            printer.print_string(f'dense<"0x{self.value.data.data.hex().upper()}"> : ')
            printer.print_attribute(self.value.type)
        else:
            printer.print_attribute(self.value)
        others = {k: v for k, v in self.properties.items() if k != "value"}
        others.update(self.attributes)
        if others:
            printer.print_string(" ")
            printer.print_attr_dict(others)

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        value = parser.parse_attribute()
        if not isinstance(value, DenseIntOrFPElementsAttr | TensorDataAttr):
            parser.raise_error("nn.constant expects a dense elements attribute")
        extra = parser.parse_optional_attr_dict()
        props: dict[str, Attribute] = {"value": constant_data(value.type, value.data.data)}
        attrs: dict[str, Attribute] = {}
        for key, attr_value in extra.items():
            (props if key in ("node", "phase") else attrs)[key] = attr_value
        return cls.create(properties=props, attributes=attrs, result_types=[value.type])


CONSTANT_HEX_ABOVE = 16


def constant_data(t: TensorType, raw: bytes) -> DenseIntOrFPElementsAttr | TensorDataAttr:
    """The value attribute for a constant: readable `dense` when small and finite, else hex data."""
    elem = t.get_element_type()
    count = num_elements(t.get_shape())
    if count <= CONSTANT_HEX_ABOVE and len(raw) == tensor_storage_bytes(t):
        dense = DenseIntOrFPElementsAttr(t, BytesAttr(raw))
        if isinstance(elem, IntegerType) or all(math.isfinite(v) for v in dense.get_values()):
            return dense
    return TensorDataAttr(t, BytesAttr(raw))


def tensor_storage_bytes(t: TensorType) -> int:
    from monet_ir.types import bits_of

    bits = bits_of(t.get_element_type())
    return num_elements(t.get_shape()) * max(bits, 8) // 8


# ----------------------------------------------------------------------------- losses


@irdl_op_definition
class SoftmaxCrossEntropyOp(MonetOp):
    """Softmax cross-entropy of scores [N, C, *D] against integer labels [N, *D]
    (ONNX SoftmaxCrossEntropyLoss); optional class weights [C]; optional log_prob result.

    ```mlir
    %loss = nn.softmax_cross_entropy %logits, %labels {reduction = "mean"}
        : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
    ```
    """

    name = "nn.softmax_cross_entropy"
    scores = operand_def(TensorType)
    labels = operand_def(TensorType)
    weights = opt_operand_def(TensorType)
    reduction = opt_prop_def(StringAttr)
    ignore_index = opt_prop_def(IntegerAttr)
    loss = result_def(TensorType)
    log_prob = var_result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = operands_format("scores", "labels", "weights?")

    def verify_semantics(self) -> None:
        s, lab = shape_of(self.scores.type), shape_of(self.labels.type)
        expect(len(s) >= 2, self, "scores must have rank >= 2")
        expect(lab == (s[0], *s[2:]), self, f"labels shape {list(lab)} does not match scores {list(s)}")
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
    traits = traits_def(Pure())
    assembly_format = operands_format("prediction", "target")

    def verify_semantics(self) -> None:
        p = shape_of(self.prediction.type)
        expect_shape(self, "target", shape_of(self.target.type), p)
        reduction = str_of(self.reduction, "mean")
        expect(reduction in ("mean", "sum", "none"), self, "reduction must be mean, sum or none")
        expect_shape(self, "loss", shape_of(self.loss.type), p if reduction == "none" else ())


NN = Dialect(
    "nn",
    [
        ReluOp, LeakyReluOp, ClipOp, SigmoidOp, HardSigmoidOp, HardSwishOp, TanhOp, ErfOp, GeluOp,
        SqrtOp, NegOp, ExpOp, LogOp, NotOp, SoftmaxOp, LogSoftmaxOp,
        AddOp, SubOp, MulOp, DivOp, PowOp, EqualOp, AndOp, WhereOp, SumOp, CastOp,
        ConvOp, ConvTransposeOp, GemmOp, MatMulOp,
        BatchNormOp, LayerNormOp,
        MaxPoolOp, AvgPoolOp, GlobalAvgPoolOp,
        ReduceSumOp, ReduceMeanOp,
        ReshapeOp, TransposeOp, ExpandOp, ConcatOp, SplitOp, SliceOp, GatherOp, PadOp,
        DropoutOp, ConstantOp,
        SoftmaxCrossEntropyOp, MseLossOp,
    ],
    [TensorDataAttr],
)
