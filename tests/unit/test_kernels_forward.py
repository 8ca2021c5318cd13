"""Forward reference kernels versus onnx.reference.ReferenceEvaluator.

Each case builds a one-node ONNX model with onnx.helper, runs it with the
reference evaluator and compares it with the corresponding kernel in
monet_ir.interp.kernels (float32, rtol 1e-5).  Where onnx.reference deviates
from the ONNX spec (noted per test), the kernel is checked against the spec
formula instead.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from monet_ir.interp import kernels as K

RTOL, ATOL = 1e-5, 1e-6


def run_onnx(op, inputs, attrs=None, n_out=1, opset=18):
    """Run a single ONNX node through the reference evaluator; None marks an omitted input."""
    names, infos, feeds = [], [], {}
    for i, a in enumerate(inputs):
        if a is None:
            names.append("")
            continue
        a = np.asarray(a)
        name = f"in{i}"
        names.append(name)
        feeds[name] = a
        infos.append(helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape))
    while names and names[-1] == "":
        names.pop()
    outs = [f"out{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, **(attrs or {}))
    out_infos = [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outs]
    graph = helper.make_graph([node], "g", infos, out_infos)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return ReferenceEvaluator(model).run(None, feeds)


def close(actual, expected, rtol=RTOL, atol=ATOL):
    expected = np.asarray(expected)
    actual = np.asarray(actual)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def onnx_attrs(**kw):
    """Drop None-valued attributes (ONNX helper rejects them)."""
    return {k: v for k, v in kw.items() if v is not None}


# --- Conv ----------------------------------------------------------------------------

CONV_CASES = [
    # x shape, w shape, attrs (ONNX names), bias
    ((2, 3, 9), (4, 3, 3), dict(), True),
    ((1, 2, 10), (4, 1, 3), dict(strides=[2], pads=[1, 2], dilations=[2], group=2), False),
    ((2, 3, 7, 6), (5, 3, 3, 2), dict(), True),
    ((1, 4, 8, 9), (6, 2, 3, 3), dict(strides=[2, 1], pads=[1, 0, 2, 1], group=2), True),
    ((1, 3, 9, 9), (2, 3, 3, 3), dict(dilations=[2, 3], pads=[2, 1, 0, 3]), False),
    ((2, 4, 6, 6), (4, 1, 3, 3), dict(group=4, pads=[1, 1, 1, 1]), True),  # depthwise
    ((1, 4, 6, 7), (8, 1, 3, 3), dict(group=4, strides=[2, 2]), False),  # depth multiplier 2
    ((1, 3, 7, 8), (4, 3, 3, 3), dict(auto_pad="SAME_UPPER", strides=[2, 2]), True),
    ((1, 3, 7, 8), (4, 3, 2, 4), dict(auto_pad="SAME_LOWER", strides=[1, 2]), False),
    ((1, 3, 7, 8), (4, 3, 3, 3), dict(auto_pad="VALID", strides=[2, 3]), True),
    ((1, 2, 5, 6, 4), (3, 2, 2, 3, 2), dict(), True),
    ((2, 4, 6, 5, 7), (4, 2, 3, 2, 3), dict(strides=[2, 1, 2], pads=[1, 0, 1, 0, 1, 1],
                                            dilations=[1, 2, 1], group=2), True),
]


@pytest.mark.parametrize("xs, ws, attrs, bias", CONV_CASES)
def test_conv(rng, xs, ws, attrs, bias):
    x, w = f32(rng, *xs), f32(rng, *ws)
    b = f32(rng, ws[0]) if bias else None
    (expected,) = run_onnx("Conv", [x, w, b], attrs)
    got = K.conv(x, w, b, **attrs)
    assert got.dtype == np.float32
    close(got, expected)


CONV_T_CASES = [
    ((1, 2, 5), (2, 3, 3), dict(), True),
    ((2, 4, 4), (4, 1, 3), dict(strides=[2], pads=[1, 0], output_padding=[1], group=2), False),
    ((1, 3, 4, 5), (3, 2, 3, 3), dict(), True),
    ((2, 4, 3, 4), (4, 3, 3, 2), dict(strides=[2, 3], pads=[1, 0, 0, 1],
                                      output_padding=[1, 2], group=2), True),
    ((1, 2, 4, 4), (2, 2, 3, 3), dict(dilations=[2, 1], strides=[2, 2]), False),
    ((1, 3, 4, 4), (3, 1, 3, 3), dict(group=3, strides=[2, 2], pads=[1, 1, 1, 1]), True),
    ((1, 2, 3, 4), (2, 2, 3, 3), dict(strides=[2, 2], output_shape=[6, 8], auto_pad="SAME_UPPER"), False),
    ((1, 2, 3, 4), (2, 2, 3, 3), dict(strides=[2, 2], output_shape=[5, 7], auto_pad="SAME_LOWER"), True),
    ((1, 2, 3, 4), (2, 2, 3, 3), dict(strides=[2, 2], auto_pad="SAME_UPPER"), True),
    ((1, 2, 3, 4), (2, 2, 4, 3), dict(strides=[2, 2], auto_pad="SAME_LOWER"), False),
    ((1, 2, 3, 3, 2), (2, 2, 2, 3, 2), dict(strides=[2, 1, 2], pads=[0, 1, 0, 1, 0, 1]), True),
]


def reference_conv_transpose(x, w, b, attrs):
    """onnx.reference ConvTranspose, one call per group.

    Its own group>1 path slices W along the wrong axis and reuses B[0]
    (correct only for depthwise without bias), so groups are split here.
    """
    g = attrs.get("group", 1)
    if g == 1:
        return run_onnx("ConvTranspose", [x, w, b], attrs)[0]
    cg, mg = x.shape[1] // g, w.shape[1]
    sub = dict(attrs, group=1)
    outs = [run_onnx("ConvTranspose", [x[:, i * cg:(i + 1) * cg], w[i * cg:(i + 1) * cg],
                                       None if b is None else b[i * mg:(i + 1) * mg]], sub)[0]
            for i in range(g)]
    return np.concatenate(outs, axis=1)


def test_conv_transpose_depthwise_reference_group_path(rng):
    """The one configuration onnx.reference's grouped path handles itself."""
    x, w = f32(rng, 2, 3, 4, 5), f32(rng, 3, 1, 3, 3)
    attrs = dict(group=3, strides=[2, 1], pads=[1, 0, 0, 1])
    (expected,) = run_onnx("ConvTranspose", [x, w], attrs)
    close(K.conv_transpose(x, w, **attrs), expected)


@pytest.mark.parametrize("xs, ws, attrs, bias", CONV_T_CASES)
def test_conv_transpose(rng, xs, ws, attrs, bias):
    x, w = f32(rng, *xs), f32(rng, *ws)
    b = f32(rng, ws[1] * attrs.get("group", 1)) if bias else None
    expected = reference_conv_transpose(x, w, b, attrs)
    got = K.conv_transpose(x, w, b, **attrs)
    assert got.dtype == np.float32
    close(got, expected)


def test_conv_transpose_output_shape_notset(rng):
    """Spec: output_shape with auto_pad NOTSET puts the larger half of the padding
    at the beginning (onnx.reference cannot run this configuration)."""
    x, w = rng.standard_normal((1, 2, 3, 4)), rng.standard_normal((2, 2, 3, 3))
    full = K.conv_transpose(x, w, strides=[2, 2])
    assert full.shape[2:] == (7, 9)
    got = K.conv_transpose(x, w, strides=[2, 2], output_shape=[1, 2, 4, 6])
    close(got, full[:, :, 2:6, 2:8], rtol=1e-12)


def test_conv_transpose_is_adjoint_of_conv(rng):
    """<conv(x), y> == <x, conv_transpose(y)> for matching attributes (independent of ONNX)."""
    x = rng.standard_normal((2, 4, 9, 8))
    w = rng.standard_normal((6, 2, 3, 2))
    attrs = dict(strides=[2, 3], pads=[1, 0, 2, 1], dilations=[2, 1], group=2)
    y = K.conv(x, w, **attrs)
    r = rng.standard_normal(y.shape)
    # output_padding restores the input extent the floor division dropped.
    op = [(9 + 3 - 5) % 2, (8 + 1 - 2) % 3]
    # Conv's W (M, C/g, k) is exactly ConvTranspose's W (C_in=M, C_out/g, k).
    xt = K.conv_transpose(r, w, **attrs, output_padding=op)
    assert xt.shape == x.shape
    np.testing.assert_allclose(np.vdot(y, r), np.vdot(x, xt), rtol=1e-10)


# --- Gemm / MatMul -----------------------------------------------------------------------

@pytest.mark.parametrize("trans_a, trans_b", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("c_shape", [None, (4, 5), (5,), (1, 5), (4, 1), ()])
def test_gemm(rng, trans_a, trans_b, c_shape):
    a = f32(rng, *((3, 4) if trans_a else (4, 3)))
    b = f32(rng, *((5, 3) if trans_b else (3, 5)))
    c = None if c_shape is None else f32(rng, *c_shape)
    attrs = dict(alpha=0.7, beta=-1.3, transA=trans_a, transB=trans_b)
    (expected,) = run_onnx("Gemm", [a, b, c], attrs)
    got = K.gemm(a, b, c, alpha=0.7, beta=-1.3, trans_a=trans_a, trans_b=trans_b)
    assert got.dtype == np.float32
    close(got, expected)


@pytest.mark.parametrize("sa, sb", [
    ((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)),
    ((2, 1, 3, 4), (5, 4, 2)), ((4,), (2, 4, 3)), ((2, 3, 4), (4,)),
])
def test_matmul(rng, sa, sb):
    a, b = f32(rng, *sa), f32(rng, *sb)
    (expected,) = run_onnx("MatMul", [a, b])
    close(K.matmul(a, b), expected)


# --- normalisation --------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 3, 4, 5), (2, 2, 3, 2, 2)])
def test_batch_norm_train(rng, shape):
    C = shape[1]
    x = f32(rng, *shape)
    scale, bias = f32(rng, C), f32(rng, C)
    rmean, rvar = f32(rng, C), np.abs(f32(rng, C)) + 0.5
    y_ref, m_ref, v_ref = run_onnx(
        "BatchNormalization", [x, scale, bias, rmean, rvar],
        dict(epsilon=1e-3, momentum=0.8, training_mode=1), n_out=3, opset=15)
    y, mean, invstd = K.batch_norm_train(x, scale, bias, epsilon=1e-3)
    close(y, y_ref)
    axes = (0,) + tuple(range(2, x.ndim))
    close(mean, x.mean(axis=axes))
    close(invstd, 1 / np.sqrt(x.var(axis=axes) + 1e-3))
    new_mean, new_var = K.batch_norm_running_stats(x, rmean, rvar, momentum=0.8)
    close(new_mean, m_ref)
    close(new_var, v_ref)
    # PyTorch flavour blends the unbiased variance.
    _, uvar = K.batch_norm_running_stats(x, rmean, rvar, momentum=0.8, unbiased=True)
    close(uvar, 0.8 * rvar + 0.2 * x.var(axis=axes, ddof=1))


def test_batch_norm_infer(rng):
    x = f32(rng, 2, 3, 4, 4)
    scale, bias, mean = f32(rng, 3), f32(rng, 3), f32(rng, 3)
    var = np.abs(f32(rng, 3)) + 0.1
    (expected,) = run_onnx("BatchNormalization", [x, scale, bias, mean, var],
                           dict(epsilon=1e-4), opset=15)
    close(K.batch_norm_infer(x, scale, bias, mean, var, epsilon=1e-4), expected)


@pytest.mark.parametrize("shape, axis, with_bias", [
    ((4, 6), -1, True), ((2, 3, 5), -1, False), ((2, 3, 4), 1, True), ((2, 3, 4, 2), -2, True),
])
def test_layer_norm(rng, shape, axis, with_bias):
    x = f32(rng, *shape)
    nshape = shape[axis:]
    scale = f32(rng, *nshape)
    bias = f32(rng, *nshape) if with_bias else None
    y_ref, mean_ref, inv_ref = run_onnx("LayerNormalization", [x, scale, bias],
                                        dict(axis=axis, epsilon=1e-4), n_out=3, opset=17)
    y, mean, invstd = K.layer_norm(x, scale, bias, axis=axis, epsilon=1e-4)
    close(y, y_ref)
    close(mean, mean_ref)
    close(invstd, inv_ref)
    assert y.dtype == mean.dtype == invstd.dtype == np.float32


# --- activations and unary ops ------------------------------------------------------------

UNARY = [
    ("Relu", K.relu, {}, {}),
    ("LeakyRelu", K.leaky_relu, dict(alpha=0.13), dict(alpha=0.13)),
    ("Sigmoid", K.sigmoid, {}, {}),
    ("HardSigmoid", K.hard_sigmoid, dict(alpha=0.3, beta=0.4), dict(alpha=0.3, beta=0.4)),
    ("HardSwish", K.hard_swish, {}, {}),
    ("Tanh", K.tanh, {}, {}),
    ("Erf", K.erf, {}, {}),
    ("Neg", K.neg, {}, {}),
    ("Exp", K.exp, {}, {}),
]


@pytest.mark.parametrize("op, fn, onnx_kw, kw", UNARY, ids=[u[0] for u in UNARY])
def test_unary(rng, op, fn, onnx_kw, kw):
    x = (3 * f32(rng, 3, 4, 5)).astype(np.float32)
    (expected,) = run_onnx(op, [x], onnx_kw)
    got = fn(x, **kw)
    assert got.dtype == np.float32
    close(got, expected)


@pytest.mark.parametrize("op, fn", [("Sqrt", K.sqrt), ("Log", K.log)])
def test_unary_positive(rng, op, fn):
    x = np.abs(f32(rng, 4, 5)) + 0.1
    (expected,) = run_onnx(op, [x])
    close(fn(x), expected)


def test_sigmoid_extreme_inputs():
    x = np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0])
    with np.errstate(over="raise"):
        y = K.sigmoid(x)
    close(y, [0.0, 1 / (1 + math.exp(50)), 0.5, 1 / (1 + math.exp(-50)), 1.0], rtol=1e-12, atol=0)


@pytest.mark.parametrize("lo, hi", [(-0.5, 0.7), (None, 0.3), (-0.2, None), (None, None)])
def test_clip(rng, lo, hi):
    x = f32(rng, 4, 5)
    mk = lambda v: None if v is None else np.array(v, dtype=np.float32)  # noqa: E731
    (expected,) = run_onnx("Clip", [x, mk(lo), mk(hi)])
    close(K.clip(x, mk(lo), mk(hi)), expected)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(rng, approximate):
    x = (3 * f32(rng, 4, 6)).astype(np.float32)
    (expected,) = run_onnx("Gelu", [x], dict(approximate=approximate), opset=20)
    got = K.gelu(x, approximate=approximate)
    assert got.dtype == np.float32
    close(got, expected)


def test_erf_accuracy():
    x = np.concatenate([np.linspace(-7, 7, 40001), [0.0, -0.0, 1e-300, 2.5, -2.5, 30.0]])
    ref = np.array([math.erf(v) for v in x])
    assert np.max(np.abs(K.erf(x) - ref)) < 1e-14
    tiny = np.geomspace(1e-12, 1e-3, 50)
    np.testing.assert_allclose(K.erf(tiny), [math.erf(v) for v in tiny], rtol=1e-14)
    special = K.erf(np.array([np.inf, -np.inf, np.nan]))
    assert special[0] == 1 and special[1] == -1 and np.isnan(special[2])


@pytest.mark.parametrize("op, fn", [("Softmax", K.softmax), ("LogSoftmax", K.log_softmax)])
@pytest.mark.parametrize("axis", [-1, 0, 1, -2])
def test_softmax_family(rng, op, fn, axis):
    x = (4 * f32(rng, 3, 4, 5)).astype(np.float32)
    (expected,) = run_onnx(op, [x], dict(axis=axis))
    got = fn(x, axis=axis)
    assert got.dtype == np.float32
    close(got, expected)


# --- pooling ---------------------------------------------------------------------------------

MAXPOOL_CASES = [
    ((2, 3, 9), dict(kernel_shape=[3], strides=[2])),
    ((1, 2, 10), dict(kernel_shape=[2], strides=[2], pads=[1, 1], dilations=[2])),
    ((2, 2, 7, 8), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ((1, 3, 8, 7), dict(kernel_shape=[2, 3], strides=[2, 1], dilations=[1, 2], pads=[0, 1, 1, 1])),
    ((1, 2, 7, 7), dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    ((1, 2, 8, 6), dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1, pads=[1, 0, 0, 1])),
    ((1, 2, 7, 6), dict(kernel_shape=[3, 2], strides=[2, 2], storage_order=1)),
    ((1, 2, 5, 6, 7), dict(kernel_shape=[2, 2, 3], strides=[2, 2, 2], pads=[0, 1, 1, 1, 0, 1])),
]


@pytest.mark.parametrize("xs, attrs", MAXPOOL_CASES)
def test_max_pool(rng, xs, attrs):
    x = f32(rng, *xs)
    y_ref, i_ref = run_onnx("MaxPool", [x], attrs, n_out=2)
    y, idx = K.max_pool(x, **attrs)
    close(y, y_ref)
    assert idx.dtype == np.int64
    np.testing.assert_array_equal(idx, i_ref)


@pytest.mark.parametrize("attrs", [
    dict(kernel_shape=[3, 3]),
    dict(kernel_shape=[2, 3], dilations=[1, 1]),
    dict(kernel_shape=[3, 3], auto_pad="SAME_UPPER"),
])
def test_max_pool_stride1(rng, attrs):
    """onnx.reference's stride-1 path (a different implementation) drops the
    batch/channel offset from its indices and measures them in padded
    coordinates, and reads 2-D explicit pads in the wrong order; we compare
    values everywhere and the within-channel index only without padding."""
    x = f32(rng, 2, 3, 6, 5)
    y_ref, i_ref = run_onnx("MaxPool", [x], attrs, n_out=2)
    y, idx = K.max_pool(x, **attrs)
    close(y, y_ref)
    if "auto_pad" not in attrs:
        np.testing.assert_array_equal(idx % 30, i_ref)
    # our indices do point at the maxima in the flattened input
    np.testing.assert_array_equal(x.ravel()[idx], y)


@pytest.mark.parametrize("attrs, xs", [
    (dict(kernel_shape=[3, 3]), (2, 2, 6, 7)),
    (dict(kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1]), (1, 3, 7, 6)),
    (dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1), (1, 2, 7, 8)),
    (dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1), (1, 2, 8, 8)),
    (dict(kernel_shape=[2, 3], strides=[2, 2], pads=[1, 0, 0, 1], ceil_mode=1,
          count_include_pad=1), (1, 2, 8, 7)),
    (dict(kernel_shape=[3], strides=[2], pads=[1, 1]), (2, 3, 9)),
    (dict(kernel_shape=[2, 2, 2], strides=[1, 2, 2], pads=[1, 0, 1, 0, 1, 0]), (1, 2, 4, 5, 5)),
])
def test_average_pool(rng, attrs, xs):
    x = f32(rng, *xs)
    (expected,) = run_onnx("AveragePool", [x], attrs)
    close(K.average_pool(x, **attrs), expected)


def test_average_pool_dilated(rng):
    x = f32(rng, 1, 2, 9, 8)
    attrs = dict(kernel_shape=[2, 3], dilations=[2, 2], strides=[1, 2], pads=[1, 1, 1, 1])
    (expected,) = run_onnx("AveragePool", [x], attrs, opset=19)
    close(K.average_pool(x, **attrs), expected)


def test_pool_ceil_mode_spec_shape():
    """ceil_mode drops a window that would start inside the end padding (PyTorch/ORT rule)."""
    x = np.arange(2 * 5, dtype=np.float64).reshape(1, 2, 5)
    y, _ = K.max_pool(x, kernel_shape=[2], strides=[3], ceil_mode=1)
    assert y.shape == (1, 2, 2)  # windows start at 0 and 3; a third would start at 6 >= 5
    np.testing.assert_array_equal(y[0, 0], [1, 4])
    a = K.average_pool(x, kernel_shape=[3], strides=[3], ceil_mode=1)
    np.testing.assert_allclose(a[0, 0], [1.0, 3.5])  # last window covers 2 real elements


def test_global_average_pool(rng):
    for shape in [(2, 3, 5), (2, 3, 4, 5), (1, 2, 3, 2, 4)]:
        x = f32(rng, *shape)
        (expected,) = run_onnx("GlobalAveragePool", [x])
        close(K.global_average_pool(x), expected)


# --- reductions -------------------------------------------------------------------------------

@pytest.mark.parametrize("op, fn", [("ReduceSum", K.reduce_sum), ("ReduceMean", K.reduce_mean)])
@pytest.mark.parametrize("axes, keepdims, noop", [
    (None, 1, 0), (None, 0, 0), ([1], 1, 0), ([-1, 0], 0, 0), ([0, 2], 1, 0), (None, 1, 1),
])
def test_reduce(rng, op, fn, axes, keepdims, noop):
    x = f32(rng, 3, 4, 5)
    ax = None if axes is None else np.array(axes, dtype=np.int64)
    (expected,) = run_onnx(op, [x, ax], dict(keepdims=keepdims, noop_with_empty_axes=noop))
    close(fn(x, ax, keepdims=keepdims, noop_with_empty_axes=noop), expected)


# --- binary / logic ------------------------------------------------------------------------------

BROADCAST_SHAPES = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 4)), ((1,), (2, 3)),
                    ((), (2, 3)), ((2, 1, 4), (3, 1))]


@pytest.mark.parametrize("op, fn", [("Add", K.add), ("Sub", K.sub), ("Mul", K.mul), ("Div", K.div)])
@pytest.mark.parametrize("sa, sb", BROADCAST_SHAPES)
def test_binary(rng, op, fn, sa, sb):
    a, b = f32(rng, *sa), f32(rng, *sb)
    if op == "Div":
        b = (np.sign(b) * (np.abs(b) + 0.5)).astype(np.float32)
    (expected,) = run_onnx(op, [a, b])
    got = fn(a, b)
    assert got.dtype == np.float32
    close(got, expected)


def test_div_integer_truncates():
    a = np.array([7, -7, 7, -7, 6], dtype=np.int64)
    b = np.array([2, 2, -2, -2, 3], dtype=np.int64)
    (expected,) = run_onnx("Div", [a, b])
    np.testing.assert_array_equal(K.div(a, b), expected)
    np.testing.assert_array_equal(K.div(a, b), [3, -3, -3, 3, 2])


@pytest.mark.parametrize("sa, sb, exp_dtype", [((3, 4), (3, 4), np.float32), ((2, 3), (3,), np.float32),
                                               ((2, 3), (), np.int64)])
def test_pow(rng, sa, sb, exp_dtype):
    a = (np.abs(f32(rng, *sa)) + 0.2).astype(np.float32)
    b = f32(rng, *sb).astype(exp_dtype) if exp_dtype != np.int64 else np.array(3, dtype=np.int64)
    (expected,) = run_onnx("Pow", [a, b])
    got = K.pow(a, b)
    assert got.dtype == np.float32
    close(got, expected)


def test_sum_variadic(rng):
    xs = [f32(rng, 3, 4), f32(rng, 4), f32(rng, 1, 4), f32(rng, 3, 1)]
    (expected,) = run_onnx("Sum", xs)
    close(K.sum(*xs), expected)
    close(K.sum(xs[0]), xs[0])


def test_where_equal_logic(rng):
    c = rng.random((3, 1)) > 0.5
    x, y = f32(rng, 3, 4), f32(rng, 4)
    (expected,) = run_onnx("Where", [c, x, y])
    close(K.where(c, x, y), expected)
    a = rng.integers(0, 3, (3, 4))
    b = rng.integers(0, 3, (4,))
    (expected,) = run_onnx("Equal", [a, b])
    np.testing.assert_array_equal(K.equal(a, b), expected)
    p, q = rng.random((2, 3)) > 0.5, rng.random((3,)) > 0.5
    for op, fn in [("And", K.logical_and), ("Or", K.logical_or)]:
        (expected,) = run_onnx(op, [p, q])
        np.testing.assert_array_equal(fn(p, q), expected)
    (expected,) = run_onnx("Not", [p])
    np.testing.assert_array_equal(K.logical_not(p), expected)


@pytest.mark.parametrize("to, np_to", [(TensorProto.INT64, np.int64), (TensorProto.FLOAT16, np.float16),
                                       (TensorProto.DOUBLE, np.float64), (TensorProto.BOOL, np.bool_),
                                       (TensorProto.INT32, np.int32)])
def test_cast(rng, to, np_to):
    x = (5 * f32(rng, 3, 4)).astype(np.float32)
    (expected,) = run_onnx("Cast", [x], dict(to=to))
    got = K.cast(x, to=to)
    assert got.dtype == np.dtype(np_to) == expected.dtype
    np.testing.assert_array_equal(got, expected)
    assert K.cast(x, to=np.float64).dtype == np.float64


# --- data movement ---------------------------------------------------------------------------------

@pytest.mark.parametrize("perm", [None, [1, 0, 2], [2, 0, 1]])
def test_transpose(rng, perm):
    x = f32(rng, 2, 3, 4)
    (expected,) = run_onnx("Transpose", [x], onnx_attrs(perm=perm))
    close(K.transpose(x, perm=perm), expected)


@pytest.mark.parametrize("xs, shape, allowzero", [
    ((2, 3, 4), [4, -1], 0), ((2, 3, 4), [0, -1], 0), ((2, 6, 2), [0, 0, 1, 2], 0),
    ((2, 3, 4), [-1], 0), ((2, 0, 3), [0, 3], 1),
])
def test_reshape(rng, xs, shape, allowzero):
    x = f32(rng, *xs)
    s = np.array(shape, dtype=np.int64)
    (expected,) = run_onnx("Reshape", [x, s], dict(allowzero=allowzero))
    close(K.reshape(x, s, allowzero=allowzero), expected)


def test_flatten_squeeze_unsqueeze(rng):
    x = f32(rng, 2, 3, 4, 5)
    for axis in [0, 1, 3, 4, -1, -3]:
        (expected,) = run_onnx("Flatten", [x], dict(axis=axis))
        close(K.flatten(x, axis=axis), expected)
    y = f32(rng, 3, 1, 4, 1)
    for axes in [None, [1], [-1, 1]]:
        ax = None if axes is None else np.array(axes, dtype=np.int64)
        (expected,) = run_onnx("Squeeze", [y, ax])
        close(K.squeeze(y, ax), expected)
    for axes in [[0], [1, -1], [0, 3]]:
        ax = np.array(axes, dtype=np.int64)
        (expected,) = run_onnx("Unsqueeze", [x, ax])
        close(K.unsqueeze(x, ax), expected)


@pytest.mark.parametrize("xs, shape", [((3, 1), (3, 4)), ((4,), (2, 3, 4)), ((2, 1, 3), (1, 4, 1)),
                                       ((3, 1), (1,))])
def test_expand(rng, xs, shape):
    x = f32(rng, *xs)
    s = np.array(shape, dtype=np.int64)
    (expected,) = run_onnx("Expand", [x, s])
    got = K.expand(x, s)
    close(got, expected)
    got[...] = 0  # must be a writable copy, not a broadcast view of x
    assert np.any(x != 0)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(rng, axis):
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    for s, extent in zip(shapes, [1, 2, 3]):
        s[axis] = extent
    xs = [f32(rng, *s) for s in shapes]
    (expected,) = run_onnx("Concat", xs, dict(axis=axis))
    close(K.concat(xs, axis=axis), expected)


@pytest.mark.parametrize("split, num_outputs, axis, n_out", [
    ([2, 3, 1], None, 1, 3), (None, 3, 1, 3), (None, 4, -1, 4), ([4, 1], None, 0, 2), (None, 2, 0, 2),
])
def test_split(rng, split, num_outputs, axis, n_out):
    x = f32(rng, 5, 6, 7)
    sp = None if split is None else np.array(split, dtype=np.int64)
    expected = run_onnx("Split", [x, sp], onnx_attrs(axis=axis, num_outputs=num_outputs), n_out=n_out)
    got = K.split(x, sp, axis=axis, num_outputs=num_outputs)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        close(g, e)


@pytest.mark.parametrize("starts, ends, axes, steps", [
    ([1], [3], None, None),
    ([0, 1], [2, -1], [0, 2], None),
    ([-1, 10], [-10, 1], [1, 2], [-1, -2]),
    ([1, 0], [1000, 5], [-1, 0], [2, 3]),
    ([-100], [100], [1], [1]),
    ([4], [-1000], [2], [-1]),
])
def test_slice(rng, starts, ends, axes, steps):
    x = f32(rng, 4, 5, 6)
    arr = lambda v: None if v is None else np.array(v, dtype=np.int64)  # noqa: E731
    (expected,) = run_onnx("Slice", [x, arr(starts), arr(ends), arr(axes), arr(steps)])
    close(K.slice(x, arr(starts), arr(ends), arr(axes), arr(steps)), expected)


@pytest.mark.parametrize("axis, ind", [(0, [[0, 2], [3, -1]]), (1, [1, 1, 0]), (-1, 2), (2, [[-2]])])
def test_gather(rng, axis, ind):
    x = f32(rng, 4, 3, 5)
    i = np.array(ind, dtype=np.int64)
    (expected,) = run_onnx("Gather", [x, i], dict(axis=axis))
    close(K.gather(x, i, axis=axis), expected)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads, axes", [
    ([1, 2, 0, 2, 1, 3], None), ([2, 1, 1, 2], [1, -1]), ([0, -1, 2, 1, 0, -2], None),
])
def test_pad(rng, mode, pads, axes):
    x = f32(rng, 3, 4, 5)
    p = np.array(pads, dtype=np.int64)
    ax = None if axes is None else np.array(axes, dtype=np.int64)
    val = np.array(1.5, dtype=np.float32) if mode == "constant" else None
    # onnx.reference (numpy.pad) rejects negative pads: pad the positive part
    # there and crop the negative part here.
    pos = np.maximum(p, 0)
    (expected,) = run_onnx("Pad", [x, pos, val, ax], dict(mode=mode), opset=19)
    k = len(pads) // 2
    axes_n = range(x.ndim) if axes is None else [a % x.ndim for a in axes]
    crop = [slice(None)] * x.ndim
    for i, a in enumerate(axes_n):
        crop[a] = slice(-min(pads[i], 0), expected.shape[a] + min(pads[k + i], 0))
    close(K.pad(x, p, val, ax, mode=mode), expected[tuple(crop)])


@pytest.mark.parametrize("mode", ["reflect", "wrap", "edge"])
def test_pad_longer_than_axis_matches_numpy(rng, mode):
    x = rng.standard_normal((3, 4))
    expected = np.pad(x, [(5, 7), (4, 9)], mode={"wrap": "wrap", "edge": "edge",
                                                 "reflect": "reflect"}[mode])
    close(K.pad(x, [5, 4, 7, 9], mode=mode), expected, rtol=0, atol=0)


# --- dropout and losses ---------------------------------------------------------------------------

def test_dropout(rng):
    x = f32(rng, 4, 5)
    # ratio 0 in training mode is the only deterministic ONNX reference case
    y_ref, m_ref = run_onnx("Dropout", [x, np.array(0.0, dtype=np.float32), np.array(True)], n_out=2)
    y, m = K.dropout_train(x, ratio=0.0)
    close(y, y_ref)
    np.testing.assert_array_equal(m, m_ref)
    y, m = K.dropout_train(x, ratio=0.25, seed=3)
    assert m.dtype == np.bool_ and y.dtype == np.float32
    close(y, np.where(m, x / 0.75, 0))
    y2, m2 = K.dropout_train(x, ratio=0.25, seed=3)
    np.testing.assert_array_equal(m, m2)
    y3, _ = K.dropout_train(x, ratio=0.25, mask=m)
    close(y3, y)
    big = np.ones((200, 200), dtype=np.float32)
    yb, mb = K.dropout_train(big, ratio=0.3, rng=np.random.default_rng(0))
    assert abs(mb.mean() - 0.7) < 0.01
    assert abs(yb.mean() - 1.0) < 0.02


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("scores_shape, use_weight, ignore_index", [
    ((5, 4), False, None), ((5, 4), True, None), ((5, 4), False, 2), ((5, 4), True, 1),
    ((3, 4, 2, 3), False, None), ((3, 4, 2), True, 0),
])
def test_softmax_cross_entropy_loss(rng, reduction, scores_shape, use_weight, ignore_index):
    scores = f32(rng, *scores_shape)
    C = scores_shape[1]
    labels = rng.integers(0, C, (scores_shape[0],) + scores_shape[2:]).astype(np.int64)
    labels.flat[0] = 1  # ensure at least one ignored and one kept element in the ignore cases
    labels.flat[-1] = (ignore_index + 1) % C if ignore_index is not None else labels.flat[-1]
    weight = (np.abs(f32(rng, C)) + 0.1) if use_weight else None
    attrs = onnx_attrs(reduction=reduction, ignore_index=ignore_index)
    loss_ref, lp_ref = run_onnx("SoftmaxCrossEntropyLoss", [scores, labels, weight], attrs, n_out=2)
    loss, lp = K.softmax_cross_entropy_loss(scores, labels, reduction=reduction,
                                            ignore_index=ignore_index, weight=weight)
    close(loss, loss_ref)
    close(lp, lp_ref)
    assert loss.dtype == np.float32


def test_softmax_cross_entropy_ignored_negative_label(rng):
    """ignore_index=-100 (PyTorch default): the label is never used as an index."""
    scores = rng.standard_normal((4, 3))
    labels = np.array([0, -100, 2, 1])
    loss, lp = K.softmax_cross_entropy_loss(scores, labels, ignore_index=-100,
                                            weight=np.array([1.0, 2.0, 3.0]))
    keep = [0, 2, 3]
    w = np.array([1.0, 3.0, 2.0])
    expected = -np.sum(w * lp[keep, labels[keep]]) / w.sum()
    np.testing.assert_allclose(loss, expected, rtol=1e-12)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss(rng, reduction):
    p, t = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    d2 = (p - t) ** 2
    expected = {"mean": d2.mean(), "sum": d2.sum(), "none": d2}[reduction]
    close(K.mse_loss(p, t, reduction=reduction), expected, rtol=1e-12)


# --- helpers ----------------------------------------------------------------------------------------

def test_reduce_to_shape():
    g = np.arange(24.0).reshape(2, 3, 4)
    close(K.reduce_to_shape(g, (4,)), g.sum(axis=(0, 1)))
    close(K.reduce_to_shape(g, (3, 1)), g.sum(axis=(0, 2))[:, None])
    close(K.reduce_to_shape(g, (1, 1, 1)), g.sum().reshape(1, 1, 1))
    close(K.reduce_to_shape(g, ()), g.sum())
    close(K.reduce_to_shape(np.ones((1, 4)), (1, 1, 4)), np.ones((1, 1, 4)))
    with pytest.raises(ValueError):
        K.reduce_to_shape(g, (2,))


def test_float32_preserved(rng):
    """Kernels never silently widen float32 (NumPy 2 promotes with numpy float64 scalars)."""
    x = f32(rng, 2, 3, 5, 5)
    w = f32(rng, 4, 3, 3, 3)
    s = f32(rng, 3)
    outs = [
        K.conv(x, w, s[:1].repeat(4), pads=[1, 1, 1, 1]),
        K.conv_transpose(x, w.transpose(1, 0, 2, 3).copy()),
        K.max_pool(x, kernel_shape=[2, 2])[0], K.average_pool(x, kernel_shape=[2, 2]),
        K.global_average_pool(x), *K.batch_norm_train(x, s, s), *K.layer_norm(x, x[0], None, axis=1),
        K.gelu(x), K.gelu(x, approximate="tanh"), K.erf(x), K.hard_swish(x), K.sigmoid(x),
        K.softmax(x), K.log_softmax(x), K.pad(x, [1] * 8, mode="reflect"), K.reduce_mean(x),
        K.gemm(x[0, 0], x[0, 1], x[0, 2], alpha=np.float64(0.5), beta=np.float64(2.0)),
        K.dropout_train(x, ratio=0.5, seed=0)[0],
        K.conv_grad_input(K.conv(x, w), w, x.shape), K.conv_grad_weight(K.conv(x, w), x, w.shape),
        K.average_pool_grad(K.average_pool(x, kernel_shape=[3, 3]), x.shape, kernel_shape=[3, 3]),
        K.max_pool_grad(*K.max_pool(x, kernel_shape=[2, 2]), x.shape),
        K.gelu_grad(x, x), K.erf_grad(x, x), K.batch_norm_train_grad(x, x, s, s, s)[0],
        K.layer_norm_grad(x, x, s[0], *K.layer_norm(x, s[0])[1:])[0],
        K.softmax_cross_entropy_loss_grad(np.float32(1), K.log_softmax(x[:, :, 0, 0], axis=1),
                                          np.array([0, 2])),
        *K.pow_grad(x, np.abs(x) + 1, np.float32(2.0)),
        *K.adam(x, x, x, x * x, step=3, lr=1e-3), *K.adagrad(x, x, x * x, step=2, lr=0.1),
    ]
    for i, o in enumerate(outs):
        assert o.dtype == np.float32, (i, o.dtype)
