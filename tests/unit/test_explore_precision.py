"""monet explore --search precision: the precision policy as a gene (LeNet on snax_mx, a small
population): every searched policy is evaluated, a point's figures are what `monet report
--precision POLICY` prints, the search is deterministic across --jobs, and a policy some core
cannot run is a one-line error before the search."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from monet_ir.explore import ga
from monet_ir.explore.evaluate import Candidate, Evaluator, StepConfig
from monet_ir.explore.outputs import report_command
from monet_ir.tools.monet import main as monet_main

LENET = str(Path(__file__).resolve().parents[1] / "data" / "models" / "lenet5_b4.onnx")
TARGET = "snax_mx"
POLICIES = ("mxfp8_e4m3;mx-block=32;mx-group=vector", "mxfp4_e2m1;mx-block=64;mx-group=square:8x8")


def _monet(*argv: str) -> int:
    with pytest.raises(SystemExit) as exit_:
        monet_main(list(argv))
    return exit_.value.code


def _report(command: list[str]) -> dict:
    assert command[:2] == ["monet", "report"]
    assert _monet(*command[1:], "--no-plots") == 0
    return json.loads((Path(command[command.index("--out") + 1]) / "report.json").read_text())


def _same(report: dict, point: dict) -> None:
    assert report["latency_cycles"] == point["latency_cycles"]
    assert report["energy_pj"] == point["energy_pj"]
    assert sum(report["memory"]["peak_bytes"].values()) == point["peak_memory_bytes"]


def test_precision_gene_cli_and_reproduction(tmp_path, capsys):
    out = tmp_path / "explore"
    assert _monet("explore", LENET, "--target", TARGET, "--out", str(out), "--search", "checkpoint,precision",
                  "--precisions", "mxfp8_e4m3,mxfp4_e2m1", "--mx-groups", "vector,square:8x8",
                  "--population", "8", "--generations", "2", "--seed", "1", "--jobs", "1", "--no-plots") == 0
    assert "precision (4 policies)" in capsys.readouterr().err
    with (out / "evaluated.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert {r["precision"] for r in rows} == {"mxfp8_e4m3;mx-block=32;mx-group=vector",
                                              "mxfp8_e4m3;mx-block=64;mx-group=square:8x8",
                                              "mxfp4_e2m1;mx-block=32;mx-group=vector", POLICIES[1]}
    front = json.loads((out / "front.json").read_text())
    assert front and all(p["precision"] in {r["precision"] for r in rows} for p in front)
    chosen = json.loads((out / "chosen.json").read_text())
    assert chosen["point"]["precision"] and "--precision" in chosen["command"]
    _same(_report(chosen["command"]), chosen["point"])
    # the policies change the figures (the gene is not ignored): MXFP4 square stores less than MXFP8 vector
    store_all = {r["precision"]: r for r in rows if r["recompute"] == ""}
    assert int(store_all[POLICIES[1]]["peak_memory_bytes"]) < int(store_all[POLICIES[0]]["peak_memory_bytes"])


def test_a_candidate_under_each_policy_is_what_report_prints(tmp_path):
    ev = Evaluator(StepConfig(LENET, TARGET))
    node = ev.checkpoint_genes[1].node
    for i, policy in enumerate(POLICIES):
        candidate = Candidate(recompute=(node,), precision=policy)
        evaluation = ev.evaluate(candidate)
        assert not evaluation.error
        report = _report(report_command(ev.config, candidate, str(tmp_path / f"r{i}"), None))
        assert report["precision"] == policy
        _same(report, {"latency_cycles": evaluation.latency_cycles, "energy_pj": evaluation.energy_pj,
                       "peak_memory_bytes": evaluation.peak_memory_bytes})


def test_deterministic_across_jobs():
    ev = Evaluator(StepConfig(LENET, TARGET))
    options = dict(population=8, generations=2, seed=3, allocation=False, fusion=False, precisions=POLICIES)
    serial = ga.run_search(ev, jobs=1, **options)
    parallel = ga.run_search(ev, jobs=2, **options)
    assert serial.order == parallel.order and serial.front == parallel.front
    assert {g: serial.objectives(g) for g in serial.order} == {g: parallel.objectives(g) for g in parallel.order}
    assert {serial.spec.decode(g).precision for g in serial.order} == set(POLICIES)


def test_unrunnable_precision_is_one_line_before_the_search(tmp_path, capsys):
    out = tmp_path / "bad"
    assert _monet("explore", LENET, "--target", TARGET, "--out", str(out), "--search", "checkpoint,precision",
                  "--precisions", "mxfp8_e4m3,bf16", "--population", "4", "--generations", "1", "--no-plots") == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "--precisions" in err and "cannot run bf16" in err
    assert not (out / "search.log").exists()
    assert _monet("explore", LENET, "--target", TARGET, "--out", str(out), "--search", "checkpoint",
                  "--precisions", "mxfp8_e4m3", "--no-plots") == 1
    assert "--search ...,precision" in capsys.readouterr().err


def test_resume_with_the_precision_gene(tmp_path, capsys):
    common = ("explore", LENET, "--target", TARGET, "--search", "checkpoint,precision", "--precisions",
              "mxfp8_e4m3,mxfp4_e2m1", "--population", "4", "--seed", "4", "--jobs", "1", "--no-plots")
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert _monet(*common, "--generations", "2", "--out", str(whole)) == 0
    assert _monet(*common, "--generations", "1", "--out", str(part)) == 0
    assert _monet(*common, "--generations", "2", "--resume", str(part)) == 0
    for name in ("front.json", "evaluated.csv"):
        assert (whole / name).read_text() == (part / name).read_text()
    # another list of policies is another genome: refused
    assert _monet(*common[:7], "mxint8", *common[8:], "--generations", "3", "--resume", str(part)) == 1
    assert "genome differs" in capsys.readouterr().err


def test_fusion_genes_under_an_mx_policy_are_stacks_fuse_layers_accepts_after_quantize(tmp_path):
    """Candidates are fused after `quantize` (as `monet report` does), whose casts sit between the
    ops: genes found on the unquantized step named stacks the pass then refused, so every fused
    candidate on an MX target failed. Fusing every gene now schedules, as `monet report` does."""
    bottleneck = str(Path(__file__).resolve().parents[1] / "data" / "corpus" / "resnet_bottleneck.ts.op15.onnx")
    ev = Evaluator(StepConfig(bottleneck, TARGET))
    assert ev.quantize and ev.fusion_genes
    candidate = Candidate(fusion=tuple(g.spec for g in ev.fusion_genes), tiles=2)
    point = ev.evaluate(candidate)
    assert point.error == "" and point.latency_cycles < float("inf")
    report = _report(report_command(ev.config, candidate, str(tmp_path / "r"), None))
    assert report["latency_cycles"] == point.latency_cycles
    assert report["energy_pj"] == point.energy_pj
