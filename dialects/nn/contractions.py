"""Contractions of the `nn` dialect: convolution, transposed convolution, `gemm` and `matmul`."""

from __future__ import annotations

from typing import Any, ClassVar

from xdsl.dialects.builtin import BoolAttr, DenseArrayBase, FloatAttr, IntegerAttr, TensorType
from xdsl.irdl import operand_def, opt_operand_def, opt_prop_def, result_def, traits_def
from xdsl.traits import Pure

from dialects.base import (
    MonetOp,
    bool_of,
    broadcast_shapes,
    conv_output_shape,
    conv_transpose_output_shape,
    expect,
    expect_same_elem,
    expect_shape,
    int_of,
    ints_of,
    irdl_op_definition,
    matmul_shape,
    num_elements,
    operands_format,
    raise_verify,
    shape_of,
)
from dialects.interfaces import LoopNestOp, OnnxNames, ProductTiling, WindowTiling, element_bits, matmul_loop_nest, matrix_axes
from dialects.sharding import IndexMap, Sharding, broadcast_onto, conv_maps, matmul_maps


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

    def conv_nest(self, kind: str, x: tuple[int, ...], w: tuple[int, ...], output: str, values: tuple) -> Any:
        """The loop nest of the convolution of input shape `x` by weight shape `w` (the
        forward convolution this op is, or whose gradient it is), `values` in the roles W, I, O
        giving the element widths (`dialects.interfaces.LoopNestOp`)."""
        from monet_ir.cost.conv_nest import conv_loop_nest
        from monet_ir.cost.signature import psum_bits_for

        bits = element_bits(*values)
        strides, pads, dilations, group = self.geometry(len(x) - 2)
        return conv_loop_nest(kind, x, w, strides, pads, dilations, group, output, (*bits, psum_bits_for(max(bits))))

    def conv_macs(self, x: tuple[int, ...], w: tuple[int, ...]) -> int:
        """MACs of the convolution of input shape `x` by weight shape `w`, any spatial rank:
        output elements x (input channels / group) x kernel."""
        strides, pads, dilations, _ = self.geometry(len(x) - 2)
        return num_elements(conv_output_shape(x, w, strides, pads, dilations)) * w[1] * num_elements(w[2:])


@irdl_op_definition
class ConvOp(ConvGeometry, LoopNestOp, WindowTiling, Sharding):
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
    traits = traits_def(Pure(), OnnxNames("Conv"))
    assembly_format = operands_format("input", "weight", "bias?")
    NEST_ROLES: ClassVar[tuple[tuple[str, ...], str]] = (("I", "W", "O"), "O")

    def loop_nest(self) -> Any:
        return self.conv_nest("conv", shape_of(self.input.type), shape_of(self.weight.type), "O", self.nest_values())

    def nest_values(self) -> tuple:
        return self.weight, self.input, self.result

    def reduction_axes(self) -> list[tuple[int, int, int | None]]:
        return [(0, 1, 0), (1, 1, 0)]  # X and W along C

    def direct_macs(self) -> int:
        return self.conv_macs(shape_of(self.input.type), shape_of(self.weight.type))

    def tile_nest(self, sig: Any, rows: int, full: int) -> Any:
        from dataclasses import replace

        return replace(sig, oy=rows)  # tiles are output rows

    def window_rows(self) -> tuple[int, int, int, int]:
        strides, pads, dilations, _ = self.geometry(len(shape_of(self.input.type)) - 2)
        return shape_of(self.weight.type)[2], strides[0], pads[0], dilations[0]

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

    def index_map(self) -> IndexMap | None:
        if int_of(self.group, 1) != 1:
            return None
        x, w, y, window, c, m = conv_maps(len(shape_of(self.input.type)) - 2)
        index = IndexMap([x, w], [y], norm=window, contraction=c)
        if self.bias is not None:
            index.operands.append([m])
            index.additive = (2,)
        return index

@irdl_op_definition
class ConvTransposeOp(ConvGeometry, LoopNestOp):
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
    traits = traits_def(Pure(), OnnxNames("ConvTranspose"))
    assembly_format = operands_format("input", "weight", "bias?")
    NEST_ROLES: ClassVar[tuple[tuple[str, ...], str]] = (("O", "W", "I"), "I")

    def loop_nest(self) -> Any:
        # conv_transpose(x, w) is the input gradient of the convolution of y (the result) with
        # w: that convolution's input is y, its weight w [Cin, Cout/g, ...], its output x
        return self.conv_nest("conv_transpose", shape_of(self.result.type), shape_of(self.weight.type), "I",
                              self.nest_values())

    def nest_values(self) -> tuple:
        return self.weight, self.result, self.input

    def reduction_axes(self) -> list[tuple[int, int, int | None]]:
        return [(0, 1, 0), (1, 0, 1)]  # x [N, C, ...] and w [C, M/g, ...] along C (as grad.conv_input)

    def direct_macs(self) -> int:
        w = shape_of(self.weight.type)
        return num_elements(shape_of(self.input.type)) * w[1] * num_elements(w[2:])

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


class ProductOp(MonetOp, LoopNestOp, ProductTiling, Sharding):
    """A product A B (`nn.gemm`, `nn.matmul`): A in the I role, B in W, the result in O."""

    NEST_ROLES: ClassVar[tuple[tuple[str, ...], str]] = (("I", "W", "O"), "O")
    KIND: ClassVar[str] = "matmul"

    def loop_nest(self) -> Any:
        return matmul_loop_nest(self.KIND, shape_of(self.lhs.type), shape_of(self.rhs.type), bool_of(self.trans_a),
                                bool_of(self.trans_b), "O", element_bits(*self.nest_values()))

    def nest_values(self) -> tuple:
        return self.rhs, self.lhs, self.result

    def reduction_axes(self) -> list[tuple[int, int, int | None]]:
        """A along K (its last axis), B along K (its first matrix axis), swapped by trans_a/b."""
        axes = []
        for index, swapped, reduced_first in ((0, bool_of(self.trans_a), False), (1, bool_of(self.trans_b), True)):
            rank = len(shape_of(self.operands[index].type))
            if rank >= 2:
                first, second = matrix_axes(rank, swapped)
                axes.append((index, first, second) if reduced_first else (index, second, first))
        return axes

    def index_map(self) -> IndexMap | None:
        a, b, y = (tuple(shape_of(v.type)) for v in (self.lhs, self.rhs, self.result))
        if len(a) < 2 or len(b) < 2 or len(y) < 2:
            return None
        am, bm, out, _, _, k = matmul_maps(bool_of(self.trans_a), bool_of(self.trans_b), a, b, y)
        index = IndexMap([am, bm], [out], contraction=k)
        bias = getattr(self, "bias", None)
        if bias is not None:
            index.operands.append(broadcast_onto(tuple(shape_of(bias.type)), y, out))
            index.additive = (2,)
        return index

@irdl_op_definition
class GemmOp(ProductOp):
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
    traits = traits_def(Pure(), OnnxNames("Gemm"))
    assembly_format = operands_format("lhs", "rhs", "bias?")
    KIND: ClassVar[str] = "gemm"

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
class MatMulOp(ProductOp):
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
    traits = traits_def(Pure(), OnnxNames("MatMul"))
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
