"""monet explore: evaluation, the checkpoint MILP, the NSGA-II search and the reproduction of a
chosen point by `monet report` (small models, small populations)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from monet_ir.explore import ga, milp
from monet_ir.explore.chain import write_chain_model
from monet_ir.explore.cli import gap
from monet_ir.explore.evaluate import Candidate, Evaluator, StepConfig
from monet_ir.tools.monet import main as monet_main

DATA = Path(__file__).resolve().parents[1] / "data" / "models"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "models"
TARGET = "tpu_like_quad_core"


@pytest.fixture(scope="module")
def chain_path(tmp_path_factory) -> Path:
    return write_chain_model(tmp_path_factory.mktemp("chain") / "chain10.onnx", layers=10)


@pytest.fixture(scope="module")
def evaluators(chain_path) -> dict[str, Evaluator]:
    return {
        "mlp": Evaluator(StepConfig(str(DATA / "mlp_b4.onnx"), TARGET)),
        "lenet": Evaluator(StepConfig(str(DATA / "lenet5_b4.onnx"), TARGET)),
        "chain10": Evaluator(StepConfig(str(chain_path), TARGET)),
    }


def test_genes_and_sizes(evaluators):
    chain = evaluators["chain10"]
    assert [g.node for g in chain.checkpoint_genes] == [f"/act{i}/{'Relu' if i % 2 == 0 else 'Tanh'}" for i in range(10)]
    lenet = evaluators["lenet"]
    assert len(lenet.checkpoint_genes) == 6
    for gene in lenet.allocation_genes:
        assert gene.options[0] is None and len(gene.options) >= 2
    spec = ga.GenomeSpec.of(lenet, "schedule")
    assert len(spec.sizes) == len(spec) == len(spec.checkpoint) + len(spec.allocation) + \
        (len(spec.fusion) + 1 if spec.fusion else 0)
    genome = tuple(n - 1 for n in spec.sizes)
    assert spec.encode(*_decisions(spec.decode(genome))) == genome


@pytest.mark.parametrize("name", ["mlp", "lenet", "chain10", "resnet18"])
def test_planned_graph_equals_the_rewritten_ir(evaluators, name):
    """The evaluator builds task graphs from the passes' plans, without cloning IR: task for
    task and tensor for tensor, the graph `monet report` extracts from the step after
    `activation-checkpoint` and `fuse-layers`."""
    from monet_ir import graph as ir_graph
    from monet_ir.schedule.taskgraph import extract

    ev = evaluators[name] if name in evaluators else Evaluator(StepConfig(str(EXAMPLES / "resnet18_b1.onnx"), TARGET))
    rng = random.Random(3)
    every = tuple(g.node for g in ev.checkpoint_genes)
    stacks = tuple(g.spec for g in ev.fusion_genes)
    sets = [every, every[::2], every[1:2]] + [tuple(n for n in every if rng.random() < 0.5) for _ in range(4)]
    candidates = [Candidate(recompute) for recompute in sets]
    if stacks:
        # the later ones with the same stacks start from the saved forward extraction of the
        # first, whatever they recompute (which can change how forward values are split)
        candidates += [Candidate((), (), stacks, 4), Candidate(every[::2], (), stacks, 4), Candidate(every, (), stacks, 4),
                       Candidate(every, (), stacks[::2], 0)]
        candidates += [Candidate((node,), (), stacks[::2], 0) for node in every[-4:]]
        candidates.append(Candidate(sets[-1], (), tuple(s for s in stacks if rng.random() < 0.5) or stacks[:1], 8))
    for c in candidates:
        planned = ev.graph(c)
        rewritten = extract(ir_graph.step_function(ev.rewritten(c.recompute, c.fusion, c.tiles)), bits=ev.bits)
        assert sum(t.phase == "recompute" for t in planned.tasks) > 0 or not c.recompute
        assert len(planned.tasks) > len(ev.graph(Candidate(c.recompute)).tasks) or not c.fusion
        assert planned.tasks == rewritten.tasks, c
        assert planned.tensors == rewritten.tensors, c


def _decisions(c: Candidate):
    return c.recompute, dict(c.allocation), c.fusion, c.tiles


@pytest.mark.parametrize("name", ["mlp", "lenet", "chain10"])
def test_milp_model_is_what_the_ir_measures(evaluators, name):
    """The MILP's cost and memory model equals the measurement on the rewritten IR."""
    ev = evaluators[name]
    model = milp.build_model(ev)
    rng = random.Random(7)
    for _ in range(8):
        chosen = tuple(g for g in model.genes if rng.random() < 0.5)
        predicted, measured = milp.predict(model, chosen), ev.checkpoint_cost(chosen)
        assert predicted.saved_bytes == measured.saved_bytes
        assert predicted.recompute_cycles == pytest.approx(measured.recompute_cycles, rel=1e-12)
    assert milp.predict(model, ()).recompute_cycles == 0


def _brute_force(model, budget):
    import itertools

    best = None
    for bits in itertools.product((0, 1), repeat=len(model.genes)):
        chosen = tuple(g for g, b in zip(model.genes, bits, strict=True) if b)
        p = milp.predict(model, chosen)
        if p.saved_bytes <= budget and (best is None or p.recompute_cycles < best):
            best = p.recompute_cycles
    return best


@pytest.mark.parametrize("name", ["mlp", "lenet", "chain10"])
def test_ga_within_5_percent_of_milp(evaluators, name):
    ev = evaluators[name]
    model = milp.build_model(ev)
    budgets = milp.default_budgets(model, 5)
    for budget in budgets[1:-1] if len(budgets) > 2 else budgets:
        sol = milp.solve(model, budget)
        assert sol.optimal and sol.saved_bytes <= budget
        assert sol.recompute_cycles == pytest.approx(_brute_force(model, budget))
        measured = ev.checkpoint_cost(sol.recompute)
        assert measured.saved_bytes == sol.saved_bytes
        assert measured.recompute_cycles == pytest.approx(sol.recompute_cycles)
        # the GA, without the greedy memory-budget seed, on the same objective
        result = ga.run_search(ev, objective="checkpoint", population=20, generations=30, seed=1, budget=budget,
                               greedy_seed=False)
        best = result.best(budget)
        assert best is not None
        assert gap(result.point(best)["recompute_cycles"], sol.recompute_cycles) <= 0.05


@pytest.fixture(scope="module")
def lenet_search(evaluators):
    return ga.run_search(evaluators["lenet"], population=8, generations=3, seed=5)


def test_front_is_non_dominated(lenet_search):
    r = lenet_search
    # every point of the search (fused forward and backward stacks, recomputation, pinned
    # cores) can be scheduled
    assert not [e.error for e in r.results.values() if getattr(e, "error", "")]
    front = [r.objectives(g) for g in r.front]
    assert front
    for a in front:
        assert not any(ga.dominates(b, a) for b in front)
        assert not any(ga.dominates(r.objectives(g), a) for g in r.order)
    # every evaluated point is on the front or dominated by (or equal to) a front point
    for g in r.order:
        v = r.objectives(g)
        if v[0] < ga.PENALTY:
            assert any(f == v or ga.dominates(f, v) for f in front)


def test_seeded_policies_are_evaluated(lenet_search):
    r = lenet_search
    assert {"store-all", "recompute-all", "sqrt"} <= set(r.seeds)
    for name, genome in r.seeds.items():
        assert genome in r.results
    spec = r.spec
    assert spec.decode(r.seeds["store-all"]) == Candidate()
    assert set(spec.decode(r.seeds["recompute-all"]).recompute) == {g.node for g in spec.checkpoint}
    assert not spec.decode(r.seeds["sqrt"]).allocation


def test_deterministic_for_a_seed(evaluators, lenet_search):
    again = ga.run_search(evaluators["lenet"], population=8, generations=3, seed=5)
    assert again.order == lenet_search.order
    assert again.front == lenet_search.front
    assert [again.objectives(g) for g in again.front] == [lenet_search.objectives(g) for g in lenet_search.front]


def test_parallel_equals_serial(evaluators, lenet_search):
    parallel = ga.run_search(evaluators["lenet"], population=8, generations=3, seed=5, jobs=2)
    assert parallel.order == lenet_search.order
    assert {g: parallel.objectives(g) for g in parallel.order} == {g: lenet_search.objectives(g) for g in lenet_search.order}


def _explore_lenet(out: Path, *options: str) -> int:
    """Exit code of `monet explore` on LeNet with these options."""
    with pytest.raises(SystemExit) as exit_:
        monet_main(["explore", str(DATA / "lenet5_b4.onnx"), "--target", TARGET, "--out", str(out), *options])
    return exit_.value.code


def test_chosen_point_is_reproduced_by_monet_report(tmp_path, evaluators):
    out = tmp_path / "explore"
    assert _explore_lenet(out, "--population", "8", "--generations", "3", "--seed", "2", "--no-plots") == 0
    chosen = json.loads((out / "chosen.json").read_text())
    front = json.loads((out / "front.json").read_text())
    point = chosen["point"]
    assert point is not None and point["fits"]
    assert point["latency_cycles"] == min(p["latency_cycles"] for p in front if p["fits"])
    _check_report(chosen["command"], point)
    # also a point with recomputation and a pinned allocation, through the same command builder
    from monet_ir.explore.outputs import report_command, write_mapping

    ev = evaluators["lenet"]
    genes = ev.allocation_genes
    candidate = Candidate(recompute=(ev.checkpoint_genes[0].node, ev.checkpoint_genes[3].node),
                          allocation=((genes[0].node, genes[0].options[1]), (genes[-1].node, genes[-1].options[-1])))
    mapping = tmp_path / "mapping.yaml"
    write_mapping(candidate, mapping)
    # and one with fused stacks as well (the evaluator plans the fusion, the report runs the pass)
    fused = Candidate(candidate.recompute, candidate.allocation, tuple(g.spec for g in ev.fusion_genes), 4)
    for point, out in ((candidate, "report2"), (fused, "report3")):
        evaluation = ev.evaluate(point)
        assert not evaluation.error
        command = report_command(ev.config, point, str(tmp_path / out), str(mapping))
        assert ("--fusion" in command) == bool(point.fusion)
        _check_report(command, {"latency_cycles": evaluation.latency_cycles, "energy_pj": evaluation.energy_pj,
                                "peak_memory_bytes": evaluation.peak_memory_bytes})


def test_search_option_chooses_the_genes(tmp_path, capsys):
    out = tmp_path / "layer_by_layer"
    options = ("--population", "4", "--generations", "1", "--no-plots")
    assert _explore_lenet(out, *options, "--search", "checkpoint,allocation") == 0
    assert "0 fusion stacks" in capsys.readouterr().err
    front = json.loads((out / "front.json").read_text())
    assert front and all("fusion" not in p and "tiles" not in p for p in front)
    assert _explore_lenet(tmp_path / "bad", *options, "--search", "checkpoint,tiling") != 0
    err = capsys.readouterr().err
    assert "--search checkpoint,tiling" in err and "not tiling" in err and "Traceback" not in err


def _check_report(command: list[str], point: dict) -> None:
    assert command[:2] == ["monet", "report"]
    with pytest.raises(SystemExit) as exit_:
        monet_main([*command[1:], "--no-plots"])
    assert exit_.value.code == 0
    out = Path(command[command.index("--out") + 1])
    report = json.loads((out / "report.json").read_text())
    assert report["latency_cycles"] == point["latency_cycles"]
    assert report["energy_pj"] == point["energy_pj"]
    assert sum(report["memory"]["peak_bytes"].values()) == point["peak_memory_bytes"]


def test_exact_cli_writes_the_comparison(tmp_path, chain_path, capsys):
    out = tmp_path / "exact"
    with pytest.raises(SystemExit) as exit_:
        monet_main(["explore", str(chain_path), "--target", TARGET, "--out", str(out), "--exact",
                    "--population", "20", "--generations", "30", "--no-plots"])
    assert exit_.value.code == 0
    rows = json.loads((out / "milp.json").read_text())
    assert len(rows) == 5
    for row in rows:
        assert row["milp_optimal"]
        assert row["measured_recompute_cycles"] == pytest.approx(row["milp_recompute_cycles"])
        assert row["ga_recompute_cycles"] >= row["milp_recompute_cycles"] - 1e-9
        assert row["gap"] <= 0.05 and row["front_gap"] >= 0 and row["greedy_gap"] >= 0
    assert "exact checkpoint choice" in capsys.readouterr().out


def test_failed_candidates_are_counted_in_the_summary(tmp_path, capsys, monkeypatch):
    from monet_ir.schedule.scheduler import ScheduleError

    real = Evaluator.schedule

    def fails_when_fused(self, candidate, *args, **kwargs):
        if candidate.fusion and any(candidate.fusion):
            raise ScheduleError("the task graph has a cycle")  # what fusion once did on MobileNetV2
        return real(self, candidate, *args, **kwargs)

    monkeypatch.setattr(Evaluator, "schedule", fails_when_fused)
    out = tmp_path / "failing"
    assert _explore_lenet(out, "--population", "8", "--generations", "2", "--no-plots", "--jobs", "1",
                          "--search", "all") == 0
    printed = capsys.readouterr().out
    assert "point(s) failed and are left out of the front; first reason: the task graph has a cycle" in printed


def test_graph_cache_is_bounded_by_tasks(monkeypatch):
    """The evaluator keeps its latest graphs up to GRAPH_CACHE_TASKS tasks in all (the newest
    always); a graph built again after eviction is the same graph."""
    from monet_ir.explore import evaluate

    ev = Evaluator(StepConfig(str(DATA / "lenet5_b4.onnx"), TARGET))
    recompute = [(), *((g.node,) for g in ev.checkpoint_genes)]
    first = ev.graph(Candidate(recompute[1]))
    monkeypatch.setattr(evaluate, "GRAPH_CACHE_TASKS", 3 * len(first.tasks))
    for names in recompute:
        g = ev.graph(Candidate(names))
        assert ev.graph(Candidate(names)) is g  # the newest is kept
        assert sum(len(kept.tasks) for kept in ev._graphs.values()) <= evaluate.GRAPH_CACHE_TASKS
        assert len(ev._graphs) >= 2
    again = ev.graph(Candidate(recompute[1]))
    assert again is not first
    assert [(t.op, t.reads, t.writes, list(t.preds)) for t in again.tasks] == \
        [(t.op, t.reads, t.writes, list(t.preds)) for t in first.tasks]
