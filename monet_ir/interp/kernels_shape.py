"""Data-movement and reduction reference kernels (ONNX semantics) with backward rules.

These backward rules need only shapes and indices, never tensor values
(training-semantics.md §2.1): Reshape/Flatten/Squeeze/Unsqueeze reshape back,
Transpose applies the inverse permutation, Expand sums over broadcast axes,
Concat and Split are each other's adjoints, Slice and Pad scatter into zeros
(Pad's reflect/edge/wrap modes accumulate mirrored contributions), Gather
scatter-adds (the embedding gradient), ReduceSum/Mean broadcast back.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .kernels_common import normalize_axes, normalize_axis, reduce_to_shape

# This module defines an ONNX `slice` kernel; keep the builtin reachable.
_pyslice = slice

__all__ = [
    "transpose", "transpose_grad", "reshape", "reshape_grad", "flatten",
    "squeeze", "unsqueeze", "expand", "expand_grad", "concat", "concat_grad",
    "split", "split_grad", "slice", "slice_grad", "gather", "gather_grad",
    "pad", "pad_grad", "reduce_sum", "reduce_sum_grad", "reduce_mean",
    "reduce_mean_grad",
    "tile", "topk", "one_hot", "scatter_elements", "gather_elements", "reduce_max", "reduce_min",
    "arg_reduce",
]


# --- pure reshapes -----------------------------------------------------------

def transpose(x, *, perm=None):
    """ONNX Transpose; perm=None reverses the axes."""
    return np.transpose(x, None if perm is None else tuple(int(p) for p in perm))


def transpose_grad(dy, *, perm=None):
    """Transpose backward: transpose by the inverse permutation."""
    dy = np.asarray(dy)
    if perm is None:
        return np.transpose(dy)
    return np.transpose(dy, np.argsort(np.asarray(perm, dtype=np.int64)))


def reshape(x, shape, *, allowzero=0):
    """ONNX Reshape: 0 copies the input extent (unless allowzero), -1 is inferred."""
    x = np.asarray(x)
    shape = [int(s) for s in np.ravel(shape)]
    if not allowzero:
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return x.reshape(shape)


def reshape_grad(dy, x_shape: Sequence[int]):
    """Backward of every pure reshape (Reshape, Flatten, Squeeze, Unsqueeze)."""
    return np.asarray(dy).reshape(tuple(x_shape))


def flatten(x, *, axis=1):
    """ONNX Flatten: 2-D (prod(shape[:axis]), prod(shape[axis:])); axis may be -r..r."""
    x = np.asarray(x)
    axis = int(axis) + (x.ndim if int(axis) < 0 else 0)
    if not 0 <= axis <= x.ndim:
        raise ValueError(f"flatten axis {axis} out of range for rank {x.ndim}")
    return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))


def squeeze(x, axes=None):
    """ONNX Squeeze: drop the given size-1 axes, or all size-1 axes."""
    x = np.asarray(x)
    if axes is None or len(axes) == 0:
        return np.squeeze(x)
    return np.squeeze(x, axis=normalize_axes(axes, x.ndim))


def unsqueeze(x, axes):
    """ONNX Unsqueeze: `axes` index the *output* rank."""
    x = np.asarray(x)
    return np.expand_dims(x, normalize_axes(axes, x.ndim + len(np.ravel(axes))))


def expand(x, shape):
    """ONNX Expand: bidirectional broadcast of x with `shape` (returns a fresh array)."""
    x = np.asarray(x)
    out = np.broadcast_shapes(x.shape, tuple(int(s) for s in np.ravel(shape)))
    return np.array(np.broadcast_to(x, out))


def expand_grad(dy, x_shape: Sequence[int]):
    """Expand backward: dY summed down to the input shape."""
    return reduce_to_shape(dy, x_shape)


# --- concat / split -------------------------------------------------------------

def concat(xs: Sequence[np.ndarray], *, axis):
    """ONNX Concat of a sequence of tensors along `axis` (may be negative)."""
    return np.concatenate([np.asarray(x) for x in xs], axis=int(axis))


def concat_grad(dy, shapes: Sequence[Sequence[int]], *, axis):
    """Concat backward -> list of dY pieces, one per input shape (a Split)."""
    dy = np.asarray(dy)
    ax = normalize_axis(axis, dy.ndim)
    cuts = np.cumsum([s[ax] for s in shapes])[:-1]
    return np.split(dy, cuts, axis=ax)


def split(x, split=None, *, axis=0, num_outputs=None):  # noqa: A002 - ONNX input name
    """ONNX Split (opset 18) -> list.

    Sizes from `split`, else `num_outputs` chunks of ceil(n/num_outputs)
    with a smaller last chunk.
    """
    x = np.asarray(x)
    ax = normalize_axis(axis, x.ndim)
    n = x.shape[ax]
    if split is not None and len(split):
        sizes = [int(s) for s in np.ravel(split)]
        if sum(sizes) != n:
            raise ValueError(f"split sizes {sizes} do not sum to {n}")
    elif num_outputs:
        chunk = -(-n // int(num_outputs))
        sizes = [min(chunk, n - i * chunk) for i in range(int(num_outputs))]
    else:
        raise ValueError("Split needs `split` sizes or `num_outputs`")
    return np.split(x, np.cumsum(sizes)[:-1], axis=ax)


def split_grad(dys: Sequence[np.ndarray], *, axis):
    """Split backward: concatenate the output gradients (caller passes zeros for unused outputs)."""
    return np.concatenate([np.asarray(d) for d in dys], axis=int(axis))


# --- slice / gather ----------------------------------------------------------

def _slices(ndim, starts, ends, axes, steps):
    starts = [int(s) for s in np.ravel(starts)]
    ends = [int(e) for e in np.ravel(ends)]
    axes = list(range(len(starts))) if axes is None or len(axes) == 0 \
        else [normalize_axis(a, ndim) for a in np.ravel(axes)]
    steps = [1] * len(starts) if steps is None or len(steps) == 0 \
        else [int(s) for s in np.ravel(steps)]
    idx = [_pyslice(None)] * ndim
    # Python slice normalisation (negative += dim, then clamping, -1 as "before 0"
    # for negative steps) is exactly ONNX Slice's clamping rule.
    for s, e, a, st in zip(starts, ends, axes, steps):
        if st == 0:
            raise ValueError("Slice step must be non-zero")
        idx[a] = _pyslice(s, e, st)
    return tuple(idx)


def slice(x, starts, ends, axes=None, steps=None):  # noqa: A001 - ONNX op name
    """ONNX Slice (opset >= 10: starts/ends/axes/steps as inputs)."""
    x = np.asarray(x)
    return x[_slices(x.ndim, starts, ends, axes, steps)].copy()


def slice_grad(dy, x_shape: Sequence[int], starts, ends, axes=None, steps=None):
    """Slice backward (ORT SliceGrad): dY written into zeros of the input shape."""
    dy = np.asarray(dy)
    out = np.zeros(tuple(x_shape), dtype=dy.dtype)
    out[_slices(len(x_shape), starts, ends, axes, steps)] = dy
    return out


def gather(x, indices, *, axis=0):
    """ONNX Gather (negative indices count from the end)."""
    x = np.asarray(x)
    return np.take(x, np.asarray(indices, dtype=np.int64), axis=normalize_axis(axis, x.ndim))


def gather_grad(dy, indices, x_shape: Sequence[int], *, axis=0):
    """Gather backward (ORT GatherGrad, embedding backward): scatter-add of dY.

    Repeated indices accumulate; the result has the input shape.
    """
    dy = np.asarray(dy)
    x_shape = tuple(x_shape)
    ax = normalize_axis(axis, len(x_shape))
    n = x_shape[ax]
    idx = np.asarray(indices, dtype=np.int64).ravel() % n
    pre, post = math.prod(x_shape[:ax]), math.prod(x_shape[ax + 1:])
    out = np.zeros((pre, n, post), dtype=dy.dtype)
    np.add.at(out, (_pyslice(None), idx), dy.reshape(pre, idx.size, post))
    return out.reshape(x_shape)


# --- pad --------------------------------------------------------------------------

def _pad_source(n: int, before: int, after: int, mode: str) -> np.ndarray:
    """Input index feeding each output position along one axis (-1 = constant fill).

    Negative pads crop.  reflect mirrors without repeating the edge, periodic
    for pads longer than the axis (as numpy.pad); wrap is periodic.
    """
    pos = np.arange(-before, n + after)
    if mode == "constant":
        return np.where((pos >= 0) & (pos < n), pos, -1)
    if mode == "edge":
        return np.clip(pos, 0, n - 1)
    if mode == "wrap":
        return np.mod(pos, n)
    if mode == "reflect":
        if n == 1:
            return np.zeros_like(pos)
        period = 2 * (n - 1)
        m = np.mod(pos, period)
        return np.where(m < n, m, period - m)
    raise ValueError(f"unknown pad mode {mode!r}")


def _pad_plan(ndim, pads, axes):
    pads = [int(p) for p in np.ravel(pads)]
    axes = list(range(ndim)) if axes is None or len(axes) == 0 \
        else [normalize_axis(a, ndim) for a in np.ravel(axes)]
    k = len(axes)
    if len(pads) != 2 * k:
        raise ValueError(f"pads has {len(pads)} entries, expected {2 * k}")
    return [(a, pads[i], pads[k + i]) for i, a in enumerate(axes)]


def _mode(mode):
    return mode.decode() if isinstance(mode, bytes) else mode


def pad(x, pads, constant_value=None, axes=None, *, mode="constant"):
    """ONNX Pad (opset 18/19): pads = [begin per axis..., end per axis...] for `axes`."""
    x = np.asarray(x)
    mode = _mode(mode)
    value = 0 if constant_value is None else np.asarray(constant_value).reshape(())
    y = x
    for ax, b, e in _pad_plan(x.ndim, pads, axes):
        if b == 0 and e == 0:
            continue
        src = _pad_source(x.shape[ax], b, e, mode)
        y = np.take(y, np.maximum(src, 0), axis=ax)
        if mode == "constant":
            fill = [_pyslice(None)] * y.ndim
            fill[ax] = src < 0
            y[tuple(fill)] = value
    return y if y is not x else x.copy()


def pad_grad(dy, x_shape: Sequence[int], pads, axes=None, *, mode="constant"):
    """Pad backward: each output position's gradient added to the input element it copies."""
    g = np.asarray(dy)
    mode = _mode(mode)
    x_shape = tuple(x_shape)
    for ax, b, e in reversed(_pad_plan(len(x_shape), pads, axes)):
        if b == 0 and e == 0:
            continue
        n = x_shape[ax]
        src = _pad_source(n, b, e, mode)
        keep = src >= 0
        moved = np.moveaxis(g, ax, 0)
        acc = np.zeros((n,) + moved.shape[1:], dtype=g.dtype)
        np.add.at(acc, src[keep], moved[keep])
        g = np.moveaxis(acc, 0, ax)
    return np.ascontiguousarray(g)


# --- reductions ------------------------------------------------------------------

def _reduce_axes(ndim, axes, noop_with_empty_axes):
    """Axes to reduce: () means identity (empty axes with noop_with_empty_axes=1)."""
    if axes is None or len(np.ravel(axes)) == 0:
        return () if noop_with_empty_axes else tuple(range(ndim))
    return normalize_axes(axes, ndim)


def reduce_sum(x, axes=None, *, keepdims=1, noop_with_empty_axes=0):
    """ONNX ReduceSum (opset 13: axes as input)."""
    x = np.asarray(x)
    ax = _reduce_axes(x.ndim, axes, noop_with_empty_axes)
    return x.copy() if not ax else x.sum(axis=ax, keepdims=bool(keepdims))


def reduce_mean(x, axes=None, *, keepdims=1, noop_with_empty_axes=0):
    """ONNX ReduceMean (opset 18: axes as input)."""
    x = np.asarray(x)
    ax = _reduce_axes(x.ndim, axes, noop_with_empty_axes)
    return x.copy() if not ax else x.mean(axis=ax, keepdims=bool(keepdims))


def reduce_sum_grad(dy, x_shape: Sequence[int], axes=None, *, keepdims=1,
                    noop_with_empty_axes=0):
    """ReduceSum backward: dY (re-expanded if keepdims=0) broadcast to the input shape."""
    dy = np.asarray(dy)
    x_shape = tuple(x_shape)
    ax = _reduce_axes(len(x_shape), axes, noop_with_empty_axes)
    if not ax:
        return dy.reshape(x_shape).copy()
    if not keepdims:
        dy = np.expand_dims(dy, ax)
    return np.array(np.broadcast_to(dy, x_shape))


def reduce_mean_grad(dy, x_shape: Sequence[int], axes=None, *, keepdims=1,
                     noop_with_empty_axes=0):
    """ReduceMean backward: ReduceSum's gradient divided by the reduced element count."""
    x_shape = tuple(x_shape)
    ax = _reduce_axes(len(x_shape), axes, noop_with_empty_axes)
    g = reduce_sum_grad(dy, x_shape, axes, keepdims=keepdims,
                        noop_with_empty_axes=noop_with_empty_axes)
    count = math.prod(x_shape[a] for a in ax) if ax else 1
    return (g / count).astype(g.dtype, copy=False) if count != 1 else g


def tile(x, repeats):
    """ONNX Tile."""
    return np.tile(np.asarray(x), [int(r) for r in repeats])


def topk(x, k, *, axis=-1, largest=1):
    """ONNX TopK (sorted; ties keep the lower index first, as ONNX specifies): (values, indices)."""
    x = np.asarray(x)
    axis %= x.ndim
    keys = -x if largest else x
    order = np.argsort(keys, axis=axis, kind="stable")
    indices = np.take(order, np.arange(int(k)), axis=axis).astype(np.int64)
    return np.take_along_axis(x, indices, axis=axis), indices


def one_hot(indices, depth, *, axis=-1, off_value=0.0, on_value=1.0, dtype=np.float32):
    """ONNX OneHot: `on_value` at each index along a new axis of `depth` (negative indices count
    from the end; indices out of range give a row of `off_value`)."""
    indices = np.asarray(indices).astype(np.int64)
    indices = np.where(indices < 0, indices + depth, indices)
    axis %= indices.ndim + 1
    classes = np.arange(depth).reshape([depth if i == axis else 1 for i in range(indices.ndim + 1)])
    hot = np.expand_dims(indices, axis) == classes
    return np.where(hot, on_value, off_value).astype(dtype)


def _element_positions(indices, data_shape, axis):
    """The full coordinates in data of each element of `indices` along `axis` (ScatterElements
    and GatherElements addressing; negative indices count from the end)."""
    indices = np.asarray(indices).astype(np.int64)
    axis %= len(data_shape)
    indices = np.where(indices < 0, indices + data_shape[axis], indices)
    grid = list(np.indices(indices.shape, sparse=True))
    grid[axis] = indices
    return tuple(grid)


def gather_elements(data, indices, *, axis=0):
    """ONNX GatherElements."""
    data = np.asarray(data)
    return data[_element_positions(indices, data.shape, axis)]


def scatter_elements(data, indices, updates, *, axis=0, reduction="none"):
    """ONNX ScatterElements (reduction none, add, mul, max, min; repeated indices combine in
    order, the last write wins without a reduction)."""
    out = np.array(data, copy=True)
    at = _element_positions(indices, out.shape, axis)
    updates = np.asarray(updates, dtype=out.dtype)
    if reduction == "none":
        out[at] = updates
    else:
        {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[reduction].at(out, at, updates)
    return out


def reduce_max(x, axes=None, *, keepdims=1, noop_with_empty_axes=0):
    """ONNX ReduceMax."""
    x = np.asarray(x)
    ax = _reduce_axes(x.ndim, axes, noop_with_empty_axes)
    return x.copy() if not ax else x.max(axis=ax, keepdims=bool(keepdims))


def reduce_min(x, axes=None, *, keepdims=1, noop_with_empty_axes=0):
    """ONNX ReduceMin."""
    x = np.asarray(x)
    ax = _reduce_axes(x.ndim, axes, noop_with_empty_axes)
    return x.copy() if not ax else x.min(axis=ax, keepdims=bool(keepdims))


def arg_reduce(x, *, axis=0, keepdims=1, select_last_index=0, largest=True):
    """ONNX ArgMax (largest) / ArgMin as int64."""
    x = np.asarray(x)
    axis %= x.ndim
    pick = np.argmax if largest else np.argmin
    if select_last_index:
        flipped = pick(np.flip(x, axis), axis=axis)
        found = x.shape[axis] - 1 - flipped
    else:
        found = pick(x, axis=axis)
    found = found.astype(np.int64)
    return np.expand_dims(found, axis) if keepdims else found
