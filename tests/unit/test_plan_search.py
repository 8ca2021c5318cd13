"""`monet plan`: every dp x pp split of the system, ZeRO stages and micro-batches; the best plan
is the fitting one with the least time per sample."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

MODELS = Path(__file__).resolve().parents[1] / "data" / "models"


def test_plan_search_finds_the_fastest_fitting_plan(tmp_path, capsys):
    from monet_ir.tools.monet import main

    with pytest.raises(SystemExit) as code:
        main(["plan", str(MODELS / "mlp_b4.onnx"), "--system", "2x2_edge_npu", "--microbatches", "1,4",
              "--zero", "0,3", "--out", str(tmp_path)])
    assert code.value.code == 0
    result = json.loads((tmp_path / "plans.json").read_text())
    plans = [p for p in result["plans"] if not p["error"]]
    assert {(p["dp"], p["pp"]) for p in plans} == {(4, 1), (2, 2), (1, 4)}
    assert {p["zero"] for p in plans if p["dp"] > 1} == {0, 3}
    assert {p["microbatches"] for p in plans if p["pp"] > 1} == {1, 4}
    fitting = [p for p in plans if p["fits"]]
    assert result["best"] == min(fitting, key=lambda p: (p["s_per_sample"], p["memory_bytes"]))
    for p in plans:
        assert p["s_per_sample"] == pytest.approx(p["step_s"] / (p["dp"] * p["microbatches"]))
    assert "<- best" in capsys.readouterr().out


def test_plan_search_rejects_bad_counts(tmp_path, capsys):
    from monet_ir.tools.monet import main

    with pytest.raises(SystemExit) as code:
        main(["plan", str(MODELS / "mlp_b4.onnx"), "--system", "2x2_edge_npu", "--microbatches", "x", "--out", str(tmp_path)])
    assert code.value.code == 1
    assert "--microbatches x: expected positive integers" in capsys.readouterr().err
