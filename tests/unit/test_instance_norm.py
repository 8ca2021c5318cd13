"""InstanceNormalization (and PyTorch's GroupNorm, which both exporters write as Reshape,
InstanceNormalization, Reshape, Mul, Add) imports as a layer norm over the spatial axes and a
per-channel scale and bias: its forward values agree with onnx.reference, its gradients with
finite differences (tests/unit/test_autodiff.py runs the onnx_cases entries)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from monet_ir import import_onnx, print_module
from monet_ir.frontend.onnx_import import OnnxImportError
from monet_ir.interp.run import run_module

F = TensorProto.FLOAT


def model(nodes, inputs, out_shape, inits=()):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
                              [helper.make_tensor_value_info("y", F, out_shape)], list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def run_both(m, feeds):
    expected = ReferenceEvaluator(m).run(None, feeds)[0]
    module = import_onnx(m.SerializeToString(), source_name="norm.onnx")
    module.verify()
    got = run_module(module, {}, feeds).outputs[0]
    return module, got, expected


@pytest.mark.parametrize("shape", [[2, 3, 4, 5], [2, 4, 7], [1, 2, 3, 2, 2]])
def test_instance_norm_forward_matches_onnx_reference(shape):
    rng = np.random.default_rng(3)
    c = shape[1]
    m = model([helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], name="/in", epsilon=1e-3)],
              [("x", shape), ("s", [c]), ("b", [c])], shape)
    feeds = {"x": rng.standard_normal(shape).astype(np.float32) * 3 + 1,
             "s": rng.standard_normal(c).astype(np.float32), "b": rng.standard_normal(c).astype(np.float32)}
    module, got, expected = run_both(m, feeds)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    text = print_module(module)
    assert "nn.layer_norm" in text and "nn.mul" in text and "nn.add" in text


def test_group_norm_as_exported_matches_onnx_reference_without_identity_scale_and_bias():
    """GroupNorm(2 groups, 6 channels) as the TorchScript exporter writes it: the instance
    norm's constant ones and zeros (Constant nodes) emit no multiply or add; the channel affine
    after the second Reshape is the layer's own. (Float initializers are parameters even when
    they hold ones: a freshly initialized affine instance norm's scale does.)"""
    rng = np.random.default_rng(5)
    shape = [2, 6, 3, 3]
    inits = [numpy_helper.from_array(np.array([2, 2, -1], np.int64), "grouped"),
             numpy_helper.from_array(np.array(shape, np.int64), "full"),
]
    nodes = [helper.make_node("Constant", [], ["ones"], value=numpy_helper.from_array(np.ones(2, np.float32))),
             helper.make_node("Constant", [], ["zeros"], value=numpy_helper.from_array(np.zeros(2, np.float32))),
             helper.make_node("Reshape", ["x", "grouped"], ["g"], name="/r1"),
             helper.make_node("InstanceNormalization", ["g", "ones", "zeros"], ["n"], name="/in"),
             helper.make_node("Reshape", ["n", "full"], ["r"], name="/r2"),
             helper.make_node("Mul", ["r", "w"], ["m"], name="/mul"),
             helper.make_node("Add", ["m", "b"], ["y"], name="/add")]
    m = model(nodes, [("x", shape), ("w", [6, 1, 1]), ("b", [6, 1, 1])], shape, inits)
    feeds = {"x": rng.standard_normal(shape).astype(np.float32), "w": rng.standard_normal((6, 1, 1)).astype(np.float32),
             "b": rng.standard_normal((6, 1, 1)).astype(np.float32)}
    module, got, expected = run_both(m, feeds)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    in_ops = [op.name for op in module.walk() if "node" in op.properties and op.properties["node"].data == "/in"]
    assert "nn.layer_norm" in in_ops and "nn.mul" not in in_ops and "nn.add" not in in_ops, in_ops


def test_instance_norm_of_rank_two_is_a_one_line_error():
    m = model([helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], name="/in")],
              [("x", [2, 3]), ("s", [3]), ("b", [3])], [2, 3])
    with pytest.raises(OnnxImportError) as info:
        import_onnx(m.SerializeToString(), source_name="bad.onnx")
    assert str(info.value).splitlines()[0] == (
        "bad.onnx: node '/in' (ai.onnx::InstanceNormalization): input of rank 2: "
        "InstanceNormalization needs (N, C, D1, ...)")
