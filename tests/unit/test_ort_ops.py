"""ONNX Runtime training ops (monet_ir/frontend/ort_ops.py and the ORT converters of onnx_ops):
each imports onto the `nn`/`grad` ops named in docs/importer.md, with ORT's semantics checked
numerically through the interpreter against the formula of ORT's op schema, and each refusal
is one line naming the node."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from monet_ir import import_onnx, parse_module, print_module
from monet_ir.analysis.accounting import op_flops
from monet_ir.errors import MonetError
from monet_ir.graph import compute_ops, step_function
from monet_ir.interp.numpy_impl import run_function

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
RNG = np.random.default_rng(0)


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)],
                             ir_version=8)


def imported(m):
    module = import_onnx(m.SerializeToString(), source_name="t.onnx")
    module.verify()
    text = print_module(module)
    assert print_module(parse_module(text)) == text  # round-trips through text
    return module


def run(module, *args):
    return run_function(step_function(module), [np.asarray(a) for a in args]).outputs


def op_names(module):
    return [op.name for op in compute_ops(step_function(module)) if op.name != "nn.constant"]


def refusal(m) -> str:
    with pytest.raises(MonetError) as info:
        import_onnx(m.SerializeToString(), source_name="t.onnx")
    lines = str(info.value).splitlines()
    assert len(lines) == 1
    return lines[0]


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def gelu(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def gelu_grad(x):
    return 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2))) + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi)


def unary_grad_model(op_type, shape=(3, 4), **attrs):
    node = helper.make_node(op_type, ["dy", "y"], ["dx"], domain="com.microsoft", name=f"/act_Grad/{op_type}_0", **attrs)
    return model([node], [vi("dy", F, shape), vi("y", F, shape)], [vi("dx", F, shape)])


@pytest.mark.parametrize("op_type, ours, formula", [
    ("SigmoidGrad", "grad.sigmoid", lambda dy, y: dy * y * (1 - y)),
    ("TanhGrad", "grad.tanh", lambda dy, y: dy * (1 - y * y)),
])
def test_gradients_from_the_forward_output(op_type, ours, formula):
    module = imported(unary_grad_model(op_type))
    assert op_names(module) == [ours]
    dy, y = RNG.standard_normal((3, 4)).astype(np.float32), RNG.uniform(-0.9, 0.9, (3, 4)).astype(np.float32)
    np.testing.assert_allclose(run(module, dy, y)[0], formula(dy, y), rtol=1e-5)


def test_leaky_relu_grad_reads_the_output_sign():
    module = imported(unary_grad_model("LeakyReluGrad", alpha=0.1))
    assert op_names(module) == ["grad.leaky_relu"]
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    y, dy = np.where(x > 0, x, 0.1 * x), RNG.standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(run(module, dy, y)[0], np.where(x > 0, dy, 0.1 * dy), rtol=1e-6)
    message = refusal(unary_grad_model("LeakyReluGrad", alpha=-0.5))
    assert message.startswith("t.onnx: node '/act_Grad/LeakyReluGrad_0' (com.microsoft::LeakyReluGrad): alpha = -0.5")


def dropout_grad_model(training: bool):
    inits = [helper.make_tensor("ratio", F, [], [0.25]), helper.make_tensor("train", B, [], [training])]
    node = helper.make_node("DropoutGrad", ["dy", "mask", "ratio", "train"], ["dx"], domain="com.microsoft",
                            name="/drop_Grad/DropoutGrad_0")
    return model([node], [vi("dy", F, [2, 8]), vi("mask", B, [2, 8])], [vi("dx", F, [2, 8])], inits)


def test_dropout_grad_scales_the_kept_elements():
    module = imported(dropout_grad_model(True))
    assert op_names(module) == ["grad.dropout"]
    dy, mask = RNG.standard_normal((2, 8)).astype(np.float32), RNG.random((2, 8)) > 0.25
    np.testing.assert_allclose(run(module, dy, mask)[0], dy * mask / 0.75, rtol=1e-6)
    assert op_names(imported(dropout_grad_model(False))) == []  # inference mode: the identity


@pytest.mark.parametrize("scale_down", [0, 1])
def test_scale(scale_down):
    node = helper.make_node("Scale", ["x", "s"], ["y"], domain="com.microsoft", scale_down=scale_down)
    module = imported(model([node], [vi("x", F, [2, 3])], [vi("y", F, [2, 3])], [helper.make_tensor("s", F, [], [4.0])]))
    assert op_names(module) == ["nn.div" if scale_down else "nn.mul"]
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(run(module, x)[0], x / 4 if scale_down else x * 4, rtol=1e-6)


@pytest.mark.parametrize("alpha", [1.0, 1.702])
def test_quick_gelu_and_its_gradient(alpha):
    fwd = helper.make_node("QuickGelu", ["x"], ["y"], domain="com.microsoft", alpha=alpha)
    bwd = helper.make_node("QuickGeluGrad", ["dy", "x"], ["dx"], domain="com.microsoft", alpha=alpha,
                           name="/act_Grad/QuickGeluGrad_0")
    shape = [2, 5]
    module = imported(model([fwd, bwd], [vi("x", F, shape), vi("dy", F, shape)], [vi("y", F, shape), vi("dx", F, shape)]))
    x, dy = RNG.standard_normal(shape).astype(np.float32), RNG.standard_normal(shape).astype(np.float32)
    y, dx = run(module, x, dy)
    s = sigmoid(alpha * x)
    np.testing.assert_allclose(y, x * s, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dx, dy * (s + alpha * x * s * (1 - s)), rtol=1e-5, atol=1e-6)
    # alpha = 1 (SiLU) is a sigmoid and a product, as PyTorch's export writes it
    forward = [op.name for op in compute_ops(step_function(module)) if op.name != "nn.constant"][:3 if alpha != 1.0 else 2]
    assert forward == (["nn.sigmoid", "nn.mul"] if alpha == 1.0 else ["nn.mul", "nn.sigmoid", "nn.mul"])


def test_bias_gelu_and_its_gradient_with_the_bias():
    fwd = helper.make_node("BiasGelu", ["a", "b"], ["y"], domain="com.microsoft")
    bwd = helper.make_node("BiasGeluGrad_dX", ["dy", "a", "b"], ["da"], domain="com.microsoft",
                           name="BiasGelu_Grad/BiasGeluGrad_dX_0")
    module = imported(model([fwd, bwd], [vi("a", F, [2, 6]), vi("b", F, [6]), vi("dy", F, [2, 6])],
                            [vi("y", F, [2, 6]), vi("da", F, [2, 6])]))
    assert op_names(module) == ["nn.add", "nn.gelu", "nn.add", "grad.gelu"]
    a, b, dy = (RNG.standard_normal(s).astype(np.float32) for s in ((2, 6), (6,), (2, 6)))
    y, da = run(module, a, b, dy)
    np.testing.assert_allclose(y, gelu(a + b), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(da, dy * gelu_grad(a + b), rtol=1e-4, atol=1e-5)


def test_conv_transpose_grad_is_the_adjoint_of_the_transposed_convolution():
    x_shape, w_shape, y_shape = [2, 4, 3, 3], [4, 3, 2, 2], [2, 3, 6, 6]
    geometry = dict(strides=[2, 2], kernel_shape=[2, 2], pads=[0, 0, 0, 0])
    fwd = model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], **geometry)],
                [vi("x", F, x_shape), vi("w", F, w_shape)], [vi("y", F, y_shape)])
    bwd = model([helper.make_node("ConvTransposeGrad", ["dy", "x", "w"], ["dx", "dw", "db"], domain="com.microsoft",
                                  name="/up_Grad/ConvTransposeGrad_0", group=1, **geometry)],
                [vi("dy", F, y_shape), vi("x", F, x_shape), vi("w", F, w_shape)],
                [vi("dx", F, x_shape), vi("dw", F, w_shape), vi("db", F, [3])])
    forward, backward = imported(fwd), imported(bwd)
    assert op_names(backward) == ["nn.conv", "grad.conv_weight", "grad.conv_bias"]
    x, w, dy = (RNG.standard_normal(s).astype(np.float32) for s in (x_shape, w_shape, y_shape))
    (y,) = run(forward, x, w)
    dx, dw, db = run(backward, dy, x, w)
    # y is linear in x and in w: <y, dy> = <x, dx> = <w, dw>
    np.testing.assert_allclose(np.sum(x * dx), np.sum(y * dy), rtol=1e-4)
    np.testing.assert_allclose(np.sum(w * dw), np.sum(y * dy), rtol=1e-4)
    np.testing.assert_allclose(db, dy.sum(axis=(0, 2, 3)), rtol=1e-5)
    # each product is the forward's loop nest
    (ct,) = [op for op in compute_ops(step_function(forward)) if op.name == "nn.conv_transpose"]
    macs = sum(op_flops(ct).values())
    for op in compute_ops(step_function(backward)):
        if op.name in ("nn.conv", "grad.conv_weight"):
            assert sum(op_flops(op).values()) == macs


def test_concat_training_lengths_feed_split_training():
    concat = helper.make_node("ConcatTraining", ["a", "b"], ["c", "lengths"], domain="com.microsoft", axis=1,
                              name="/cat/ConcatReplacement/")
    split = helper.make_node("SplitTraining", ["dc", "lengths"], ["a_grad", "b_grad"], domain="com.microsoft", axis=1,
                             name="/cat/ConcatReplacement/_Grad/SplitTraining_0")
    m = model([concat, split], [vi("a", F, [2, 3, 4]), vi("b", F, [2, 5, 4]), vi("dc", F, [2, 8, 4])],
              [vi("c", F, [2, 8, 4]), vi("a_grad", F, [2, 3, 4]), vi("b_grad", F, [2, 5, 4])])
    del m.graph.output[1:]  # the split's shapes come from the gradient names (`<tensor>_grad`)
    m.graph.output.extend([vi("a_grad", F, [2, 3, 4]), vi("b_grad", F, [2, 5, 4])])
    module = imported(m)
    assert op_names(module) == ["nn.concat", "nn.split"]
    a, b, dc = (RNG.standard_normal(s).astype(np.float32) for s in ((2, 3, 4), (2, 5, 4), (2, 8, 4)))
    c, da, db = run(module, a, b, dc)
    np.testing.assert_array_equal(c, np.concatenate([a, b], 1))
    np.testing.assert_array_equal(da, dc[:, :3])
    np.testing.assert_array_equal(db, dc[:, 3:])


def test_slice_grad_writes_dy_into_zeros_of_the_input_shape():
    inits = [helper.make_tensor(n, I64, [len(v)], v) for n, v in
             (("shape", [2, 7]), ("starts", [1]), ("ends", [6]), ("axes", [1]), ("steps", [2]))]
    node = helper.make_node("SliceGrad", ["dy", "shape", "starts", "ends", "axes", "steps"], ["dx"],
                            domain="com.microsoft", name="/Slice_Grad/SliceGrad_0")
    module = imported(model([node], [vi("dy", F, [2, 3])], [vi("dx", F, [2, 7])], inits))
    assert op_names(module) == ["grad.slice"]
    dy = RNG.standard_normal((2, 3)).astype(np.float32)
    expected = np.zeros((2, 7), np.float32)
    expected[:, 1:6:2] = dy
    np.testing.assert_array_equal(run(module, dy)[0], expected)

def batch_norm_internal_model(stat_reader: str):
    bn = helper.make_node("BatchNormInternal", ["x", "g", "b", "m", "v"], ["y", "rm", "rv", "sm", "sv"],
                          domain="com.microsoft", epsilon=1e-5, momentum=0.9, training_mode=1, name="/bn/BatchNormInternal")
    reader = (helper.make_node("BatchNormalizationGrad", ["dy", "x", "g", "sm", "sv"], ["dx", "dg", "db"],
                               domain="com.microsoft", epsilon=1e-5, name="/bn_Grad/BatchNormalizationGrad_0")
              if stat_reader == "grad" else helper.make_node("Neg", ["sm"], ["dx"], name="/Neg"))
    outs = [vi("y", F, [4, 3, 2, 2]), vi("dx", F, [4, 3, 2, 2] if stat_reader == "grad" else [3])]
    return model([bn, reader], [vi("x", F, [4, 3, 2, 2]), vi("dy", F, [4, 3, 2, 2])] + [vi(n, F, [3]) for n in "gbmv"],
                 outs)


def test_batch_norm_internal_normalizes_with_the_batch_statistics():
    module = imported(batch_norm_internal_model("grad"))
    assert op_names(module) == ["nn.batch_norm", "grad.batch_norm"]
    x, dy = RNG.standard_normal((4, 3, 2, 2)).astype(np.float32), RNG.standard_normal((4, 3, 2, 2)).astype(np.float32)
    stats = [np.array(v, np.float32) for v in ([1, 2, 3], [0, 1, 0], [0, 0, 0], [1, 1, 1])]
    y = run(module, x, dy, *stats)[0]
    mean, var = x.mean(axis=(0, 2, 3), keepdims=True), x.var(axis=(0, 2, 3), keepdims=True)
    g, b = np.array([1, 2, 3.0]).reshape(1, 3, 1, 1), np.array([0, 1, 0.0]).reshape(1, 3, 1, 1)
    np.testing.assert_allclose(y, g * (x - mean) / np.sqrt(var + 1e-5) + b, rtol=1e-4, atol=1e-5)
    message = refusal(batch_norm_internal_model("neg"))
    assert message == ("t.onnx: node '/bn/BatchNormInternal' (com.microsoft::BatchNormInternal): the saved statistics "
                       "output 'sm' is read by node '/Neg'; it is not modelled as a value")


def test_layer_norm_statistics_read_by_its_gradient_import():
    ln = helper.make_node("LayerNormalization", ["x", "g", "b"], ["y", "mean", "inv_std"], axis=-1, name="/ln/LN")
    grad = helper.make_node("LayerNormalizationGrad", ["dy", "x", "g", "mean", "inv_std"], ["dx", "dg", "db"],
                            domain="com.microsoft", axis=-1, name="/ln/LN_Grad/LayerNormalizationGrad_0")
    inits = [helper.make_tensor("g", F, [4], [1.0] * 4), helper.make_tensor("b", F, [4], [0.0] * 4)]
    m = model([ln, grad], [vi("x", F, [2, 4]), vi("dy", F, [2, 4])], [vi("y", F, [2, 4]), vi("dx", F, [2, 4])], inits)
    assert op_names(imported(m)) == ["nn.layer_norm", "grad.layer_norm"]
    neg = helper.make_node("Neg", ["mean"], ["m2"], name="/Neg")
    m = model([ln, neg], [vi("x", F, [2, 4])], [vi("y", F, [2, 4]), vi("m2", F, [2, 1])], inits)
    assert "the statistics output 'mean' is used" in refusal(m)


def test_simplified_layer_norm_and_its_gradient_from_the_saved_statistic():
    """ORT's RMSNorm fusion: y = x / sqrt(mean(x^2) + eps) * scale, its gradient reading the saved
    inverse root mean square."""
    fwd = helper.make_node("SimplifiedLayerNormalization", ["x", "s"], ["y", "inv"], axis=-1, epsilon=1e-6,
                           name="/norm/SimplifiedLayerNormFusion/")
    bwd = helper.make_node("SimplifiedLayerNormalizationGrad", ["dy", "x", "s", "inv"], ["dx", "ds"],
                           domain="com.microsoft", axis=-1, epsilon=1e-6,
                           name="/norm/SimplifiedLayerNormFusion/_Grad/SimplifiedLayerNormalizationGrad_0")
    shape = [2, 3, 8]
    m = model([fwd, bwd], [vi("x", F, shape), vi("s", F, [8]), vi("dy", F, shape)],
              [vi("y", F, shape), vi("dx", F, shape), vi("ds", F, [8])])
    module = imported(m)
    x, s, dy = (RNG.standard_normal(d).astype(np.float32) for d in (shape, [8], shape))
    y, dx, ds = run(module, x, s, dy)
    r = 1 / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(y, x * r * s, rtol=1e-5, atol=1e-6)
    # the gradient of sum(y * dy), by central differences on x and s
    def loss(xv, sv):
        rv = 1 / np.sqrt((xv.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6)
        return float(np.sum(xv * rv * sv * dy))

    eps, numeric_dx = 1e-3, np.zeros_like(x, dtype=np.float64)
    for i in np.ndindex(*shape):
        up, down = x.astype(np.float64), x.astype(np.float64)
        up[i] += eps
        down[i] -= eps
        numeric_dx[i] = (loss(up, s) - loss(down, s)) / (2 * eps)
    np.testing.assert_allclose(dx, numeric_dx, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(ds, (dy * x * r).sum(axis=(0, 1)), rtol=1e-5, atol=1e-5)
    # the mean of squares is reduced once, in the forward pass: the gradient reads the saved r
    reduce_means = [op for op in compute_ops(step_function(module)) if op.name == "nn.reduce_mean"]
    assert len(reduce_means) == 2  # mean(x^2) forward, mean(g * x̂) backward


def test_accumulator_v2_with_its_overwrite_flag():
    node = helper.make_node("InPlaceAccumulatorV2", ["p_grad.accumulation.buffer", "p_grad", "lazy_reset_grad"],
                            ["p_grad.accumulation.out"], domain="com.microsoft", name="GradientAccumulator0")
    m = model([node], [vi("p_grad", F, [3]), vi("p_grad.accumulation.buffer", F, [3]), vi("lazy_reset_grad", B, [1])],
              [vi("p_grad.accumulation.out", B, [1])])
    module = imported(m)
    assert op_names(module) == ["train.accumulate"]
    (acc,) = [op for op in compute_ops(step_function(module)) if op.name == "train.accumulate"]
    assert sum(op_flops(acc).values()) == 3  # one addition per element
    g, buf = np.ones(3, np.float32), np.full(3, 2.0, np.float32)
    (flag,) = run(module, g, buf, np.array([False]))
    assert flag.tolist() == [True]
    np.testing.assert_array_equal(buf, [3.0, 3.0, 3.0])


@pytest.mark.parametrize("op_type, reference", [("LessOrEqual", np.less_equal), ("GreaterOrEqual", np.greater_equal)])
def test_comparisons_or_equal(op_type, reference):
    node = helper.make_node(op_type, ["a", "b"], ["m"])
    module = imported(model([node], [vi("a", F, [5]), vi("b", F, [])], [vi("m", B, [5])]))
    assert "or_equal = true" in print_module(module)
    a = np.array([-1.0, 0.0, 0.5, 1.0, 2.0], np.float32)
    np.testing.assert_array_equal(run(module, a, np.float32(0.5))[0], reference(a, 0.5))


def test_cross_entropy_with_the_classes_last_in_a_training_graph():
    """ORT's cross-entropy block takes the classes on the last axis: (B, T, V) scores and (B, T)
    labels, forward loss and gradient alike."""
    loss = helper.make_node("SoftmaxCrossEntropyLoss", ["s", "labels"], ["loss", "log_prob"], reduction="mean",
                            name="SoftmaxCrossEntropyLoss")
    grad = helper.make_node("SoftmaxCrossEntropyLossGrad", ["one", "log_prob", "labels"], ["s_grad"],
                            domain="com.microsoft", reduction="mean", name="SoftmaxCrossEntropyLoss_Grad/SCEGrad_0")
    m = model([loss, grad], [vi("s", F, [2, 3, 7]), vi("labels", I64, [2, 3])],
              [vi("loss", F, []), vi("s_grad", F, [2, 3, 7])], [helper.make_tensor("one", F, [], [1.0])])
    module = imported(m)
    assert print_module(module).count("class_axis = 2") == 2
    s, labels = RNG.standard_normal((2, 3, 7)).astype(np.float32), RNG.integers(0, 7, (2, 3))
    value, ds = run(module, s, labels)
    log_prob = s - np.log(np.exp(s).sum(-1, keepdims=True))
    chosen = np.take_along_axis(log_prob, labels[..., None], -1)
    np.testing.assert_allclose(value, -chosen.mean(), rtol=1e-5)
    expected = np.exp(log_prob)
    np.put_along_axis(expected, labels[..., None], np.take_along_axis(expected, labels[..., None], -1) - 1, -1)
    np.testing.assert_allclose(ds, expected / labels.size, rtol=1e-5, atol=1e-7)


def test_pool_gradients_in_the_standard_domain():
    nodes = [helper.make_node("MaxPool", ["x"], ["y", "idx"], kernel_shape=[2, 2], strides=[2, 2], name="/pool"),
             helper.make_node("MaxPoolGrad", ["dy", "idx"], ["dx"], kernel_shape=[2, 2], strides=[2, 2],
                              name="/pool_Grad/MaxPoolGrad_0"),
             helper.make_node("AveragePoolGrad", ["dy"], ["dx2"], kernel_shape=[2, 2], strides=[2, 2],
                              name="/pool_Grad/AveragePoolGrad_0")]
    m = model(nodes, [vi("x", F, [1, 2, 4, 4]), vi("dy", F, [1, 2, 2, 2])],
              [vi("y", F, [1, 2, 2, 2]), vi("dx", F, [1, 2, 4, 4]), vi("dx2", F, [1, 2, 4, 4])])
    assert op_names(imported(m)) == ["nn.max_pool", "grad.max_pool", "grad.avg_pool"]


def test_recurrent_training_refusals_name_the_node():
    # the saved gates read by a node other than the gradient op have no value of their own
    training, _ = recurrent_models("LSTM", False)
    training.graph.node.append(helper.make_node("Neg", ["iofc"], ["n"], name="/Neg"))
    message = refusal(training)
    assert message.startswith("t.onnx: node '/rnn/LSTM_training' (com.microsoft::LSTMTraining): the saved gates "
                              "output 'iofc' is read by node '/Neg'")
    # GRU's other reset placement
    training, _ = recurrent_models("GRU", False)
    for n in training.graph.node:
        for a in n.attribute:
            if a.name == "linear_before_reset":
                a.i = 0
    message = refusal(training)
    assert message == ("t.onnx: node '/rnn/GRU_training_Grad/GRUGrad_0' (com.microsoft::GRUGrad): "
                       "linear_before_reset = 0 is not modelled (PyTorch's GRU exports 1)")


def test_onnx_checker_accepts_the_standard_part_of_these_models():
    # the hand-written models above are valid ONNX where they use the standard domain
    onnx.checker.check_model(model([helper.make_node("LessOrEqual", ["a", "b"], ["m"])],
                                   [vi("a", F, [5]), vi("b", F, [])], [vi("m", B, [5])]))


def recurrent_models(kind: str, with_initial: bool, steps=3, batch=2, size=3, hidden=2):
    """An LSTMTraining/GRUTraining node and its gradient as generate_artifacts writes them (the
    gradient reads the forward's saved gates), and the plain ONNX LSTM/GRU of the same inputs."""
    gates = 4 if kind == "LSTM" else 3
    names = ["x", "w", "r", "b", "", "h0"] + (["c0"] if kind == "LSTM" else [])
    if not with_initial:
        names = names[:4]
    inputs = [vi("x", F, [steps, batch, size]), vi("w", F, [1, gates * hidden, size]),
              vi("r", F, [1, gates * hidden, hidden]), vi("b", F, [1, 2 * gates * hidden])]
    if with_initial:
        inputs += [vi(n, F, [1, batch, hidden]) for n in names[5:]]
    attrs = {"hidden_size": hidden, "direction": "forward"}
    if kind == "GRU":
        attrs["linear_before_reset"] = 1
    y_shape = [steps, 1, batch, hidden]
    if kind == "LSTM":
        fwd = helper.make_node("LSTMTraining", names, ["y", "yh", "yc", "all_c", "iofc"], domain="com.microsoft",
                               name="/rnn/LSTM_training", **attrs)
        grad_inputs = ["x", "w", "r", "", names[5] if with_initial else "", names[6] if with_initial else "", "y",
                       "all_c", "iofc", "dy", "", ""]
        grad_outputs = ["dx", "dw", "dr", "db", "", ""]
    else:
        fwd = helper.make_node("GRUTraining", names, ["y", "yh", "zrh"], domain="com.microsoft",
                               name="/rnn/GRU_training", **attrs)
        grad_inputs = ["x", "w", "r", "b", "", names[5] if with_initial else "", "y", "zrh", "dy", ""]
        grad_outputs = ["dx", "dw", "dr", "db", ""]
    bwd = helper.make_node(f"{kind}Grad", grad_inputs, grad_outputs, domain="com.microsoft",
                           name=f"/rnn/{kind}_training_Grad/{kind}Grad_0", **attrs)
    outputs = [vi("y", F, y_shape), vi("dx", F, [steps, batch, size]), vi("dw", F, [1, gates * hidden, size]),
               vi("dr", F, [1, gates * hidden, hidden]), vi("db", F, [1, 2 * gates * hidden])]
    training = model([fwd, bwd], inputs + [vi("dy", F, y_shape)], outputs)
    plain = model([helper.make_node(kind, names, ["y"], name="/rnn", **attrs)], inputs, [vi("y", F, y_shape)])
    return training, plain


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("with_initial", [False, True])
def test_recurrent_training_gradients_match_finite_differences(kind, with_initial):
    training, plain = recurrent_models(kind, with_initial)
    grads_module, forward_module = imported(training), imported(plain)
    gates = 4 if kind == "LSTM" else 3
    shapes = [(3, 2, 3), (1, gates * 2, 3), (1, gates * 2, 2), (1, 4 * gates)]
    if with_initial:
        shapes += [(1, 2, 2)] * (2 if kind == "LSTM" else 1)
    args = [RNG.uniform(-1, 1, s).astype(np.float32) for s in shapes]
    dy = RNG.uniform(-1, 1, (3, 1, 2, 2)).astype(np.float32)
    y, dx, dw, dr, db = run(grads_module, *args, dy)
    np.testing.assert_allclose(y, run(forward_module, *args)[0], rtol=1e-5, atol=1e-6)

    def loss(values):
        return float(np.sum(run(forward_module, *values)[0].astype(np.float64) * dy))

    for k, analytic in enumerate([dx, dw, dr, db]):
        numeric = np.zeros(shapes[k])
        for i in np.ndindex(*shapes[k]):
            up, down = [a.copy() for a in args], [a.copy() for a in args]
            up[k][i] += 1e-2
            down[k][i] -= 1e-2
            numeric[i] = (loss(up) - loss(down)) / 2e-2
        np.testing.assert_allclose(analytic, numeric, rtol=2e-2, atol=2e-3, err_msg=f"gradient of input {k}")
    # the backward's products: one dX and one dW product over all steps, and per step after the
    # first one product for dh and one for dR per recurrent weight block
    names = op_names(grads_module)
    blocks = 1 if kind == "LSTM" else 2
    recurrent_steps = 3 if with_initial else 2
    assert names.count("grad.matmul_lhs") == 1 + blocks * recurrent_steps
    assert names.count("grad.matmul_rhs") == 1 + blocks * recurrent_steps
