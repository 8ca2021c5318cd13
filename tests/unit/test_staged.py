"""The stage-expanded (Checkmate/POET) MILP: exact against an exhaustive search on tiny graphs,
its schedules re-checked by an independent evaluator, paging, the graph-file readers and
`monet explore GRAPH.json`."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from monet_ir.explore import graph_files, staged
from monet_ir.explore.staged import Schedule, Stage, StagedError, StagedGraph
from monet_ir.explore.training_graphs import linear_chain, random_dag, unet


def _agrees(graph: StagedGraph, budget: float) -> None:
    solution = staged.solve(graph, budget, paging=False)
    best = staged.exhaustive(graph, budget)
    if best is None:
        assert solution.status == "infeasible"
    else:
        assert solution.status == "optimal"
        assert solution.cost == pytest.approx(best)
        assert solution.peak <= budget + 1e-9


@pytest.mark.parametrize("graph", [linear_chain(3), random_dag(4, 0), random_dag(4, 3), random_dag(4, 5)],
                         ids=lambda g: g.source)
def test_optimum_equals_exhaustive_search(graph):
    high = staged.evaluate(graph, graph.store_all()).peak
    for budget in sorted({1, high // 4, high // 3, high // 2, 2 * high // 3, high - 1, high}):
        _agrees(graph, float(budget))


def test_linear_chain_recomputes_more_than_once_when_memory_is_tight():
    # Checkmate's unit chain of 3: store-all peaks at 5; at 3 the optimum recomputes 3 times, at 4 once
    graph = linear_chain(3)
    costs = [staged.solve(graph, b, paging=False).cost for b in (3, 4, 5)]
    assert costs == [10.0, 8.0, 7.0]
    tight = staged.solve(graph, 3, paging=False).schedule
    # node 0 is computed in more than one later stage (a value recomputed any number of times)
    assert sum(0 in s.computed for s in tight.stages) >= 3


def test_schedules_check_out_on_larger_graphs():
    from monet_ir.explore.graph_explore import default_budgets

    for graph in (unet(2, seed=1), random_dag(8, 2)):
        base = staged.evaluate(graph, graph.store_all())
        budgets = default_budgets(graph, 4)
        for budget in budgets:
            solution = staged.solve(graph, budget, paging=False, time_limit=30)
            assert solution.feasible or budget < budgets[-2]
            if not solution.feasible:
                continue
            check = staged.evaluate(graph, solution.schedule)
            assert check.peak <= budget + 1e-6
            assert check.cost == pytest.approx(solution.cost)
            assert solution.cost >= base.cost


def _with_energy(graph: StagedGraph, page: float) -> StagedGraph:
    graph.energy = list(graph.cost)
    graph.page_in_energy = [page * m for m in graph.memory]
    graph.page_out_energy = [page * m for m in graph.memory]
    return graph


def test_paging_when_recomputing_is_off_or_dearer():
    graph = _with_energy(linear_chain(4), page=0.25)
    base = staged.evaluate(graph, graph.store_all())
    budget = base.peak - 2
    remat = staged.solve(graph, budget, objective="energy", paging=False)
    pages = staged.solve(graph, budget, objective="energy", recompute=False)
    both = staged.solve(graph, budget, objective="energy")
    assert remat.feasible and pages.feasible and both.feasible
    assert pages.recomputations == 0 and pages.page_ins > 0
    assert both.energy <= min(remat.energy, pages.energy) + 1e-9
    for s in (remat, pages, both):
        check = staged.evaluate(graph, s.schedule)
        assert check.energy == pytest.approx(s.energy) and check.peak <= budget + 1e-9
    # paging at 0.25 per byte each way beats recomputing a unit node only for a node of 1 byte
    # when two recomputations are saved; energy never above store-all plus the paging it needs
    assert both.energy >= base.energy


def test_time_budget_bounds_compute():
    graph = _with_energy(linear_chain(4), page=10.0)
    base = staged.evaluate(graph, graph.store_all())
    free = staged.solve(graph, 4, objective="energy")
    assert free.feasible and free.cost > base.cost
    capped = staged.solve(graph, 4, base.cost, objective="energy", paging=False)
    assert capped.status == "infeasible"


def test_time_limit_returns_best_found():
    graph = linear_chain(24)
    solution = staged.solve(graph, 6, paging=False, time_limit=0.5)
    assert solution.status.startswith("time limit")
    # HiGHS starts from the best simple schedule within budget, so the limit returns at least that
    start = staged.best_heuristic(graph, 6, objective="cost", paging=False)
    assert start is not None and solution.feasible
    assert solution.cost <= staged.evaluate(graph, start).cost
    assert staged.evaluate(graph, solution.schedule).peak <= 6


def test_evaluate_rejects_broken_schedules():
    graph = linear_chain(2)  # 5 nodes
    good = graph.store_all()
    staged.evaluate(graph, good)
    bad = list(good.stages)
    bad[3] = Stage(computed=(3,), kept=())  # node 3 reads node 2, neither kept nor computed
    with pytest.raises(StagedError, match="stage 3: computes"):
        staged.evaluate(graph, Schedule(bad))
    bad = list(good.stages)
    bad[2] = Stage(computed=(2,), kept=(1,), page_in=(1,))
    with pytest.raises(StagedError, match="not in storage"):
        staged.evaluate(graph, Schedule(bad))


# ---------------------------------------------------------------------- graph files


def _forms(graph: StagedGraph) -> dict[str, dict]:
    checkmate = graph_files.checkmate_json(graph)
    node_link = {"directed": True, "multigraph": False, "graph": {},
                 "nodes": [{"id": v, "cost_cpu": graph.cost[v], "cost_ram": graph.memory[v],
                            "backward": graph.backward[v], "name": graph.names[v]} for v in range(graph.size)],
                 "links": [{"source": u, "target": v} for u, v in graph.edges]}
    layers = {"layers": [{"name": graph.names[v], "depends_on": [graph.names[u] for u in graph.args[v]],
                          "backward": graph.backward[v], "runtime_ms": graph.cost[v],
                          "memory_bytes": graph.memory[v], "param_memory_bytes": 0,
                          "compute_cost_joules": graph.cost[v], "pagein_cost_joules": 1.0,
                          "pageout_cost_joules": 1.0} for v in range(graph.size)]}
    return {"checkmate": checkmate, "node_link": node_link, "poet": layers}


def test_readers_give_the_same_problem(tmp_path):
    graph = unet(2, seed=3)
    optimum = None
    for form, data in _forms(graph).items():
        path = tmp_path / f"{form}.json"
        path.write_text(json.dumps(data))
        read = graph_files.load_graph(path)
        assert read.args == graph.args and read.cost == graph.cost and read.memory == graph.memory
        assert read.backward == graph.backward
        cost = staged.solve(read, 300, paging=False).cost
        optimum = cost if optimum is None else optimum
        assert cost == optimum
    edges = _forms(graph)["node_link"]
    edges["edges"] = edges.pop("links")  # networkx >= 3.4 writes 'edges'
    assert graph_files.graph_from_json(edges, "x").args == graph.args


@pytest.mark.parametrize("data, message", [
    ([1, 2], "expected a JSON object"),
    ({"v": [0, 1], "args": {"1": [0]}, "cost_ram": {"0": 1}}, "'cost_ram' has no entry for node 1"),
    ({"v": [0, 1], "args": {"0": [1]}}, "node '0' reads '1', which does not come before it"),
    ({"v": [0, 1], "args": {"1": [0]}, "cost_cpu": {"0": -1, "1": 1}}, "'cost_cpu' of node 0"),
    ({"nodes": [{"id": "a", "cost_cpu": 1}], "links": []}, "node 'a' has no 'cost_ram'"),
    ({"nodes": [{"id": "a", "cost_cpu": 1, "cost_ram": 1}], "links": [{"source": "a", "target": "b"}]},
     "node 'b' is not in 'nodes'"),
    ({"layers": [{"name": "x", "depends_on": ["y"]}]}, "depends on 'y', which is not an earlier layer"),
    ({"layers": [{"name": "x", "runtime_ms": 1}]}, "has no 'memory_bytes'"),
    ({"something": 1}, "not a graph file"),
])
def test_bad_graph_files_name_the_entry(tmp_path, data, message):
    path = tmp_path / "g.json"
    path.write_text(json.dumps(data))
    with pytest.raises(StagedError, match=message) as err:
        graph_files.load_graph(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)
    path.write_text("{not json")
    with pytest.raises(StagedError, match="not JSON"):
        graph_files.load_graph(path)
    path.write_text("[" * 100_000 + "]" * 100_000)  # nested beyond the parser: refused, one line
    with pytest.raises(StagedError, match="nested too deeply"):
        graph_files.load_graph(path)


def _monet(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", *argv], capture_output=True, text=True)


def test_explore_graph_file(tmp_path):
    graph = linear_chain(3)
    path = tmp_path / "chain.json"
    path.write_text(json.dumps(graph_files.checkmate_json(graph)))
    run = _monet("explore", str(path), "--exact", "full", "--budget", "3", "--out", str(tmp_path / "out"))
    assert run.returncode == 0, run.stderr
    result = json.loads((tmp_path / "out" / "milp.json").read_text())
    from monet_ir.files import check_run

    assert check_run(tmp_path / "out") == []  # a complete run: the manifest lists milp.json and milp.csv
    assert result["solutions"][0]["status"] == "optimal" and result["solutions"][0]["cost"] == 10.0
    assert len(result["solutions"][0]["schedule"]) == graph.size
    sweep = _monet("explore", str(path), "--out", str(tmp_path / "sweep"))
    assert sweep.returncode == 0 and len(json.loads((tmp_path / "sweep" / "milp.json").read_text())["solutions"]) > 1
    for argv, message in ((["--exact"], "--exact once: a graph file"),
                          (["--objective", "energy", "--memory-budget", "3"], "needs per-node compute_cost_joules"),
                          (["--target", "edge_npu"], "--target does not apply to a graph file")):
        bad = _monet("explore", str(path), "--out", str(tmp_path / "bad"), *argv)
        assert bad.returncode != 0 and message in bad.stderr and "Traceback" not in bad.stderr


def test_exact_full_on_onnx_is_a_usage_error(tmp_path):
    from monet_ir.explore.chain import write_chain_model

    model = write_chain_model(tmp_path / "c.onnx", layers=2, batch=2)
    run = _monet("explore", str(model), "--target", "edge_npu", "--exact", "full", "--out", str(tmp_path / "o"),
                 "--population", "4", "--generations", "0")
    assert run.returncode != 0 and "--exact full" in run.stderr and "Traceback" not in run.stderr
