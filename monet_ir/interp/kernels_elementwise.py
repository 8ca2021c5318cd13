"""Elementwise reference kernels (ONNX semantics) and their backward rules.

Binary ops broadcast multidirectionally like NumPy; their backward rules
return gradients already reduced to each operand's shape.  Activation
backward rules take whatever ORT's gradient builder saves for that op
(training-semantics.md §2.1): Relu/Sigmoid/Tanh/Sqrt/Exp save Y, the others X.

Floating results keep the input dtype; scalar constants are plain Python
floats so NumPy 2's promotion rules never widen float32 to float64.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .kernels_common import erf, onnx_dtype_to_numpy, reduce_to_shape

__all__ = [
    # forward
    "add", "sub", "mul", "div", "pow", "sum", "neg", "sqrt", "exp", "log",
    "relu", "leaky_relu", "clip", "sigmoid", "hard_sigmoid", "hard_swish",
    "tanh", "erf", "gelu", "where", "equal", "logical_and", "logical_or", "logical_not",
    "cast", "identity", "softplus", "softsign", "sign", "elu", "celu", "selu", "mish", "maximum", "minimum",
    "mod", "prelu",
    # backward
    "add_grad", "sub_grad", "mul_grad", "div_grad", "pow_grad", "sum_grad",
    "neg_grad", "sqrt_grad", "exp_grad", "log_grad", "relu_grad",
    "leaky_relu_grad", "clip_grad", "sigmoid_grad", "hard_sigmoid_grad",
    "hard_swish_grad", "tanh_grad", "erf_grad", "gelu_grad", "where_grad",
    "cast_grad",
]

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_GELU_TANH_C = 0.044715


def _as(a, like: np.ndarray) -> np.ndarray:
    """Cast `a` to `like`'s dtype without copying when it already matches."""
    return np.asarray(a).astype(np.asarray(like).dtype, copy=False)


# --- binary arithmetic ---------------------------------------------------

def add(a, b):
    """ONNX Add: a + b with broadcasting."""
    return np.add(a, b)


def sub(a, b):
    """ONNX Sub: a - b with broadcasting."""
    return np.subtract(a, b)


def mul(a, b):
    """ONNX Mul: a * b with broadcasting."""
    return np.multiply(a, b)


def div(a, b):
    """ONNX Div: a / b; integer division truncates toward zero like C."""
    a, b = np.asarray(a), np.asarray(b)
    if np.issubdtype(a.dtype, np.integer):
        q = np.floor_divide(a, b)
        # floor_divide rounds toward -inf; ONNX (C) truncates toward zero.
        fix = (np.remainder(a, b) != 0) & ((a < 0) ^ (b < 0))
        return (q + fix).astype(a.dtype)
    return _as(np.divide(a, b), a)


def pow(a, b):  # noqa: A001 - ONNX op name
    """ONNX Pow: a ** b, result in the base's dtype (ONNX allows a wider exponent)."""
    a = np.asarray(a)
    return _as(np.power(a, b), a)


def sum(*xs):  # noqa: A001 - ONNX op name
    """ONNX Sum: variadic elementwise sum with broadcasting."""
    if not xs:
        raise ValueError("Sum needs at least one input")
    out = np.asarray(xs[0])
    for x in xs[1:]:
        out = out + x
    return out


def add_grad(dy, a_shape, b_shape):
    """Add backward -> (da, db): dY reduced to each operand's shape."""
    return reduce_to_shape(dy, a_shape), reduce_to_shape(dy, b_shape)


def sub_grad(dy, a_shape, b_shape):
    """Sub backward -> (da, db) = (dY, -dY), reduced to the operand shapes."""
    return reduce_to_shape(dy, a_shape), reduce_to_shape(-dy, b_shape)


def mul_grad(dy, a, b):
    """Mul backward -> (da, db) = (dY*b, dY*a), reduced to the operand shapes."""
    a, b = np.asarray(a), np.asarray(b)
    return reduce_to_shape(dy * b, a.shape), reduce_to_shape(dy * a, b.shape)


def div_grad(dy, a, b):
    """Div backward -> (da, db) = (dY/b, -dY*a/b^2), reduced to the operand shapes."""
    a, b = np.asarray(a), np.asarray(b)
    da = dy / b
    return reduce_to_shape(da, a.shape), reduce_to_shape(-da * a / b, b.shape)


def pow_grad(dy, a, b):
    """Pow backward -> (da, db).

    da = dY * b * a^(b-1); db = dY * a^b * log(a).  Like PyTorch, db is 0 where
    a == 0 and b >= 0 (the limit of a^b log a), and NaN for negative bases.
    """
    a, b = np.asarray(a), np.asarray(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        da = dy * b * np.power(a, b - 1)
        y = np.power(a, b)
        db = dy * np.where((a == 0) & (b >= 0), 0, y * np.log(a))
    return (_as(reduce_to_shape(da, a.shape), a),
            _as(reduce_to_shape(db, b.shape), b))


def sum_grad(dy, shapes: Sequence[Sequence[int]]):
    """Sum backward -> list with dY reduced to each input shape."""
    return [reduce_to_shape(dy, s) for s in shapes]


# --- simple unary --------------------------------------------------------

def identity(x):
    """ONNX Identity."""
    return np.asarray(x)


def neg(x):
    """ONNX Neg."""
    return np.negative(x)


def neg_grad(dy):
    """Neg backward -> -dY."""
    return np.negative(dy)


def sqrt(x):
    """ONNX Sqrt."""
    return np.sqrt(x)


def sqrt_grad(dy, y):
    """Sqrt backward from the saved output: dY / (2 y)."""
    return dy / (2.0 * y)


def exp(x):
    """ONNX Exp."""
    return np.exp(x)


def exp_grad(dy, y):
    """Exp backward from the saved output: dY * y."""
    return dy * y


def log(x):
    """ONNX Log."""
    return np.log(x)


def log_grad(dy, x):
    """Log backward from the saved input: dY / x."""
    return dy / x


# --- activations ----------------------------------------------------------

def relu(x):
    """ONNX Relu: max(x, 0)."""
    x = np.asarray(x)
    return np.maximum(x, 0).astype(x.dtype, copy=False)


def relu_grad(dy, y):
    """Relu backward from the saved output (ORT ReluGrad): dY where y > 0."""
    return np.where(y > 0, dy, 0).astype(np.asarray(dy).dtype, copy=False)


def leaky_relu(x, *, alpha=0.01):
    """ONNX LeakyRelu: x if x >= 0 else alpha * x."""
    x = np.asarray(x)
    return np.where(x >= 0, x, alpha * x).astype(x.dtype, copy=False)


def leaky_relu_grad(dy, x, *, alpha=0.01):
    """LeakyRelu backward from the saved input: dY if x > 0 else alpha * dY."""
    dy = np.asarray(dy)
    return np.where(x > 0, dy, alpha * dy).astype(dy.dtype, copy=False)


def clip(x, min=None, max=None):  # noqa: A002 - ONNX input names
    """ONNX Clip (opset >= 11, min/max as optional scalars)."""
    x = np.asarray(x)
    lo = -np.inf if min is None else min
    hi = np.inf if max is None else max
    return np.minimum(np.maximum(x, lo), hi).astype(x.dtype, copy=False)


def clip_grad(dy, x, min=None, max=None):  # noqa: A002
    """Clip backward -> dY where min <= x <= max (inclusive, as PyTorch clamp), else 0."""
    dy = np.asarray(dy)
    keep = np.ones(np.shape(x), dtype=bool)
    if min is not None:
        keep &= x >= min
    if max is not None:
        keep &= x <= max
    return np.where(keep, dy, 0).astype(dy.dtype, copy=False)


def sigmoid(x):
    """ONNX Sigmoid, evaluated without overflow for large |x|."""
    x = np.asarray(x)
    e = np.exp(-np.abs(x))
    # For x < 0 use e^x / (1 + e^x) so exp never sees a large positive argument.
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype, copy=False)


def sigmoid_grad(dy, y):
    """Sigmoid backward from the saved output: dY * y * (1 - y)."""
    return dy * y * (1.0 - y)


def hard_sigmoid(x, *, alpha=0.2, beta=0.5):
    """ONNX HardSigmoid: max(0, min(1, alpha*x + beta))."""
    x = np.asarray(x)
    return np.clip(alpha * x + beta, 0.0, 1.0).astype(x.dtype, copy=False)


def hard_sigmoid_grad(dy, x, *, alpha=0.2, beta=0.5):
    """HardSigmoid backward from the saved input: alpha*dY inside the linear region."""
    dy = np.asarray(dy)
    t = alpha * x + beta
    return np.where((t > 0) & (t < 1), alpha * dy, 0).astype(dy.dtype, copy=False)


def hard_swish(x):
    """ONNX HardSwish: x * HardSigmoid(x; alpha=1/6, beta=0.5)."""
    x = np.asarray(x)
    return (x * np.clip(x / 6.0 + 0.5, 0.0, 1.0)).astype(x.dtype, copy=False)


def hard_swish_grad(dy, x):
    """HardSwish backward from the saved input: 0 below -3, dY above 3, dY*(x/3+1/2) between."""
    dy = np.asarray(dy)
    inner = dy * (x / 3.0 + 0.5)
    return np.where(x <= -3, 0, np.where(x >= 3, dy, inner)).astype(dy.dtype, copy=False)


def tanh(x):
    """ONNX Tanh."""
    return np.tanh(x)


def tanh_grad(dy, y):
    """Tanh backward from the saved output: dY * (1 - y^2)."""
    return dy * (1.0 - y * y)


def erf_grad(dy, x):
    """Erf backward from the saved input: dY * 2/sqrt(pi) * exp(-x^2)."""
    return dy * (_TWO_OVER_SQRT_PI * np.exp(-np.square(x)))


def gelu(x, *, approximate="none"):
    """ONNX Gelu (opset 20): x*Phi(x) exactly, or the tanh approximation."""
    x = np.asarray(x)
    if approximate == "none":
        return (0.5 * x * (1.0 + erf(x * _INV_SQRT_2))).astype(x.dtype, copy=False)
    if approximate == "tanh":
        inner = _SQRT_2_OVER_PI * (x + _GELU_TANH_C * x * x * x)
        return (0.5 * x * (1.0 + np.tanh(inner))).astype(x.dtype, copy=False)
    raise ValueError(f"unknown gelu approximation {approximate!r}")


def gelu_grad(dy, x, *, approximate="none"):
    """Gelu backward from the saved input (PyTorch gelu_backward)."""
    x = np.asarray(x)
    if approximate == "none":
        cdf = 0.5 * (1.0 + erf(x * _INV_SQRT_2))
        pdf = _INV_SQRT_2PI * np.exp(-0.5 * x * x)
        return (dy * (cdf + x * pdf)).astype(x.dtype, copy=False)
    if approximate == "tanh":
        x2 = x * x
        t = np.tanh(_SQRT_2_OVER_PI * (x + _GELU_TANH_C * x2 * x))
        dinner = _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_TANH_C * x2)
        d = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * dinner
        return (dy * d).astype(x.dtype, copy=False)
    raise ValueError(f"unknown gelu approximation {approximate!r}")


# --- selection, comparison, logic, casts --------------------------------

def where(cond, x, y):
    """ONNX Where: x where cond else y, with broadcasting."""
    return np.where(cond, x, y)


def where_grad(dy, cond, x_shape, y_shape):
    """Where backward -> (dx, dy_other): dY routed by cond, reduced to operand shapes."""
    dy = np.asarray(dy)
    zero = np.zeros((), dtype=dy.dtype)
    return (reduce_to_shape(np.where(cond, dy, zero), x_shape),
            reduce_to_shape(np.where(cond, zero, dy), y_shape))


def equal(a, b):
    """ONNX Equal -> bool tensor."""
    return np.equal(a, b)


def logical_and(a, b):
    """ONNX And -> bool tensor."""
    return np.logical_and(a, b)


def logical_or(a, b):
    """ONNX Or -> bool tensor."""
    return np.logical_or(a, b)


def logical_not(x):
    """ONNX Not -> bool tensor."""
    return np.logical_not(x)


def cast(x, *, to):
    """ONNX Cast; `to` is an ONNX TensorProto enum int or any NumPy dtype-like.

    Float -> integer truncates toward zero (NumPy's C-style conversion), as ONNX.
    """
    return np.asarray(x).astype(onnx_dtype_to_numpy(to))


def cast_grad(dy, x_dtype):
    """Cast backward: dY cast back to the source dtype (only meaningful float -> float)."""
    return np.asarray(dy).astype(np.dtype(x_dtype))



# --- activations and arithmetic without a backward kernel ------------------
# (their gradients are written with forward ops by `autodiff`)

def softplus(x):
    """ONNX Softplus: log(1 + exp(x)), without overflow for large x."""
    x = np.asarray(x)
    return _as(np.logaddexp(x, 0.0), x)


def softsign(x):
    """ONNX Softsign: x / (1 + |x|)."""
    x = np.asarray(x)
    return _as(x / (1.0 + np.abs(x)), x)


def sign(x):
    """ONNX Sign: -1, 0 or 1 in x's dtype."""
    x = np.asarray(x)
    return _as(np.sign(x), x)


def elu(x, *, alpha=1.0):
    """ONNX Elu."""
    x = np.asarray(x)
    return _as(np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0.0))), x)


def celu(x, *, alpha=1.0):
    """ONNX Celu: max(0, x) + min(0, alpha (exp(x / alpha) - 1))."""
    x = np.asarray(x)
    return _as(np.maximum(x, 0.0) + np.minimum(0.0, alpha * np.expm1(np.minimum(x, 0.0) / alpha)), x)


def selu(x, *, alpha=1.6732632423543772, gamma=1.0507009873554805):
    """ONNX Selu."""
    x = np.asarray(x)
    return _as(gamma * np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0.0))), x)


def mish(x):
    """ONNX Mish: x tanh(softplus(x))."""
    x = np.asarray(x)
    return _as(x * np.tanh(np.logaddexp(x, 0.0)), x)


def maximum(a, b):
    """ONNX Max of two operands, broadcasting."""
    return np.maximum(a, b)


def minimum(a, b):
    """ONNX Min of two operands, broadcasting."""
    return np.minimum(a, b)


def mod(a, b, *, fmod=0):
    """ONNX Mod: the divisor's sign (fmod = 0, integers) or the dividend's (fmod = 1)."""
    a = np.asarray(a)
    return _as(np.fmod(a, b) if fmod else np.mod(a, b), a)


def prelu(x, slope):
    """ONNX PRelu: x if x >= 0 else slope * x, slope broadcast to x."""
    x = np.asarray(x)
    return _as(np.where(x < 0, np.asarray(slope) * x, x), x)
