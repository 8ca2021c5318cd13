"""`monet plan`: every dp x pp split of the system, ZeRO stages and micro-batches; the best plan
is the fitting one with the least time per sample."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

MODELS = Path(__file__).resolve().parents[1] / "data" / "models"


def _monet(argv: list[str]) -> int:
    """Runs `monet ARGV` as a user would; its exit status."""
    from monet_ir.tools.monet import main

    with pytest.raises(SystemExit) as code:
        main(argv)
    return code.value.code


def test_plan_search_finds_the_fastest_fitting_plan(tmp_path, capsys):
    assert _monet(["plan", str(MODELS / "mlp_b4.onnx"), "--system", "2x2_edge_npu", "--microbatches", "1,4",
                   "--zero", "0,3", "--tp", "1", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "plans.json").read_text())
    plans = [p for p in result["plans"] if not p["error"]]
    assert {(p["dp"], p["pp"]) for p in plans} == {(4, 1), (2, 2), (1, 4)}
    assert {p["zero"] for p in plans if p["dp"] > 1} == {0, 3}
    assert {p["microbatches"] for p in plans if p["pp"] > 1} == {1, 4}
    fitting = [p for p in plans if p["fits"]]
    assert result["best"] == min(fitting, key=lambda p: (p["s_per_sample"], p["memory_bytes"]))
    for p in plans:
        assert p["s_per_sample"] == pytest.approx(p["step_s"] / (p["dp"] * p["microbatches"]))
    out = capsys.readouterr().out
    assert "<- best" in out
    header = next(line for line in out.splitlines() if line.startswith("MONET parallel plans"))
    assert "None" not in header and (result["precision"] or "the model's element types") in header


def test_plan_search_rejects_bad_counts(tmp_path, capsys):
    assert _monet(["plan", str(MODELS / "mlp_b4.onnx"), "--system", "2x2_edge_npu", "--microbatches", "x",
                   "--out", str(tmp_path)]) == 1
    assert "--microbatches x: expected positive integers" in capsys.readouterr().err


def test_plan_search_over_tensor_parallelism(tmp_path, capsys):
    assert _monet(["plan", str(MODELS / "mlp_b4.onnx"), "--system", "2x2_edge_npu", "--microbatches", "2",
                   "--zero", "0", "--tp", "1,2,4", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "plans.json").read_text())
    plans = [p for p in result["plans"] if not p["error"]]
    assert {(p["dp"], p["tp"], p["pp"]) for p in plans} == {
        (4, 1, 1), (2, 1, 2), (1, 1, 4), (2, 2, 1), (1, 2, 2), (1, 4, 1)}
    for p in plans:
        assert p["samples_per_step"] == p["dp"] * p["microbatches"]
    # the front: fitting plans, none beaten in both time per sample and memory
    front = result["front"]
    assert front and front[0] == result["best"]
    for f in front:
        assert not any(o["fits"] and o["s_per_sample"] < f["s_per_sample"] and o["memory_bytes"] < f["memory_bytes"]
                       for o in plans)
    tp4 = [p for p in plans if p["tp"] == 4]
    one = [p for p in plans if p["tp"] == 1 and p["pp"] == 4]
    assert tp4[0]["memory_bytes"] < one[0]["memory_bytes"] * 4  # split weights: 1/4 of fc1 and fc2 per chip
    out = capsys.readouterr().out
    assert "  dp  tp  pp zero" in out


def test_explore_search_parallel_is_the_plan_search(tmp_path, capsys):
    assert _monet(["explore", str(MODELS / "lenet5_b4.onnx"), "--system", "2x2_edge_npu", "--search", "parallel",
                   "--microbatches", "1", "--zero", "0", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "plans.json").read_text())
    assert json.loads((tmp_path / "front.json").read_text()) == result["front"]
    # LeNet-5's 6 channels: tp=2 splits, tp=4 does not (one line, every plan with tp=4)
    errors = {p["error"] for p in result["plans"] if p["tp"] == 4}
    assert errors == {"tp=4 does not divide dimension 0 (6) of tensor<6x1x5x5xf32> at /conv1/Conv"}
    assert any(p["tp"] == 2 and not p["error"] for p in result["plans"])
    out = capsys.readouterr().out
    assert out.startswith("front: ") and "MONET parallel plans" in out


@pytest.mark.parametrize("argv,message", [
    (["--search", "parallel"], "--search parallel needs --system"),
    (["--search", "parallel", "--system", "2x2_edge_npu", "--target", "edge_npu"], "searches a --system, not a --target"),
    (["--system", "2x2_edge_npu"], "--system goes with --search parallel"),
    ([], "--target is required (or --system with --search parallel)"),
    (["--search", "parallel", "--system", "2x2_edge_npu", "--tp", "3"], "--tp 3: 3 does not divide the 4 chips"),
])
def test_explore_parallel_errors(tmp_path, capsys, argv, message):
    assert _monet(["explore", str(MODELS / "mlp_b4.onnx"), "--out", str(tmp_path)] + argv) == 1
    err = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("[")]
    assert len(err) == 1 and message in err[0], err
