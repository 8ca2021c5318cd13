"""The exact keep/recompute/page choice (monet_ir/explore/poet.py): on unit-cost chains the MILP
finds the optimum an independent dynamic program and brute force find; on a real step its answer,
re-scheduled by the real scheduler, meets both budgets, and paging opens budgets recomputation
alone cannot meet."""

from __future__ import annotations

import functools
import itertools
import math
from pathlib import Path

import pytest

from monet_ir.explore import poet
from monet_ir.explore.evaluate import Evaluator, StepConfig


def brute_force(model: poet.PoetModel, budget: float) -> float | None:
    best = None
    for keep in itertools.product((0, 1), repeat=len(model.genes)):
        decisions = {g: "keep" if k else "recompute" for g, k in zip(model.genes, keep)}
        energy, _, peak = poet.predict(model, decisions)
        if peak <= budget:
            best = energy if best is None else min(best, energy)
    return best


@pytest.mark.parametrize("n", [5, 7])
def test_chain_milp_matches_brute_force_and_the_dynamic_program(n):
    model = poet.chain_model(n)
    for budget in range(2, n + 4):
        exact = brute_force(model, budget)
        dp = poet.chain_optimum(n, budget)
        solution = poet.solve(model, budget, page=False)
        if exact is None:
            assert dp is None and solution.status == "infeasible" and not solution.decisions
            continue
        assert dp == exact - model.base_energy
        assert solution.status == "optimal" and solution.energy_pj == exact
        assert solution.peak_bytes <= budget


@pytest.mark.parametrize("n", [8, 12, 16])
def test_chain_milp_reaches_the_known_optimum(n):
    model = poet.chain_model(n)
    budgets = sorted({3, 4, int(2 * math.sqrt(n)) + 1, n // 2 + 1, n + 2})
    for budget in budgets:
        dp = poet.chain_optimum(n, budget)
        solution = poet.solve(model, budget, page=False, time_limit=30)
        if dp is None:
            assert solution.status == "infeasible"
        else:
            assert solution.status == "optimal" and solution.energy_pj - model.base_energy == dp, budget
    # store-all needs every output at once; recompute costs one op per dropped output
    assert poet.chain_optimum(n, n + 2) == 0 and poet.chain_optimum(n, 3) is None


def test_time_limit_reports_what_it_has():
    model = poet.chain_model(24)
    solution = poet.solve(model, 9, page=False, time_limit=1e-3)
    assert solution.status in ("optimal", "time limit (best feasible)", "time limit (none found)")
    if solution.status == "time limit (best feasible)":
        assert solution.decisions and solution.peak_bytes <= 9


# ----------------------------------------------------------------------------- a real step


@functools.cache
def cnn_step(tmp: Path):
    from test_paging import tiny_cnn

    model_path = tiny_cnn(tmp / "tiny_cnn.onnx")
    evaluator = Evaluator(StepConfig(model=str(model_path), target="cortex_m_mcu", optimizer="sgd"))
    return evaluator, poet.build_model(evaluator)


def test_model_of_store_all_and_page_all_matches_the_scheduler(tmp_path_factory):
    evaluator, model = cnn_step(tmp_path_factory.getbasetemp())
    for decisions in ({}, {g: "page" for g in model.genes}):
        measured = poet.measure(evaluator, decisions)
        energy, latency, peak = poet.predict(model, decisions)
        assert energy == pytest.approx(measured["energy_pj"], rel=1e-3)
        assert peak == pytest.approx(measured["peak_bytes"], rel=0.01)
        # paging counted serially in the model: the scheduler overlaps it with compute
        assert measured["latency_cycles"] <= latency * (1 + 1e-9)


def test_milp_answer_meets_both_budgets_when_rescheduled(tmp_path_factory):
    evaluator, model = cnn_step(tmp_path_factory.getbasetemp())
    base = poet.measure(evaluator, {})
    time_budget = 1.5 * base["latency_cycles"]
    for fraction in (0.9, 0.75):
        memory_budget = fraction * base["peak_bytes"]
        both = poet.solve_measured(evaluator, model, memory_budget, time_budget)
        assert both.status == "optimal" and both.plan()
        assert both.measured["peak_bytes"] <= memory_budget
        assert both.measured["latency_cycles"] <= time_budget
        assert both.measured["energy_pj"] == pytest.approx(both.energy_pj, rel=1e-3)
        only_recompute = poet.solve(model, memory_budget, time_budget, page=False)
        if only_recompute.decisions:
            assert both.energy_pj <= only_recompute.energy_pj
        else:
            # a budget only paging can meet
            assert fraction == 0.75 and "page" in both.plan().values()
    # a latency budget below store-all's is infeasible
    assert poet.solve(model, base["peak_bytes"], 0.5 * base["latency_cycles"]).status == "infeasible"


def test_energy_does_not_grow_with_the_budget_and_paging_never_costs_more(tmp_path_factory):
    evaluator, model = cnn_step(tmp_path_factory.getbasetemp())
    _, latency, peak = poet.predict(model, {})
    energies = {}
    for mode, (recompute, page) in {"recompute": (True, False), "page": (False, True), "both": (True, True)}.items():
        previous = math.inf
        for fraction in (0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0):
            solution = poet.solve(model, fraction * peak, 1.5 * latency, recompute=recompute, page=page)
            energy = solution.energy_pj if solution.decisions else math.inf
            assert energy <= previous + 1e-6 * abs(energy if math.isfinite(energy) else 1.0), (mode, fraction)
            previous = energy
            energies[(mode, fraction)] = energy
    for fraction in (0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0):
        assert energies[("both", fraction)] <= min(energies[("recompute", fraction)], energies[("page", fraction)])
    assert any(math.isinf(energies[("recompute", f)]) and math.isfinite(energies[("both", f)]) for f in (0.7, 0.75))


def test_model_of_keeping_everything_in_storage_matches_the_scheduler(tmp_path_factory):
    evaluator, model = cnn_step(tmp_path_factory.getbasetemp())
    assert {"x", "conv0.weight", "d_conv0.weight"} <= set(model.homes)
    decisions = {g: "store" if model.can_store(i) else "keep" for i, g in enumerate(model.genes)}
    assert "store" in decisions.values()
    names = model.stored_names(decisions, model.homes)
    measured = poet.measure(evaluator, decisions, names, model.tile)
    energy, latency, peak = poet.predict(model, decisions, model.homes)
    assert energy == pytest.approx(measured["energy_pj"], rel=1e-3)
    assert latency == pytest.approx(measured["latency_cycles"], rel=0.01)
    # conservative, and close
    assert measured["peak_bytes"] <= peak <= 1.05 * measured["peak_bytes"]
    assert measured["peak_bytes"] < 0.6 * poet.measure(evaluator, {})["peak_bytes"]


def test_storage_opens_a_budget_activation_paging_cannot_meet(tmp_path_factory):
    # 60 % of the store-all peak: recomputing and paging activations leave too much in SRAM
    # (the batch, weights and gradients stay); keeping the batch in storage meets it
    evaluator, model = cnn_step(tmp_path_factory.getbasetemp())
    base = poet.measure(evaluator, {})
    budget, time_budget = 0.6 * base["peak_bytes"], 1.5 * base["latency_cycles"]
    activations_only = poet.PoetModel(**{**model.__dict__, "homes": [], "home_members": [], "home_points": [],
                                         "home_cycles": [], "home_energy": [], "clone_reads": []})
    activations_only.storage_name = [None] * len(model.storage_name)
    assert poet.solve(activations_only, budget, time_budget).status == "infeasible"
    assert poet.solve(model, budget, time_budget, page=False).status == "infeasible"
    solution = poet.solve_measured(evaluator, model, budget, time_budget)
    assert solution.status == "optimal" and solution.stored
    assert solution.measured["peak_bytes"] <= budget and solution.measured["latency_cycles"] <= time_budget
    assert solution.measured["energy_pj"] == pytest.approx(solution.energy_pj, rel=1e-3)


def test_recompute_all_model_is_close_to_the_schedule_on_resnet18():
    # the clones of one backward reader run in forward order: each cone intermediate is counted
    # from its clone to its last cone reader, not all of them at once (432 vs 338 MB at batch 8)
    from conftest import SHARED

    model_path = SHARED / "models" / "resnet18_b1.onnx"
    if not model_path.is_file():
        pytest.skip(f"{model_path} is not present")
    evaluator = Evaluator(StepConfig(model=str(model_path), target="cortex_a_board"))
    model = poet.build_model(evaluator)
    decisions = {g: "recompute" if model.can_recompute[i] else "keep" for i, g in enumerate(model.genes)}
    measured = poet.measure(evaluator, decisions)
    _, _, peak = poet.predict(model, decisions)
    assert measured["peak_bytes"] <= peak <= 1.05 * measured["peak_bytes"]
