"""Backward rules and optimizer steps of monet_ir.interp.kernels.

Every backward rule is checked against central finite differences in
float64: for a random cotangent dY, L(x) = sum(f(x) * dY) and the analytic
gradient must match (L(x + eps e_i) - L(x - eps e_i)) / (2 eps) for every
element of every differentiable input.  Inputs are chosen away from kinks
(ReLU at 0, clip bounds, max-pool ties) so the check is well defined.

Optimizer steps are checked against the textbook (PyTorch) update formulas
and against onnx.reference's ai.onnx.preview.training Adam / Momentum /
Adagrad where the conventions coincide.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from monet_ir.interp import kernels as K

EPS = 1e-6
RTOL, ATOL = 1e-5, 1e-7


def numeric_grad(loss, x: np.ndarray) -> np.ndarray:
    """Central differences of the scalar `loss()` w.r.t. x, perturbing x in place."""
    g = np.zeros_like(x)
    flat, gflat = x.reshape(-1), g.reshape(-1)
    for i in range(flat.size):
        orig = flat[i]
        flat[i] = orig + EPS
        up = loss()
        flat[i] = orig - EPS
        down = loss()
        flat[i] = orig
        gflat[i] = (up - down) / (2 * EPS)
    return g


def check_grads(fwd, backward, inputs, wrt=None, seed=0):
    """Compare analytic and numeric gradients.

    fwd(*inputs) -> output array; backward(dy, *inputs) -> one gradient per
    index in `wrt` (default: all inputs), each with its input's shape.
    """
    inputs = [np.array(a, dtype=np.float64) for a in inputs]
    wrt = list(range(len(inputs))) if wrt is None else list(wrt)
    y = np.asarray(fwd(*inputs))
    dy = np.random.default_rng(seed).standard_normal(y.shape)
    analytic = backward(dy, *inputs)
    if not isinstance(analytic, (tuple, list)):
        analytic = (analytic,)
    assert len(analytic) == len(wrt)
    for i, ga in zip(wrt, analytic):
        num = numeric_grad(lambda: float(np.sum(np.asarray(fwd(*inputs)) * dy)), inputs[i])
        ga = np.asarray(ga)
        assert ga.shape == inputs[i].shape, (i, ga.shape, inputs[i].shape)
        np.testing.assert_allclose(ga, num, rtol=RTOL, atol=ATOL, err_msg=f"input {i}")


@pytest.fixture
def rng():
    return np.random.default_rng(42)


def away_from_zero(rng, *shape, margin=0.1):
    """Random values with |v| >= margin, for kinks at 0."""
    v = rng.standard_normal(shape)
    return np.sign(v) * (np.abs(v) + margin)


def avoid(x, kinks, margin=0.05):
    """Shift entries lying within `margin` of a kink by 2*margin."""
    for k in kinks:
        x = np.where(np.abs(x - k) < margin, x + 2 * margin, x)
    return x


def distinct(rng, *shape):
    """A random permutation of well-separated values (no max-pool ties)."""
    n = math.prod(shape)
    return (rng.permutation(n).astype(np.float64) * 0.1 - 0.05 * n).reshape(shape)


def test_checker_detects_wrong_gradient(rng):
    """Guard: the checker must fail for a wrong rule (here: tanh' taken from x, not y)."""
    x = rng.standard_normal((3, 4))
    with pytest.raises(AssertionError):
        check_grads(K.tanh, lambda dy, x: K.tanh_grad(dy, x), [x])


# --- Conv / ConvTranspose ---------------------------------------------------------------

CONV_GRAD_CASES = [
    ((2, 2, 7), (3, 2, 3), dict()),
    ((1, 4, 9), (4, 2, 3), dict(strides=[2], pads=[2, 1], dilations=[2], group=2)),
    ((2, 3, 6, 5), (4, 3, 3, 2), dict(pads=[1, 0, 1, 1])),
    ((1, 4, 7, 8), (6, 2, 3, 3), dict(strides=[2, 3], pads=[1, 2, 0, 1], dilations=[1, 2], group=2)),
    ((1, 3, 6, 6), (3, 1, 3, 3), dict(group=3, pads=[1, 1, 1, 1], strides=[2, 2])),  # depthwise
    ((1, 2, 6, 7), (3, 2, 3, 3), dict(auto_pad="SAME_UPPER", strides=[2, 2])),
    ((1, 2, 4, 5, 4), (2, 2, 2, 3, 2), dict(strides=[1, 2, 2], pads=[1, 0, 0, 0, 1, 1])),
]


@pytest.mark.parametrize("xs, ws, attrs", CONV_GRAD_CASES)
def test_conv_grad(rng, xs, ws, attrs):
    x, w, b = rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(ws[0])

    def bwd(dy, x, w, b):
        dx, dw, db = K.conv_grad(dy, x, w, **attrs)
        assert np.array_equal(dx, K.conv_grad_input(dy, w, x.shape, **attrs))
        assert np.array_equal(dw, K.conv_grad_weight(dy, x, w.shape, **attrs))
        return dx, dw, db

    check_grads(lambda x, w, b: K.conv(x, w, b, **attrs), bwd, [x, w, b])


CONV_T_GRAD_CASES = [
    ((1, 2, 4), (2, 3, 3), dict(strides=[2], pads=[1, 0], output_padding=[1])),
    ((2, 3, 3, 4), (3, 2, 3, 2), dict()),
    ((1, 4, 3, 3), (4, 1, 3, 3), dict(strides=[2, 2], pads=[1, 0, 0, 1], group=2,
                                      output_padding=[1, 0], dilations=[1, 2])),
    ((1, 2, 3, 3), (2, 2, 3, 3), dict(strides=[2, 2], auto_pad="SAME_LOWER")),
    ((1, 2, 3, 3), (2, 2, 3, 3), dict(strides=[2, 2], output_shape=[5, 6])),
    ((1, 2, 2, 3, 2), (2, 1, 2, 2, 3), dict(strides=[2, 1, 2], pads=[0, 1, 1, 0, 0, 1])),
]


@pytest.mark.parametrize("xs, ws, attrs", CONV_T_GRAD_CASES)
def test_conv_transpose_grad(rng, xs, ws, attrs):
    g = attrs.get("group", 1)
    x, w, b = rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(ws[1] * g)
    check_grads(lambda x, w, b: K.conv_transpose(x, w, b, **attrs),
                lambda dy, x, w, b: K.conv_transpose_grad(dy, x, w, **attrs), [x, w, b])


# --- Gemm / MatMul ----------------------------------------------------------------------------

@pytest.mark.parametrize("trans_a, trans_b", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("c_shape", [(3, 5), (5,), (3, 1), ()])
def test_gemm_grad(rng, trans_a, trans_b, c_shape):
    a = rng.standard_normal((4, 3) if trans_a else (3, 4))
    b = rng.standard_normal((5, 4) if trans_b else (4, 5))
    c = rng.standard_normal(c_shape)
    kw = dict(alpha=0.7, beta=-1.4, trans_a=trans_a, trans_b=trans_b)
    check_grads(lambda a, b, c: K.gemm(a, b, c, **kw),
                lambda dy, a, b, c: K.gemm_grad(dy, a, b, c.shape, **kw), [a, b, c])


def test_gemm_grad_without_c(rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    assert K.gemm_grad(np.ones((3, 2)), a, b)[2] is None
    check_grads(lambda a, b: K.gemm(a, b, alpha=2.0),
                lambda dy, a, b: K.gemm_grad(dy, a, b, alpha=2.0)[:2], [a, b])


@pytest.mark.parametrize("sa, sb", [
    ((3, 4), (4, 2)), ((2, 3, 4), (4, 2)), ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (3, 4, 2)),
    ((4,), (4, 3)), ((3, 4), (4,)), ((4,), (4,)), ((4,), (2, 4, 3)), ((2, 3, 4), (4,)),
])
def test_matmul_grad(rng, sa, sb):
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    check_grads(K.matmul, lambda dy, a, b: K.matmul_grad(dy, a, b), [a, b])


# --- broadcasting binary ops --------------------------------------------------------------------

BCAST = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 4)), ((), (2, 3)), ((2, 1, 4), (3, 1))]


@pytest.mark.parametrize("sa, sb", BCAST)
def test_add_sub_grad(rng, sa, sb):
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    check_grads(K.add, lambda dy, a, b: K.add_grad(dy, a.shape, b.shape), [a, b])
    check_grads(K.sub, lambda dy, a, b: K.sub_grad(dy, a.shape, b.shape), [a, b])


@pytest.mark.parametrize("sa, sb", BCAST)
def test_mul_div_grad(rng, sa, sb):
    a, b = rng.standard_normal(sa), away_from_zero(rng, *sb, margin=0.5)
    check_grads(K.mul, K.mul_grad, [a, b])
    check_grads(K.div, K.div_grad, [a, b])


@pytest.mark.parametrize("sa, sb", [((3, 4), (3, 4)), ((2, 3), (3,)), ((2, 3), ())])
def test_pow_grad(rng, sa, sb):
    a = np.abs(rng.standard_normal(sa)) + 0.3
    b = rng.standard_normal(sb)
    check_grads(K.pow, K.pow_grad, [a, b])


def test_pow_grad_zero_base_and_negative_base():
    # d/db 0^b = 0 for b >= 0 (PyTorch convention), and integer powers of negatives work for da.
    da, db = K.pow_grad(np.ones(2), np.array([0.0, -2.0]), np.array([2.0, 3.0]))
    np.testing.assert_allclose(da, [0.0, 12.0])
    assert db[0] == 0 and np.isnan(db[1])


def test_sum_grad(rng):
    shapes = [(2, 3, 4), (4,), (3, 1), ()]
    xs = [rng.standard_normal(s) for s in shapes]
    check_grads(lambda *xs: K.sum(*xs), lambda dy, *xs: K.sum_grad(dy, [x.shape for x in xs]), xs)


def test_where_grad(rng):
    cond = rng.random((2, 1, 4)) > 0.5
    x, y = rng.standard_normal((3, 1)), rng.standard_normal((1,))
    check_grads(lambda x, y: K.where(cond, x, y),
                lambda dy, x, y: K.where_grad(dy, cond, x.shape, y.shape), [x, y])


# --- elementwise activations ------------------------------------------------------------------

UNARY_GRADS = [
    ("relu", K.relu, lambda dy, x: K.relu_grad(dy, K.relu(x)), "kink"),
    ("leaky_relu", lambda x: K.leaky_relu(x, alpha=0.2),
     lambda dy, x: K.leaky_relu_grad(dy, x, alpha=0.2), "kink"),
    ("sigmoid", K.sigmoid, lambda dy, x: K.sigmoid_grad(dy, K.sigmoid(x)), "any"),
    ("tanh", K.tanh, lambda dy, x: K.tanh_grad(dy, K.tanh(x)), "any"),
    ("erf", K.erf, K.erf_grad, "any"),
    ("gelu", K.gelu, K.gelu_grad, "any"),
    ("gelu_tanh", lambda x: K.gelu(x, approximate="tanh"),
     lambda dy, x: K.gelu_grad(dy, x, approximate="tanh"), "any"),
    ("hard_sigmoid", lambda x: K.hard_sigmoid(x, alpha=0.3, beta=0.4),
     lambda dy, x: K.hard_sigmoid_grad(dy, x, alpha=0.3, beta=0.4), "hard_sigmoid"),
    ("hard_swish", K.hard_swish, K.hard_swish_grad, "hard_swish"),
    ("sqrt", K.sqrt, lambda dy, x: K.sqrt_grad(dy, K.sqrt(x)), "positive"),
    ("exp", K.exp, lambda dy, x: K.exp_grad(dy, K.exp(x)), "any"),
    ("log", K.log, K.log_grad, "positive"),
    ("neg", K.neg, lambda dy, x: K.neg_grad(dy), "any"),
]


def _unary_input(rng, domain):
    x = 2.5 * rng.standard_normal((4, 5))
    if domain == "kink":
        return away_from_zero(rng, 4, 5)
    if domain == "positive":
        return np.abs(x) + 0.2
    if domain == "hard_sigmoid":  # kinks where alpha*x+beta hits 0 or 1: x = -4/3, 2
        return avoid(np.linspace(-3.0, 3.5, 20).reshape(4, 5), [-4 / 3, 2.0])
    if domain == "hard_swish":  # kinks at +-3
        return avoid(np.linspace(-4.5, 4.5, 20).reshape(4, 5), [-3.0, 3.0])
    return x


@pytest.mark.parametrize("name, fwd, bwd, domain", UNARY_GRADS, ids=[u[0] for u in UNARY_GRADS])
def test_unary_grad(rng, name, fwd, bwd, domain):
    check_grads(fwd, bwd, [_unary_input(rng, domain)])


def test_clip_grad(rng):
    x = avoid(np.linspace(-2, 2, 24).reshape(4, 6), [-1.0, -0.5, 0.3, 0.7])
    for lo, hi in [(-0.5, 0.7), (None, 0.3), (-1.0, None)]:
        check_grads(lambda x: K.clip(x, lo, hi), lambda dy, x: K.clip_grad(dy, x, lo, hi), [x])
    # boundaries are inclusive, as PyTorch clamp
    np.testing.assert_array_equal(K.clip_grad(np.ones(3), np.array([-1.0, 0.0, 1.0]), -1.0, 1.0),
                                  [1.0, 1.0, 1.0])


def test_cast_grad():
    dy = np.arange(3, dtype=np.float16)
    g = K.cast_grad(dy, np.float32)
    assert g.dtype == np.float32 and np.array_equal(g, [0, 1, 2])


# --- softmax family, norms -------------------------------------------------------------------

@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_grads(rng, axis):
    x = rng.standard_normal((3, 4, 2))
    check_grads(lambda x: K.softmax(x, axis=axis),
                lambda dy, x: K.softmax_grad(dy, K.softmax(x, axis=axis), axis=axis), [x])
    check_grads(lambda x: K.log_softmax(x, axis=axis),
                lambda dy, x: K.log_softmax_grad(dy, K.log_softmax(x, axis=axis), axis=axis), [x])


@pytest.mark.parametrize("shape, axis, scale_shape", [
    ((3, 5), -1, (5,)), ((2, 3, 4), 1, (3, 4)), ((2, 3, 4), -1, (1,)), ((2, 2, 3), 1, (2, 3)),
])
def test_layer_norm_grad(rng, shape, axis, scale_shape):
    x, s, b = rng.standard_normal(shape), rng.standard_normal(scale_shape), rng.standard_normal(scale_shape)

    def bwd(dy, x, s, b):
        _, mean, invstd = K.layer_norm(x, s, b, axis=axis, epsilon=1e-3)
        return K.layer_norm_grad(dy, x, s, mean, invstd, axis=axis)

    check_grads(lambda x, s, b: K.layer_norm(x, s, b, axis=axis, epsilon=1e-3)[0], bwd, [x, s, b])


@pytest.mark.parametrize("shape", [(5, 3), (3, 2, 4), (2, 3, 3, 2), (2, 2, 2, 2, 2)])
def test_batch_norm_train_grad(rng, shape):
    C = shape[1]
    x, s, b = rng.standard_normal(shape), rng.standard_normal(C), rng.standard_normal(C)

    def bwd(dy, x, s, b):
        _, mean, invstd = K.batch_norm_train(x, s, b, epsilon=1e-3)
        return K.batch_norm_train_grad(dy, x, s, mean, invstd)

    check_grads(lambda x, s, b: K.batch_norm_train(x, s, b, epsilon=1e-3)[0], bwd, [x, s, b])


# --- pooling ------------------------------------------------------------------------------------

MAXPOOL_GRAD_CASES = [
    ((1, 2, 9), dict(kernel_shape=[3], strides=[2], pads=[1, 1])),
    ((2, 2, 6, 6), dict(kernel_shape=[3, 3], strides=[1, 1])),  # heavy overlap
    ((1, 2, 7, 7), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ((1, 1, 7, 8), dict(kernel_shape=[2, 3], strides=[2, 2], dilations=[2, 1], ceil_mode=1)),
    ((1, 2, 5, 4), dict(kernel_shape=[2, 2], strides=[1, 2], storage_order=1)),
    ((1, 1, 4, 5, 4), dict(kernel_shape=[2, 3, 2], strides=[1, 2, 1], pads=[0, 1, 0, 1, 1, 0])),
]


@pytest.mark.parametrize("xs, attrs", MAXPOOL_GRAD_CASES)
def test_max_pool_grad(rng, xs, attrs):
    order = attrs.get("storage_order", 0)
    check_grads(lambda x: K.max_pool(x, **attrs)[0],
                lambda dy, x: K.max_pool_grad(dy, K.max_pool(x, **attrs)[1], x.shape,
                                              storage_order=order),
                [distinct(rng, *xs)])


AVGPOOL_GRAD_CASES = [
    ((1, 2, 9), dict(kernel_shape=[3], strides=[2], pads=[1, 1])),
    ((1, 2, 6, 7), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ((1, 2, 6, 7), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1)),
    ((1, 1, 8, 7), dict(kernel_shape=[3, 2], strides=[2, 2], ceil_mode=1, pads=[1, 0, 0, 1])),
    ((1, 1, 8, 7), dict(kernel_shape=[2, 2], strides=[3, 2], ceil_mode=1, count_include_pad=1)),
    ((1, 1, 7, 7), dict(kernel_shape=[2, 2], dilations=[2, 3], strides=[1, 1])),
    ((1, 1, 4, 4, 5), dict(kernel_shape=[2, 2, 3], strides=[2, 1, 2], pads=[1, 0, 1, 0, 1, 1])),
]


@pytest.mark.parametrize("xs, attrs", AVGPOOL_GRAD_CASES)
def test_average_pool_grad(rng, xs, attrs):
    check_grads(lambda x: K.average_pool(x, **attrs),
                lambda dy, x: K.average_pool_grad(dy, x.shape, **attrs),
                [rng.standard_normal(xs)])


def test_global_average_pool_grad(rng):
    for shape in [(2, 3, 4), (1, 2, 3, 4), (1, 2, 2, 3, 2)]:
        check_grads(K.global_average_pool,
                    lambda dy, x: K.global_average_pool_grad(dy, x.shape),
                    [rng.standard_normal(shape)])


# --- reductions and data movement ---------------------------------------------------------------

@pytest.mark.parametrize("axes, keepdims, noop", [
    (None, 1, 0), (None, 0, 0), ([1], 0, 0), ([-1, 0], 1, 0), ([0, 2], 0, 0), (None, 0, 1),
])
def test_reduce_grads(rng, axes, keepdims, noop):
    x = rng.standard_normal((2, 3, 4))
    kw = dict(keepdims=keepdims, noop_with_empty_axes=noop)
    check_grads(lambda x: K.reduce_sum(x, axes, **kw),
                lambda dy, x: K.reduce_sum_grad(dy, x.shape, axes, **kw), [x])
    check_grads(lambda x: K.reduce_mean(x, axes, **kw),
                lambda dy, x: K.reduce_mean_grad(dy, x.shape, axes, **kw), [x])


def test_transpose_reshape_family_grads(rng):
    x = rng.standard_normal((2, 3, 4))
    for perm in [None, [1, 0, 2], [2, 0, 1]]:
        check_grads(lambda x: K.transpose(x, perm=perm),
                    lambda dy, x: K.transpose_grad(dy, perm=perm), [x])
    check_grads(lambda x: K.reshape(x, [0, -1]), lambda dy, x: K.reshape_grad(dy, x.shape), [x])
    check_grads(lambda x: K.flatten(x, axis=2), lambda dy, x: K.flatten_grad(dy, x.shape), [x])
    y = rng.standard_normal((3, 1, 4))
    check_grads(lambda y: K.squeeze(y, [1]), lambda dy, y: K.squeeze_grad(dy, y.shape), [y])
    check_grads(lambda x: K.unsqueeze(x, [0, -1]), lambda dy, x: K.unsqueeze_grad(dy, x.shape), [x])


@pytest.mark.parametrize("xs, shape", [((3, 1), (2, 3, 4)), ((4,), (3, 4)), ((2, 1, 3), (1, 4, 1))])
def test_expand_grad(rng, xs, shape):
    check_grads(lambda x: K.expand(x, shape), lambda dy, x: K.expand_grad(dy, x.shape),
                [rng.standard_normal(xs)])


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat_split_grads(rng, axis):
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    for s, extent in zip(shapes, [1, 3, 2]):
        s[axis] = extent
    xs = [rng.standard_normal(s) for s in shapes]
    check_grads(lambda *xs: K.concat(xs, axis=axis),
                lambda dy, *xs: K.concat_grad(dy, [x.shape for x in xs], axis=axis), xs)
    # Split: L = sum_k <y_k, dy_k>; pack the outputs into one array for the checker.
    x = rng.standard_normal((4, 6, 5))
    sizes = {0: [1, 3], 1: [2, 1, 3], -1: [4, 1]}[axis]
    check_grads(lambda x: np.concatenate([p.ravel() for p in K.split(x, sizes, axis=axis)]),
                lambda dy, x: K.split_grad(_unpack(dy, K.split(x, sizes, axis=axis)), axis=axis),
                [x])


def _unpack(flat, like):
    out, i = [], 0
    for p in like:
        out.append(flat[i:i + p.size].reshape(p.shape))
        i += p.size
    return out


@pytest.mark.parametrize("starts, ends, axes, steps", [
    ([1], [3], None, None), ([-1, 5], [-10, 0], [1, 2], [-1, -2]), ([0, 1], [100, 4], [2, 0], [2, 2]),
])
def test_slice_grad(rng, starts, ends, axes, steps):
    x = rng.standard_normal((4, 5, 6))
    check_grads(lambda x: K.slice(x, starts, ends, axes, steps),
                lambda dy, x: K.slice_grad(dy, x.shape, starts, ends, axes, steps), [x])


@pytest.mark.parametrize("axis, ind", [
    (0, [[0, 2, 2], [4, 0, -1]]),  # embedding lookup with repeated (and negative) ids
    (1, [1, 1, 0, 1]), (-1, [[2], [0]]), (1, 2),
])
def test_gather_grad(rng, axis, ind):
    x = rng.standard_normal((5, 3, 4))
    idx = np.array(ind)
    check_grads(lambda x: K.gather(x, idx, axis=axis),
                lambda dy, x: K.gather_grad(dy, idx, x.shape, axis=axis), [x])


def test_gather_grad_accumulates_repeats():
    g = K.gather_grad(np.ones((3, 2)), np.array([1, 1, 1]), (4, 2))
    np.testing.assert_array_equal(g, [[0, 0], [3, 3], [0, 0], [0, 0]])


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads, axes", [([1, 2, 0, 2, 1, 3], None), ([3, -1, 2, 5], [1, -1])])
def test_pad_grad(rng, mode, pads, axes):
    x = rng.standard_normal((2, 3, 4))
    check_grads(lambda x: K.pad(x, pads, 0.5, axes, mode=mode),
                lambda dy, x: K.pad_grad(dy, x.shape, pads, axes, mode=mode), [x])


# --- dropout and losses ---------------------------------------------------------------------------

def test_dropout_grad(rng):
    x = rng.standard_normal((4, 5))
    _, mask = K.dropout_train(x, ratio=0.4, seed=7)
    assert 0 < mask.sum() < mask.size
    check_grads(lambda x: K.dropout_train(x, ratio=0.4, mask=mask)[0],
                lambda dy, x: K.dropout_grad(dy, mask, ratio=0.4), [x])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape, use_weight, ignore_index", [
    ((5, 4), False, None), ((5, 4), True, 2), ((3, 4, 2), False, 1), ((2, 3, 2, 2), True, None),
])
def test_softmax_cross_entropy_loss_grad(rng, reduction, shape, use_weight, ignore_index):
    C = shape[1]
    labels = rng.integers(0, C, (shape[0],) + shape[2:])
    if ignore_index is not None:
        labels.flat[0] = ignore_index
        labels.flat[-1] = (ignore_index + 1) % C
    weight = rng.random(C) + 0.2 if use_weight else None
    kw = dict(reduction=reduction, ignore_index=ignore_index, weight=weight)

    def bwd(dloss, scores):
        _, log_prob = K.softmax_cross_entropy_loss(scores, labels, **kw)
        return K.softmax_cross_entropy_loss_grad(dloss, log_prob, labels, **kw)

    check_grads(lambda s: K.softmax_cross_entropy_loss(s, labels, **kw)[0], bwd,
                [rng.standard_normal(shape)])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_grad(rng, reduction):
    p, t = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    check_grads(lambda p, t: K.mse_loss(p, t, reduction=reduction),
                lambda dl, p, t: K.mse_loss_grad(dl, p, t, reduction=reduction), [p, t])


# --- optimizers ---------------------------------------------------------------------------------------

def run_training_op(op, inputs, attrs):
    """Run an ai.onnx.preview.training node through onnx.reference."""
    names = [f"in{i}" for i in range(len(inputs))]
    infos = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.asarray(a).dtype),
                                           np.shape(a)) for n, a in zip(names, inputs)]
    n_out = {"Adam": 3, "Momentum": 2, "Adagrad": 2}[op]
    outs = [f"out{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, domain="ai.onnx.preview.training", **attrs)
    graph = helper.make_graph([node], "g", infos,
                              [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None)
                               for o in outs])
    model = helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 18), helper.make_opsetid("ai.onnx.preview.training", 1)])
    return ReferenceEvaluator(model).run(None, dict(zip(names, inputs)))


def test_sgd(rng):
    p, g = rng.standard_normal(5), rng.standard_normal(5)
    (new,) = K.sgd(p, g, lr=0.1)
    np.testing.assert_allclose(new, p - 0.1 * g)
    (new,) = K.sgd(p, g, lr=0.1, weight_decay=0.01)
    np.testing.assert_allclose(new, p - 0.1 * (g + 0.01 * p))


def test_momentum_torch_semantics(rng):
    p, gs = rng.standard_normal(4), rng.standard_normal((3, 4))
    lr, mu, wd, damp = 0.1, 0.9, 0.01, 0.2
    for nesterov in (False, True):
        pk, v, pt, buf = p.copy(), None, p.copy(), None
        for g in gs:
            pk, v = K.momentum(pk, g, v, lr=lr, momentum=mu, weight_decay=wd,
                               nesterov=nesterov, dampening=0.0 if nesterov else damp)
            # torch.optim.SGD, written out
            d = g + wd * pt
            buf = d.copy() if buf is None else mu * buf + (1 - (0.0 if nesterov else damp)) * d
            pt = pt - lr * (d + mu * buf if nesterov else buf)
            np.testing.assert_allclose(pk, pt, rtol=1e-13)
            np.testing.assert_allclose(v, buf, rtol=1e-13)


@pytest.mark.parametrize("mode", ["standard", "nesterov"])
def test_momentum_matches_onnx(rng, mode):
    """ONNX Momentum(alpha=mu, beta=1) from a zero buffer == PyTorch SGD momentum, dampening 0."""
    p = rng.standard_normal(6).astype(np.float32)
    v_onnx = np.zeros(6, dtype=np.float32)
    pk, v = p.copy(), None
    po = p.copy()
    for t in range(3):
        g = rng.standard_normal(6).astype(np.float32)
        po, v_onnx = run_training_op(
            "Momentum", [np.array(0.05, np.float32), np.array(t, np.int64), po, g, v_onnx],
            dict(alpha=0.9, beta=1.0, mode=mode, norm_coefficient=0.02))
        pk, v = K.momentum(pk, g, v, lr=0.05, momentum=0.9, weight_decay=0.02,
                           nesterov=mode == "nesterov")
        np.testing.assert_allclose(pk, po, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(v, v_onnx, rtol=1e-5, atol=1e-6)
        assert pk.dtype == np.float32


def _torch_adam(p, gs, lr, b1, b2, eps, wd, decoupled):
    """torch.optim.Adam / AdamW single-tensor algorithm, written out from the docs."""
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    for t, g in enumerate(gs, start=1):
        if decoupled:
            p = p * (1 - lr * wd)
        elif wd:
            g = g + wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        mhat = m / (1 - b1 ** t)
        vhat = v / (1 - b2 ** t)
        p = p - lr * mhat / (np.sqrt(vhat) + eps)
    return p, m, v


@pytest.mark.parametrize("decoupled", [False, True])
def test_adam_adamw_textbook(rng, decoupled):
    p, gs = rng.standard_normal(5), rng.standard_normal((4, 5))
    kw = dict(lr=0.01, beta1=0.8, beta2=0.95, eps=1e-6, weight_decay=0.1)
    step_fn = K.adamw if decoupled else K.adam
    pk, m, v = p.copy(), np.zeros(5), np.zeros(5)
    for t, g in enumerate(gs, start=1):
        pk, m, v = step_fn(pk, g, m, v, step=t, **kw)
    pt, mt, vt = _torch_adam(p, gs, 0.01, 0.8, 0.95, 1e-6, 0.1, decoupled)
    np.testing.assert_allclose(pk, pt, rtol=1e-12)
    np.testing.assert_allclose(m, mt, rtol=1e-12)
    np.testing.assert_allclose(v, vt, rtol=1e-12)
    # AdamW and Adam genuinely differ once weight decay is on
    other = (K.adam if decoupled else K.adamw)(p, gs[0], np.zeros(5), np.zeros(5), step=1, **kw)[0]
    assert not np.allclose(other, step_fn(p, gs[0], np.zeros(5), np.zeros(5), step=1, **kw)[0])


def test_adam_matches_onnx(rng):
    """ONNX Adam(epsilon=e) == torch Adam with eps = e / sqrt(1 - beta2**t) (see kernels_optim)."""
    p = rng.standard_normal(6)
    m, v = np.zeros(6), np.zeros(6)
    po, mo, vo = p.copy(), m.copy(), v.copy()
    # ONNX stores float attributes as float32: pick values exact in float32.
    b1, b2, e, lr, wd = 0.875, 0.96875, 2.0 ** -10, 0.02, 0.0625
    for t in range(1, 4):
        g = rng.standard_normal(6)
        po, mo, vo = run_training_op(
            "Adam", [np.array(lr), np.array(t, np.int64), po, g, mo, vo],
            dict(alpha=b1, beta=b2, epsilon=e, norm_coefficient=wd, norm_coefficient_post=0.0))
        p, m, v = K.adam(p, g, m, v, step=t, lr=lr, beta1=b1, beta2=b2,
                         eps=e / math.sqrt(1 - b2 ** t), weight_decay=wd)
        np.testing.assert_allclose(p, po, rtol=1e-12)
        np.testing.assert_allclose(m, mo, rtol=1e-12)
        np.testing.assert_allclose(v, vo, rtol=1e-12)
    # with the same nominal epsilon the conventions differ
    p2 = K.adam(p, g, m, v, step=4, lr=lr, beta1=b1, beta2=b2, eps=e, weight_decay=wd)[0]
    po2 = run_training_op("Adam", [np.array(lr), np.array(4, np.int64), p, g, m, v],
                          dict(alpha=b1, beta=b2, epsilon=e, norm_coefficient=wd))[0]
    assert not np.allclose(p2, po2, rtol=1e-9, atol=0)


def test_adagrad_matches_onnx(rng):
    p = rng.standard_normal((2, 3)).astype(np.float32)
    h = np.zeros((2, 3), dtype=np.float32)
    po, ho = p.copy(), h.copy()
    for t in range(3):
        g = rng.standard_normal((2, 3)).astype(np.float32)
        po, ho = run_training_op(
            "Adagrad", [np.array(0.1, np.float32), np.array(t, np.int64), po, g, ho],
            dict(decay_factor=0.3, epsilon=1e-6, norm_coefficient=0.01))
        p, h = K.adagrad(p, g, h, step=t, lr=0.1, decay_factor=0.3, epsilon=1e-6, weight_decay=0.01)
        np.testing.assert_allclose(p, po, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(h, ho, rtol=1e-6, atol=1e-7)
        assert p.dtype == h.dtype == np.float32
    # textbook, one step from a fresh accumulator
    p0, g0 = np.array([1.0, -2.0]), np.array([0.5, 0.25])
    np.testing.assert_allclose(K.adagrad(p0, g0, np.zeros(2), step=0, lr=0.1, epsilon=0.0)[0],
                               p0 - 0.1 * np.sign(g0))
