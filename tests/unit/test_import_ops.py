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


@pytest.mark.parametrize("raw", [True, False], ids=["raw_data", "typed_fields"])
def test_large_initializers_reach_shape_inference_by_type_only(monkeypatch, raw):
    # ONNX's shape inference serializes the model to C++ and back: a large mask or inline
    # weights go to it by type only; the model is left as it was and the constant keeps its data
    import numpy as np
    import onnx.shape_inference
    from onnx import TensorProto, helper, numpy_helper

    from monet_ir.frontend.onnx_import import ImportOptions, OnnxImporter

    mask = np.tril(np.ones((64, 64), dtype=bool))[None, None]
    weight = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    ids = np.arange(2048, dtype=np.int64)

    def tensor(name, array):
        if raw:
            return numpy_helper.from_array(array, name)
        dtype = helper.np_dtype_to_tensor_dtype(array.dtype)
        return helper.make_tensor(name, dtype, array.shape, array.flatten().tolist())

    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("Where", ["mask", "xw", "neg_inf"], ["y"], name="/Where"),
        helper.make_node("Gather", ["ids", "index"], ["picked"]),
    ]
    graph = helper.make_graph(
        nodes, "payloads", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 64, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("picked", TensorProto.INT64, None)],
        [tensor("mask", mask), tensor("w", weight), tensor("ids", ids),
         helper.make_tensor("neg_inf", TensorProto.FLOAT, [], [-np.inf]),
         helper.make_tensor("index", TensorProto.INT64, [1], [3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    before = model.SerializeToString()

    seen = []
    infer = onnx.shape_inference.infer_shapes

    def recording_infer(m, *args, **kwargs):
        seen.append({t.name: t.ByteSize() for t in m.graph.initializer})
        return infer(m, *args, **kwargs)

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", recording_infer)
    module = OnnxImporter(model, "payloads.onnx", None, ImportOptions()).run()

    assert model.SerializeToString() == before
    assert seen and seen[0]["mask"] < 64 and seen[0]["w"] < 64  # name, type and dims only
    assert seen[0]["ids"] > 2048  # integer data may be shape data: it stays
    constants = {op.result.name_hint: op for op in module.walk() if op.name == "nn.constant"}
    assert constants["mask"].raw_bytes() == mask.tobytes()
    assert constants["picked"].raw_bytes() == np.array([3], dtype="<i8").tobytes()
    assert "tensor<1x1x64x64xf32>" in print_module(module)


def test_a_model_stating_every_type_skips_shape_inference(monkeypatch):
    # PyTorch's dynamo exporter writes every value's type; ONNX's inference keeps stated types,
    # so it is not run then (its operator registry alone takes milliseconds to set up); one
    # value without a stated type brings it back, and the IR is the same either way
    import onnx.shape_inference
    from onnx import TensorProto, helper

    def model(state_every_type: bool):
        nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
        stated = [helper.make_tensor_value_info("h", TensorProto.FLOAT, [2, 3])] if state_every_type else []
        graph = helper.make_graph(
            nodes, "typed", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
            [helper.make_tensor("w", TensorProto.FLOAT, [4, 3], [0.5] * 12)], value_info=stated)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)

    calls = []
    infer = onnx.shape_inference.infer_shapes

    def counting_infer(m, *args, **kwargs):
        calls.append(m.graph.name)
        return infer(m, *args, **kwargs)

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", counting_infer)
    typed = print_module(import_onnx(model(True).SerializeToString()))
    assert calls == []
    inferred = print_module(import_onnx(model(False).SerializeToString()))
    assert calls == ["typed"]
    assert typed == inferred and "tensor<2x3xf32>" in typed
