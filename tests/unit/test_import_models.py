"""Every ONNX workload in ../shared/models imports, verifies and round-trips through text."""

from __future__ import annotations

from collections import Counter

import pytest

from monet_ir import import_onnx, parse_module, print_module
from conftest import SHARED

MODELS = sorted(p.relative_to(SHARED / "models").as_posix() for p in (SHARED / "models").rglob("*.onnx")) \
    if (SHARED / "models").is_dir() else []


def op_counts(module) -> Counter:
    return Counter(op.name for op in module.walk())


@pytest.mark.parametrize("name", MODELS or ["<none>"])
def test_workload_imports_and_round_trips(shared_models, name):
    module = import_onnx(shared_models / name)
    module.verify()
    text = print_module(module)
    reparsed = parse_module(text)
    reparsed.verify()
    assert print_module(reparsed) == text
    generic = print_module(module, generic=True)
    assert print_module(parse_module(generic)) == text


def test_resnet18_structure(shared_models):
    counts = op_counts(import_onnx(shared_models / "resnet18_b32.onnx"))
    assert counts["nn.conv"] == 20
    assert counts["nn.batch_norm"] == 20
    assert counts["nn.gemm"] == 1
    assert counts["nn.max_pool"] == 1


def test_gpt2_shape_subgraphs_fold_and_mask_is_shared(shared_models):
    module = import_onnx(shared_models / "gpt2_small_b1.onnx")
    counts = op_counts(module)
    assert counts["nn.matmul"] == 4 * 6 + 1  # qkv, qk, av, proj, fc, fc2 per layer + LM head
    assert counts["nn.layer_norm"] == 4 * 2 + 1
    masks = [op for op in module.walk() if op.name == "nn.constant" and "128x128xi1" in str(op.result.type)]
    assert len(masks) == 1  # the causal mask each layer builds is imported once


def test_parameters_and_trainable_flags(shared_models):
    from monet_ir.graph import arg_infos, step_function

    infos = arg_infos(step_function(import_onnx(shared_models / "resnet18_b1.onnx")))
    params = [i for i in infos if i.role == "param"]
    inputs = [i for i in infos if i.role == "input"]
    assert [i.name for i in inputs] == ["x"]
    running = [i for i in params if i.name.endswith(("running_mean", "running_var"))]
    assert len(running) == 40 and not any(i.trainable for i in running)
    trainable = [i for i in params if i.trainable]
    assert len(trainable) == 62  # 20 conv + 20x2 bn + fc weight and bias


def test_ort_training_graph_maps_onto_our_ops(shared_models):
    module = import_onnx(shared_models / "monet" / "resnet18_full_training.onnx")
    counts = op_counts(module)
    assert counts["grad.relu"] == 17
    assert counts["grad.conv_input"] == 19
    assert counts["grad.softmax_cross_entropy"] == 1
    assert counts["grad.avg_pool"] == 1
    assert counts["train.adam"] == 21
    phases = Counter(op.get_phase() for op in module.walk() if hasattr(op, "get_phase"))
    assert set(phases) == {"forward", "backward", "optimizer"}
    assert phases["optimizer"] == 21
    from monet_ir.graph import arg_infos, step_function

    infos = arg_infos(step_function(module))
    steps = [i.name for i in infos if i.role == "state" and i.name.endswith(".step")]
    assert len(steps) == 21  # each collapsed Adam update gets its own persistent step counter
    names = {i.index: i.name for i in infos}
    for op in module.walk():
        if op.name == "train.adam":
            assert names[op.step.index] == names[op.param.index] + ".step"
