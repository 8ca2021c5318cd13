"""Constant sub-graphs are evaluated at import (monet_ir/frontend/folding.py): the shape
arithmetic with numpy folders, any other standard operator by ONNX's reference kernels, so an
operator the importer has no converter for is refused only where it computes on data."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from monet_ir import import_onnx, print_module
from monet_ir.frontend.folding import NotFoldable, fold

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "fold", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8).SerializeToString()


@pytest.mark.parametrize("axis, shape", [(0, (1, 24)), (1, (2, 12)), (3, (24, 1)), (-1, (6, 4)), (-2, (2, 12)), (-3, (1, 24))])
def test_flatten_folds_every_axis_onnx_allows(axis, shape):
    # axis == rank flattens to [N, 1] (was [1, N]: axis % rank)
    (out,) = fold("Flatten", [np.zeros((2, 3, 4), np.float32)], {"axis": axis})
    assert out.shape == shape


def test_causal_mask_flattened_at_axis_rank_imports():
    # transformers 5.x's TorchScript exports flatten the causal mask whole (axis = rank)
    mask = numpy_helper.from_array(np.triu(np.ones((2, 3), np.float32)), "mask")
    nodes = [
        helper.make_node("Constant", [], ["m"], value=mask),
        helper.make_node("Flatten", ["m"], ["flat"], axis=2),
        helper.make_node("Add", ["x", "flat"], ["y"], name="/Add"),
    ]
    module = import_onnx(_model(nodes, [helper.make_tensor_value_info("x", F, [6, 1])],
                                [helper.make_tensor_value_info("y", F, [6, 1])]))
    assert "tensor<6x1xf32>, tensor<6x1xf32>) -> tensor<6x1xf32>" in print_module(module)


def test_rotary_tables_of_constants_fold():
    # Cos/Sin of a constant (a rotary table): no converter is needed, the tables are constants
    positions = numpy_helper.from_array(np.arange(8, dtype=np.float32).reshape(2, 4) * 0.5, "p")
    nodes = [
        helper.make_node("Constant", [], ["angles"], value=positions),
        helper.make_node("Cos", ["angles"], ["cos"]),
        helper.make_node("Sin", ["angles"], ["sin"]),
        helper.make_node("Mul", ["x", "cos"], ["xc"], name="/MulCos"),
        helper.make_node("Mul", ["x", "sin"], ["xs"], name="/MulSin"),
        helper.make_node("Add", ["xc", "xs"], ["y"], name="/Add"),
    ]
    module = import_onnx(_model(nodes, [helper.make_tensor_value_info("x", F, [2, 4])],
                                [helper.make_tensor_value_info("y", F, [2, 4])]))
    ops = [op.name for op in module.walk()]
    assert ops.count("nn.constant") == 2 and ops.count("nn.mul") == 2, ops
    from dialects import nn
    from monet_ir.interp.numpy_impl import decode_constant

    values = sorted((decode_constant(op.value) for op in module.walk() if isinstance(op, nn.ConstantOp)),
                    key=lambda a: float(a[0, 0]))
    angles = np.arange(8, dtype=np.float32).reshape(2, 4) * 0.5
    np.testing.assert_allclose(values[0], np.sin(angles), rtol=1e-6)
    np.testing.assert_allclose(values[1], np.cos(angles), rtol=1e-6)


def test_operators_without_numpy_folder_fold_by_the_reference_kernels():
    x = np.array([[3.0, -1.0, 2.0, 5.0]], np.float32)
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=-1)
    values, indices = fold("TopK", [x, np.array([2], np.int64)], {"axis": -1}, node, 17)
    assert values.tolist() == [[5.0, 3.0]] and indices.tolist() == [[3, 0]]
    (soft,) = fold("Softplus", [x], {}, helper.make_node("Softplus", ["x"], ["y"]), 17)
    np.testing.assert_allclose(soft, np.log1p(np.exp(x)), rtol=1e-6)


def test_random_and_subgraph_ops_never_fold():
    with pytest.raises(NotFoldable):
        fold("RandomUniformLike", [np.zeros(3, np.float32)], {}, helper.make_node("RandomUniformLike", ["x"], ["y"]))
    branch = helper.make_graph([], "g", [], [])
    node = helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)
    with pytest.raises(NotFoldable):
        fold("If", [np.array(True)], {}, node)
