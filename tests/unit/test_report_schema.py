"""One report schema: `monet report`'s report.json and `monet-opt -t monet-report` after
`schedule` hold the same fields with the same values; layers.csv mirrors `layers`."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"
LENET = DATA / "models" / "lenet5_b4.onnx"


def monet_report(tmp_path, *extra):
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", "report", str(LENET), "--target", "edge_npu",
                          "--out", str(out), "--no-plots", *extra], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return out, run.stdout


def test_monet_opt_and_monet_report_share_one_schema(tmp_path):
    out, _ = monet_report(tmp_path)
    from_report = json.loads((out / "report.json").read_text())
    run = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet_opt", str(LENET), "-p",
                          "autodiff,insert-optimizer{kind=adam},schedule{target=edge_npu}", "-t", "monet-report"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    from_opt = json.loads(run.stdout)
    assert set(from_report) - set(from_opt) == {"pipeline"}
    assert set(from_opt) <= set(from_report)
    for key, value in from_opt.items():
        assert from_report[key] == value, key


def test_energy_adds_up_and_critical_path_is_a_lower_bound(tmp_path):
    out, text = monet_report(tmp_path)
    report = json.loads((out / "report.json").read_text())
    phases = sum(p["energy_pj"] for p in report["phases"].values())
    transfers = sum(t["energy_pj"] for t in report["transfers"].values())
    assert abs(phases + transfers - report["energy_pj"]) <= 1e-6 * report["energy_pj"]
    assert sum(report["energy_breakdown_pj"].values()) == report["energy_pj"]
    assert 0 < report["critical_path_cycles"] <= report["latency_cycles"]
    busy = sum(c["busy_cycles"] for c in report["cores"].values())
    assert abs(report["average_parallelism"] - busy / report["latency_cycles"]) < 1e-3
    assert "transfers" in text and "critical path" in text and text.startswith("MONET training-step report")


def test_layers_csv_mirrors_the_json(tmp_path):
    out, _ = monet_report(tmp_path)
    report = json.loads((out / "report.json").read_text())
    rows = list(csv.DictReader((out / "layers.csv").open()))
    assert len(rows) == len(report["layers"]) > 0
    assert [r["name"] for r in rows] == [r["name"] for r in report["layers"]]
    assert [int(r["latency_cycles"]) for r in rows] == [r["latency_cycles"] for r in report["layers"]]


def test_an_inference_report_is_not_a_training_report(tmp_path):
    _, text = monet_report(tmp_path, "--inference")
    assert text.startswith("MONET inference report") and "training-step" not in text.splitlines()[0]


def ort_report(tmp_path, model):
    out = tmp_path / model.stem
    run = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", "report", str(model), "--target",
                          "tpu_like_quad_core", "--out", str(out), "--no-plots"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return json.loads((out / "report.json").read_text()), run.stdout


def test_a_training_graph_without_optimizer_says_so(tmp_path):
    # generate_artifacts' training graph: forward, backward, gradient accumulation; its optimizer
    # is in a separate optimizer_model.onnx
    report, text = ort_report(tmp_path, DATA / "ort_corpus" / "mlp.training.onnx")
    assert report["pipeline"] == "as imported"
    assert report["ops"]["backward"] > 0 and report["ops"]["optimizer"] == 0
    assert "optimizer_model.onnx" in report["optimizer_step"]
    lines = text.splitlines()
    line = next(i for i, t in enumerate(lines) if t.strip().startswith("optimizer  none in the imported graph"))
    assert any(t.strip().startswith("backward") for t in lines[line - 4:line])  # next to the phase table


def test_a_training_graph_with_its_optimizer_gets_no_statement(tmp_path):
    # the Stream fork's ORT graph holds its optimizer; a model MONET differentiates gets one too
    report, text = ort_report(tmp_path, DATA / "ort" / "gpt2like_training.onnx")
    assert report["ops"]["optimizer"] > 0 and "optimizer_step" not in report
    assert "none in the imported graph" not in text
    out, text = monet_report(tmp_path)
    assert "optimizer_step" not in json.loads((out / "report.json").read_text())
    assert "none in the imported graph" not in text
