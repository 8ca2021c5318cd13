"""An ONNX Runtime training graph of a language model (MONET's GPT-2-like workload): frozen
weights stored as initializers without their data, gradients accumulated with `Sum`, AdamW
written out element-wise, cross-entropy over the last axis."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest

from monet_ir import import_onnx, parse_module, print_module
from monet_ir.frontend.onnx_import import OnnxImportError
from monet_ir.graph import arg_infos, step_function

DATA = Path(__file__).resolve().parents[1] / "data"
GPT2LIKE = DATA / "ort" / "gpt2like_training.onnx"


def test_imports_with_frozen_weights_whose_data_is_not_shipped():
    module = import_onnx(GPT2LIKE)
    counts = Counter(op.name for op in module.walk())
    assert counts["train.adam"] == 6  # one per parameter with optimizer state
    infos = {i.name: i for i in arg_infos(step_function(module))}
    trainable = sorted(n for n, i in infos.items() if i.role == "param" and i.trainable)
    buffer = "_grad.accumulation.buffer"  # ORT keeps one per trainable parameter
    ort_params = sorted(i.name.removesuffix(buffer)
                        for i in onnx.load(GPT2LIKE, load_external_data=False).graph.input
                        if i.name.endswith(buffer))
    assert trainable == ort_params
    # the embedding table is an initializer whose external data is absent: a frozen parameter
    assert infos["embedding.weight"].role == "param" and not infos["embedding.weight"].trainable
    (sce,) = [op for op in module.walk() if op.name == "grad.softmax_cross_entropy"]
    assert sce.class_axis_value == 2


def test_round_trips_through_text():
    module = import_onnx(GPT2LIKE)
    module.verify()
    text = print_module(module)
    assert print_module(parse_module(text)) == text


def test_one_error_for_a_failing_node_not_one_per_consumer(tmp_path):
    model = onnx.load(GPT2LIKE, load_external_data=False)
    (gather,) = [n for n in model.graph.node if n.op_type == "Gather"]
    gather.op_type = "NoSuchOp"
    with pytest.raises(OnnxImportError) as err:
        import_onnx(model.SerializeToString(), source_name="broken.onnx")
    assert err.value.problems == [
        f"broken.onnx: node '{gather.name}' (ai.onnx::NoSuchOp): unsupported operator"
    ]


def test_cross_entropy_gradient_with_classes_last_matches_classes_on_axis_1():
    from monet_ir.interp import kernels_nn as K

    rng = np.random.default_rng(0)
    scores = rng.standard_normal((2, 5, 7)).astype(np.float32)  # (batch, tokens, classes)
    labels = rng.integers(0, 7, size=(2, 5))
    log_prob = scores - np.log(np.exp(scores).sum(-1, keepdims=True))
    expected = np.exp(log_prob)
    expected[np.arange(2)[:, None], np.arange(5)[None], labels] -= 1.0
    expected /= labels.size
    onnx_layout = K.softmax_cross_entropy_loss_grad(np.float32(1), np.moveaxis(log_prob, 2, 1), labels)
    np.testing.assert_allclose(np.moveaxis(onnx_layout, 1, 2), expected, rtol=1e-5, atol=1e-7)


def test_report_on_a_stream_system_file(tmp_path):
    stream = DATA / "stream_hw" / "tpu_like_quad_core.yaml"
    if not stream.exists():
        pytest.skip("no bundled Stream system file")
    out = tmp_path / "o"
    run = subprocess.run(
        [sys.executable, "-m", "monet_ir.tools.monet", "report", str(GPT2LIKE), "--target", str(stream),
         "--precision", "int8", "--out", str(out)],
        capture_output=True, text=True,
    )
    assert run.returncode == 0, run.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["latency_cycles"] > 0
