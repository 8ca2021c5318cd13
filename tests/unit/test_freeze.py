"""`--freeze NAME` on `monet report`, `monet explore` and `monet sweep` (as on `monet-opt`): an
initializer an exporter wrote for a buffer or a folded constant (a causal mask, a frozen position
table) is imported as a frozen weight, with no gradient and no optimizer state; a name the model
does not have is refused in one line instead of leaving the weight trainable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

MLP = Path(__file__).resolve().parents[1] / "data" / "models" / "mlp_b4.onnx"


def report(tmp_path: Path, *extra: str) -> dict:
    from monet_ir.tools.monet import main

    out = tmp_path / "out"
    with pytest.raises(SystemExit) as code:
        main(["report", str(MLP), "--target", "edge_npu", "--no-plots", "--out", str(out), *extra])
    assert code.value.code == 0
    return json.loads((out / "report.json").read_text())


def test_a_frozen_initializer_gets_no_optimizer_step(tmp_path):
    trained = report(tmp_path)
    frozen = report(tmp_path, "--freeze", "fc1.bias", "--freeze", "fc2.bias")
    assert trained["ops"]["optimizer"] == 4
    assert frozen["ops"]["optimizer"] == 2  # the two weights only
    # no gradient of the biases, no Adam state for them: less memory at the peak
    assert sum(frozen["memory"]["peak_bytes"].values()) < sum(trained["memory"]["peak_bytes"].values())


def test_a_name_the_model_does_not_have_is_refused_in_one_line(tmp_path, capsys):
    from monet_ir.tools.monet import main

    with pytest.raises(SystemExit) as code:
        main(["report", str(MLP), "--target", "edge_npu", "--no-plots", "--out", str(tmp_path / "o"),
              "--freeze", "fc3.bias"])
    assert code.value.code == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]  # (after the progress lines)
    assert len(errors) == 1
    assert "mlp_b4.onnx" in errors[0] and "--freeze 'fc3.bias'" in errors[0] and "no float initializer" in errors[0]


def test_explore_builds_the_step_with_the_frozen_weights():
    from monet_ir.explore.evaluate import StepConfig, build_step

    config = StepConfig(str(MLP), "edge_npu", frozen=("fc1.weight",))
    assert config.report_args()[-2:] == ["--freeze", "fc1.weight"]
    adam = [op for op in build_step(config).walk() if op.name == "train.adam"]
    assert len(adam) == 3


def test_explore_and_sweep_accept_the_option():
    from monet_ir.explore.cli import step_config
    from monet_ir.tools.monet import build_parser

    args = build_parser().parse_args(["explore", str(MLP), "--target", "edge_npu", "--out", "unused",
                                      "--freeze", "fc2.bias"])
    assert step_config(args).frozen == ("fc2.bias",)
    args = build_parser().parse_args(["sweep", str(MLP), "--target-template", "t.yaml", "--out", "unused",
                                      "--freeze", "fc2.bias"])
    assert args.freeze == ["fc2.bias"]
