"""ONNX LSTM and GRU, unrolled over the sequence (monet_ir/frontend/onnx_recurrent.py): the
forward values agree with onnx.reference for each variant (bias or not, initial state or not,
reverse, GRU's linear_before_reset), a zero initial state costs no op and no parameter, the
FLOPs are the cell's, and what is not modelled is a one-line error naming the node. Gradients
are checked by finite differences through the onnx_cases entries (tests/unit/test_autodiff.py)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from monet_ir import import_onnx
from monet_ir.frontend.onnx_import import OnnxImportError
from monet_ir.interp.run import run_module

F = TensorProto.FLOAT
T, B, I, H = 4, 2, 3, 5


def rnn_model(op, *, bias=True, h0=True, c0=True, outputs=("y",), inits=(), **attrs):
    gates = 4 if op == "LSTM" else 3
    shapes = {"x": [T, B, I], "w": [1, gates * H, I], "r": [1, gates * H, H], "b": [1, 2 * gates * H],
              "h0": [1, B, H], "c0": [1, B, H]}
    names = ["x", "w", "r", "b" if bias else "", "", "h0" if h0 else ""]
    if op == "LSTM":
        names.append("c0" if c0 else "")
    while names[-1] == "":
        names.pop()
    init_names = {t.name for t in inits}
    inputs = [helper.make_tensor_value_info(n, F, shapes[n]) for n in names if n and n not in init_names]
    out_shapes = {"y": [T, 1, B, H], "yh": [1, B, H], "yc": [1, B, H]}
    node_outputs = [o if o in outputs else "" for o in ("y", "yh", "yc")[: 3 if op == "LSTM" else 2]]
    while node_outputs[-1] == "":
        node_outputs.pop()
    node = helper.make_node(op, names, node_outputs, name=f"/rnn/{op}", hidden_size=H, **attrs)
    graph = helper.make_graph([node], "rnn", inputs, [helper.make_tensor_value_info(o, F, out_shapes[o])
                                                        for o in outputs], list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), shapes


def feeds_for(model, shapes, rng):
    return {i.name: rng.standard_normal(shapes[i.name]).astype(np.float32) for i in model.graph.input}


VARIANTS = [
    ("LSTM", {}, {}),
    ("LSTM", {"bias": False, "h0": False, "c0": False}, {}),
    ("LSTM", {"c0": False}, {"direction": "reverse"}),
    ("GRU", {}, {}),
    ("GRU", {}, {"linear_before_reset": 1}),
    ("GRU", {"h0": False}, {"linear_before_reset": 1}),
    ("GRU", {"h0": False}, {"direction": "reverse"}),
    ("GRU", {"bias": False, "h0": False}, {}),
]


@pytest.mark.parametrize("op,inputs,attrs", VARIANTS, ids=[f"{o}-{i}-{a}" for o, i, a in VARIANTS])
def test_forward_matches_onnx_reference(op, inputs, attrs):
    outputs = ("y", "yh", "yc") if op == "LSTM" else ("y", "yh")
    model, shapes = rnn_model(op, outputs=outputs, **inputs, **attrs)
    feeds = feeds_for(model, shapes, np.random.default_rng(11))
    expected = ReferenceEvaluator(model).run(None, feeds)
    module = import_onnx(model.SerializeToString(), source_name="rnn.onnx")
    module.verify()
    got = run_module(module, {}, feeds).outputs
    for name, g, e in zip(outputs, got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6, err_msg=name)


def test_zero_initial_state_initializer_is_no_parameter_and_no_op():
    """The dynamo exporter writes PyTorch's default zero state as an initializer."""
    zeros = numpy_helper.from_array(np.zeros((1, B, H), np.float32), "h0")
    model, shapes = rnn_model("GRU", bias=False, inits=[zeros])
    module = import_onnx(model.SerializeToString(), source_name="rnn.onnx")
    text = str(module)
    assert "h0" not in text
    # T input projections fused into one product, T - 1 recurrent products (none at the first step)
    assert sum(op.name == "nn.matmul" for op in module.walk()) == 1 + 2 * (T - 1)
    feeds = feeds_for(model, shapes, np.random.default_rng(2))
    expected = ReferenceEvaluator(model).run(None, {**feeds, "h0": np.zeros((1, B, H), np.float32)})[0]
    np.testing.assert_allclose(run_module(module, {}, feeds).outputs[0], expected, rtol=1e-5, atol=1e-6)


def test_only_the_outputs_read_are_built():
    model, _ = rnn_model("LSTM", outputs=("yh",))
    module = import_onnx(model.SerializeToString(), source_name="rnn.onnx")
    assert not any(op.name == "nn.concat" for op in module.walk())


@pytest.mark.parametrize("attrs,message", [
    ({"direction": "bidirectional"}, "direction 'bidirectional' is not modelled (forward and reverse are)"),
    ({"layout": 1}, "layout = 1 (batch-major) is not modelled"),
    ({"clip": 3.0}, "clip is not modelled"),
    ({"activations": ["Relu", "Tanh"]}, "activations ['Relu', 'Tanh'] are not modelled (the default ['Sigmoid', 'Tanh'] is)"),
])
def test_what_is_not_modelled_is_a_one_line_error(attrs, message):
    model, _ = rnn_model("GRU", **attrs)
    with pytest.raises(OnnxImportError) as info:
        import_onnx(model.SerializeToString(), source_name="rnn.onnx")
    assert str(info.value).splitlines()[0] == f"rnn.onnx: node '/rnn/GRU' (ai.onnx::GRU): {message}"


@pytest.mark.parametrize("op,h0", [("LSTM", True), ("LSTM", False), ("GRU", True), ("GRU", False)])
def test_matrix_product_flops_are_the_cells(op, h0):
    """One input projection of all T steps (2·T·B·G·H·I) and one recurrent product per step
    (2·B·G·H·H), none at the first step when the initial state is zero."""
    from monet_ir.analysis.ir_signatures import matmul_conv_flops

    gates = 4 if op == "LSTM" else 3
    model, _ = rnn_model(op, h0=h0, c0=h0, linear_before_reset=1) if op == "GRU" else rnn_model(op, h0=h0, c0=h0)
    module = import_onnx(model.SerializeToString(), source_name="rnn.onnx")
    recurrent_steps = T if h0 else T - 1
    expected = 2 * T * B * gates * H * I + recurrent_steps * 2 * B * gates * H * H
    assert sum(matmul_conv_flops(o) for o in module.walk()) == expected
