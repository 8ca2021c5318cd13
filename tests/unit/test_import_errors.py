"""Bad ONNX input: one line per problem naming file, node and domain::op_type; exit status 1."""

from __future__ import annotations

import subprocess
import sys

import pytest
from onnx import TensorProto, helper

from monet_ir import import_onnx
from monet_ir.frontend.onnx_import import OnnxImportError

F = TensorProto.FLOAT


def model_with(nodes, inputs, outputs, opsets=(("", 17),)):
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets], ir_version=8)


def unsupported_model():
    return model_with(
        [helper.make_node("Relu", ["x"], ["a"], name="/relu"),
         helper.make_node("Hardmax", ["a"], ["b"], name="/head/Hardmax"),
         helper.make_node("Det", ["b"], ["c"], name="/det")],
        [helper.make_tensor_value_info("x", F, [1, 2, 4, 4]),
         helper.make_tensor_value_info("scales", F, [4])],
        [helper.make_tensor_value_info("c", F, None)],
    )


def dynamic_model():
    return model_with(
        [helper.make_node("Relu", ["x"], ["y"], name="/relu")],
        [helper.make_tensor_value_info("x", F, ["batch", 8])],
        [helper.make_tensor_value_info("y", F, ["batch", 8])],
    )


def problems_of(data: bytes, **kwargs) -> list[str]:
    with pytest.raises(OnnxImportError) as info:
        import_onnx(data, source_name="bad.onnx", **kwargs)
    return info.value.problems


def test_every_unsupported_node_is_reported_at_once():
    problems = problems_of(unsupported_model().SerializeToString())
    assert problems == [
        "bad.onnx: node '/head/Hardmax' (ai.onnx::Hardmax): unsupported operator",
        "bad.onnx: node '/det' (ai.onnx::Det): unsupported operator",
    ]


def test_truncated_file():
    data = unsupported_model().SerializeToString()
    problems = problems_of(data[: len(data) // 2])
    assert len(problems) == 1
    assert problems[0].startswith("bad.onnx: malformed or truncated ONNX file")


def test_not_an_onnx_file():
    assert problems_of(b"") == ["bad.onnx: empty file, not an ONNX model"]
    problems = problems_of(b"builtin.module {}\n")
    assert len(problems) == 1 and problems[0].startswith("bad.onnx:")


def test_dynamic_shape_names_the_tensor_and_offers_pinning():
    problems = problems_of(dynamic_model().SerializeToString())
    assert problems == [
        "bad.onnx: input 'x' has a dynamic dimension 0 ('batch') that cannot be resolved statically; "
        "pin it with --dim batch=N"
    ]


def test_pinned_dimension_imports():
    module = import_onnx(dynamic_model().SerializeToString(), dims={"batch": 32})
    assert "tensor<32x8xf32>" in str(module)


def test_pinning_an_unknown_dimension_is_an_error():
    problems = problems_of(dynamic_model().SerializeToString(), dims={"batch": 2, "seq": 4})
    assert problems == ["bad.onnx: --dim seq: no graph input has a symbolic dimension named 'seq'"]


def test_unknown_domain_and_opset():
    model = model_with(
        [helper.make_node("Frobnicate", ["x"], ["y"], name="/f", domain="com.example")],
        [helper.make_tensor_value_info("x", F, [2])], [helper.make_tensor_value_info("y", F, [2])],
        opsets=(("", 17), ("com.example", 3)),
    )
    assert problems_of(model.SerializeToString()) == [
        "bad.onnx: opset domain 'com.example' (version 3) is not supported"
    ]
    too_new = model_with(
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", F, [2])], [helper.make_tensor_value_info("y", F, [2])],
        opsets=(("", 99),),
    )
    assert problems_of(too_new.SerializeToString()) == [
        "bad.onnx: opset ai.onnx version 99 is not supported (supported: 7..22)"
    ]


def test_unsupported_semantics_of_a_supported_op():
    model = model_with(
        [helper.make_node("MaxPool", ["x"], ["y", "idx"], name="/pool", kernel_shape=[2, 2]),
         helper.make_node("Cast", ["idx"], ["z"], name="/cast", to=F)],
        [helper.make_tensor_value_info("x", F, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("y", F, None), helper.make_tensor_value_info("z", F, None)],
    )
    problems = problems_of(model.SerializeToString())
    assert problems[0] == "bad.onnx: node '/pool' (ai.onnx::MaxPool): the Indices output is not modelled"


def run_cli(*args, stdin: bytes | None = None):
    return subprocess.run([sys.executable, "-m", "monet_ir.tools.monet_opt", *args], input=stdin,
                          capture_output=True, timeout=60)


def test_cli_reports_one_line_per_problem_and_fails(tmp_path):
    path = tmp_path / "bad.onnx"
    path.write_bytes(unsupported_model().SerializeToString())
    result = run_cli(str(path))
    err = result.stderr.decode()
    assert result.returncode == 1
    assert "Traceback" not in err
    assert err.splitlines() == [
        f"monet-opt: error: {path}: node '/head/Hardmax' (ai.onnx::Hardmax): unsupported operator",
        f"monet-opt: error: {path}: node '/det' (ai.onnx::Det): unsupported operator",
    ]
    assert result.stdout == b""


def test_cli_truncated_and_dynamic(tmp_path):
    data = unsupported_model().SerializeToString()
    truncated = tmp_path / "t.onnx"
    truncated.write_bytes(data[:100])
    result = run_cli(str(truncated))
    assert result.returncode == 1 and "malformed or truncated" in result.stderr.decode()
    assert len(result.stderr.decode().splitlines()) == 1

    dynamic = tmp_path / "d.onnx"
    dynamic.write_bytes(dynamic_model().SerializeToString())
    result = run_cli(str(dynamic))
    assert result.returncode == 1 and "--dim batch=N" in result.stderr.decode()
    result = run_cli(str(dynamic), "--dim", "batch=4")
    assert result.returncode == 0, result.stderr.decode()
    assert b"tensor<4x8xf32>" in result.stdout
    result = run_cli("-f", "onnx", "--dim", "batch=4", stdin=dynamic.read_bytes())
    assert result.returncode == 0 and b"tensor<4x8xf32>" in result.stdout


def test_cli_bad_dim_option_and_bad_ir(tmp_path):
    result = run_cli("--dim", "batch=zero", "-f", "onnx", stdin=dynamic_model().SerializeToString())
    assert result.returncode == 1
    assert result.stderr.decode().strip() == (
        "monet-opt: error: --dim batch=zero: expected NAME=VALUE with a positive integer VALUE"
    )
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @f(%x: tensor<2xf32>) {\n  %y = nn.relu %x : tensor<3xf32>\n  func.return\n}\n")
    result = run_cli(str(bad))
    err = result.stderr.decode()
    assert result.returncode == 1 and "Traceback" not in err and len(err.splitlines()) == 1, err


def test_name_that_is_not_utf8_is_a_malformed_file():
    data = unsupported_model().SerializeToString()
    data = data.replace(b"/relu", b"/r\xe8lu", 1)  # same length: the protobuf framing stays valid
    problems = problems_of(data)
    assert problems == ["bad.onnx: malformed ONNX file: a name in node #0 ('Relu') is not valid UTF-8"]


def test_control_characters_in_names_stay_on_one_line(capsys):
    from monet_ir.errors import run_reporting_errors

    model = model_with([helper.make_node("Re\rlu", ["x"], ["y"], name="/re\nlu")],
                       [helper.make_tensor_value_info("x", F, [2])], [helper.make_tensor_value_info("y", F, [2])])

    def work():
        import_onnx(model.SerializeToString(), source_name="bad.onnx")

    assert run_reporting_errors("monet-opt", work) == 1
    assert capsys.readouterr().err.splitlines() == [
        "monet-opt: error: bad.onnx: node '/re\\nlu' (ai.onnx::Re\\rlu): unsupported operator"]
