"""ZigZag's workload YAML as a model: a ZigZag user's three files (hardware, mapping, workload)
give a report with no edits, layers keep their shapes and names, and what MONET cannot read is
a one-line error naming the file and layer."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

from monet_ir.frontend.onnx_import import OnnxImportError, import_onnx
from monet_ir.frontend.zigzag_workload import WorkloadError, workload_model
from monet_ir.tools.monet import main

DATA = Path(__file__).resolve().parents[1] / "data"
RESNET = DATA / "zigzag_workload" / "resnet18.yaml"
GEMM = DATA / "zigzag_workload" / "gemm_layer.yaml"


def test_resnet18_workload_reads_as_its_layers():
    model = workload_model(str(RESNET))
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    kinds = [n.op_type for n in model.graph.node]
    # ZigZag writes the classifier as a 1x1 conv and the global average pool as a Pooling layer
    assert kinds.count("Conv") == 21 and kinds.count("Add") == 8 and kinds.count("MaxPool") == 2
    first = model.graph.node[0]
    assert first.name == "example_name_of_layer0" and first.op_type == "Conv"
    assert inferred.graph.node  # the shapes are consistent end to end


def test_the_three_zigzag_files_give_a_report(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(RESNET), "--target", str(DATA / "zigzag_hw" / "tpu_like.yaml"),
              "--mapping", str(DATA / "zigzag_mapping" / "tpu_like.yaml"), "--inference", "--out", str(out),
              "--no-plots"])
    assert exit_info.value.code == 0
    report = json.loads((out / "report.json").read_text())
    convs = [row for row in report["layers"] if row["op"] == "nn.conv"]
    assert len(convs) == 21 and convs[0]["name"] == "example_name_of_layer0"
    assert report["flops"]["forward"]["matmul_conv"] > 3e9


def test_a_gemm_workload_trains():
    module = import_onnx(GEMM)
    assert any(op.name == "nn.matmul" for op in module.walk())


@pytest.mark.parametrize("text, says", [
    ("- id: 0\n  equation: O[k]+=W[k]*I[k]\n", "needs 'loop_dims'"),
    ("- id: 0\n  equation: O[a][b]=max(I[a][b])\n  loop_dims: [A, B]\n  loop_sizes: [2, 2]\n", "equation"),
    ("- id: 0\n  equation: O[d][k]+=I[d][c]*W[c][k]\n  loop_dims: [D, K]\n  loop_sizes: [4, 4]\n", "'c'"),
    ("- id: 0\n  equation: O[d][k]+=I[d][c]*W[c][k]\n  loop_dims: [D, K, C]\n  loop_sizes: [4, 4, 4]\n"
     "  operand_source: {I: 7}\n", "no earlier layer"),
    ("- id: 0\n  equation: O[b][k][oy][ox]+=W[k][c][fy][fx]*I[b][c][iy][ix]\n  dimension_relations: [ix=ox-fx]\n"
     "  loop_dims: [B, K, C, OY, OX, FY, FX]\n  loop_sizes: [1, 2, 2, 4, 4, 3, 3]\n", "dimension_relations"),
])
def test_unreadable_workloads_are_one_line_errors(tmp_path, text, says):
    path = tmp_path / "workload.yaml"
    path.write_text(text)
    with pytest.raises(OnnxImportError) as error:
        import_onnx(path)
    message = str(error.value).strip()
    assert says in message and "\n" not in message and str(path) in message
