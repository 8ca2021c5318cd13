"""Pooling and reduction ops of the `nn` dialect: max, average and global average pooling, `reduce_sum`, `reduce_mean`,
`reduce_max`, `reduce_min`, `argmax`, `argmin`, `cumsum`."""

from __future__ import annotations

from xdsl.dialects.builtin import BoolAttr, DenseArrayBase, IntegerAttr, TensorType, i64
from xdsl.irdl import operand_def, opt_prop_def, prop_def, result_def, traits_def
from xdsl.traits import Pure

from dialects.base import (
    MonetOp,
    bool_of,
    elem_of,
    expect,
    expect_same_elem,
    expect_shape,
    int_of,
    ints_of,
    irdl_op_definition,
    normalize_axis,
    operands_format,
    pool_output_shape,
    raise_verify,
    reduce_shape,
    shape_of,
)
from dialects.interfaces import OnnxNames, PoolWork, ReductionWork, VectorWork, WindowTiling
from dialects.sharding import IndexMap, Sharding, pool_map


class PoolOp(MonetOp, WindowTiling, Sharding):
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

    def window_rows(self) -> tuple[int, int, int, int]:
        kernel, strides, pads, dilations, _ = self.window()
        return kernel[0], strides[0], pads[0], dilations[0]

    def verify_semantics(self) -> None:
        x = shape_of(self.input.type)
        kernel, strides, pads, dilations, ceil_mode = self.window()
        expect(len(x) == len(kernel) + 2, self, f"kernel_shape needs {len(x) - 2} entries")
        expect(len(strides) == len(kernel) and len(dilations) == len(kernel)
               and len(pads) == 2 * len(kernel), self, "strides/pads/dilations do not match kernel_shape")
        expect_shape(self, "result", shape_of(self.result.type),
                     pool_output_shape(x, kernel, strides, pads, dilations, ceil_mode))

    def index_map(self) -> IndexMap | None:
        return pool_map(self, gradient=False)

@irdl_op_definition
class MaxPoolOp(PoolOp):
    """Max pooling (ONNX MaxPool, first output).

    `%y = nn.max_pool %x {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x64x112x112xf32>) -> tensor<1x64x56x56xf32>`
    """

    name = "nn.max_pool"
    traits = traits_def(PoolWork(1), OnnxNames("MaxPool"))


@irdl_op_definition
class AvgPoolOp(PoolOp):
    """Average pooling (ONNX AveragePool).

    `%y = nn.avg_pool %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x8x8x8xf32>) -> tensor<1x8x4x4xf32>`
    """

    name = "nn.avg_pool"
    traits = traits_def(PoolWork(1), OnnxNames("AveragePool"))
    count_include_pad = opt_prop_def(BoolAttr)


@irdl_op_definition
class GlobalAvgPoolOp(MonetOp, Sharding):
    """Mean over all spatial axes, kept as size 1 (ONNX GlobalAveragePool).

    `%y = nn.global_avg_pool %x : (tensor<1x512x7x7xf32>) -> tensor<1x512x1x1xf32>`
    """

    name = "nn.global_avg_pool"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), PoolWork(1, global_window=True), OnnxNames("GlobalAveragePool"))
    assembly_format = operands_format("input")

    def verify_semantics(self) -> None:
        x = shape_of(self.input.type)
        expect(len(x) >= 3, self, "input must have rank >= 3")
        expect_shape(self, "result", shape_of(self.result.type), (x[0], x[1]) + (1,) * (len(x) - 2))

    def index_map(self) -> IndexMap | None:
        return pool_map(self, gradient=False)

# ----------------------------------------------------------------------------- reductions


class ReduceOp(MonetOp, Sharding):
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

    def index_map(self) -> IndexMap | None:
        # linear: a split reduced axis gives a partial sum
        rank = len(shape_of(self.input.type))
        reduced = set(self.reduced_axes())
        if bool_of(self.keepdims, True):
            out = [None if i in reduced else i for i in range(rank)]
        else:
            out = [i for i in range(rank) if i not in reduced]
        return IndexMap([list(range(rank))], [out])

@irdl_op_definition
class ReduceSumOp(ReduceOp):
    """Sum over `axes` (all when absent); keepdims defaults to true as in ONNX.

    `%s = nn.reduce_sum %x {axes = array<i64: 0>, keepdims = false} : (tensor<4x8xf32>) -> tensor<8xf32>`
    """

    name = "nn.reduce_sum"
    traits = traits_def(ReductionWork(1))


@irdl_op_definition
class ReduceMeanOp(ReduceOp):
    """Mean over `axes` (all when absent).

    `%m = nn.reduce_mean %x {axes = array<i64: -1>} : (tensor<4x8xf32>) -> tensor<4x1xf32>`
    """

    name = "nn.reduce_mean"
    traits = traits_def(ReductionWork(1))


@irdl_op_definition
class ReduceMaxOp(ReduceOp):
    """Maximum over `axes` (all when absent); the gradient goes to the maxima, split evenly
    between ties (PyTorch's `amax`).

    `%m = nn.reduce_max %x {axes = array<i64: 2>, keepdims = false} : (tensor<2x64x128xf32>) -> tensor<2x64xf32>`
    """

    name = "nn.reduce_max"
    traits = traits_def(ReductionWork(1))

    def index_map(self) -> IndexMap | None:
        m = super().index_map()
        m.norm = set(self.reduced_axes())  # a maximum over a split axis is no partial sum
        return m


@irdl_op_definition
class ReduceMinOp(ReduceOp):
    """Minimum over `axes` (all when absent).

    `%m = nn.reduce_min %x {axes = array<i64: -1>} : (tensor<4x8xf32>) -> tensor<4x1xf32>`
    """

    name = "nn.reduce_min"
    traits = traits_def(ReductionWork(1))

    def index_map(self) -> IndexMap | None:
        m = super().index_map()
        m.norm = set(self.reduced_axes())
        return m


class ArgReduceOp(MonetOp):
    """The index of the maximum (minimum) along one axis, as i64: no gradient."""

    input = operand_def(TensorType)
    axis = prop_def(IntegerAttr)
    keepdims = opt_prop_def(BoolAttr)
    select_last_index = opt_prop_def(BoolAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), ReductionWork(2))
    assembly_format = operands_format("input")

    def verify_semantics(self) -> None:
        x = shape_of(self.input.type)
        try:
            want = reduce_shape(x, [int_of(self.axis)], bool_of(self.keepdims, True))
        except ValueError as e:
            raise_verify(self, str(e))
            return
        expect_shape(self, "result", shape_of(self.result.type), want)
        expect(elem_of(self.result.type) == i64, self, "result must be a tensor of i64")


@irdl_op_definition
class ArgMaxOp(ArgReduceOp):
    """Index of the maximum along `axis` (ONNX ArgMax; CLIP pools its text tower at the end
    token found this way).

    `%i = nn.argmax %ids {axis = -1 : i64, keepdims = false} : (tensor<2x16xi64>) -> tensor<2xi64>`
    """

    name = "nn.argmax"


@irdl_op_definition
class ArgMinOp(ArgReduceOp):
    """Index of the minimum along `axis` (ONNX ArgMin).

    `%i = nn.argmin %d {axis = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x1xi64>`
    """

    name = "nn.argmin"


@irdl_op_definition
class CumSumOp(MonetOp):
    """Cumulative sum along `axis` (ONNX CumSum); `exclusive` leaves each element out of its
    own sum, `reverse` sums from the end. Language models build position ids with it.

    `%p = nn.cumsum %m {axis = 1 : i64} : (tensor<2x16xi64>) -> tensor<2x16xi64>`
    """

    name = "nn.cumsum"
    input = operand_def(TensorType)
    axis = prop_def(IntegerAttr)
    exclusive = opt_prop_def(BoolAttr)
    reverse = opt_prop_def(BoolAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), VectorWork(1))
    assembly_format = operands_format("input")

    def verify_semantics(self) -> None:
        x = shape_of(self.input.type)
        expect(-len(x) <= int_of(self.axis) < len(x), self, f"axis {int_of(self.axis)} is out of range for rank {len(x)}")
        expect_shape(self, "result", shape_of(self.result.type), x)
        expect_same_elem(self, self.input.type, self.result.type)
