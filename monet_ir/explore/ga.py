"""NSGA-II (DEAP) over the checkpointing and core-allocation decisions of a training step.

Genome: a flat list of integers, one per gene, in segments (`GenomeSpec`):

1. checkpoint genes, one per forward node whose saved activations can be recomputed
   (`Evaluator.checkpoint_genes`): 0 = keep, 1 = recompute;
2. allocation genes, one per node with a real choice of cores (`Evaluator.allocation_genes`):
   an index into the node's options (0 = any able core, the scheduler's default);
3. (reserved) fusion genes: stack boundaries and tile counts for `fuse-layers`, appended as a
   third segment with their own value ranges; decoding ignores segments it does not know.

Objectives (all minimized), by `objective`:

- `schedule`: (latency cycles, energy pJ, peak memory bytes) of the scheduled step
  (`Evaluator.evaluate`);
- `checkpoint`: (recompute cycles, saved-activation bytes), the model of the exact MILP
  (`Evaluator.checkpoint_cost`; only checkpoint genes). With a budget, the search's fitness is
  (recompute cycles, bytes over the budget) instead: the constraint as a second objective, so
  the population concentrates on the cheapest feasible point and the cheaper infeasible points
  next to it. The reported front is always over (recompute cycles, saved bytes).

Algorithm: (mu + lambda) NSGA-II with mu = lambda = population (rounded up to a multiple of 4 for
DEAP's `selTournamentDCD`): tournament selection on rank and crowding, two-point crossover
(probability `cxpb`) and per-gene random reassignment (probability 1/genes per gene, applied
to an offspring with probability `mutpb`), then `selNSGA2` on parents + offspring. The initial
population holds the seeds (store-all, recompute-all, sqrt(n) segments, and the greedy
memory-budget plan when a budget is given; all with the default allocation), the rest random.

Determinism: `random` is seeded with `seed` before anything is drawn and DEAP's operators use
`random` only; evaluations are pure functions of the genome, cached by genome, and a
generation's new genomes are evaluated in a fixed order (serially, or with `multiprocessing`
workers that each build the step once), so results do not depend on `jobs`.
"""

from __future__ import annotations

import functools
import math
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from monet_ir.explore.evaluate import (
    AllocationGene,
    Candidate,
    CheckpointGene,
    TILE_CHOICES,
    Evaluation,
    Evaluator,
    FusionGene,
    StepConfig,
    tuned_collection,
)

PENALTY = 1e30  # objective value of a candidate that cannot be scheduled
OBJECTIVES = {
    "schedule": ("latency_cycles", "energy_pj", "peak_memory_bytes"),
    "checkpoint": ("recompute_cycles", "saved_bytes"),
}


# ---------------------------------------------------------------------- genome


@dataclass(frozen=True)
class GenomeSpec:
    checkpoint: tuple[CheckpointGene, ...]
    allocation: tuple[AllocationGene, ...]
    fusion: tuple[FusionGene, ...] = ()

    @staticmethod
    def of(evaluator: Evaluator, objective: str = "schedule", checkpointing: bool = True,
           allocation: bool = True, fusion: bool = True) -> GenomeSpec:
        schedule = objective == "schedule"
        return GenomeSpec(tuple(evaluator.checkpoint_genes) if checkpointing else (),
                          tuple(evaluator.allocation_genes) if allocation and schedule else (),
                          tuple(evaluator.fusion_genes) if fusion and schedule else ())

    @property
    def sizes(self) -> list[int]:
        """Number of values of each gene (the fusion segment ends with the tiles gene)."""
        sizes = [2] * len(self.checkpoint) + [len(g.options) for g in self.allocation]
        if self.fusion:
            sizes += [2] * len(self.fusion) + [len(TILE_CHOICES)]
        return sizes

    def __len__(self) -> int:
        return len(self.sizes)

    def decode(self, genome: Sequence[int]) -> Candidate:
        n = len(self.checkpoint)
        recompute = tuple(g.node for g, v in zip(self.checkpoint, genome[:n], strict=True) if v)
        allocation = []
        for g, v in zip(self.allocation, genome[n:n + len(self.allocation)], strict=True):
            option = g.options[v]
            if option is not None:
                allocation.append((g.node, option))
        n += len(self.allocation)
        stacks = tuple(g.spec for g, v in zip(self.fusion, genome[n:n + len(self.fusion)], strict=True) if v)
        tiles = TILE_CHOICES[genome[n + len(self.fusion)]] if stacks else 0
        return Candidate(recompute, tuple(allocation), stacks, tiles)

    def encode(self, recompute: Sequence[str] = (), allocation: dict[str, tuple[int, ...]] | None = None,
               fusion: Sequence[str] = (), tiles: int = 0) -> tuple[int, ...]:
        chosen = set(recompute)
        genome = [1 if g.node in chosen else 0 for g in self.checkpoint]
        allocation = allocation or {}
        for g in self.allocation:
            option = allocation.get(g.node)
            genome.append(g.options.index(tuple(option)) if option is not None and tuple(option) in g.options else 0)
        if self.fusion:
            stacks = set(fusion)
            genome += [1 if g.spec in stacks else 0 for g in self.fusion]
            genome.append(TILE_CHOICES.index(tiles) if tiles in TILE_CHOICES else 0)
        return tuple(genome)


def seed_genomes(evaluator: Evaluator, spec: GenomeSpec, budget: int | None = None,
                 objective: str = "schedule", greedy: bool = True) -> dict[str, tuple[int, ...]]:
    """The standard policies as genomes (default allocation), by name."""
    from monet_ir import graph as ir_graph
    from monet_ir.analysis import checkpoint_policies as plans

    seeds = {"store-all": spec.encode()}
    if spec.fusion:
        seeds["fuse-all"] = spec.encode(fusion=[g.spec for g in spec.fusion])
    if not spec.checkpoint:
        return seeds
    problem = plans.CheckpointProblem(ir_graph.step_function(evaluator.module))
    gene_storages = {g.node: plans.plan_named(problem, [g.node]) for g in spec.checkpoint}

    def nodes_of(dropped) -> list[str]:
        return [n for n, s in gene_storages.items() if s and s <= dropped]

    seeds["recompute-all"] = spec.encode([g.node for g in spec.checkpoint])
    seeds["sqrt"] = spec.encode(nodes_of(plans.plan_sqrt(problem)))
    if greedy and budget is not None and objective == "checkpoint":
        try:
            seeds["memory-budget"] = spec.encode(nodes_of(plans.plan_memory_budget(problem, budget)))
        except plans.PlanError:
            pass
    return seeds


# ---------------------------------------------------------------------- evaluation (serial or pooled)

_WORKER: dict[str, Any] = {}


def _init_worker(config: StepConfig) -> None:
    import gc

    _WORKER["evaluator"] = Evaluator(config)
    gc.freeze()  # the worker's step and caches (see tuned_collection), for the worker's life


def _evaluate_in_worker(job: tuple[str, Candidate]) -> Any:
    return evaluate_candidate(_WORKER["evaluator"], *job)


def evaluate_candidate(evaluator: Evaluator, objective: str, candidate: Candidate) -> Any:
    if objective == "checkpoint":
        return evaluator.checkpoint_cost(candidate.recompute)
    return evaluator.evaluate(candidate)


def raw_objectives(objective: str, result: Any) -> tuple[float, ...]:
    if objective == "checkpoint":
        return (float(result.recompute_cycles), float(result.saved_bytes))
    assert isinstance(result, Evaluation)
    if result.error:
        return (PENALTY,) * 3
    return tuple(float(v) for v in result.objectives)


class Population:
    """Evaluates genomes once each (cache by genome), serially or in a worker pool."""

    def __init__(self, evaluator: Evaluator, spec: GenomeSpec, objective: str, jobs: int = 1):
        self.evaluator = evaluator
        self.spec = spec
        self.objective = objective
        self.results: dict[tuple[int, ...], Any] = {}
        self.order: list[tuple[int, ...]] = []  # genomes in evaluation order
        self.pool = None
        self.jobs = max(1, jobs)
        self.seconds = 0.0
        if self.jobs > 1:
            import multiprocessing

            methods = multiprocessing.get_all_start_methods()
            ctx = multiprocessing.get_context("fork" if "fork" in methods else None)
            self.pool = ctx.Pool(self.jobs, initializer=_init_worker, initargs=(evaluator.config,))

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool.join()
            self.pool = None

    def evaluate(self, genomes: Sequence[tuple[int, ...]]) -> int:
        """Evaluate the genomes not seen yet; returns how many were new."""
        new: list[tuple[int, ...]] = []
        seen = set()
        for g in genomes:
            if g not in self.results and g not in seen:
                seen.add(g)
                new.append(g)
        if not new:
            return 0
        start = time.perf_counter()
        jobs = [(self.objective, self.spec.decode(g)) for g in new]
        if self.pool is None:
            results = [evaluate_candidate(self.evaluator, *job) for job in jobs]
        else:
            chunk = max(1, math.ceil(len(jobs) / (self.jobs * 4)))
            results = self.pool.map(_evaluate_in_worker, jobs, chunksize=chunk)
        self.seconds += time.perf_counter() - start
        for g, r in zip(new, results, strict=True):
            self.results[g] = r
            self.order.append(g)
        return len(new)


# ---------------------------------------------------------------------- the search


@dataclass
class SearchResult:
    spec: GenomeSpec
    objective: str
    names: tuple[str, ...]
    results: dict[tuple[int, ...], Any]
    order: list[tuple[int, ...]]
    seeds: dict[str, tuple[int, ...]]
    front: list[tuple[int, ...]]  # non-dominated genomes over every evaluation, sorted
    final_population: list[tuple[int, ...]]
    evaluations: int
    eval_seconds: float
    seconds: float
    budget: int | None = None
    history: list[dict[str, Any]] = field(default_factory=list)

    def objectives(self, genome: tuple[int, ...]) -> tuple[float, ...]:
        return raw_objectives(self.objective, self.results[genome])

    def point(self, genome: tuple[int, ...]) -> dict[str, Any]:
        """One point: objectives, decisions, seed label."""
        candidate = self.spec.decode(genome)
        result = self.results[genome]
        row: dict[str, Any]
        if self.objective == "schedule":
            row = {"latency_cycles": result.latency_cycles, "energy_pj": result.energy_pj,
                   "peak_memory_bytes": result.peak_memory_bytes, "fits": result.fits,
                   "peak_bytes": dict(result.peaks)}
            if result.error:
                row["error"] = result.error
        else:
            row = {"recompute_cycles": result.recompute_cycles, "saved_bytes": result.saved_bytes}
        row["recompute"] = list(candidate.recompute)
        row["allocation"] = {node: list(cores) for node, cores in candidate.allocation}
        if self.spec.fusion:
            row["fusion"] = list(candidate.fusion)
            row["tiles"] = candidate.tiles
        row["seed"] = next((name for name, g in self.seeds.items() if g == genome), "")
        row["genome"] = "".join(_gene_char(v) for v in genome)
        return row

    def feasible(self, genome: tuple[int, ...], budget: int | None) -> bool:
        result = self.results[genome]
        if self.objective == "checkpoint":
            return budget is None or result.saved_bytes <= budget
        if result.error or not result.fits:
            return False
        return budget is None or result.peak_memory_bytes <= budget

    def best(self, budget: int | None = None, among: Sequence[tuple[int, ...]] | None = None) -> tuple[int, ...] | None:
        """The chosen point: the lowest first objective (latency, or recompute cycles) among the
        feasible evaluated points (fitting the target's memories, and the budget if given);
        ties go to the lower other objectives."""
        pool = [g for g in (self.order if among is None else among) if self.feasible(g, budget)]
        if not pool:
            return None
        return min(pool, key=lambda g: (self.objectives(g), g))


def _gene_char(v: int) -> str:
    return "0123456789abcdefghijklmnopqrstuvwxyz"[v] if v < 36 else "?"


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    return all(x <= y for x, y in zip(a, b, strict=True)) and any(x < y for x, y in zip(a, b, strict=True))


def pareto_front(points: dict[tuple[int, ...], tuple[float, ...]]) -> list[tuple[int, ...]]:
    """Genomes whose objectives no other point dominates (one genome per objective vector,
    the smallest), sorted by objectives."""
    by_value: dict[tuple[float, ...], tuple[int, ...]] = {}
    for g, v in points.items():
        if v not in by_value or g < by_value[v]:
            by_value[v] = g
    values = sorted(by_value)
    front = []
    for v in values:
        if v[0] >= PENALTY:
            continue
        if not any(dominates(w, v) for w in values if w != v):
            front.append(by_value[v])
    return front


def _with_tuned_collection(search: Callable[..., SearchResult]) -> Callable[..., SearchResult]:
    @functools.wraps(search)
    def run(*args: Any, **kwargs: Any) -> SearchResult:
        with tuned_collection():
            return search(*args, **kwargs)

    return run


@_with_tuned_collection
def run_search(
    evaluator: Evaluator,
    objective: str = "schedule",
    population: int = 64,
    generations: int = 50,
    seed: int = 0,
    jobs: int = 1,
    budget: int | None = None,
    checkpointing: bool = True,
    allocation: bool = True,
    fusion: bool = True,
    cxpb: float = 0.9,
    mutpb: float = 1.0,
    greedy_seed: bool = True,
    progress: Callable[[str], None] | None = None,
) -> SearchResult:
    """Run NSGA-II; see the module docstring."""
    from deap import base, tools

    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective '{objective}' (expected {', '.join(OBJECTIVES)})")
    start = time.perf_counter()
    names = OBJECTIVES[objective]
    spec = GenomeSpec.of(evaluator, objective, checkpointing, allocation, fusion)
    seeds = seed_genomes(evaluator, spec, budget, objective, greedy_seed)
    sizes = spec.sizes
    rng_state = random.getstate()
    random.seed(seed)
    mu = max(4, 4 * math.ceil(population / 4))

    class Fitness(base.Fitness):
        weights = (-1.0,) * len(names)

    class Individual(list):
        def __init__(self, genes):
            super().__init__(genes)
            self.fitness = Fitness()

    pop_eval = Population(evaluator, spec, objective, jobs)

    def fitness_of(genome: tuple[int, ...]) -> tuple[float, ...]:
        values = raw_objectives(objective, pop_eval.results[genome])
        if objective == "checkpoint" and budget is not None:
            # (cost, excess over the budget): every feasible point has excess 0, so the feasible
            # part of the front is the cheapest feasible point, and infeasible points survive
            # only while cheaper (stepping stones towards the budget from above)
            return (values[0], max(0.0, values[1] - budget))
        return values

    def assign(individuals: list[Individual]) -> None:
        pop_eval.evaluate([tuple(i) for i in individuals])
        for ind in individuals:
            ind.fitness.values = fitness_of(tuple(ind))

    def random_genome() -> list[int]:
        return [random.randrange(n) for n in sizes]

    def mutate(ind: Individual) -> None:
        p = 1.0 / max(1, len(ind))
        for i, n in enumerate(sizes):
            if n > 1 and random.random() < p:
                ind[i] = random.choice([v for v in range(n) if v != ind[i]])

    try:
        initial = [Individual(g) for g in seeds.values()]
        while len(initial) < mu:
            initial.append(Individual(random_genome()))
        initial = initial[:mu]
        assign(initial)
        pop = tools.selNSGA2(initial, mu) if len(spec) else initial
        history = []
        report = _Progress(progress, generations)
        report.step(0, pop_eval, pop, names, start)
        for gen in range(1, generations + 1 if len(spec) else 1):
            parents = tools.selTournamentDCD(pop, mu)
            offspring = [Individual(p) for p in parents]
            for a, b in zip(offspring[::2], offspring[1::2], strict=True):
                if len(spec) > 1 and random.random() < cxpb:
                    tools.cxTwoPoint(a, b)
            for ind in offspring:
                if random.random() < mutpb:
                    mutate(ind)
            assign(offspring)
            pop = tools.selNSGA2(pop + offspring, mu)
            history.append({"generation": gen, "evaluations": len(pop_eval.results),
                            "best": list(min(raw_objectives(objective, pop_eval.results[tuple(i)]) for i in pop))})
            report.step(gen, pop_eval, pop, names, start)
    finally:
        pop_eval.close()
        random.setstate(rng_state)
    all_points = {g: raw_objectives(objective, r) for g, r in pop_eval.results.items()}
    return SearchResult(
        spec=spec, objective=objective, names=names, results=pop_eval.results, order=pop_eval.order,
        seeds=seeds, front=pareto_front(all_points), final_population=[tuple(i) for i in pop],
        evaluations=len(pop_eval.results), eval_seconds=pop_eval.seconds, seconds=time.perf_counter() - start,
        budget=budget, history=history,
    )


class _Progress:
    """A one-line text progress bar per generation on stderr."""

    def __init__(self, sink: Callable[[str], None] | None, generations: int):
        self.sink = sink
        self.generations = max(1, generations)

    def step(self, gen: int, pop_eval: Population, pop, names, start: float) -> None:
        if self.sink is None:
            return
        width = 24
        done = int(width * gen / self.generations)
        best = min(raw_objectives(pop_eval.objective, pop_eval.results[tuple(i)]) for i in pop)
        elapsed = time.perf_counter() - start
        per = pop_eval.seconds / max(1, len(pop_eval.results)) * 1e3
        self.sink(f"[{'#' * done}{'.' * (width - done)}] gen {gen}/{self.generations}  "
                  f"evals {len(pop_eval.results)}  {per:.0f} ms/eval  best {names[0]} {best[0]:,.0f}  {elapsed:.1f} s")


def stderr_progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
