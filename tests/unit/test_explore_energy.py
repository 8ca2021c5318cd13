"""`monet explore --objective energy`: keep/recompute/page genes searched for the least energy under
a main-memory and a latency budget; the GA lands within 5 % of the MILP on small graphs, the chosen
plan is written as plan.json and `monet report --checkpoint plan=plan.json` reproduces it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from monet_ir.explore import energy, poet


@pytest.mark.parametrize("n", [12, 20])
def test_ga_is_within_5_percent_of_the_optimum_on_chains(n):
    # 2n + 1 tasks: up to 41 on these chains
    model = poet.chain_model(n)
    least = next(b for b in range(1, n + 3) if poet.chain_optimum(n, b) is not None)
    for budget in (least, least + 2, n // 2 + 2):
        optimum = model.base_energy + poet.chain_optimum(n, budget)
        found = energy.search(model, budget, page=False, population=24, generations=25, seed=0)
        assert found.best is not None
        got = found.evaluated[found.best][0]
        assert optimum <= got <= 1.05 * optimum, (n, budget, got, optimum)


def test_ga_is_within_5_percent_of_the_milp_on_a_real_step(tmp_path):
    from test_poet import cnn_step

    evaluator, model = cnn_step(tmp_path)
    base = poet.measure(evaluator, {})
    for fraction in (0.95, 0.85, 0.7):
        budget = fraction * base["peak_bytes"]
        exact = poet.solve(model, budget, 2 * base["latency_cycles"])
        found = energy.search(model, budget, 2 * base["latency_cycles"], population=16, generations=10)
        assert exact.status == "optimal" and found.best is not None
        assert found.evaluated[found.best][0] <= 1.05 * exact.energy_pj
        assert set(found.decisions(found.best).values()) <= {"keep", "recompute", "page"}


def monet(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", *args], capture_output=True, text=True)


def test_explore_energy_writes_a_plan_that_report_reproduces(tmp_path):
    from test_paging import tiny_cnn

    model = tiny_cnn(tmp_path / "tiny_cnn.onnx")
    out = tmp_path / "explore"
    run = monet("explore", str(model), "--target", "cortex_m_mcu", "--optimizer", "sgd", "--objective", "energy",
                "--memory-budget", "150kB", "--time-budget", "120000000", "--exact", "--search", "checkpoint,paging",
                "--population", "12", "--generations", "6", "--out", str(out))
    assert run.returncode == 0, run.stderr
    assert "GA gap to the MILP: 0.00 %" in run.stdout
    plan = json.loads((out / "plan.json").read_text())
    assert plan["budgeted"] == "sram" and plan["activations"]
    assert plan["measured"]["peak_bytes"] <= 150_000 and plan["measured"]["latency_cycles"] <= 120_000_000
    assert json.loads((out / "milp.json").read_text())["status"] == "optimal"
    front = json.loads((out / "front.json").read_text())
    assert front["points"] and any(p["feasible"] for p in front["points"])
    report_dir = tmp_path / "report"
    again = monet("report", str(model), "--target", "cortex_m_mcu", "--optimizer", "sgd", "--checkpoint",
                  f"plan={out / 'plan.json'}", "--out", str(report_dir), "--no-plots")
    assert again.returncode == 0, again.stderr
    report = json.loads((report_dir / "report.json").read_text())
    assert report["energy_pj"] == pytest.approx(plan["measured"]["energy_pj"], rel=1e-12)
    assert report["latency_cycles"] == plan["measured"]["latency_cycles"]
    assert report["memory"]["peak_bytes"]["sram"] == plan["measured"]["peak_bytes"]
    assert report["memory"]["budgeted"] == "sram"


@pytest.mark.parametrize("args, message", [
    (["--objective", "energy"], "--objective energy needs --memory-budget BYTES"),
    (["--objective", "energy", "--memory-budget", "1MB", "--search", "fusion"],
     "--objective energy searches checkpoint, paging or all"),
    (["--objective", "energy", "--memory-budget", "1MB", "--search", "paging"],
     "--search paging: target 'edge_npu' has no storage level to page to"),
    (["--memory-budget", "1MB"], "--memory-budget and --time-budget apply to --objective energy"),
])
def test_usage_errors(tmp_path, args, message):
    model = Path(__file__).resolve().parents[1] / "data" / "models" / "mlp_b4.onnx"
    run = monet("explore", str(model), "--target", "edge_npu", "--out", str(tmp_path / "o"), *args)
    assert run.returncode == 1
    lines = [line for line in run.stderr.splitlines() if not line.startswith("[")]
    assert len(lines) == 1 and message in lines[0], lines
