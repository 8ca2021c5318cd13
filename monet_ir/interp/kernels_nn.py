"""Normalisation, softmax, dropout and loss reference kernels with backward rules.

Saved tensors follow training-semantics.md §2: BatchNorm (training) and
LayerNormalization save X, scale, mean and inverse std; Softmax/LogSoftmax
save Y; SoftmaxCrossEntropyLoss saves its log_prob output; Dropout saves
its mask.
"""

from __future__ import annotations

import numpy as np

from .kernels_common import normalize_axis, reduce_to_shape

__all__ = [
    "batch_norm_train", "batch_norm_infer", "batch_norm_running_stats",
    "batch_norm_train_grad", "layer_norm", "layer_norm_grad", "resize", "resize_grad", "resize_matrix",
    "softmax", "softmax_grad", "log_softmax", "log_softmax_grad",
    "dropout_train", "dropout_grad",
    "softmax_cross_entropy_loss", "softmax_cross_entropy_loss_grad",
    "mse_loss", "mse_loss_grad",
]


# --- BatchNormalization -----------------------------------------------------

def _bn_axes(x: np.ndarray) -> tuple[int, ...]:
    return (0,) + tuple(range(2, x.ndim))


def _per_channel(v, ndim: int) -> np.ndarray:
    return np.asarray(v).reshape((1, -1) + (1,) * (ndim - 2))


def batch_norm_train(x, scale, bias, *, epsilon=1e-5):
    """BatchNormalization in training mode -> (y, batch_mean, batch_invstd).

    Statistics over N and the spatial axes, biased variance (as ONNX and
    PyTorch normalise); mean/invstd have shape (C,), which is what ORT's
    BatchNormInternal saves for the backward.
    """
    x = np.asarray(x)
    axes = _bn_axes(x)
    mean = x.mean(axis=axes)
    xc = x - _per_channel(mean, x.ndim)
    var = np.mean(xc * xc, axis=axes)
    invstd = (1.0 / np.sqrt(var + epsilon)).astype(x.dtype, copy=False)
    y = xc * _per_channel(invstd * scale, x.ndim) + _per_channel(bias, x.ndim)
    return y.astype(x.dtype, copy=False), mean, invstd


def batch_norm_running_stats(x, running_mean, running_var, *, momentum=0.9, unbiased=False):
    """Updated (running_mean, running_var) = momentum * running + (1 - momentum) * batch.

    ONNX (opset 15+, training_mode=1) blends the *biased* batch variance;
    PyTorch blends the unbiased one (unbiased=True) and its `momentum` is
    1 - ONNX's.
    """
    x = np.asarray(x)
    axes = _bn_axes(x)
    mean = x.mean(axis=axes)
    var = x.var(axis=axes, ddof=1 if unbiased else 0)
    new_mean = momentum * np.asarray(running_mean) + (1.0 - momentum) * mean
    new_var = momentum * np.asarray(running_var) + (1.0 - momentum) * var
    return new_mean.astype(x.dtype, copy=False), new_var.astype(x.dtype, copy=False)


def batch_norm_infer(x, scale, bias, mean, var, *, epsilon=1e-5):
    """BatchNormalization in inference mode with the given running statistics."""
    x = np.asarray(x)
    invstd = 1.0 / np.sqrt(np.asarray(var) + epsilon)
    y = (x - _per_channel(mean, x.ndim)) * _per_channel(invstd * scale, x.ndim) \
        + _per_channel(bias, x.ndim)
    return y.astype(x.dtype, copy=False)


def batch_norm_train_grad(dy, x, scale, mean, invstd):
    """Training-mode BatchNorm backward (ORT BatchNormalizationGrad) -> (dX, dscale, dbias).

    dX = scale*invstd/m * (m*dY - sum(dY) - xhat*sum(dY*xhat)), m = N*prod(spatial).
    """
    dy, x = np.asarray(dy), np.asarray(x)
    axes = _bn_axes(x)
    m = x.size // x.shape[1]
    xhat = (x - _per_channel(mean, x.ndim)) * _per_channel(invstd, x.ndim)
    dbias = dy.sum(axis=axes)
    dscale = (dy * xhat).sum(axis=axes)
    k = _per_channel(np.asarray(scale) * invstd / m, x.ndim)
    dx = k * (m * dy - _per_channel(dbias, x.ndim) - xhat * _per_channel(dscale, x.ndim))
    return dx.astype(x.dtype, copy=False), dscale, dbias


# --- LayerNormalization --------------------------------------------------------

def layer_norm(x, scale, bias=None, *, axis=-1, epsilon=1e-5):
    """ONNX LayerNormalization -> (y, mean, invstd).

    Normalises over axes [axis, rank); mean/invstd keep those axes with size 1
    (ONNX's Mean and InvStdDev outputs).
    """
    x = np.asarray(x)
    axes = tuple(range(normalize_axis(axis, x.ndim), x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    xc = x - mean
    var = np.mean(xc * xc, axis=axes, keepdims=True)
    invstd = (1.0 / np.sqrt(var + epsilon)).astype(x.dtype, copy=False)
    y = xc * invstd * scale
    if bias is not None:
        y = y + bias
    return y.astype(x.dtype, copy=False), mean, invstd


def layer_norm_grad(dy, x, scale, mean, invstd, *, axis=-1):
    """LayerNormalization backward (ORT LayerNormalizationGrad) -> (dX, dscale, dbias).

    With g = dY*scale: dX = invstd * (g - mean(g) - xhat*mean(g*xhat)) over the
    normalised axes; dscale/dbias are reduced to scale's shape.
    """
    dy, x = np.asarray(dy), np.asarray(x)
    scale = np.asarray(scale)
    axes = tuple(range(normalize_axis(axis, x.ndim), x.ndim))
    xhat = (x - mean) * invstd
    g = dy * scale
    dx = invstd * (g - g.mean(axis=axes, keepdims=True)
                   - xhat * (g * xhat).mean(axis=axes, keepdims=True))
    return (dx.astype(x.dtype, copy=False),
            reduce_to_shape(dy * xhat, scale.shape), reduce_to_shape(dy, scale.shape))


# --- Softmax family ---------------------------------------------------------------

def softmax(x, *, axis=-1):
    """ONNX Softmax (opset >= 13: along a single axis), max-shifted for stability."""
    x = np.asarray(x)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_grad(dy, y, *, axis=-1):
    """Softmax backward from the saved output: y * (dY - sum(dY*y))."""
    return y * (dy - (dy * y).sum(axis=axis, keepdims=True))


def log_softmax(x, *, axis=-1):
    """ONNX LogSoftmax: x - max - log(sum(exp(x - max)))."""
    x = np.asarray(x)
    s = x - x.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


def log_softmax_grad(dy, y, *, axis=-1):
    """LogSoftmax backward from the saved output: dY - exp(y) * sum(dY)."""
    return dy - np.exp(y) * np.sum(dy, axis=axis, keepdims=True)


# --- Dropout ----------------------------------------------------------------------

def dropout_train(x, *, ratio=0.5, seed=None, rng=None, mask=None):
    """ONNX Dropout with training_mode=True -> (y, mask).

    Keeps each element with probability 1-ratio and scales kept ones by
    1/(1-ratio).  The mask is taken from `mask` if given (replay), otherwise
    drawn from `rng` (a numpy Generator) or a fresh default_rng(seed).
    """
    x = np.asarray(x)
    ratio = float(ratio)
    if mask is None:
        if ratio == 0.0:
            mask = np.ones(x.shape, dtype=bool)
        else:
            gen = rng if rng is not None else np.random.default_rng(seed)
            mask = gen.random(x.shape) >= ratio
    mask = np.asarray(mask, dtype=bool)
    return dropout_grad(x, mask, ratio=ratio), mask


def dropout_grad(dy, mask, *, ratio=0.5):
    """Dropout backward (ORT DropoutGrad): dY * mask / (1 - ratio); 0 when ratio == 1."""
    dy = np.asarray(dy)
    ratio = float(ratio)
    scale = 0.0 if ratio >= 1.0 else 1.0 / (1.0 - ratio)
    return np.where(mask, dy * scale, 0).astype(dy.dtype, copy=False)


# --- losses ------------------------------------------------------------------------

def _sce_weights(labels, ignore_index, weight, dtype):
    """(safe labels for indexing, per-element weights with ignored positions at 0)."""
    labels = np.asarray(labels).astype(np.int64, copy=False)
    ignored = (labels == ignore_index) if ignore_index is not None \
        else np.zeros(labels.shape, dtype=bool)
    safe = np.where(ignored, 0, labels)
    w = np.ones(labels.shape, dtype=dtype) if weight is None \
        else np.asarray(weight).astype(dtype, copy=False)[safe]
    return safe, np.where(ignored, 0, w).astype(dtype, copy=False)


def softmax_cross_entropy_loss(scores, labels, *, reduction="mean", ignore_index=None,
                               weight=None):
    """ONNX SoftmaxCrossEntropyLoss -> (loss, log_prob).

    scores (N, C, *d), labels (N, *d) integer.  Element loss is
    -weight[label] * log_prob[label] (0 where label == ignore_index);
    'mean' divides the sum by the total weight of non-ignored elements.
    """
    scores = np.asarray(scores)
    log_prob = log_softmax(scores, axis=1)
    safe, w = _sce_weights(labels, ignore_index, weight, scores.dtype)
    picked = np.take_along_axis(log_prob, safe[:, None], axis=1)[:, 0]
    loss = -picked * w
    if reduction == "sum":
        loss = loss.sum()
    elif reduction == "mean":
        loss = loss.sum() / w.sum()
    elif reduction != "none":
        raise ValueError(f"unknown reduction {reduction!r}")
    return np.asarray(loss).astype(scores.dtype, copy=False), log_prob


def softmax_cross_entropy_loss_grad(dloss, log_prob, labels, *, reduction="mean",
                                    ignore_index=None, weight=None):
    """SoftmaxCrossEntropyLoss backward w.r.t. scores (ORT SoftmaxCrossEntropyLossGrad).

    dscores = (softmax - onehot(label)) * weight[label] * s, with s = dloss
    (per element for 'none'), dloss for 'sum', dloss / total weight for 'mean'.
    """
    log_prob = np.asarray(log_prob)
    safe, w = _sce_weights(labels, ignore_index, weight, log_prob.dtype)
    g = np.exp(log_prob)
    np.put_along_axis(g, safe[:, None],
                      np.take_along_axis(g, safe[:, None], axis=1) - 1.0, axis=1)
    dloss = np.asarray(dloss, dtype=log_prob.dtype)
    if reduction == "mean":
        s = w * (dloss / w.sum())
    elif reduction in ("sum", "none"):
        s = w * dloss
    else:
        raise ValueError(f"unknown reduction {reduction!r}")
    return (g * s[:, None]).astype(log_prob.dtype, copy=False)


def mse_loss(pred, target, *, reduction="mean"):
    """Mean-squared-error loss (PyTorch MSELoss semantics; ONNX has no op)."""
    pred = np.asarray(pred)
    d = pred - target
    sq = d * d
    if reduction == "mean":
        out = sq.mean()
    elif reduction == "sum":
        out = sq.sum()
    elif reduction == "none":
        out = sq
    else:
        raise ValueError(f"unknown reduction {reduction!r}")
    return np.asarray(out).astype(pred.dtype, copy=False)


def mse_loss_grad(dloss, pred, target, *, reduction="mean"):
    """MSE backward -> (dpred, dtarget): 2*(pred-target)*dloss (/n for 'mean')."""
    pred, target = np.asarray(pred), np.asarray(target)
    d = pred - target
    g = 2.0 * d * dloss
    if reduction == "mean":
        g = g / d.size
    g = g.astype(pred.dtype, copy=False)
    return reduce_to_shape(g, pred.shape), reduce_to_shape(-g, target.shape)


def resize_matrix(n_in, n_out, mode="nearest", coordinates="half_pixel", nearest="round_prefer_floor",
                  scale=None, cubic_coeff_a=-0.75, exclude_outside=False):
    """The (n_out, n_in) matrix of ONNX Resize along one axis (scale n_out / n_in unless the
    file gave `scale`): row o holds the weights of the input elements output o is taken or
    interpolated from. Cubic interpolation weighs the four inputs around the source coordinate
    with the kernel of `cubic_coeff_a`, reading edge values beyond the input (or, with
    `exclude_outside`, dropping those and renormalizing)."""
    scale = n_out / n_in if scale is None else float(scale)
    o = np.arange(n_out, dtype=np.float64)
    if coordinates == "half_pixel":
        x = (o + 0.5) / scale - 0.5
    elif coordinates == "pytorch_half_pixel":
        x = (o + 0.5) / scale - 0.5 if n_out > 1 else np.zeros_like(o)
    elif coordinates == "asymmetric":
        x = o / scale
    elif coordinates == "align_corners":
        x = o * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros_like(o)
    else:
        raise ValueError(f"coordinate_transformation_mode {coordinates}")
    m = np.zeros((n_out, n_in))
    rows = np.arange(n_out)
    if mode == "nearest":
        index = {"floor": np.floor(x), "ceil": np.ceil(x), "round_prefer_floor": np.ceil(x - 0.5),
                 "round_prefer_ceil": np.floor(x + 0.5)}[nearest]
        m[rows, np.clip(index, 0, n_in - 1).astype(np.int64)] = 1.0
        return m
    if mode == "cubic":
        return _cubic_matrix(m, x, n_in, cubic_coeff_a, exclude_outside)
    x = np.clip(x, 0, n_in - 1)
    x0 = np.floor(x).astype(np.int64)
    x1 = np.minimum(x0 + 1, n_in - 1)
    w1 = x - x0
    np.add.at(m, (rows, x0), 1.0 - w1)
    np.add.at(m, (rows, x1), w1)
    return m


def _cubic_matrix(m, x, n_in, a, exclude_outside):
    rows = np.arange(len(x))
    base = np.floor(x).astype(np.int64)
    t = x - base
    weights = []
    for offset in (-1, 0, 1, 2):
        d = np.abs(t - offset)
        near = ((a + 2) * d - (a + 3)) * d * d + 1
        far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
        weights.append(np.where(d <= 1, near, np.where(d < 2, far, 0.0)))
    weights = np.stack(weights, axis=1)
    index = base[:, None] + np.arange(-1, 3)[None, :]
    if exclude_outside:
        weights = np.where((index >= 0) & (index < n_in), weights, 0.0)
        weights = weights / weights.sum(axis=1, keepdims=True)
    for j in range(4):
        np.add.at(m, (rows, np.clip(index[:, j], 0, n_in - 1)), weights[:, j])
    return m


def _along_axes(x, sizes, matrices):
    for axis, m in enumerate(matrices):
        if m is not None:
            x = np.moveaxis(np.tensordot(m, np.moveaxis(x, axis, 0), axes=1), 0, axis)
    return x


def _resize_matrices(in_shape, out_shape, scales=(), **options):
    """One interpolation matrix per axis (None where the axis keeps its size at scale 1)."""
    matrices = []
    for i, (a, b) in enumerate(zip(in_shape, out_shape)):
        scale = scales[i] if scales else None
        if a == b and (scale is None or scale == 1.0):
            matrices.append(None)
        else:
            matrices.append(resize_matrix(a, b, scale=scale, **options))
    return matrices


def resize(x, out_shape, **options):
    """ONNX Resize (nearest, linear or cubic, separable over the axes) to `out_shape`."""
    x = np.asarray(x)
    return _along_axes(x, out_shape, _resize_matrices(x.shape, out_shape, **options)).astype(x.dtype)


def resize_grad(dy, in_shape, **options):
    """The gradient of `resize`: the transposed interpolation of dy back to `in_shape`."""
    dy = np.asarray(dy)
    matrices = [None if m is None else m.T for m in _resize_matrices(in_shape, dy.shape, **options)]
    return _along_axes(dy, in_shape, matrices).astype(dy.dtype)
