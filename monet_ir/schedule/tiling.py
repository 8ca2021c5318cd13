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
whether it can join a stack tiled along `axis`. Each rule is the op's own (its class's `Tiling`
interface, `dialects.interfaces`); these functions only ask it.
"""

from __future__ import annotations

import math
from dataclasses import replace

from xdsl.ir import Operation

from dialects.base import shape_of
from dialects.interfaces import Tiling, elementwise_rows
from monet_ir.cost.signature import LoopNestSig, VectorSig

Rows = tuple[int, int]


def tiled_axes(op: Operation) -> tuple[int, ...]:
    """Axes of the (first) result along which `op` can run as tiles (its `Tiling`; any axis of
    an op that is not `Tiling`, which is never fused)."""
    if not op.results:
        return ()
    return op.tiled_axes() if isinstance(op, Tiling) else tuple(range(len(shape_of(op.results[0].type))))


def fusable(op: Operation, axis: int) -> bool:
    """Whether `op` can join a stack tiled along `axis`."""
    return isinstance(op, Tiling) and axis in op.tiled_axes() and op.fuses_along(axis)


def operand_rows(op: Operation, index: int, axis: int, lo: int, hi: int) -> tuple[int, Rows] | None:
    """(operand axis, rows) of operand `index` that result rows [lo, hi) along `axis` read, or
    None when the tile reads the whole operand."""
    if isinstance(op, Tiling):
        return op.operand_rows(index, axis, lo, hi)
    return elementwise_rows(op, index, axis, lo, hi)


def waits_for_all_rows(op: Operation) -> bool:
    """Whether every tile of `op` needs its whole input computed first (batch statistics)."""
    return isinstance(op, Tiling) and op.waits_for_all_rows()


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
        return op.tile_nest(sig, rows, full)
    scale = rows / full
    return replace(sig, elements=max(1, math.ceil(sig.elements * scale)),
                   bytes_read=math.ceil(sig.bytes_read * scale), bytes_written=math.ceil(sig.bytes_written * scale))


