"""Every operator of the importer's coverage list imports into a verified module."""

from __future__ import annotations

import pytest

from monet_ir import import_onnx, parse_module, print_module

from onnx_cases import CASES, gather_grad_model


@pytest.mark.parametrize("case", CASES, ids=[f"{c.domain or 'ai.onnx'}::{c.op_type}-{i}" for i, c in enumerate(CASES)])
def test_operator_imports(case):
    model = case.model() if case.op_type != "GatherGrad" else gather_grad_model()
    module = import_onnx(model.SerializeToString(), source_name=f"{case.op_type}.onnx")
    text = print_module(module)
    assert case.expect in text, text
    # the printed module re-parses to the same text
    assert print_module(parse_module(text)) == text


def test_monet_ops_carry_node_names():
    case = next(c for c in CASES if c.op_type == "Conv")
    module = import_onnx(case.model().SerializeToString())
    assert 'node = "/Conv"' in print_module(module)


def test_same_padding_is_resolved_to_explicit_pads():
    case = next(c for c in CASES if c.attrs.get("auto_pad") == "SAME_UPPER")
    text = print_module(import_onnx(case.model().SerializeToString()))
    assert "pads = array<i64: 1, 1, 1, 1>" in text


def test_shape_subgraph_is_folded():
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "zero1"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"], name="/Reshape"),
    ]
    graph = helper.make_graph(
        nodes, "fold", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("zero", TensorProto.INT64, [], [0]), helper.make_tensor("zero1", TensorProto.INT64, [1], [0]),
         helper.make_tensor("minus1", TensorProto.INT64, [1], [-1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    module = import_onnx(model.SerializeToString())
    ops = [op.name for op in module.walk()]
    assert ops == ["builtin.module", "func.func", "nn.reshape", "func.return"], ops
    assert "-> tensor<2x12xf32>" in print_module(module)
