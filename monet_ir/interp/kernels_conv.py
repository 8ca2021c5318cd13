"""N-d convolution and pooling reference kernels (ONNX semantics) and backward rules.

All ops work on (N, C, *spatial) tensors with 1, 2 or 3 (or more) spatial axes.
ONNX `pads` are ordered [begin_0 .. begin_{n-1}, end_0 .. end_{n-1}].

Implementation: `_patches` builds a zero-copy strided view of shape
(N, C, *out, *kernel) over the padded input ("im2col" without the copy), and
`_col2im` is its adjoint (scatter-add of per-window values back to the input
grid).  Every forward and backward rule here is one of those two plus a
grouped matmul, so forward and backward share the exact same geometry:

* conv             = patches(x)  . W
* conv dX          = col2im(dY . W)          (= ConvTranspose of dY)
* conv dW          = dY^T . patches(x)
* conv_transpose   = col2im(X . W)
* conv_transpose dX= patches(dY) . W^T        (= Conv of dY)
* conv_transpose dW= X^T . patches(dY)
* max_pool dX      = scatter-add of dY at the saved argmax indices
* average_pool dX  = col2im(dY / divisor)

Pooling output sizes follow ONNX/PyTorch `ceil_mode` (the last window must
start inside the input or its begin padding).  Note: onnx.reference's pooling
shifts windows when ceil_mode needs >= 2 extra elements (stride >= 3); we
follow the spec/PyTorch/ORT instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

__all__ = [
    "conv", "conv_grad", "conv_grad_input", "conv_grad_weight", "conv_grad_bias",
    "conv_transpose", "conv_transpose_grad", "conv_transpose_grad_input",
    "conv_transpose_grad_weight", "conv_transpose_grad_bias",
    "max_pool", "max_pool_grad", "average_pool", "average_pool_grad",
    "global_average_pool", "global_average_pool_grad",
]


# --- geometry -------------------------------------------------------------

def _ints(v, n: int, default: int) -> tuple[int, ...]:
    if v is None or len(v) == 0:
        return (default,) * n
    if len(v) != n:
        raise ValueError(f"expected {n} values, got {list(v)}")
    return tuple(int(i) for i in v)


def _mode(auto_pad) -> str:
    if isinstance(auto_pad, bytes):
        auto_pad = auto_pad.decode()
    return auto_pad or "NOTSET"


def _resolve_pads(in_sp, kernel, strides, dilations, pads, auto_pad):
    """Explicit (begin, end) pads, resolving ONNX auto_pad.

    SAME_*: output = ceil(in / stride); the odd padding element goes to the
    end for SAME_UPPER and to the beginning for SAME_LOWER.
    """
    n = len(in_sp)
    mode = _mode(auto_pad)
    if mode == "NOTSET":
        p = _ints(pads, 2 * n, 0)
        return p[:n], p[n:]
    if mode == "VALID":
        return (0,) * n, (0,) * n
    if mode not in ("SAME_UPPER", "SAME_LOWER"):
        raise ValueError(f"unknown auto_pad {auto_pad!r}")
    begin, end = [], []
    for i, k, s, d in zip(in_sp, kernel, strides, dilations):
        out = -(-i // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - i)
        b = total // 2 if mode == "SAME_UPPER" else total - total // 2
        begin.append(b)
        end.append(total - b)
    return tuple(begin), tuple(end)


def _out_len(i, k, s, d, pb, pe, ceil_mode) -> int:
    eff = (k - 1) * d + 1
    num = i + pb + pe - eff
    if num < 0:
        raise ValueError(f"window of extent {eff} does not fit input {i} with pads ({pb}, {pe})")
    o = (-(-num // s) if ceil_mode else num // s) + 1
    # ceil_mode must not create a window that starts in the end padding.
    if ceil_mode and (o - 1) * s >= i + pb:
        o -= 1
    return o


def _geometry(x_shape, kernel, strides, pads, dilations, auto_pad, ceil_mode=0):
    """-> (strides, dilations, pads_begin, pads_end, out_spatial) for conv/pool."""
    n = len(x_shape) - 2
    kernel = tuple(int(k) for k in kernel)
    if len(kernel) != n:
        raise ValueError(f"kernel rank {len(kernel)} != spatial rank {n}")
    st = _ints(strides, n, 1)
    dil = _ints(dilations, n, 1)
    pb, pe = _resolve_pads(x_shape[2:], kernel, st, dil, pads, auto_pad)
    out = tuple(_out_len(i, k, s, d, b, e, ceil_mode)
                for i, k, s, d, b, e in zip(x_shape[2:], kernel, st, dil, pb, pe))
    return st, dil, pb, pe, out


def _patches(x, kernel, strides, dilations, pads_begin, out_sp, fill):
    """Read-only view (N, C, *out, *kernel) of x padded with `fill`.

    Only as much end padding as the windows actually reach is added.
    """
    in_sp = x.shape[2:]
    pe = [max(0, (o - 1) * s + (k - 1) * d + 1 - i - b)
          for i, k, s, d, b, o in zip(in_sp, kernel, strides, dilations, pads_begin, out_sp)]
    if any(pads_begin) or any(pe):
        x = np.pad(x, [(0, 0), (0, 0)] + list(zip(pads_begin, pe)),
                   mode="constant", constant_values=fill)
    n = len(kernel)
    sp_strides = x.strides[2:]
    view_strides = (x.strides[:2]
                    + tuple(sp_strides[j] * strides[j] for j in range(n))
                    + tuple(sp_strides[j] * dilations[j] for j in range(n)))
    return as_strided(x, x.shape[:2] + tuple(out_sp) + tuple(kernel), view_strides,
                      writeable=False)


def _col2im(cols, padded_sp, strides, dilations):
    """Adjoint of `_patches` (before cropping): scatter-add windows into (N, C, *padded_sp)."""
    n = len(strides)
    out_sp = cols.shape[2:2 + n]
    kernel = cols.shape[2 + n:]
    buf = np.zeros(cols.shape[:2] + tuple(padded_sp), dtype=cols.dtype)
    # One strided slice-add per kernel offset: windows of a single offset never
    # overlap each other, so plain += is exact (no np.add.at needed).
    for kidx in np.ndindex(*kernel):
        region = tuple(slice(k * d, k * d + s * (o - 1) + 1, s)
                       for k, d, s, o in zip(kidx, dilations, strides, out_sp))
        buf[(slice(None), slice(None)) + region] += cols[(Ellipsis,) + kidx]
    return buf


def _crop(buf, pads_begin, in_sp):
    return buf[(slice(None), slice(None))
               + tuple(slice(b, b + i) for b, i in zip(pads_begin, in_sp))]


def _col2im_cropped(cols, in_sp, strides, dilations, pads_begin):
    """col2im into an input-sized grid: pads cut away, overhang beyond them ignored."""
    n = len(strides)
    out_sp = cols.shape[2:2 + n]
    kernel = cols.shape[2 + n:]
    padded = tuple(max(i + b, (o - 1) * s + (k - 1) * d + 1)
                   for i, b, o, s, k, d in zip(in_sp, pads_begin, out_sp, strides, kernel, dilations))
    return np.ascontiguousarray(_crop(_col2im(cols, padded, strides, dilations), pads_begin, in_sp))


def _group_cols(cols, group):
    """(N, C, *O, *K) -> (G, N*prod(O), (C/G)*prod(K)) for per-group matmuls."""
    n = (cols.ndim - 2) // 2
    N, C = cols.shape[:2]
    O, K = cols.shape[2:2 + n], cols.shape[2 + n:]
    c = cols.reshape((N, group, C // group) + O + K)
    perm = (1, 0) + tuple(range(3, 3 + n)) + (2,) + tuple(range(3 + n, 3 + 2 * n))
    return c.transpose(perm).reshape(group, N * math.prod(O), (C // group) * math.prod(K))


def _ungroup_cols(c, N, C, O, K, group):
    """Inverse of `_group_cols`: (G, N*prod(O), (C/G)*prod(K)) -> (N, C, *O, *K)."""
    n = len(O)
    c = c.reshape((group, N) + tuple(O) + (C // group,) + tuple(K))
    perm = (1, 0, 2 + n) + tuple(range(2, 2 + n)) + tuple(range(3 + n, 3 + 2 * n))
    return c.transpose(perm).reshape((N, C) + tuple(O) + tuple(K))


def _group_channels(t, group):
    """(N, C, *S) -> (G, N*prod(S), C/G): channels-last rows for per-group matmuls."""
    N, C = t.shape[:2]
    S = t.shape[2:]
    n = len(S)
    g = t.reshape((N, group, C // group) + S)
    perm = (1, 0) + tuple(range(3, 3 + n)) + (2,)
    return g.transpose(perm).reshape(group, N * math.prod(S), C // group)


def _ungroup_channels(g, N, S, group):
    """Inverse of `_group_channels`: (G, N*prod(S), Cg) -> (N, G*Cg, *S)."""
    n = len(S)
    cg = g.shape[-1]
    g = g.reshape((group, N) + tuple(S) + (cg,))
    perm = (1, 0, 2 + n) + tuple(range(2, 2 + n))
    return np.ascontiguousarray(g.transpose(perm).reshape((N, group * cg) + tuple(S)))


def _bias_shape(b, n):
    return np.asarray(b).reshape((1, -1) + (1,) * n)


def _check_kernel(w_shape, kernel_shape):
    if kernel_shape is not None and len(kernel_shape) and tuple(kernel_shape) != tuple(w_shape[2:]):
        raise ValueError(f"kernel_shape {list(kernel_shape)} != weight spatial shape {w_shape[2:]}")


# --- Conv -----------------------------------------------------------------

def conv(x, w, b=None, *, strides=None, pads=None, dilations=None, group=1,
         auto_pad="NOTSET", kernel_shape=None):
    """ONNX Conv: x (N, C, *S), w (M, C/group, *K), b (M,) -> y (N, M, *O)."""
    x, w = np.asarray(x), np.asarray(w)
    _check_kernel(w.shape, kernel_shape)
    st, dil, pb, _, out = _geometry(x.shape, w.shape[2:], strides, pads, dilations, auto_pad)
    cols = _group_cols(_patches(x, w.shape[2:], st, dil, pb, out, 0), group)
    wm = w.reshape(group, w.shape[0] // group, -1)
    y = _ungroup_channels(cols @ wm.transpose(0, 2, 1), x.shape[0], out, group)
    if b is not None:
        y += _bias_shape(b, len(out)).astype(y.dtype, copy=False)
    return y


def conv_grad_input(dy, w, x_shape, *, strides=None, pads=None, dilations=None, group=1,
                    auto_pad="NOTSET"):
    """Conv backward w.r.t. X (saved: W, shape of X): col2im(dY . W), i.e. a ConvTranspose."""
    dy, w = np.asarray(dy), np.asarray(w)
    x_shape = tuple(x_shape)
    st, dil, pb, _, out = _geometry(x_shape, w.shape[2:], strides, pads, dilations, auto_pad)
    wm = w.reshape(group, w.shape[0] // group, -1)
    dcols = _group_channels(dy, group) @ wm
    cols = _ungroup_cols(dcols, x_shape[0], x_shape[1], out, w.shape[2:], group)
    return _col2im_cropped(cols, x_shape[2:], st, dil, pb)


def conv_grad_weight(dy, x, w_shape, *, strides=None, pads=None, dilations=None, group=1,
                     auto_pad="NOTSET"):
    """Conv backward w.r.t. W (saved: X): per group dY^T . im2col(X), shape w_shape."""
    dy, x = np.asarray(dy), np.asarray(x)
    w_shape = tuple(w_shape)
    st, dil, pb, _, out = _geometry(x.shape, w_shape[2:], strides, pads, dilations, auto_pad)
    cols = _group_cols(_patches(x, w_shape[2:], st, dil, pb, out, 0), group)
    dw = _group_channels(dy, group).transpose(0, 2, 1) @ cols
    return dw.reshape(w_shape)


def conv_grad_bias(dy):
    """Conv/ConvTranspose backward w.r.t. the bias: dY summed over N and the spatial axes."""
    dy = np.asarray(dy)
    return dy.sum(axis=(0,) + tuple(range(2, dy.ndim)))


def conv_grad(dy, x, w, *, has_bias=True, strides=None, pads=None, dilations=None, group=1,
              auto_pad="NOTSET"):
    """ORT ConvGrad equivalent -> (dX, dW, dB or None); saved tensors X and W."""
    x, w = np.asarray(x), np.asarray(w)
    kw = dict(strides=strides, pads=pads, dilations=dilations, group=group, auto_pad=auto_pad)
    return (conv_grad_input(dy, w, x.shape, **kw),
            conv_grad_weight(dy, x, w.shape, **kw),
            conv_grad_bias(dy) if has_bias else None)


# --- ConvTranspose -----------------------------------------------------------

def _transpose_geometry(x_shape, w_shape, strides, pads, dilations, output_padding,
                        output_shape, auto_pad):
    """-> (strides, dilations, pads_begin, full_spatial, out_spatial) for ConvTranspose.

    `full` is the uncropped scatter extent s*(in-1) + output_padding + (k-1)*d + 1;
    the output is full[pads_begin : pads_begin + out].
    """
    n = len(x_shape) - 2
    K = tuple(w_shape[2:])
    st = _ints(strides, n, 1)
    dil = _ints(dilations, n, 1)
    op = _ints(output_padding, n, 0)
    full = tuple(s * (i - 1) + p + (k - 1) * d + 1
                 for i, s, p, k, d in zip(x_shape[2:], st, op, K, dil))
    mode = _mode(auto_pad)
    if (output_shape is not None and len(output_shape)) or mode in ("SAME_UPPER", "SAME_LOWER"):
        if output_shape is not None and len(output_shape):
            target = tuple(int(v) for v in output_shape)[-n:]
        else:
            target = tuple(i * s for i, s in zip(x_shape[2:], st))
        total = [f - t for f, t in zip(full, target)]
        if min(total) < 0:
            raise ValueError(f"output_shape {target} larger than the full extent {full}")
        # ONNX spec: SAME_UPPER puts the larger half at the end, otherwise the begin.
        pb = tuple(t // 2 if mode == "SAME_UPPER" else t - t // 2 for t in total)
        out = target
    else:
        p = (0,) * (2 * n) if mode == "VALID" else _ints(pads, 2 * n, 0)
        pb, pe = p[:n], p[n:]
        out = tuple(f - b - e for f, b, e in zip(full, pb, pe))
    return st, dil, pb, full, out


def conv_transpose(x, w, b=None, *, strides=None, pads=None, dilations=None, group=1,
                   output_padding=None, output_shape=None, auto_pad="NOTSET", kernel_shape=None):
    """ONNX ConvTranspose: x (N, C, *S), w (C, M/group, *K), b (M,) -> y (N, M, *O)."""
    x, w = np.asarray(x), np.asarray(w)
    _check_kernel(w.shape, kernel_shape)
    st, dil, pb, full, out = _transpose_geometry(x.shape, w.shape, strides, pads, dilations,
                                                 output_padding, output_shape, auto_pad)
    N, C = x.shape[:2]
    Mg = w.shape[1]
    wm = w.reshape(group, C // group, -1)
    cols = _ungroup_cols(_group_channels(x, group) @ wm, N, Mg * group, x.shape[2:],
                         w.shape[2:], group)
    y = np.ascontiguousarray(_crop(_col2im(cols, full, st, dil), pb, out))
    if b is not None:
        y += _bias_shape(b, len(out)).astype(y.dtype, copy=False)
    return y


def conv_transpose_grad_input(dy, w, x_shape, *, strides=None, pads=None, dilations=None,
                              group=1, output_padding=None, output_shape=None, auto_pad="NOTSET"):
    """ConvTranspose backward w.r.t. X (saved: W, shape of X): im2col(dY) . W^T, i.e. a Conv."""
    dy, w = np.asarray(dy), np.asarray(w)
    x_shape = tuple(x_shape)
    st, dil, pb, _, _ = _transpose_geometry(x_shape, w.shape, strides, pads, dilations,
                                            output_padding, output_shape, auto_pad)
    cols = _group_cols(_patches(dy, w.shape[2:], st, dil, pb, x_shape[2:], 0), group)
    wm = w.reshape(group, x_shape[1] // group, -1)
    return _ungroup_channels(cols @ wm.transpose(0, 2, 1), x_shape[0], x_shape[2:], group)


def conv_transpose_grad_weight(dy, x, w_shape, *, strides=None, pads=None, dilations=None,
                               group=1, output_padding=None, output_shape=None, auto_pad="NOTSET"):
    """ConvTranspose backward w.r.t. W (saved: X): per group X^T . im2col(dY)."""
    dy, x = np.asarray(dy), np.asarray(x)
    w_shape = tuple(w_shape)
    st, dil, pb, _, _ = _transpose_geometry(x.shape, w_shape, strides, pads, dilations,
                                            output_padding, output_shape, auto_pad)
    cols = _group_cols(_patches(dy, w_shape[2:], st, dil, pb, x.shape[2:], 0), group)
    dw = _group_channels(x, group).transpose(0, 2, 1) @ cols
    return dw.reshape(w_shape)


#: The bias gradient of ConvTranspose is the same channel sum as Conv's.
conv_transpose_grad_bias = conv_grad_bias


def conv_transpose_grad(dy, x, w, *, has_bias=True, **attrs):
    """ConvTranspose backward -> (dX, dW, dB or None); saved tensors X and W."""
    x, w = np.asarray(x), np.asarray(w)
    return (conv_transpose_grad_input(dy, w, x.shape, **attrs),
            conv_transpose_grad_weight(dy, x, w.shape, **attrs),
            conv_grad_bias(dy) if has_bias else None)


# --- pooling ----------------------------------------------------------------

def _lowest(dtype):
    return -np.inf if np.issubdtype(dtype, np.floating) else np.iinfo(dtype).min


def max_pool(x, *, kernel_shape, strides=None, pads=None, dilations=None, ceil_mode=0,
             auto_pad="NOTSET", storage_order=0):
    """ONNX MaxPool -> (y, indices).

    `indices` is ONNX's second output: int64 offsets into the flattened input
    tensor (batch and channel included, padding excluded); storage_order=1
    flattens the spatial part column-major.  Ties pick the first element in
    row-major window order, as ORT and onnx.reference do.
    """
    x = np.asarray(x)
    K = tuple(int(k) for k in kernel_shape)
    st, dil, pb, _, out = _geometry(x.shape, K, strides, pads, dilations, auto_pad, ceil_mode)
    N, C = x.shape[:2]
    in_sp = x.shape[2:]
    win = _patches(x, K, st, dil, pb, out, _lowest(x.dtype)).reshape((N, C) + out + (-1,))
    arg = win.argmax(axis=-1)
    y = np.take_along_axis(win, arg[..., None], axis=-1)[..., 0]
    koff = np.unravel_index(arg, K)
    grid = np.indices(out, sparse=True)
    coords = tuple(grid[j] * st[j] + koff[j] * dil[j] - pb[j] for j in range(len(K)))
    spatial = np.ravel_multi_index(coords, in_sp, order="F" if storage_order else "C")
    base = (np.arange(N * C, dtype=np.int64) * math.prod(in_sp)).reshape((N, C) + (1,) * len(K))
    return y, (base + spatial).astype(np.int64)


def max_pool_grad(dy, indices, x_shape, *, storage_order=0):
    """MaxPool backward (ORT MaxPoolGrad): scatter-add dY at the saved flat indices."""
    dy = np.asarray(dy)
    x_shape = tuple(x_shape)
    idx = np.asarray(indices, dtype=np.int64)
    if storage_order:
        spatial = math.prod(x_shape[2:])
        nc, r = np.divmod(idx, spatial)
        r = np.ravel_multi_index(np.unravel_index(r, x_shape[2:], order="F"), x_shape[2:])
        idx = nc * spatial + r
    # bincount sums repeats (overlapping windows can pick the same input).
    flat = np.bincount(idx.ravel(), weights=dy.ravel(), minlength=math.prod(x_shape))
    return flat.reshape(x_shape).astype(dy.dtype, copy=False)


def _avg_divisor(in_sp, K, st, dil, pb, pe, out, count_include_pad):
    """Per-window element counts, shape out: windows clipped to the input, or to the
    input plus explicit pads when count_include_pad (the ceil_mode overhang never counts)."""
    div = np.ones((), dtype=np.int64)
    for j, (i, k, s, d, b, e, o) in enumerate(zip(in_sp, K, st, dil, pb, pe, out)):
        pos = np.arange(o)[:, None] * s + np.arange(k)[None, :] * d - b
        lo, hi = (-b, i + e) if count_include_pad else (0, i)
        cnt = ((pos >= lo) & (pos < hi)).sum(axis=1)
        div = div[..., None] * cnt.reshape((1,) * j + (o,))
    return div


def average_pool(x, *, kernel_shape, strides=None, pads=None, dilations=None, ceil_mode=0,
                 count_include_pad=0, auto_pad="NOTSET"):
    """ONNX AveragePool (dilations as in opset 19; default 1)."""
    x = np.asarray(x)
    K = tuple(int(k) for k in kernel_shape)
    st, dil, pb, pe, out = _geometry(x.shape, K, strides, pads, dilations, auto_pad, ceil_mode)
    n = len(K)
    s = _patches(x, K, st, dil, pb, out, 0).sum(axis=tuple(range(2 + n, 2 + 2 * n)))
    div = _avg_divisor(x.shape[2:], K, st, dil, pb, pe, out, count_include_pad)
    return (s / div).astype(x.dtype, copy=False)


def average_pool_grad(dy, x_shape, *, kernel_shape, strides=None, pads=None, dilations=None,
                      ceil_mode=0, count_include_pad=0, auto_pad="NOTSET"):
    """AveragePool backward (needs only the input shape): col2im(dY / divisor)."""
    dy = np.asarray(dy)
    x_shape = tuple(x_shape)
    K = tuple(int(k) for k in kernel_shape)
    st, dil, pb, pe, out = _geometry(x_shape, K, strides, pads, dilations, auto_pad, ceil_mode)
    g = (dy / _avg_divisor(x_shape[2:], K, st, dil, pb, pe, out, count_include_pad)).astype(
        dy.dtype, copy=False)
    cols = np.broadcast_to(g.reshape(g.shape + (1,) * len(K)), g.shape + K)
    return _col2im_cropped(cols, x_shape[2:], st, dil, pb)


def global_average_pool(x):
    """ONNX GlobalAveragePool: mean over all spatial axes, kept as size-1 axes."""
    x = np.asarray(x)
    return x.mean(axis=tuple(range(2, x.ndim)), keepdims=True)


def global_average_pool_grad(dy, x_shape: Sequence[int]):
    """GlobalAveragePool backward: dY / prod(spatial) expanded to the input shape."""
    dy = np.asarray(dy)
    x_shape = tuple(x_shape)
    scale = 1.0 / math.prod(x_shape[2:])
    return np.broadcast_to(dy * scale, x_shape).astype(dy.dtype, copy=True)
