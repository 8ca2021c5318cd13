"""`monet explore --search ...,paging`: paging genes in the scheduled NSGA-II search (page a
node's saved activations; keep a parameter's optimizer state, or also the parameter and its
gradient, or the batch, in storage), so the main front can use paging; a chosen point that
pages is written as a plan file that `monet report --checkpoint plan=FILE.json` reproduces."""

from __future__ import annotations

import json
import subprocess
import sys

from monet_ir.explore import ga
from monet_ir.explore.evaluate import Evaluator, StepConfig
from test_paging import DATA, tiny_cnn


def monet(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", *args], capture_output=True, text=True)


def test_paging_genes_decode_to_plans():
    evaluator = Evaluator(StepConfig(model=str(DATA / "models" / "mlp_b4.onnx"), target="cortex_a_board"))
    spec = ga.GenomeSpec.of(evaluator, "schedule", checkpointing=True, allocation=False, fusion=False, paging=True)
    by_name = {g.name: g for g in spec.paging}
    # Adam: the state alone, or with the parameter and its gradient
    assert by_name["fc1.weight"].values == ((), ("fc1.weight.exp_avg", "fc1.weight.exp_avg_sq", "fc1.weight.step"),
                                            ("fc1.weight.exp_avg", "fc1.weight.exp_avg_sq", "fc1.weight.step",
                                             "fc1.weight", "d_fc1.weight"))
    assert by_name["x"].values == ((), ("x",))
    assert [g.name for g in spec.paging if g.kind == "activation"] == ["/Relu", "loss"]
    genome = spec.encode(recompute=["/Relu"], paging={"/Relu": 1, "loss": 1, "fc1.weight": 2, "x": 1})
    candidate = spec.decode(genome)
    assert candidate.recompute == ("/Relu",) and candidate.paged == ("loss",)  # recompute wins over page
    assert set(candidate.stored) == {"fc1.weight", "d_fc1.weight", "fc1.weight.exp_avg", "fc1.weight.exp_avg_sq",
                                     "fc1.weight.step", "x"}
    assert spec.decode(spec.encode()).stored == () and not spec.decode(spec.encode()).pages
    # the scheduled candidate is the plan's schedule: main memory relieved of fc1's tensors
    base = evaluator.evaluate(spec.decode(spec.encode()))
    stored = evaluator.evaluate(spec.decode(spec.encode(paging={"fc1.weight": 2})))
    assert not stored.error and stored.peak_memory_bytes < base.peak_memory_bytes
    assert stored.energy_pj > base.energy_pj


def test_explore_with_paging_genes_reproduces_a_paging_point(tmp_path):
    model = tiny_cnn(tmp_path / "tiny_cnn.onnx")
    out = tmp_path / "explore"
    run = monet("explore", str(model), "--target", "cortex_m_mcu", "--optimizer", "sgd", "--search",
                "checkpoint,paging", "--population", "12", "--generations", "3", "--jobs", "1", "--no-plots",
                "--budget", "130kB", "--out", str(out))
    assert run.returncode == 0, run.stderr
    chosen = json.loads((out / "chosen.json").read_text())
    point = chosen["point"]
    # below store-all's 182 kB of SRAM only paging (or keeping tensors in storage) fits
    assert point["peak_memory_bytes"] <= 130_000 and (point["paged"] or point["stored"])
    assert "--checkpoint" in chosen["command"] and any(a.startswith("plan=") for a in chosen["command"])
    plan = json.loads((out / "chosen_plan.json").read_text())
    assert set(plan.get("storage", [])) == set(point["stored"])
    assert {n for n, d in plan["activations"].items() if d == "page"} == set(point["paged"])
    report = monet(*chosen["command"][1:], "--no-plots")
    assert report.returncode == 0, report.stderr
    got = json.loads((out / "chosen_report" / "report.json").read_text())
    assert got["latency_cycles"] == point["latency_cycles"]
    assert abs(got["energy_pj"] - point["energy_pj"]) <= 1e-6 * point["energy_pj"]
    assert got["memory"]["peak_bytes"] == point["peak_bytes"]
    front = json.loads((out / "front.json").read_text())
    assert any(p["paged"] or p["stored"] for p in front)


def test_paging_genes_need_a_storage_level(tmp_path):
    run = monet("explore", str(DATA / "models" / "mlp_b4.onnx"), "--target", "edge_npu", "--search", "paging",
                "--population", "4", "--generations", "1", "--out", str(tmp_path / "x"))
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1].endswith("--search paging: target 'edge_npu' has no storage level to page to")
