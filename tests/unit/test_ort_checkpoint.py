"""Activation checkpointing, `monet explore` and `monet sweep` on imported ONNX Runtime training
graphs (their backward and optimizer ops come with the file: autodiff does not run again)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from xdsl.context import Context

from monet_ir import import_onnx
from monet_ir.graph import holds_training_ops, op_phase, step_function
from monet_ir.interp.run import run_module
from monet_ir.tools.monet import main as monet_main
from passes.activation_checkpoint import ActivationCheckpointPass
from test_activation_checkpoint import random_arguments

CORPUS = Path(__file__).resolve().parents[1] / "data" / "ort_corpus"
TARGET = "tpu_like_quad_core"


def _monet(*argv: str) -> int:
    with pytest.raises(SystemExit) as exit_:
        monet_main([*argv])
    return exit_.value.code


def _report(tmp_path: Path, name: str, policy: str) -> dict:
    out = tmp_path / f"{name}_{policy}"
    assert _monet("report", str(CORPUS / f"{name}.training.onnx"), "--target", TARGET, "--out", str(out),
                  "--checkpoint", policy, "--no-plots") == 0
    return json.loads((out / "report.json").read_text())


@pytest.mark.parametrize("name", ["mlp", "cnn_bn", "bert"])
def test_report_checkpoint_trades_saved_bytes_for_forward_flops(tmp_path, name):
    stored, sqrt = _report(tmp_path, name, "store-all"), _report(tmp_path, name, "sqrt")
    assert stored["pipeline"] == "as imported" and "activation-checkpoint" in sqrt["pipeline"]
    assert sqrt["memory"]["saved_activation_bytes"] < stored["memory"]["saved_activation_bytes"]
    assert sum(sqrt["flops"]["recompute"].values()) > 0 == sum(stored["flops"]["recompute"].values())
    for phase in ("forward", "backward", "optimizer"):  # the imported ops themselves are unchanged
        assert sqrt["flops"][phase] == stored["flops"][phase]


# mlp: Dropout (its mask is random: stored, never recomputed); cnn_bn: BatchNormInternal's saved
# mean and inverse deviation and running statistics
def _run(module, params: dict, inputs: dict) -> tuple[list, dict]:
    """Every result of a forward, backward or optimizer op (in program order, recompute clones
    left out) and the parameter and state arrays after the run (ORT's gradient accumulators)."""
    copy = {k: v.copy() for k, v in params.items()}, {k: v.copy() for k, v in inputs.items()}
    result = run_module(module, *copy, keep_values=True)
    values = [(op.name, result.values[r]) for op in step_function(module).body.block.ops
              if op_phase(op) != "recompute" for r in op.results if r in result.values]
    return values, result.state


@pytest.mark.parametrize("name", ["mlp", "cnn_bn"])
def test_checkpointed_ort_step_computes_the_same_gradients_and_parameters(name):
    path = CORPUS / f"{name}.training.onnx"
    base = import_onnx(path)
    assert holds_training_ops(step_function(base))
    params, inputs = random_arguments(base, scale=0.5, ids=4)
    before, state = _run(base, params, inputs)
    assert any(op_phase(op) == "backward" for op in step_function(base).body.block.ops)
    # the step does something: ORT's gradient accumulators (state arguments) are written
    start = {**params, **inputs}
    assert any(k.endswith("accumulation.buffer") and not np.array_equal(v, start[k]) for k, v in state.items())
    for policy in ("recompute-all", "sqrt"):
        module = import_onnx(path)
        ActivationCheckpointPass(policy=policy).apply(Context(), module)
        module.verify()
        assert any(op_phase(op) == "recompute" for op in step_function(module).body.block.ops)
        after, state_after = _run(module, params, inputs)
        assert [n for n, _ in after] == [n for n, _ in before]
        for i, ((n, a), (_, b)) in enumerate(zip(after, before, strict=True)):
            assert np.array_equal(np.asarray(a), np.asarray(b)), f"{policy}: value {i} ({n})"
        assert sorted(state_after) == sorted(state)
        for key, value in state.items():
            assert np.array_equal(state_after[key], value), f"{policy}: {key}"


def test_dropout_of_an_ort_graph_is_never_recomputed():
    module = import_onnx(CORPUS / "mlp.training.onnx")
    ActivationCheckpointPass(policy="recompute-all").apply(Context(), module)
    ops = list(step_function(module).body.block.ops)
    assert any(op.name == "nn.dropout" for op in ops)
    assert not any(op.name == "nn.dropout" and op_phase(op) == "recompute" for op in ops)


def test_explore_on_an_ort_graph_and_its_points_reproduce(tmp_path):
    from monet_ir.explore.evaluate import Candidate, Evaluator, StepConfig
    from monet_ir.explore.outputs import report_command

    model = str(CORPUS / "cnn_bn.training.onnx")
    out = tmp_path / "explore"
    assert _monet("explore", model, "--target", TARGET, "--out", str(out), "--population", "4",
                  "--generations", "1", "--seed", "1", "--no-plots") == 0
    chosen = json.loads((out / "chosen.json").read_text())
    _check_report(chosen["command"], chosen["point"])
    # a point that recomputes (through the same command builder)
    ev = Evaluator(StepConfig(model, TARGET))
    assert len(ev.checkpoint_genes) >= 2
    point = Candidate(recompute=tuple(g.node for g in ev.checkpoint_genes[::2]))
    evaluation = ev.evaluate(point)
    assert not evaluation.error
    command = report_command(ev.config, point, str(tmp_path / "recompute"), None)
    _check_report(command, {"latency_cycles": evaluation.latency_cycles, "energy_pj": evaluation.energy_pj,
                            "peak_memory_bytes": evaluation.peak_memory_bytes})


def _check_report(command: list[str], point: dict) -> None:
    assert command[:2] == ["monet", "report"]
    assert _monet(*command[1:], "--no-plots") == 0
    report = json.loads((Path(command[command.index("--out") + 1]) / "report.json").read_text())
    assert report["latency_cycles"] == point["latency_cycles"]
    assert report["energy_pj"] == point["energy_pj"]
    assert sum(report["memory"]["peak_bytes"].values()) == point["peak_memory_bytes"]


def test_sweep_on_an_ort_graph(tmp_path):
    out = tmp_path / "sweep"
    assert _monet("sweep", str(CORPUS / "mlp.training.onnx"), "--target-template", TARGET, "--set",
                  "dram.bandwidth_GBps=100,400", "--checkpoint", "sqrt", "--out", str(out), "--no-plots") == 0
    rows = json.loads((out / "sweep.json").read_text())
    assert len(rows) == 2 and all("error" not in r or not r["error"] for r in rows)


def test_checkpoint_with_inference_is_refused(tmp_path, capsys):
    assert _monet("report", str(CORPUS / "mlp.forward.onnx"), "--target", TARGET, "--inference",
                  "--checkpoint", "sqrt", "--out", str(tmp_path / "r"), "--no-plots") == 1
    err = capsys.readouterr().err
    assert "--checkpoint sqrt" in err and "--inference" in err and "Traceback" not in err
