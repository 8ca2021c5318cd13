"""`monet explore --objective energy`: keep, recompute or page each saved activation for the least
energy under a main-memory budget and a latency budget (POET's problem).

Genome: one gene per forward node with saved results (`poet.PoetModel.genes`), with the values
0 = keep, 1 = recompute (recomputable nodes, with `--search checkpoint`), 2 = page and 3 = keep
in storage (targets with a storage level, with `--search paging`), then one gene per other
tensor that can be kept in storage (`poet.PoetModel.homes`: parameters, optimizer state, the
batch, gradients, other values; with `--search paging`), 0 = in main memory, 1 = in storage. Fitness: the model of `monet_ir/explore/poet.py`
(`poet.predict`: energy, latency, main-memory peak), minimized as (budget violation, energy):
a feasible point beats every infeasible one, feasible points compare by energy, infeasible
ones by how far they are over the budgets (relative excess summed). The GA is a (mu + lambda)
evolution with binary tournaments, uniform crossover and per-gene mutation, seeded with
store-all, recompute-all, page-all, one gene changed at a time from store-all and Chen-style
periodic plans (every k-th gene kept, the others dropped), the best `population` of them
first; `random` is seeded, so results are deterministic. The front is the Pareto set of the evaluated points over
(energy, peak, latency). The chosen point must meet the budgets as the real pass and scheduler
measure it (`poet.measure`), not only on the model: the plans feasible on the model are measured
in order of model energy (at most MEASURED_PER_ROUND, the MILP's answer with `--exact` among
them) and the first that meets the budgets is chosen; when none does, the model's budgets are
tightened by the worst measured excess and the GA runs again (at most TIGHTEN_ROUNDS times).
The chosen plan is written as `plan.json`, which `monet report ... --checkpoint plan=plan.json`
reproduces; when no plan meets the budgets, none is written and the run says so
(`NoPlanFound`, exit status 1). `--exact` also solves the MILP (`poet.solve_measured`) and
reports the GA's gap to it.
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

from monet_ir.errors import MonetError
from monet_ir.explore import poet

VALUES = ("keep", "recompute", "page", "store")
MEASURED_PER_ROUND = 8  # model-feasible plans scheduled per round, cheapest first
TIGHTEN_ROUNDS = 3  # GA runs again with budgets tightened by the measured excess


class NoPlanFound(MonetError):
    """No plan the search found meets the budgets when scheduled; `summary`: the run's text, which
    the tool prints before the error."""

    def __init__(self, message: str, summary: str):
        super().__init__(message)
        self.summary = summary


@dataclass
class EnergySearch:
    genes: list[str]
    choices: list[tuple[int, ...]]  # allowed values per gene (then per home)
    evaluated: dict[tuple[int, ...], tuple[float, float, float]] = field(default_factory=dict)  # energy, latency, peak
    best: tuple[int, ...] | None = None
    seconds: float = 0.0
    evaluations: int = 0
    homes: list[str] = field(default_factory=list)

    def decisions(self, genome: Sequence[int]) -> dict[str, str]:
        return {g: VALUES[v] for g, v in zip(self.genes, genome)}

    def stored(self, genome: Sequence[int]) -> list[str]:
        """The homes the genome keeps in storage."""
        return [h for h, v in zip(self.homes, genome[len(self.genes):]) if v]


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
    for g, can in enumerate(model.can_recompute):
        allowed = [0]
        if recompute and can:
            allowed.append(1)
        if page and model.can_page:
            allowed.append(2)
            if model.can_store(g):
                allowed.append(3)
        choices.append(tuple(allowed))
    homes = list(model.homes) if page and model.can_page else []
    choices += [(0, 1)] * len(homes)
    result = EnergySearch(list(model.genes), choices, homes=homes)
    rng = random.Random(seed)

    def figures(genome: tuple[int, ...]) -> tuple[float, float, float]:
        known = result.evaluated.get(genome)
        if known is None:
            known = result.evaluated[genome] = poet.predict(model, result.decisions(genome), result.stored(genome))
        return known

    def fitness(genome: tuple[int, ...]) -> tuple[float, float]:
        f = figures(genome)
        return violation(f, memory_budget, time_budget), f[0]

    n = len(choices)
    G = len(model.genes)
    seeds = [tuple(0 for _ in choices)]
    for value in (1, 2, 3):
        seeds.append(tuple(value if value in c else 0 for c in choices))
    if homes:  # every home kept in storage, with each gene value
        for value in (0, 1, 2, 3):
            seeds.append(tuple((value if value in c else 0) if i < G else 1 for i, c in enumerate(choices)))
        # the largest homes in storage: the k largest, for k = 1, 2, 4, ...
        largest = sorted(range(len(homes)), key=lambda c: -max(m[2] for m in model.home_members[c]))
        k = 1
        while k < len(homes):
            chosen = {G + c for c in largest[:k]}
            seeds.append(tuple(1 if i in chosen else 0 for i in range(n)))
            k *= 2
    for i, c in enumerate(choices):
        for value in c[1:]:
            genome = [0] * n
            genome[i] = value
            seeds.append(tuple(genome))
    # Chen-style periodic plans: keep every k-th gene, drop (recompute, else page) the others
    for k in range(2, int(math.isqrt(max(1, G))) + 3):
        for offset in range(k):
            seeds.append(tuple(0 if i % k == offset or i >= G else (1 if 1 in c else c[-1])
                               for i, c in enumerate(choices)))
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
    pool = sorted(pool, key=lambda g: (fitness(g), g))
    small = n <= PAIR_LIMIT
    improve(pool[0], choices, fitness, pairs=small)
    # the cheapest plans found, feasible or not, repaired greedily: the change that removes most
    # budget excess per energy added, until within budget; then the local search
    starts = sorted(set(pool) | set(seeds), key=lambda g: (figures(g)[0], g))[:8 if small else 2]
    for genome in starts:
        improve(repair(genome, choices, figures, memory_budget, time_budget), choices, fitness, pairs=small)
    feasible = [g for g in result.evaluated if violation(result.evaluated[g], memory_budget, time_budget) == 0]
    if feasible:
        result.best = min(feasible, key=lambda g: (result.evaluated[g][0], g))
    result.evaluations = len(result.evaluated)
    result.seconds = time.perf_counter() - start
    return result


PAIR_LIMIT = 64  # genomes up to this length also try every pair of changes


def repair(genome: tuple[int, ...], choices: Sequence[tuple[int, ...]],
           figures: Callable[[tuple[int, ...]], tuple[float, float, float]], memory_budget: float,
           time_budget: float) -> tuple[int, ...]:
    """Change one gene at a time, each time the change that removes most budget excess per
    energy it adds, until the genome meets the budgets (or no change removes excess). Long
    genomes (over `PAIR_LIMIT` genes) rank every change once per round and apply them in that
    order while each still removes excess (at most 8 rounds)."""
    current = genome
    over = violation(figures(current), memory_budget, time_budget)
    batch = len(choices) > PAIR_LIMIT  # long genomes: apply the ranked changes in one sweep per round
    rounds = 0
    while over > 0 and rounds < (8 if batch else len(choices) * 4):
        rounds += 1
        energy = figures(current)[0]
        ranked = []
        for i, c in enumerate(choices):
            for v in c:
                if v == current[i]:
                    continue
                g = current[:i] + (v,) + current[i + 1:]
                f = figures(g)
                gain = over - violation(f, memory_budget, time_budget)
                if gain <= 0:
                    continue
                ranked.append((gain / max(f[0] - energy, 1e-9 * max(abs(energy), 1.0)), i, v))
        if not ranked:
            return current
        ranked.sort(key=lambda r: (-r[0], r[1], r[2]))
        if not batch:
            _, i, v = ranked[0]
            current = current[:i] + (v,) + current[i + 1:]
            over = violation(figures(current), memory_budget, time_budget)
            continue
        changed: set[int] = set()
        for _, i, v in ranked:
            if i in changed:
                continue
            g = current[:i] + (v,) + current[i + 1:]
            now = violation(figures(g), memory_budget, time_budget)
            if now < over:
                current, over = g, now
                changed.add(i)
                if over <= 0:
                    break
    return current


def improve(genome: tuple[int, ...], choices: Sequence[tuple[int, ...]], fitness: Callable[[tuple[int, ...]], Any],
            pairs: bool) -> tuple[int, ...]:
    """Local search from the GA's best: take the best single-gene change while one improves the
    fitness, then (short genomes) the best change of two genes, and again."""
    best, best_fit = genome, fitness(genome)
    passes = 0
    while pairs or passes < 3:  # long genomes: at most 3 passes of single changes
        passes += 1
        moves = [(i, v) for i, c in enumerate(choices) for v in c if v != best[i]]
        found = None
        for i, v in moves:
            g = best[:i] + (v,) + best[i + 1:]
            f = fitness(g)
            if f < best_fit:
                found, best_fit = g, f
        if found is None and pairs:
            for a in range(len(moves)):
                i, v = moves[a]
                for b in range(a + 1, len(moves)):
                    k, w = moves[b]
                    if k == i:
                        continue
                    g = list(best)
                    g[i], g[k] = v, w
                    g = tuple(g)
                    f = fitness(g)
                    if f < best_fit:
                        found, best_fit = g, f
        if found is None:
            return best
        best = found
    return best


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
        progress: Callable[[str], None], files: list[str] | None = None) -> str:
    """The whole `monet explore --objective energy` run; returns the summary text and appends the
    names of the files written to `files`."""
    from monet_ir.analysis.paging_plan import write_plan
    from monet_ir.files import write_atomic

    written = files if files is not None else []

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
                     "plan": {g: d for g, d in result.decisions(genome).items() if d != "keep"},
                     "storage": result.stored(genome)})
    write_atomic(out / "front.json", json.dumps({"budgeted": model.budgeted, "memory_budget": memory_budget,
                                                 "time_budget": time_budget if math.isfinite(time_budget) else None,
                                                 "points": rows}, indent=1) + "\n")
    csv_lines = ["energy_pj,latency_cycles,peak_bytes,feasible,recompute,page,store\n"]
    for row in rows:
        plan = row["plan"]
        csv_lines.append(f"{row['energy_pj']:.6g},{row['latency_cycles']:.0f},{row['peak_bytes']:.0f},{row['feasible']},"
                     f"{' '.join(g for g, d in plan.items() if d == 'recompute')},"
                     f"{' '.join(g for g, d in plan.items() if d == 'page')},"
                     f"{' '.join([*(g for g, d in plan.items() if d == 'store'), *row['storage']])}\n")
    write_atomic(out / "front.csv", "".join(csv_lines))
    written += ["front.json", "front.csv"]
    lines = [f"MONET exploration: energy under budgets on {evaluator.target.name}: main memory "
             f"'{model.budgeted}' <= {memory_budget:,.0f} bytes"
             + (f", latency <= {time_budget:,.0f} cycles" if math.isfinite(time_budget) else ""),
             f"  GA: {result.evaluations} plans evaluated on the model in {result.seconds:.1f} s, "
             f"{len(rows)} Pareto points (energy, peak, latency)"]
    candidates: list[tuple[float, dict[str, str], list[str], str]] = []  # model energy, decisions, homes, source
    milp_energy = math.nan
    if exact:
        solution = poet.solve_measured(evaluator, model, memory_budget, time_budget, recompute=recompute, page=page)
        milp_energy = solution.energy_pj if solution.decisions else math.nan
        lines.append(f"  MILP: {solution.status} in {solution.seconds:.2f} s ({solution.variables} variables, "
                     f"{solution.constraints} rows)" + (f", {solution.energy_pj / 1e9:.6g} mJ (model)"
                                                        if solution.decisions else ""))
        written.append("milp.json")
        write_atomic(out / "milp.json", json.dumps({
            "status": solution.status, "energy_pj": solution.energy_pj, "latency_cycles": solution.latency_cycles,
            "peak_bytes": solution.peak_bytes, "plan": solution.plan(), "storage": solution.stored,
            "measured": solution.measured,
            "seconds": solution.seconds, "variables": solution.variables, "constraints": solution.constraints,
            "rounds": solution.rounds}, indent=1, default=float) + "\n")
        if solution.decisions:
            candidates.append((solution.energy_pj, solution.decisions, solution.stored, "MILP"))
    if result.best is not None and not math.isnan(milp_energy) and milp_energy > 0:
        gap = (result.evaluated[result.best][0] - milp_energy) / milp_energy
        lines.append(f"  GA gap to the MILP: {gap * 100:.2f} %")
    found = _choose_measured(evaluator, model, result, candidates, memory_budget, time_budget, recompute=recompute,
                             page=page, population=population, generations=generations, seed=seed, progress=progress)
    if found.chosen is None:
        lines.append(f"  chosen: none: {found.why}")
        (out / "plan.json").unlink(missing_ok=True)
        raise NoPlanFound(f"no plan meets the budgets: {found.why}; try a larger --memory-budget"
                          + (" or --time-budget" if math.isfinite(time_budget) else "")
                          + ("" if page and model.can_page else ", or a target with a storage level to page to"),
                          "\n".join(lines) + "\n")
    chosen, storage, measured = found.chosen, found.storage, found.measured
    tile = model.tile if storage else None
    plan = {g: d for g, d in chosen.items() if d in ("recompute", "page")}
    write_plan(str(out / "plan.json"), plan, storage=storage, tile_bytes=tile,
               target=evaluator.target.name, budgeted=model.budgeted,
               memory_budget=memory_budget, time_budget=time_budget if math.isfinite(time_budget) else None,
               measured=measured)
    command = " ".join(["monet", "report", *report_args, "--checkpoint", f"plan={out / 'plan.json'}", "--out", "DIR"])
    write_atomic(out / "chosen_command.txt", command + "\n")
    written += ["plan.json", "chosen_command.txt"]
    recomputed = [g for g, d in plan.items() if d == "recompute"]
    paged = [g for g, d in plan.items() if d == "page"]
    lines.append(f"  chosen: {len(recomputed)} recomputed, {len(paged)} paged, {len(storage)} tensors kept in storage; "
                 f"measured {measured['energy_pj'] / 1e9:.6g} mJ, "
                 f"{measured['latency_cycles']:,.0f} cycles, '{model.budgeted}' peak {measured['peak_bytes']:,.0f} bytes, "
                 f"{measured['paged_bytes']:,.0f} bytes paged")
    if found.note:
        lines.append(f"  {found.note}")
    lines.append(f"  reproduce: {command}")
    lines.append(f"  wrote {out}/ front.csv, front.json, plan.json, chosen_command.txt" + (", milp.json" if exact else ""))
    return "\n".join(lines) + "\n"


@dataclass
class Measured:
    """The plan `_choose_measured` chose (None: none meets the budgets, `why` says how close one came)."""

    chosen: dict[str, str] | None = None
    storage: list[str] = field(default_factory=list)
    measured: dict[str, float] = field(default_factory=dict)
    note: str = ""
    why: str = ""


def _choose_measured(evaluator: Any, model: poet.PoetModel, result: EnergySearch,
                     extra: list[tuple[float, dict[str, str], list[str], str]], memory_budget: float,
                     time_budget: float, *, recompute: bool, page: bool, population: int, generations: int, seed: int,
                     progress: Callable[[str], None]) -> Measured:
    """The least-energy plan (by the model) whose schedule meets the budgets: the module
    docstring's rounds of measuring the model's feasible plans and tightening its budgets."""
    mem, lat = memory_budget, time_budget
    tried: set[tuple] = set()
    closest: tuple[float, dict[str, float]] | None = None
    for round_ in range(TIGHTEN_ROUNDS + 1):
        feasible = sorted((g for g, f in result.evaluated.items() if violation(f, mem, lat) == 0),
                          key=lambda g: (result.evaluated[g][0], g))
        candidates = [(result.evaluated[g][0], result.decisions(g), result.stored(g), "GA") for g in feasible]
        candidates = sorted(extra + candidates, key=lambda c: c[0]) if round_ == 0 else candidates
        measured_now = 0
        worst_mem = worst_lat = 0.0
        for _, decisions, homes, _source in candidates:
            key = (tuple(sorted(decisions.items())), tuple(homes))
            if key in tried:
                continue
            if measured_now == MEASURED_PER_ROUND:
                break
            tried.add(key)
            measured_now += 1
            storage = model.stored_names(decisions, homes)
            figures = poet.measure(evaluator, decisions, storage, model.tile if storage else None)
            over_mem = figures["peak_bytes"] - memory_budget
            over_lat = figures["latency_cycles"] - time_budget
            if over_mem <= 0 and over_lat <= 0:
                note = "" if round_ == 0 and measured_now == 1 else (
                    f"(the schedule of {measured_now - 1 + round_ * MEASURED_PER_ROUND} cheaper plan(s) missed a "
                    f"budget the model met; this is the cheapest that meets them when scheduled)")
                return Measured(decisions, storage, figures, note=note)
            excess = max(over_mem / max(memory_budget, 1.0), over_lat / time_budget if math.isfinite(time_budget) else 0)
            if closest is None or excess < closest[0]:
                closest = (excess, figures)
            worst_mem, worst_lat = max(worst_mem, over_mem), max(worst_lat, over_lat)
        if round_ == TIGHTEN_ROUNDS or not measured_now:
            break
        mem -= max(0.0, worst_mem)
        lat -= max(0.0, worst_lat)
        if mem <= 0 or lat <= 0:
            break
        progress(f"  the schedules miss a budget the model met: searching again with the model's budgets tightened "
                 f"to {mem:,.0f} bytes" + (f", {lat:,.0f} cycles" if math.isfinite(lat) else ""))
        result = search(model, mem, lat, recompute=recompute, page=page, population=population,
                        generations=generations, seed=seed + round_ + 1)
    if closest is None:
        return Measured(why="none of the plans the search found meets them even on the model")
    figures = closest[1]
    return Measured(why=f"{len(tried)} plan(s) within them on the model were scheduled and missed them; the closest "
                        f"peaks at "
                        f"{figures['peak_bytes']:,.0f} bytes of '{model.budgeted}'"
                        + (f" and takes {figures['latency_cycles']:,.0f} cycles" if math.isfinite(time_budget) else ""))
