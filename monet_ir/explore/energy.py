"""`monet explore --objective energy`: keep, recompute or page each saved activation for the least
energy under a main-memory budget and a latency budget (POET's problem).

Genome: one gene per forward node with saved results (`poet.PoetModel.genes`), with the values
0 = keep, 1 = recompute (recomputable nodes, with `--search checkpoint`), 2 = page (targets with
a storage level, with `--search paging`). Fitness: the model of `monet_ir/explore/poet.py`
(`poet.predict`: energy, latency, main-memory peak), minimized as (budget violation, energy):
a feasible point beats every infeasible one, feasible points compare by energy, infeasible
ones by how far they are over the budgets (relative excess summed). The GA is a (mu + lambda)
evolution with binary tournaments, uniform crossover and per-gene mutation, seeded with
store-all, recompute-all, page-all, one gene changed at a time from store-all and Chen-style
periodic plans (every k-th gene kept, the others dropped), the best `population` of them
first; `random` is seeded, so results are deterministic. The front is the Pareto set of the evaluated points over
(energy, peak, latency); the chosen point is the feasible one with the least energy, measured by
the real pass and scheduler (`poet.measure`) and written as `plan.json`, which
`monet report ... --checkpoint plan=plan.json` reproduces. `--exact` also solves the MILP
(`poet.solve_measured`) and reports the GA's gap to it.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from monet_ir.explore import poet

VALUES = ("keep", "recompute", "page")


@dataclass
class EnergySearch:
    genes: list[str]
    choices: list[tuple[int, ...]]  # allowed values per gene
    evaluated: dict[tuple[int, ...], tuple[float, float, float]] = field(default_factory=dict)  # energy, latency, peak
    best: tuple[int, ...] | None = None
    seconds: float = 0.0
    evaluations: int = 0

    def decisions(self, genome: Sequence[int]) -> dict[str, str]:
        return {g: VALUES[v] for g, v in zip(self.genes, genome)}


def violation(figures: tuple[float, float, float], memory_budget: float, time_budget: float) -> float:
    _, latency, peak = figures
    over = max(0.0, peak - memory_budget) / max(memory_budget, 1.0)
    if math.isfinite(time_budget):
        over += max(0.0, latency - time_budget) / max(time_budget, 1.0)
    return over


def search(model: poet.PoetModel, memory_budget: float, time_budget: float = math.inf, *, recompute: bool = True,
           page: bool = True, population: int = 32, generations: int = 40, seed: int = 0) -> EnergySearch:
    """The GA of the module docstring on the model."""
    start = time.perf_counter()
    choices = []
    for can in model.can_recompute:
        allowed = [0]
        if recompute and can:
            allowed.append(1)
        if page and model.can_page:
            allowed.append(2)
        choices.append(tuple(allowed))
    result = EnergySearch(list(model.genes), choices)
    rng = random.Random(seed)

    def figures(genome: tuple[int, ...]) -> tuple[float, float, float]:
        known = result.evaluated.get(genome)
        if known is None:
            known = result.evaluated[genome] = poet.predict(model, result.decisions(genome))
        return known

    def fitness(genome: tuple[int, ...]) -> tuple[float, float]:
        f = figures(genome)
        return violation(f, memory_budget, time_budget), f[0]

    n = len(choices)
    seeds = [tuple(0 for _ in choices)]
    for value in (1, 2):
        seeds.append(tuple(value if value in c else 0 for c in choices))
    for i, c in enumerate(choices):
        for value in c[1:]:
            genome = [0] * n
            genome[i] = value
            seeds.append(tuple(genome))
    # Chen-style periodic plans: keep every k-th gene, drop (recompute, else page) the others
    for k in range(2, int(math.isqrt(max(1, n))) + 3):
        for offset in range(k):
            seeds.append(tuple(0 if i % k == offset else (1 if 1 in c else c[-1]) for i, c in enumerate(choices)))
    seeds = list(dict.fromkeys(seeds))
    pool = sorted(seeds, key=lambda g: (fitness(g), g))[:population]
    while len(pool) < population:
        pool.append(tuple(rng.choice(c) for c in choices))

    def tournament() -> tuple[int, ...]:
        a, b = rng.choice(pool), rng.choice(pool)
        return a if fitness(a) <= fitness(b) else b

    for _ in range(generations):
        children = []
        while len(children) < population:
            a, b = tournament(), tournament()
            child = [x if rng.random() < 0.5 else y for x, y in zip(a, b)]
            for i, c in enumerate(choices):
                if len(c) > 1 and rng.random() < 1.0 / max(1, n):
                    child[i] = rng.choice(c)
            children.append(tuple(child))
        pool = sorted(set(pool) | set(children), key=lambda g: (fitness(g), g))[:population]
    feasible = [g for g in result.evaluated if violation(result.evaluated[g], memory_budget, time_budget) == 0]
    if feasible:
        result.best = min(feasible, key=lambda g: (result.evaluated[g][0], g))
    result.evaluations = len(result.evaluated)
    result.seconds = time.perf_counter() - start
    return result


def front(result: EnergySearch) -> list[tuple[int, ...]]:
    """The evaluated genomes no other evaluated genome beats on energy, peak and latency."""
    points = sorted(result.evaluated.items(), key=lambda kv: (kv[1][0], kv[1][2], kv[1][1], kv[0]))
    kept: list[tuple[tuple[int, ...], tuple[float, float, float]]] = []
    for genome, (energy, latency, peak) in points:
        if not any(e <= energy and p <= peak and t <= latency and (e, p, t) != (energy, peak, latency)
                   for _, (e, t, p) in kept):
            kept.append((genome, (energy, latency, peak)))
    return [g for g, _ in kept]


def run(evaluator: Any, out: Path, memory_budget: float, time_budget: float, *, recompute: bool, page: bool,
        exact: bool, population: int, generations: int, seed: int, report_args: list[str],
        progress: Callable[[str], None]) -> str:
    """The whole `monet explore --objective energy` run; returns the summary text."""
    from monet_ir.analysis.paging_plan import write_plan

    start = time.perf_counter()
    model = poet.build_model(evaluator)
    progress(f"[{time.perf_counter() - start:6.2f} s] model: {len(model.genes)} genes, {model.points} ops, "
             f"store-all {model.base_energy / 1e9:.4g} mJ, {model.base_latency:,.0f} cycles")
    result = search(model, memory_budget, time_budget, recompute=recompute, page=page, population=population,
                    generations=generations, seed=seed)
    rows = []
    for genome in front(result):
        energy, latency, peak = result.evaluated[genome]
        rows.append({"energy_pj": energy, "latency_cycles": latency, "peak_bytes": peak,
                     "feasible": violation((energy, latency, peak), memory_budget, time_budget) == 0,
                     "plan": {g: d for g, d in result.decisions(genome).items() if d != "keep"}})
    (out / "front.json").write_text(json.dumps({"budgeted": model.budgeted, "memory_budget": memory_budget,
                                                "time_budget": time_budget if math.isfinite(time_budget) else None,
                                                "points": rows}, indent=1) + "\n")
    with (out / "front.csv").open("w", encoding="utf-8") as handle:
        handle.write("energy_pj,latency_cycles,peak_bytes,feasible,recompute,page\n")
        for row in rows:
            plan = row["plan"]
            handle.write(f"{row['energy_pj']:.6g},{row['latency_cycles']:.0f},{row['peak_bytes']:.0f},{row['feasible']},"
                         f"{' '.join(g for g, d in plan.items() if d == 'recompute')},"
                         f"{' '.join(g for g, d in plan.items() if d == 'page')}\n")
    lines = [f"MONET exploration: energy under budgets on {evaluator.target.name}: main memory "
             f"'{model.budgeted}' <= {memory_budget:,.0f} bytes"
             + (f", latency <= {time_budget:,.0f} cycles" if math.isfinite(time_budget) else ""),
             f"  GA: {result.evaluations} plans evaluated on the model in {result.seconds:.1f} s, "
             f"{len(rows)} Pareto points (energy, peak, latency)"]
    chosen = result.decisions(result.best) if result.best is not None else None
    milp_energy = math.nan
    if exact:
        solution = poet.solve_measured(evaluator, model, memory_budget, time_budget, recompute=recompute, page=page)
        milp_energy = solution.energy_pj if solution.decisions else math.nan
        lines.append(f"  MILP: {solution.status} in {solution.seconds:.2f} s ({solution.variables} variables, "
                     f"{solution.constraints} rows)" + (f", {solution.energy_pj / 1e9:.6g} mJ (model)"
                                                        if solution.decisions else ""))
        (out / "milp.json").write_text(json.dumps({
            "status": solution.status, "energy_pj": solution.energy_pj, "latency_cycles": solution.latency_cycles,
            "peak_bytes": solution.peak_bytes, "plan": solution.plan(), "measured": solution.measured,
            "seconds": solution.seconds, "variables": solution.variables, "constraints": solution.constraints,
            "rounds": solution.rounds}, indent=1, default=float) + "\n")
        if solution.decisions and (chosen is None or solution.energy_pj < result.evaluated[result.best][0]):
            chosen = solution.decisions
    if result.best is not None and not math.isnan(milp_energy) and milp_energy > 0:
        gap = (result.evaluated[result.best][0] - milp_energy) / milp_energy
        lines.append(f"  GA gap to the MILP: {gap * 100:.2f} %")
    if chosen is None:
        lines.append("  chosen: none (no plan meets the budgets)")
        return "\n".join(lines) + "\n"
    measured = poet.measure(evaluator, chosen)
    plan = {g: d for g, d in chosen.items() if d != "keep"}
    write_plan(str(out / "plan.json"), plan, target=evaluator.target.name, budgeted=model.budgeted,
               memory_budget=memory_budget, time_budget=time_budget if math.isfinite(time_budget) else None,
               measured=measured)
    command = " ".join(["monet", "report", *report_args, "--checkpoint", f"plan={out / 'plan.json'}", "--out", "DIR"])
    (out / "chosen_command.txt").write_text(command + "\n")
    recomputed = [g for g, d in plan.items() if d == "recompute"]
    paged = [g for g, d in plan.items() if d == "page"]
    lines.append(f"  chosen: {len(recomputed)} recomputed, {len(paged)} paged; measured {measured['energy_pj'] / 1e9:.6g} mJ, "
                 f"{measured['latency_cycles']:,.0f} cycles, '{model.budgeted}' peak {measured['peak_bytes']:,.0f} bytes, "
                 f"{measured['paged_bytes']:,.0f} bytes paged")
    meets = measured["peak_bytes"] <= memory_budget and measured["latency_cycles"] <= time_budget
    if not meets:
        lines.append("  the schedule misses a budget the model met (see docs/poet.md, Limits)")
    lines.append(f"  reproduce: {command}")
    lines.append(f"  wrote {out}/ front.csv, front.json, plan.json, chosen_command.txt" + (", milp.json" if exact else ""))
    return "\n".join(lines) + "\n"
