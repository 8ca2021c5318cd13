"""Data movement ops of the `nn` dialect: views, transposes, concatenation, slicing, gathering, padding, and dropout's masking."""

from __future__ import annotations

from typing import Any, ClassVar

from xdsl.dialects.builtin import BoolAttr, DenseArrayBase, FloatAttr, IntegerAttr, StringAttr, TensorType, i1, i64
from xdsl.irdl import (
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
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
    float_of,
    int_of,
    ints_of,
    irdl_op_definition,
    is_float_type,
    normalize_axis,
    num_elements,
    operands_format,
    raise_verify,
    shape_of,
    str_of,
)
from dialects.interfaces import CostFree, MovedAxisTiling, OnnxNames, ReductionWork, Tiling, VectorWork
from dialects.sharding import IndexMap, Sharding, joined_axis_map


@irdl_op_definition
class ReshapeOp(MonetOp, MovedAxisTiling):
    """Reshape to the result type, which has the same number of elements. ONNX Reshape, Flatten,
    Squeeze and Unsqueeze all import as this op.

    `%y = nn.reshape %x : (tensor<1x512x1x1xf32>) -> tensor<1x512xf32>`
    """

    name = "nn.reshape"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), CostFree(), OnnxNames("Reshape"))
    assembly_format = operands_format("input")

    def fuses_along(self, axis: int) -> bool:
        a, b = shape_of(self.input.type), shape_of(self.result.type)
        return len(a) > axis and a[: axis + 1] == b[: axis + 1]  # keeps the axes up to the tiled one

    def verify_semantics(self) -> None:
        a, b = shape_of(self.input.type), shape_of(self.result.type)
        expect(num_elements(a) == num_elements(b), self,
               f"cannot reshape {list(a)} ({num_elements(a)} elements) to {list(b)} ({num_elements(b)} elements)")
        expect_same_elem(self, self.input.type, self.result.type)


@irdl_op_definition
class TransposeOp(MonetOp, MovedAxisTiling, Sharding):
    """Permute axes (ONNX Transpose).

    `%y = nn.transpose %x {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x128x4x64xf32>) -> tensor<1x4x128x64xf32>`
    """

    name = "nn.transpose"
    input = operand_def(TensorType)
    perm = prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure(), VectorWork(0, "data_movement"), OnnxNames("Transpose"))
    assembly_format = operands_format("input")

    def source_axis(self, axis: int) -> int | None:
        return ints_of(self.perm)[axis]

    def verify_semantics(self) -> None:
        x = shape_of(self.input.type)
        perm = ints_of(self.perm)
        expect(sorted(perm) == list(range(len(x))), self, f"perm {list(perm)} is not a permutation of {len(x)} axes")
        expect_shape(self, "result", shape_of(self.result.type), tuple(x[p] for p in perm))
        expect_same_elem(self, self.input.type, self.result.type)

    def index_map(self) -> IndexMap | None:
        perm = ints_of(self.perm)
        return IndexMap([list(range(len(perm)))], [list(perm)])

@irdl_op_definition
class ExpandOp(MonetOp, Sharding):
    """Broadcast to the result type (ONNX Expand).

    `%y = nn.expand %x : (tensor<1x8xf32>) -> tensor<4x8xf32>`
    """

    name = "nn.expand"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), VectorWork(0, "data_movement"))
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
class ConcatOp(MonetOp, MovedAxisTiling, Sharding):
    """Concatenate along `axis` (ONNX Concat).

    `%y = nn.concat %a, %b {axis = 1 : i64} : (tensor<1x8xf32>, tensor<1x4xf32>) -> tensor<1x12xf32>`
    """

    name = "nn.concat"
    inputs = var_operand_def(TensorType)
    axis = prop_def(IntegerAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), VectorWork(0, "data_movement"))
    assembly_format = "$inputs " + FUNCTIONAL

    def source_axis(self, axis: int) -> int | None:
        rank = len(shape_of(self.results[0].type))
        return axis if self.axis.value.data % rank != axis else None  # not across the joined axis

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

    def index_map(self) -> IndexMap | None:
        return joined_axis_map(self)

@irdl_op_definition
class SplitOp(MonetOp, MovedAxisTiling, Sharding):
    """Split along `axis` into pieces of the result sizes (ONNX Split).

    `%a, %b = nn.split %x {axis = 2 : i64} : (tensor<1x128x768xf32>) -> (tensor<1x128x256xf32>, tensor<1x128x512xf32>)`
    """

    name = "nn.split"
    input = operand_def(TensorType)
    axis = prop_def(IntegerAttr)
    outputs = var_result_def(TensorType)
    traits = traits_def(Pure(), VectorWork(0, "data_movement"))
    assembly_format = operands_format("input")

    def source_axis(self, axis: int) -> int | None:
        rank = len(shape_of(self.results[0].type))
        return axis if self.axis.value.data % rank != axis else None  # not across the joined axis

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

    def index_map(self) -> IndexMap | None:
        return joined_axis_map(self)

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
    traits = traits_def(Pure(), VectorWork(0, "data_movement"))
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
    traits = traits_def(Pure(), VectorWork(0, "data_movement"), OnnxNames("Gather"))
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
class GatherElementsOp(MonetOp):
    """Pick one element of `data` along `axis` per element of `indices` (ONNX GatherElements,
    PyTorch's `torch.gather`); the result has the indices' shape.

    `%t = nn.gather_elements %buf, %pos {axis = 1 : i64} : (tensor<1x32xi64>, tensor<2x16xi64>) -> tensor<2x16xi64>`
    """

    name = "nn.gather_elements"
    data = operand_def(TensorType)
    indices = operand_def(TensorType)
    axis = opt_prop_def(IntegerAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), VectorWork(0, "data_movement"))
    assembly_format = operands_format("data", "indices")

    def verify_semantics(self) -> None:
        d, idx = shape_of(self.data.type), shape_of(self.indices.type)
        expect(len(d) == len(idx), self, "data and indices must have the same rank")
        try:
            normalize_axis(int_of(self.axis), len(d))
        except ValueError as e:
            raise_verify(self, str(e))
            return
        expect(not is_float_type(self.indices.type), self, "indices must be integers")
        expect_shape(self, "result", shape_of(self.result.type), idx)
        expect_same_elem(self, self.data.type, self.result.type)


@irdl_op_definition
class GatherNDOp(MonetOp):
    """Gather slices of `data` at index tuples (ONNX GatherND, batch_dims 0): the last axis of
    `indices` (length q) indexes the first q axes of data; the result has shape
    indices.shape[:-1] + data.shape[q:]. Swin V2 reads its relative-position bias this way.

    `%b = nn.gather_nd %table, %idx : (tensor<49x4xf32>, tensor<256x1xi64>) -> tensor<256x4xf32>`
    """

    name = "nn.gather_nd"
    data = operand_def(TensorType)
    indices = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), VectorWork(0, "data_movement"))
    assembly_format = operands_format("data", "indices")

    def verify_semantics(self) -> None:
        d, idx = shape_of(self.data.type), shape_of(self.indices.type)
        expect(not is_float_type(self.indices.type), self, "indices must be integers")
        expect(len(idx) >= 1 and 1 <= idx[-1] <= len(d), self, "the last axis of indices must index 1..rank(data) axes")
        if len(idx) >= 1 and 1 <= idx[-1] <= len(d):
            expect_shape(self, "result", shape_of(self.result.type), (*idx[:-1], *d[idx[-1]:]))
        expect_same_elem(self, self.data.type, self.result.type)


@irdl_op_definition
class ScatterNDOp(MonetOp):
    """A copy of `data` with the slices at index tuples replaced by (`reduction = "add"`: added
    to) `updates` (ONNX ScatterND); the inverse addressing of `nn.gather_nd`.

    `%m = nn.scatter_nd %zeros, %idx, %fill : (tensor<8x8xf32>, tensor<4x1xi64>, tensor<4x8xf32>) -> tensor<8x8xf32>`
    """

    name = "nn.scatter_nd"
    data = operand_def(TensorType)
    indices = operand_def(TensorType)
    updates = operand_def(TensorType)
    reduction = opt_prop_def(StringAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), VectorWork(0, "data_movement"))
    assembly_format = operands_format("data", "indices", "updates")

    def verify_semantics(self) -> None:
        d, idx, u = shape_of(self.data.type), shape_of(self.indices.type), shape_of(self.updates.type)
        expect(not is_float_type(self.indices.type), self, "indices must be integers")
        expect(str_of(self.reduction, "none") in ("none", "add"), self, "reduction must be none or add")
        expect(len(idx) >= 1 and 1 <= idx[-1] <= len(d), self, "the last axis of indices must index 1..rank(data) axes")
        if len(idx) >= 1 and 1 <= idx[-1] <= len(d):
            expect_shape(self, "updates", u, (*idx[:-1], *d[idx[-1]:]))
        expect_shape(self, "result", shape_of(self.result.type), d)
        expect_same_elem(self, self.data.type, self.updates.type, self.result.type)


@irdl_op_definition
class ScatterElementsOp(MonetOp):
    """A copy of `data` with the element at each position of `indices` along `axis` replaced by
    (`reduction` add, mul, max, min: combined with) the matching element of `updates` (ONNX
    ScatterElements; PyTorch's `scatter`, `scatter_add`, `index_add`, `scatter_reduce`); the inverse
    addressing of `nn.gather_elements`. Message passing in graph networks and the combine step of
    a mixture of experts.

    `%h = nn.scatter_elements %zeros, %dst, %msg {axis = 0 : i64, reduction = "add"} : (tensor<20x32xf32>, tensor<60x32xi64>, tensor<60x32xf32>) -> tensor<20x32xf32>`
    """

    name = "nn.scatter_elements"
    data = operand_def(TensorType)
    indices = operand_def(TensorType)
    updates = operand_def(TensorType)
    axis = opt_prop_def(IntegerAttr)
    reduction = opt_prop_def(StringAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), VectorWork(0, "data_movement"), OnnxNames("ScatterElements"))
    assembly_format = operands_format("data", "indices", "updates")

    REDUCTIONS: ClassVar[tuple[str, ...]] = ("none", "add", "mul", "max", "min")

    def verify_semantics(self) -> None:
        d, idx, u = shape_of(self.data.type), shape_of(self.indices.type), shape_of(self.updates.type)
        expect(not is_float_type(self.indices.type), self, "indices must be integers")
        expect(str_of(self.reduction, "none") in self.REDUCTIONS, self,
               f"reduction must be one of {', '.join(self.REDUCTIONS)}")
        expect(len(d) == len(idx), self, "data and indices must have the same rank")
        expect_shape(self, "updates", u, idx)
        try:
            normalize_axis(int_of(self.axis), len(d))
        except ValueError as e:
            raise_verify(self, str(e))
        expect_shape(self, "result", shape_of(self.result.type), d)
        expect_same_elem(self, self.data.type, self.updates.type, self.result.type)


@irdl_op_definition
class TileOp(MonetOp):
    """Repeat the input `repeats[i]` times along each axis (ONNX Tile).

    `%t = nn.tile %x {repeats = array<i64: 1, 4, 1>} : (tensor<2x8x16xf32>) -> tensor<2x32x16xf32>`
    """

    name = "nn.tile"
    input = operand_def(TensorType)
    repeats = prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure(), VectorWork(0, "data_movement"), OnnxNames("Tile"))
    assembly_format = operands_format("input")

    def verify_semantics(self) -> None:
        x, repeats = shape_of(self.input.type), ints_of(self.repeats)
        expect(len(repeats) == len(x), self, f"repeats needs {len(x)} entries")
        expect(all(r >= 0 for r in repeats), self, "repeats must be non-negative")
        expect_shape(self, "result", shape_of(self.result.type), tuple(d * r for d, r in zip(x, repeats)))
        expect_same_elem(self, self.input.type, self.result.type)


@irdl_op_definition
class TopKOp(MonetOp):
    """The `k` largest (`largest = false`: smallest) elements along `axis` and their indices,
    sorted (ONNX TopK; a mixture of experts' routing). The values' gradient goes back to the
    positions they were taken from; the indices have none.

    `%w, %e = nn.topk %p {k = 2 : i64, axis = -1 : i64} : (tensor<16x8xf32>) -> (tensor<16x2xf32>, tensor<16x2xi64>)`
    """

    name = "nn.topk"
    input = operand_def(TensorType)
    k = prop_def(IntegerAttr)
    axis = opt_prop_def(IntegerAttr)
    largest = opt_prop_def(BoolAttr)
    values = result_def(TensorType)
    indices = result_def(TensorType)
    # a top-k keeps a running list of k per row: about log2(k) + 1 compares per element read
    traits = traits_def(Pure(), ReductionWork(3), OnnxNames("TopK"))
    assembly_format = operands_format("input")

    def verify_semantics(self) -> None:
        x = list(shape_of(self.input.type))
        try:
            axis = normalize_axis(int_of(self.axis, -1), len(x))
        except ValueError as e:
            raise_verify(self, str(e))
            return
        k = int_of(self.k)
        expect(0 <= k <= x[axis], self, f"k = {k} is out of range for an axis of {x[axis]}")
        x[axis] = k
        expect_shape(self, "values", shape_of(self.values.type), x)
        expect_shape(self, "indices", shape_of(self.indices.type), x)
        expect_same_elem(self, self.input.type, self.values.type)
        expect(elem_of(self.indices.type) == i64, self, "indices must be a tensor of i64")


@irdl_op_definition
class OneHotOp(MonetOp):
    """One-hot encoding of integer `indices` (negative ones count from the end) with `depth`
    classes on a new axis `axis`: `on_value` at the index, `off_value` elsewhere (ONNX OneHot,
    values known at import).

    `%m = nn.one_hot %e {depth = 8 : i64, axis = -1 : i64, off_value = 0.0 : f64, on_value = 1.0 : f64} : (tensor<16x2xi64>) -> tensor<16x2x8xi64>`
    """

    name = "nn.one_hot"
    indices = operand_def(TensorType)
    depth = prop_def(IntegerAttr)
    axis = opt_prop_def(IntegerAttr)
    off_value = opt_prop_def(FloatAttr)
    on_value = opt_prop_def(FloatAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), VectorWork(1), OnnxNames("OneHot"))
    assembly_format = operands_format("indices")

    def verify_semantics(self) -> None:
        idx = list(shape_of(self.indices.type))
        expect(not is_float_type(self.indices.type), self, "indices must be integers")
        depth = int_of(self.depth)
        expect(depth >= 1, self, "depth must be positive")
        try:
            axis = normalize_axis(int_of(self.axis, -1), len(idx) + 1)
        except ValueError as e:
            raise_verify(self, str(e))
            return
        expect_shape(self, "result", shape_of(self.result.type), idx[:axis] + [depth] + idx[axis:])


@irdl_op_definition
class NonZeroOp(MonetOp):
    """The coordinates of the non-zero (true) elements of `input`, one column each, in row-major
    order (ONNX NonZero): a data-dependent count, which the result type bounds statically (the
    importer's capacity bound, `monet_ir.frontend.routing`). Columns past the true elements repeat
    the last true element's coordinates (zeros when none is true); true elements past the bound
    are dropped, as a capacity-bounded mixture of experts drops the tokens over an expert's
    capacity.

    `%c = nn.nonzero %mask : (tensor<2x16xi1>) -> tensor<2x8xi64>`
    """

    name = "nn.nonzero"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), ReductionWork(2), OnnxNames("NonZero"))
    assembly_format = operands_format("input")

    def verify_semantics(self) -> None:
        x, y = shape_of(self.input.type), shape_of(self.result.type)
        expect(len(y) == 2 and y[0] == len(x), self, f"result must have shape [{len(x)}, bound]")
        if len(y) == 2:
            expect(y[1] <= num_elements(x), self, f"the bound {y[1]} exceeds the input's {num_elements(x)} elements")
        expect(elem_of(self.result.type) == i64, self, "result must be a tensor of i64")

    @staticmethod
    def coordinates(x: Any, bound: int) -> Any:
        """The op's semantics on a numpy array: the first `bound` true coordinates of `x` in
        row-major order, missing columns repeating the last true one (zeros when none is)."""
        import numpy as np

        found = np.array(np.nonzero(np.asarray(x)), dtype=np.int64).reshape(np.ndim(x), -1)
        if found.shape[1] >= bound:
            return found[:, :bound]
        fill = found[:, -1:] if found.shape[1] else np.zeros((np.ndim(x), 1), np.int64)
        return np.concatenate([found, np.repeat(fill, bound - found.shape[1], axis=1)], axis=1)


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
    traits = traits_def(Pure(), VectorWork(0, "data_movement"))
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
class DropoutOp(MonetOp, Tiling, Sharding):
    """Dropout in training mode (ONNX Dropout): y = x * mask / (1 - ratio), mask ~ Bernoulli.

    `%y, %mask = nn.dropout %x {ratio = 0.1 : f64, seed = 0 : i64} : (tensor<1x128x256xf32>) -> (tensor<1x128x256xf32>, tensor<1x128x256xi1>)`
    """

    name = "nn.dropout"
    traits = traits_def(VectorWork(3))
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


RESIZE_MODES = ("nearest", "linear", "cubic")
RESIZE_COORDINATES = ("half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners")
RESIZE_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def verify_resize_options(op: MonetOp) -> None:
    """The options nn.resize and grad.resize share (ONNX Resize's attributes and defaults)."""
    mode = str_of(op.mode)
    expect(mode in RESIZE_MODES, op, f"mode must be one of {', '.join(RESIZE_MODES)}, not '{mode}'")
    coords = str_of(op.coordinate_transformation_mode, "half_pixel")
    expect(coords in RESIZE_COORDINATES, op,
           f"coordinate_transformation_mode must be one of {', '.join(RESIZE_COORDINATES)}, not '{coords}'")
    nearest = str_of(op.nearest_mode, "round_prefer_floor")
    expect(nearest in RESIZE_NEAREST, op, f"nearest_mode must be one of {', '.join(RESIZE_NEAREST)}, not '{nearest}'")
    scales = op.scale_factors()
    expect(all(s > 0 for s in scales), op, "scales must be positive")


class ResizeOptions:
    """The optional properties nn.resize and grad.resize share beyond mode and coordinates."""

    cubic_coeff_a = opt_prop_def(FloatAttr)
    exclude_outside = opt_prop_def(BoolAttr)
    scales = opt_prop_def(DenseArrayBase)

    def scale_factors(self) -> tuple[float, ...]:
        """The per-axis scales the coordinates are mapped with when they are not output/input
        (ONNX Resize given scales that do not give whole sizes); () otherwise."""
        return tuple(float(v) for v in self.scales.get_values()) if self.scales is not None else ()


@irdl_op_definition
class ResizeOp(MonetOp, ResizeOptions):
    """Resize every axis to the result's size by nearest-neighbour, (multi-)linear or cubic
    interpolation (ONNX Resize; PyTorch's `interpolate`/`Upsample`): output coordinate o maps
    to input coordinate x by `coordinate_transformation_mode` with scale out/in (or `scales`,
    f64 per axis, when the file gives scales that are not out/in), then takes the nearest input
    (`nearest_mode`), interpolates between the two around x, clamped to the input, or applies
    the cubic kernel of `cubic_coeff_a` (default -0.75) to the four around x (edge values
    repeated; `exclude_outside` drops the outside ones and renormalizes).

    `%u = nn.resize %x {mode = "linear", coordinate_transformation_mode = "half_pixel"} : (tensor<2x8x4x4xf32>) -> tensor<2x8x16x16xf32>`
    """

    name = "nn.resize"
    input = operand_def(TensorType)
    mode = prop_def(StringAttr)
    coordinate_transformation_mode = opt_prop_def(StringAttr)
    nearest_mode = opt_prop_def(StringAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), VectorWork(3))
    assembly_format = operands_format("input")

    def verify_semantics(self) -> None:
        verify_resize_options(self)
        x, y = shape_of(self.input.type), shape_of(self.result.type)
        expect(len(x) == len(y), self, f"result rank {len(y)} differs from input rank {len(x)}")
        expect(all(d > 0 for d in y), self, "result sizes must be positive")
        expect_same_elem(self, self.input.type, self.result.type)
        expect_float(self, "input", self.input.type)
