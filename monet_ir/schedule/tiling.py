"""Row ranges of fused layers: which part of each operand a tile of an op's result needs.

A fused op runs as tiles along one axis of its result (the output rows of a convolution, the
sequence of a transformer layer). `operand_rows(op, i, axis, lo, hi)` says which rows of operand
`i`, along which of its axes, tile rows `[lo, hi)` read:

- convolution and pooling: the input window of those output rows (strides, padding, dilation;
  neighbouring tiles overlap by the halo);
- element-wise ops, dropout, normalizations over other axes, matrix products on their rows:
  the same rows (broadcast operands are read whole);
- in the backward pass, the element-wise gradients (dy and a saved value of the same shape,
  softmax gradients over another axis) and the gradient of a product's left operand (rows of
  dy times the whole right operand): the same rows. Weight, bias and normalization gradients
  reduce over rows and are not tiled;
- reshape, transpose, concat and split that keep the tiled axis: the same rows on the axis it
  moves to;
- `None`: the whole operand (a weight, a bias, a broadcast value).

Batch normalization with batch statistics reads its own rows per tile but waits for the whole
input (`waits_for_all_rows`): the statistics need every row.

`tiled_axes(op)` gives the result axes an op can be tiled along, and `fusable(op, axis)`
whether it can join a stack tiled along `axis`.
"""

from __future__ import annotations

import math
from dataclasses import replace

from xdsl.ir import Operation

from dialects import grad, nn
from dialects.base import bool_of, ints_of, shape_of
from monet_ir.cost.signature import LoopNestSig, VectorSig

Rows = tuple[int, int]

ROW_LOCAL = (nn.UnaryOp, nn.BinaryOp, nn.WhereOp, nn.SumOp, nn.CastOp, nn.DropoutOp)


def tiled_axes(op: Operation) -> tuple[int, ...]:
    """Axes of the (first) result along which `op` can run as tiles."""
    if not op.results:
        return ()
    rank = len(shape_of(op.results[0].type))
    if isinstance(op, nn.ConvOp | nn.MaxPoolOp | nn.AvgPoolOp):
        return (2,) if rank == 4 else ()
    if isinstance(op, nn.MatMulOp | nn.GemmOp | grad.MatMulLhsGradOp):
        return (rank - 2,) if rank >= 2 and not bool_of(op.trans_a) else ()
    if isinstance(op, grad.GradOp) and not isinstance(op, grad.ElementwiseGradOp):
        # the other gradients reduce over rows (weights, biases, normalization statistics)
        # or have results of other shapes
        return ()
    return tuple(range(rank))


def fusable(op: Operation, axis: int) -> bool:
    if isinstance(op, nn.ConstantOp) or axis not in tiled_axes(op):
        return False
    if isinstance(op, nn.ConvOp | nn.MaxPoolOp | nn.AvgPoolOp | nn.MatMulOp | nn.GemmOp | nn.BatchNormOp):
        return True
    if isinstance(op, nn.SoftmaxOp | nn.LogSoftmaxOp | grad.SoftmaxGradOp | grad.LogSoftmaxGradOp):
        return op.axis.value.data % len(shape_of(op.results[0].type)) != axis
    if isinstance(op, grad.ElementwiseGradOp | grad.MatMulLhsGradOp):
        return True
    if isinstance(op, nn.LayerNormOp):
        return axis < op.norm_axis()
    if isinstance(op, nn.ReshapeOp):
        a, b = shape_of(op.input.type), shape_of(op.result.type)
        return len(a) > axis and a[: axis + 1] == b[: axis + 1]
    if isinstance(op, nn.TransposeOp | nn.ConcatOp | nn.SplitOp):
        return _moved_axis(op, axis) is not None
    return isinstance(op, ROW_LOCAL)


def _moved_axis(op: Operation, axis: int) -> int | None:
    """The operand axis a result axis comes from, for ops that move or stack data."""
    if isinstance(op, nn.TransposeOp):
        return ints_of(op.perm)[axis]
    if isinstance(op, nn.ConcatOp | nn.SplitOp):
        rank = len(shape_of(op.results[0].type))
        return axis if op.axis.value.data % rank != axis else None
    return axis


def operand_rows(op: Operation, index: int, axis: int, lo: int, hi: int) -> tuple[int, Rows] | None:
    """(operand axis, rows) of operand `index` that result rows [lo, hi) along `axis` read, or
    None when the tile reads the whole operand."""
    operand = op.operands[index]
    in_shape = shape_of(operand.type)
    out_shape = shape_of(op.results[0].type)
    if isinstance(op, nn.ConvOp | nn.MaxPoolOp | nn.AvgPoolOp):
        if index != 0:
            return None
        if isinstance(op, nn.ConvOp):
            strides, pads, dilations, _ = op.geometry(len(in_shape) - 2)
            kernel = shape_of(op.weight.type)[2]
        else:
            k, strides, pads, dilations, _ = op.window()
            kernel = k[0]
        first = lo * strides[0] - pads[0]
        last = (hi - 1) * strides[0] - pads[0] + (kernel - 1) * dilations[0] + 1
        return 2, (max(first, 0), min(last, in_shape[2]))
    if isinstance(op, nn.MatMulOp | nn.GemmOp | grad.MatMulLhsGradOp):
        # rows of the left operand (for the gradient of a product's left operand: of dy)
        return (len(in_shape) - 2, (lo, hi)) if index == 0 and len(in_shape) >= 2 else None
    if isinstance(op, nn.BatchNormOp):
        # a tile normalizes its own rows; the statistics over every row make it wait for the
        # whole input first (see `waits_for_all_rows`), not read it again per tile
        return (axis, (lo, hi)) if index == 0 else None
    if isinstance(op, nn.LayerNormOp | nn.SoftmaxOp | nn.LogSoftmaxOp):
        return (axis, (lo, hi)) if index == 0 else None
    if isinstance(op, nn.TransposeOp | nn.ConcatOp | nn.SplitOp | nn.ReshapeOp):
        moved = _moved_axis(op, axis)
        return None if moved is None else (moved, (lo, hi))
    # element-wise: operands align from the right; a broadcast axis is read whole
    offset = len(out_shape) - len(in_shape)
    own = axis - offset
    if own < 0 or in_shape[own] != out_shape[axis]:
        return None
    return own, (lo, hi)


def waits_for_all_rows(op: Operation) -> bool:
    """Whether every tile of `op` needs its whole input computed first (batch statistics)."""
    return isinstance(op, nn.BatchNormOp) and bool_of(op.training)


def tile_bounds(size: int, tiles: int) -> list[Rows]:
    """Split `size` rows into `tiles` contiguous ranges (the first ones one row larger)."""
    tiles = max(1, min(tiles, size))
    base, extra = divmod(size, tiles)
    bounds, start = [], 0
    for t in range(tiles):
        rows = base + (1 if t < extra else 0)
        bounds.append((start, start + rows))
        start += rows
    return bounds


def tile_signature(sig: LoopNestSig | VectorSig | None, op: Operation, axis: int, rows: int, full: int):
    """The signature of one tile of `rows` out of `full` result rows."""
    if sig is None or rows == full:
        return sig
    if isinstance(sig, LoopNestSig):
        if isinstance(op, nn.ConvOp):
            return replace(sig, oy=rows)
        return replace(sig, b=max(1, math.ceil(sig.b * rows / full)))
    scale = rows / full
    return replace(sig, elements=max(1, math.ceil(sig.elements * scale)),
                   bytes_read=math.ceil(sig.bytes_read * scale), bytes_written=math.ceil(sig.bytes_written * scale))


