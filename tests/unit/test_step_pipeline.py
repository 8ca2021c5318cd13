"""One pipeline builds the training step for every tool (monet_ir/pipeline.py).

`monet report`, the explorer's `Evaluator`, `monet-opt -p monet-step{...}` and the Python API
must build the same step from the same options; the options are declared once (`StepOptions`)
and everything that spells them (command line, pass options, reproducing command line) is made
from that declaration.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from monet_ir.options import StepOptions
from monet_ir.tools.monet import build_parser

REPO = Path(__file__).resolve().parents[2]
LENET = str(REPO / "tests" / "data" / "models" / "lenet5_b4.onnx")
MLP = str(REPO / "tests" / "data" / "models" / "mlp_b4.onnx")


def test_the_command_line_of_options_parses_back_to_them():
    options = StepOptions(model=LENET, target="edge_npu", loss="mse", optimizer="sgd", lr=0.5, precision="bf16",
                          dims=("batch=2",), frozen=("w",), checkpoint="sqrt", fusion="auto", tiles=4,
                          mapping="m.yaml", pipeline="cse,dce")
    args = build_parser().parse_args(["report", *options.command_line(), "--out", "x"])
    assert StepOptions.from_args(args, "report") == options


def test_none_and_lists_are_normalized():
    assert StepOptions(model="m", precision=None, dims=["a=1"]) == StepOptions(model="m", dims=("a=1",))


def test_every_command_takes_the_step_options_it_declares():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices
    for f, opt in StepOptions.options():
        for command in ("report", "explore", "sweep", "plan"):
            flags = {s for a in sub[command]._actions for s in a.option_strings} | {
                a.dest for a in sub[command]._actions if not a.option_strings}
            assert (opt.flag in flags) == (command in opt.commands), (f.name, command)


def test_the_monet_step_pass_takes_the_options_marked_for_it():
    from passes.monet_step import MonetStepPass

    names = {f.name for f in dataclasses.fields(MonetStepPass)}
    assert names == {f.name for f, opt in StepOptions.options() if opt.in_pass}
    import passes.monet_step as module

    for name in names:  # the pass file's docstring lists its options
        assert f"`{name}`" in module.__doc__
    spec = MonetStepPass(target="edge_npu", lr=1, checkpoint="sqrt")
    assert str(spec) == 'monet-step{target="edge_npu" lr=1 checkpoint="sqrt"}'


def _report(argv: list[str]) -> dict:
    from monet_ir.tools.monet import Progress, make_report

    args = build_parser().parse_args(["report", *argv, "--out", "unused"])
    return make_report(args, Progress(enabled=False))[0]


def test_report_evaluator_monet_opt_and_api_build_the_same_step(tmp_path):
    """The same options, four tools, one latency and energy."""
    import monet_ir
    from monet_ir.explore.evaluate import Candidate, Evaluator

    report = _report([LENET, "--target", "edge_npu", "--checkpoint", "list=/Relu_1,/MaxPool_1", "--optimizer", "sgd"])
    options = StepOptions(model=LENET, target="edge_npu", optimizer="sgd")
    evaluation = Evaluator(options).evaluate(Candidate(recompute=("/Relu_1", "/MaxPool_1")))
    assert (evaluation.latency_cycles, evaluation.energy_pj) == (report["latency_cycles"], report["energy_pj"])
    built = monet_ir.build_step(LENET, target="edge_npu", optimizer="sgd", checkpoint="list=/Relu_1,/MaxPool_1")
    assert round(built.schedule.latency_cycles) == report["latency_cycles"]
    assert "monet-step" in built.module.attributes["monet.step"].data
    out = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet_opt", LENET, "-p",
                          'monet-step{target=edge_npu optimizer=sgd checkpoint="list=/Relu_1,/MaxPool_1"}', "-t", "monet-report"],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["latency_cycles"] == report["latency_cycles"]


def test_report_runs_the_users_pipeline_before_the_costing():
    report = _report([MLP, "--target", "edge_npu", "-p", "cse,dce"])
    assert report["pipeline"] == "autodiff,insert-optimizer,cse,dce"


@pytest.mark.parametrize("argv, message", [
    ([MLP, "--target", "edge_npu", "-p", "no-such-pass"], "-p no-such-pass: Unrecognized passes: ['no-such-pass']"),
    ([MLP, "--target", "edge_npu", "-p", "cse{x=1}"], "-p cse{x=1}:"),
])
def test_a_bad_user_pipeline_is_one_line(argv, message, capsys):
    from monet_ir.tools.monet import main

    with pytest.raises(SystemExit) as exit_:
        main(["report", *argv, "--out", "unused", "--no-plots"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 1 and len(err) == 1 and message in err[0], err


def test_options_are_resolved_before_the_model_is_read(tmp_path):
    """A bad target fails before the (missing) model is imported."""
    from monet_ir.errors import MonetError
    from monet_ir.pipeline import build_step

    with pytest.raises(MonetError, match="no-such-target"):
        build_step(StepOptions(model=str(tmp_path / "missing.onnx"), target="no-such-target"))


def test_stages_are_a_prefix_of_the_whole_pipeline():
    from monet_ir.pipeline import STAGES, resolve, step_passes

    resolved = resolve(StepOptions(model=LENET, target="edge_npu", checkpoint="sqrt", fusion="auto",
                                   precision="mxfp8_e4m3", pipeline="cse"))
    every = [p.name for p in step_passes(resolved)]
    assert every == ["autodiff", "insert-optimizer", "activation-checkpoint", "quantize", "fuse-layers", "cse",
                     "annotate-cost", "schedule"]
    assert [p.name for stage in STAGES for p in step_passes(resolved, stages=(stage,))] == every
    assert [p.name for p in step_passes(resolved, training=False)] == [
        "activation-checkpoint", "fuse-layers", "cse", "annotate-cost", "schedule"]
