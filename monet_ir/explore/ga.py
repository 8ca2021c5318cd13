"""NSGA-II (DEAP) over the checkpointing and core-allocation decisions of a training step.

Genome: a flat list of integers, one per gene, in segments (`GenomeSpec`):

1. checkpoint genes, one per forward node whose saved activations can be recomputed
   (`Evaluator.checkpoint_genes`): 0 = keep, 1 = recompute;
2. allocation genes, one per node with a real choice of cores (`Evaluator.allocation_genes`):
   an index into the node's options (0 = any able core, the scheduler's default);
3. fusion genes, one per stack `fuse-layers{mode=auto}` would form (0 = unfused, 1 = fused),
   then one tiles gene (an index into `TILE_CHOICES`);
4. paging genes (`--search paging`, targets with a storage level; `PagingGene`): per forward
   node with saved activations 0 = keep, 1 = page (recompute, when its checkpoint gene says
   so, wins); per parameter 0 = in main memory, 1 = its optimizer state kept in storage, 2 =
   also the parameter and its gradient; per other argument (the batch) 0 or 1. The candidate
   is scheduled as `monet report --checkpoint plan=FILE.json` with that plan schedules it;
5. the precision gene (`--search precision`), last: an index into `GenomeSpec.precisions`, the
   policies searched; the candidate is evaluated as `monet report --precision POLICY` builds
   the step (`Evaluator.variant`).

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
memory-budget plan when a budget is given; all with the default allocation and the first
policy; store-all under each other searched policy), the rest random.

Determinism: `random` is seeded with `seed` before anything is drawn and DEAP's operators use
`random` only; evaluations are pure functions of the genome, cached by genome, and a
generation's new genomes are dispatched in a fixed order and their results taken back in that
order (`monet_ir.explore.dispatch`: in the process, local worker processes or Ray tasks), so
results depend neither on `jobs` nor on the backend. A candidate whose evaluation raises is
recorded as failed with its one-line reason. The state after every generation can be saved and
a search continued from it (`monet_ir.explore.state`) with the same outcome as an uninterrupted
one.
"""

from __future__ import annotations

import functools
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monet_ir.errors import UsageError
from monet_ir.explore.evaluate import (
    AllocationGene,
    ExploreError,
    Candidate,
    CheckpointGene,
    TILE_CHOICES,
    Evaluation,
    Evaluator,
    FailedCost,
    FusionGene,
    PagingGene,
    StepConfig,
    tuned_collection,
)

if TYPE_CHECKING:
    from monet_ir.explore.state import SearchState

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
    precisions: tuple[str, ...] = ()  # the policies the precision gene picks from (specs)
    paging: tuple[PagingGene, ...] = ()

    @staticmethod
    def of(evaluator: Evaluator, objective: str = "schedule", checkpointing: bool = True,
           allocation: bool = True, fusion: bool = True, precisions: Sequence[str] = (),
           paging: bool = False) -> GenomeSpec:
        from monet_ir.explore.evaluate import paging_genes

        schedule = objective == "schedule"
        return GenomeSpec(tuple(evaluator.checkpoint_genes) if checkpointing else (),
                          tuple(evaluator.allocation_genes) if allocation and schedule else (),
                          tuple(evaluator.fusion_genes) if fusion and schedule else (),
                          tuple(precisions) if schedule else (),
                          tuple(paging_genes(evaluator)) if paging and schedule else ())

    @property
    def sizes(self) -> list[int]:
        """Number of values of each gene (the fusion segment ends with the tiles gene; the
        precision gene, when searched, is the last)."""
        sizes = [2] * len(self.checkpoint) + [len(g.options) for g in self.allocation]
        if self.fusion:
            sizes += [2] * len(self.fusion) + [len(TILE_CHOICES)]
        sizes += [len(g.values) for g in self.paging]
        if self.precisions:
            sizes.append(len(self.precisions))
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
        n += len(self.fusion) + 1 if self.fusion else 0
        precision = self.precisions[genome[-1]] if self.precisions else None
        if not self.paging:
            return Candidate(recompute, tuple(allocation), stacks, tiles, precision)
        values = genome[n:n + len(self.paging)]
        recomputed = set(recompute)
        paged = tuple(g.name for g, v in zip(self.paging, values, strict=True)
                      if g.kind == "activation" and v and g.name not in recomputed)
        stored = tuple(name for g, v in zip(self.paging, values, strict=True) if g.kind == "tensor"
                       for name in g.values[v])
        return Candidate(recompute, tuple(allocation), stacks, tiles, precision, paged, stored)

    def encode(self, recompute: Sequence[str] = (), allocation: dict[str, tuple[int, ...]] | None = None,
               fusion: Sequence[str] = (), tiles: int = 0, precision: str | None = None,
               paging: dict[str, int] | None = None) -> tuple[int, ...]:
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
        paging = paging or {}
        genome += [min(paging.get(g.name, 0), len(g.values) - 1) for g in self.paging]
        if self.precisions:
            genome.append(self.precisions.index(precision) if precision in self.precisions else 0)
        return tuple(genome)


def seed_genomes(evaluator: Evaluator, spec: GenomeSpec, budget: int | None = None,
                 objective: str = "schedule", greedy: bool = True) -> dict[str, tuple[int, ...]]:
    """The standard policies as genomes (default allocation), by name."""
    from monet_ir import graph as ir_graph
    from monet_ir.analysis import checkpoint_policies as plans

    seeds = {"store-all": spec.encode()}
    for precision in spec.precisions[1:]:  # every policy is evaluated at least once
        seeds[f"store-all@{precision}"] = spec.encode(precision=precision)
    if spec.fusion:
        seeds["fuse-all"] = spec.encode(fusion=[g.spec for g in spec.fusion])
    if spec.paging:
        tensors = [g for g in spec.paging if g.kind == "tensor"]
        seeds["page-all"] = spec.encode(paging={g.name: 1 for g in spec.paging if g.kind == "activation"})
        seeds["state-in-storage"] = spec.encode(paging={g.name: 1 for g in tensors})
        seeds["all-in-storage"] = spec.encode(paging={g.name: len(g.values) - 1 for g in spec.paging})
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


# ---------------------------------------------------------------------- evaluation (dispatched)


def evaluate_candidate(evaluator: Evaluator, objective: str, candidate: Candidate) -> Any:
    if objective == "checkpoint":
        return evaluator.checkpoint_cost(candidate.recompute)
    return evaluator.evaluate(candidate)


def failed_evaluation(objective: str, reason: str) -> Any:
    """The record of a candidate whose evaluation raised (kept in the archive, never on the front)."""
    return FailedCost(reason) if objective == "checkpoint" else Evaluation.failed(reason)


def raw_objectives(objective: str, result: Any) -> tuple[float, ...]:
    if objective == "checkpoint":
        if getattr(result, "error", ""):
            return (PENALTY, PENALTY)
        return (float(result.recompute_cycles), float(result.saved_bytes))
    assert isinstance(result, Evaluation)
    if result.error:
        return (PENALTY,) * 3
    return tuple(float(v) for v in result.objectives)


@dataclass
class ExploreWork:
    """What a worker evaluates candidates with (see `dispatch.Work`): the step's options and, for
    workers on other machines, the model and target files (`shipped_files`)."""

    config: StepConfig
    objective: str
    files: tuple[tuple[str, str, bytes], ...] = ()  # (role, path relative to its root, content)
    key: str = ""

    def build(self) -> Evaluator:
        return Evaluator(materialize(self.config, self.files, self.key))

    def run(self, evaluator: Evaluator, candidate: Candidate) -> Any:
        return evaluate_candidate(evaluator, self.objective, candidate)

    def failed(self, candidate: Candidate, reason: str) -> Any:
        return failed_evaluation(self.objective, reason)


MAX_SHIPPED_BYTES = 256 * 2**20


def shipped_files(config: StepConfig) -> tuple[tuple[str, str, bytes], ...]:
    """The model file, and a target given as a file with the YAML files under its folder (the
    core files a Stream description names), for workers that do not share this file system."""
    from pathlib import Path

    files = [("model", Path(config.model).name, Path(config.model).read_bytes())]
    target = Path(config.target)
    if target.suffix in (".yaml", ".yml") and target.is_file():
        root = target.parent
        names = sorted({target, *(p for p in root.glob("*.y*ml")), *(p for p in root.glob("*/*.y*ml"))})
        for path in names:
            if path.is_file():
                files.append(("target", str(path.relative_to(root)), path.read_bytes()))
    if sum(len(f[2]) for f in files) > MAX_SHIPPED_BYTES:
        raise ExploreError(f"{config.model}: the model and target files exceed {MAX_SHIPPED_BYTES >> 20} MiB; "
                           f"Ray workers cannot be sent them")
    return tuple(files)


def work_key(config: StepConfig, objective: str, files: Sequence[tuple[str, str, bytes]]) -> str:
    import hashlib

    digest = hashlib.sha256(repr((config, objective)).encode())
    for role, name, content in files:
        digest.update(f"{role}:{name}:{len(content)}:".encode())
        digest.update(content)
    return digest.hexdigest()[:20]


_MATERIALIZED: dict[str, Path] = {}  # work key -> this process's private folder of its copies


def private_folder(key: str) -> Path:
    """A folder only this user can enter (`tempfile.mkdtemp`: a new random name, mode 0700), one
    per work key and process, removed when the process exits. (A predictable name in /tmp, as
    before, could be planted beforehand as a symbolic link to another user's folder.)"""
    folder = _MATERIALIZED.get(key)
    if folder is None or not folder.is_dir():
        import atexit
        import shutil
        import tempfile

        folder = Path(tempfile.mkdtemp(prefix=f"monet-explore-{key[:12] or 'work'}-"))
        _MATERIALIZED[key] = folder
        atexit.register(shutil.rmtree, folder, True)
    return folder


def materialize(config: StepConfig, files: Sequence[tuple[str, str, bytes]], key: str) -> StepConfig:
    """`config` with its model and target paths pointing at copies of the shipped files (in
    `private_folder(key)`), where this machine does not have the same files at the same paths."""
    import dataclasses
    from pathlib import PurePath

    def same(path: Path, content: bytes) -> bool:
        try:
            return path.stat().st_size == len(content) and path.read_bytes() == content
        except OSError:
            return False

    model = [(name, content) for role, name, content in files if role == "model"]
    target = [(name, content) for role, name, content in files if role == "target"]
    for name, _ in model + target:
        if PurePath(name).is_absolute() or ".." in PurePath(name).parts:
            raise ExploreError(f"shipped file {name!r}: not a path inside its folder")
    changes = {}
    if model and not same(Path(config.model), model[0][1]):
        path = private_folder(key) / "model" / model[0][0]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(model[0][1])
        changes["model"] = str(path)
    target_path = Path(config.target)
    target_name = target_path.name
    if target and not (same(target_path, dict(target).get(target_name, b"")) and
                       all(same(target_path.parent / name, content) for name, content in target)):
        folder = private_folder(key)
        for name, content in target:
            path = folder / "target" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
        changes["target"] = str(folder / "target" / target_name)
    return dataclasses.replace(config, **changes) if changes else config


class Population:
    """Evaluates genomes once each (cache by genome) through a backend (`dispatch`): in this
    process, on local worker processes or as Ray tasks; results in genome order."""

    def __init__(self, evaluator: Evaluator, spec: GenomeSpec, objective: str, jobs: int = 1,
                 backend: str = "local"):
        from monet_ir.explore import dispatch

        self.evaluator = evaluator
        self.spec = spec
        self.objective = objective
        self.results: dict[tuple[int, ...], Any] = {}
        self.order: list[tuple[int, ...]] = []  # genomes in evaluation order
        self.jobs = max(1, jobs)
        self.seconds = 0.0
        if backend == "ray":
            files = shipped_files(evaluator.config)
            work = ExploreWork(evaluator.config, objective, files, work_key(evaluator.config, objective, files))
            self.backend = dispatch.RayBackend(work)
        elif backend == "local":
            work = ExploreWork(evaluator.config, objective)
            self.backend = dispatch.LocalBackend(work, self.jobs, state=evaluator)
        else:
            raise ValueError(f"unknown backend '{backend}' (expected local or ray)")

    def close(self, abort: bool = False) -> None:
        self.backend.close(abort)

    def workers_alive(self) -> int:
        return self.backend.workers_alive()

    def evaluate(self, genomes: Sequence[tuple[int, ...]],
                 progress: Callable[[int, int], None] | None = None) -> int:
        """Evaluate the genomes not seen yet; returns how many were new. `progress(done, new)`
        as results arrive."""
        new: list[tuple[int, ...]] = []
        seen = set()
        for g in genomes:
            if g not in self.results and g not in seen:
                seen.add(g)
                new.append(g)
        if not new:
            return 0
        start = time.perf_counter()
        arrived = None if progress is None else (lambda done: progress(done, len(new)))
        results = self.backend.map([self.spec.decode(g) for g in new], arrived)
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
            if getattr(result, "error", ""):
                row["error"] = result.error
        row["recompute"] = list(candidate.recompute)
        row["allocation"] = {node: list(cores) for node, cores in candidate.allocation}
        if self.spec.fusion:
            row["fusion"] = list(candidate.fusion)
            row["tiles"] = candidate.tiles
        if self.spec.precisions:
            row["precision"] = candidate.precision
        if self.spec.paging:
            row["paged"] = list(candidate.paged)
            row["stored"] = list(candidate.stored)
        row["seed"] = next((name for name, g in self.seeds.items() if g == genome), "")
        row["genome"] = "".join(_gene_char(v) for v in genome)
        return row

    def feasible(self, genome: tuple[int, ...], budget: int | None) -> bool:
        result = self.results[genome]
        if self.objective == "checkpoint":
            return not getattr(result, "error", "") and (budget is None or result.saved_bytes <= budget)
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
    return [by_value[v] for v in non_dominated(sorted(by_value)) if v[0] < PENALTY]


def non_dominated(values: Sequence[tuple[float, ...]]) -> list[tuple[float, ...]]:
    """The values (distinct, sorted lexicographically) that no other value dominates, in order.

    A value comes after every value that dominates it, and a value dominated by a dominated
    value is dominated by a front value (domination is transitive), so each value is compared
    with the front found so far only. Moreover an earlier distinct value w (w[0] <= v[0]) that
    is no worse than v on the other objectives dominates it: with two objectives the test is
    against the smallest second objective so far; with three, against a staircase of the
    earlier front values' (second, third) objectives, by bisection (the search's 3,000 points
    and its front of 100 are sorted out in milliseconds, not in a second)."""
    import bisect

    front: list[tuple[float, ...]] = []
    if not values:
        return front
    objectives = len(values[0])
    if objectives == 2:
        best = math.inf
        for v in values:
            if v[1] < best:  # v[1] == best: dominated by the earlier value with that second objective
                front.append(v)
                best = v[1]
        return front
    if objectives == 3:
        # the (second, third) pairs of the front so far that no other pair of it is below and left
        # of: second objectives increasing, third decreasing
        seconds: list[float] = []
        thirds: list[float] = []
        for v in values:
            i = bisect.bisect_right(seconds, v[1])  # pairs with a second objective <= v[1]: seconds[:i]
            if i and thirds[i - 1] <= v[2]:  # the smallest third among them
                continue
            front.append(v)
            # v's pair enters; the pairs it is below and left of leave
            j = i
            while j < len(seconds) and thirds[j] >= v[2]:
                j += 1
            seconds[i:j] = [v[1]]
            thirds[i:j] = [v[2]]
        return front
    for v in values:
        if not any(dominates(w, v) for w in front):
            front.append(v)
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
    precisions: Sequence[str] = (),
    paging: bool = False,
    cxpb: float = 0.9,
    mutpb: float = 1.0,
    greedy_seed: bool = True,
    progress: Callable[[str], None] | None = None,
    backend: str = "local",
    checkpoint: Path | None = None,
    resume: SearchState | None = None,
    log: Path | None = None,
    stop_after: int | None = None,
    live: Callable[[str], None] | None = None,
) -> SearchResult:
    """Run NSGA-II; see the module docstring. `backend`: `local` (`jobs` processes) or `ray`
    (Ray must be initialized). `checkpoint`: a folder the search state is saved to after every
    generation (`monet_ir.explore.state`); `resume`: a saved state to continue from (its settings
    must match these); `log`: a file that gets one line per generation; `live`: a sink for the
    progress line redrawn as a generation's results arrive (a terminal's); `stop_after`: stop
    after that generation as if interrupted (raises `SearchInterrupted`; tests)."""
    from deap import base, tools

    from monet_ir.explore import state as saved

    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective '{objective}' (expected {', '.join(OBJECTIVES)})")
    start = time.perf_counter()
    names = OBJECTIVES[objective]
    spec = GenomeSpec.of(evaluator, objective, checkpointing, allocation, fusion, precisions, paging)
    seeds = seed_genomes(evaluator, spec, budget, objective, greedy_seed)
    sizes = spec.sizes
    rng_state = random.getstate()
    mu = max(4, 4 * math.ceil(population / 4))
    settings = search_settings(evaluator, spec, objective=objective, population=mu, seed=seed, budget=budget,
                               cxpb=cxpb, mutpb=mutpb, greedy_seed=greedy_seed)
    if resume is not None:
        saved.check(resume, settings, checkpoint or "", sizes, objective)
        if resume.generation > generations:
            raise UsageError(f"--resume {checkpoint or ''}: the saved search has run {resume.generation} generations, "
                             f"more than --generations {generations}")

    class Fitness(base.Fitness):
        weights = (-1.0,) * len(names)

    class Individual(list):
        def __init__(self, genes):
            super().__init__(genes)
            self.fitness = Fitness()

    pop_eval = Population(evaluator, spec, objective, jobs, backend)
    previous_seconds = 0.0

    def fitness_of(genome: tuple[int, ...]) -> tuple[float, ...]:
        values = raw_objectives(objective, pop_eval.results[genome])
        if objective == "checkpoint" and budget is not None:
            # (cost, excess over the budget): every feasible point has excess 0, so the feasible
            # part of the front is the cheapest feasible point, and infeasible points survive
            # only while cheaper (stepping stones towards the budget from above)
            return (values[0], max(0.0, values[1] - budget))
        return values

    def assign(individuals: list[Individual], gen: int) -> None:
        pop_eval.evaluate([tuple(i) for i in individuals], report.live(gen))
        for ind in individuals:
            ind.fitness.values = fitness_of(tuple(ind))

    def random_genome() -> list[int]:
        return [random.randrange(n) for n in sizes]

    def mutate(ind: Individual) -> None:
        p = 1.0 / max(1, len(ind))
        for i, n in enumerate(sizes):
            if n > 1 and random.random() < p:
                ind[i] = random.choice([v for v in range(n) if v != ind[i]])

    def save(gen: int) -> None:
        if checkpoint is None:
            return
        saved.save(saved.SearchState(
            settings=settings, generation=gen,
            population=[(tuple(i), getattr(i.fitness, "crowding_dist", 0.0)) for i in pop],
            random_state=random.getstate(), results=pop_eval.results, order=pop_eval.order, seeds=seeds,
            history=history, eval_seconds=pop_eval.seconds,
            seconds=previous_seconds + time.perf_counter() - start), checkpoint)

    report = _Progress(progress, log, generations, names, pop_eval, start, append=resume is not None, live=live)
    aborted = False
    try:
        if resume is None:
            random.seed(seed)
            initial = [Individual(g) for g in seeds.values()]
            while len(initial) < mu:
                initial.append(Individual(random_genome()))
            initial = initial[:mu]
            assign(initial, 0)
            pop = tools.selNSGA2(initial, mu) if len(spec) else initial
            history: list[dict[str, Any]] = []
            first = 1
            save(0)
            report.step(0, pop)
        else:
            pop_eval.results = dict(resume.results)
            pop_eval.order = list(resume.order)
            pop_eval.seconds = resume.eval_seconds
            previous_seconds = resume.seconds
            report.resumed(len(pop_eval.results))
            random.setstate(resume.random_state)
            pop = []
            for genome, crowding in resume.population:
                ind = Individual(genome)
                ind.fitness.values = fitness_of(genome)
                ind.fitness.crowding_dist = crowding
                pop.append(ind)
            history = list(resume.history)
            first = resume.generation + 1
            report.step(resume.generation, pop, resumed=True)
        for gen in range(first, generations + 1 if len(spec) else 1):
            if stop_after is not None and gen > stop_after:
                raise SearchInterrupted(gen - 1)
            parents = tools.selTournamentDCD(pop, mu)
            offspring = [Individual(p) for p in parents]
            for a, b in zip(offspring[::2], offspring[1::2], strict=True):
                if len(spec) > 1 and random.random() < cxpb:
                    tools.cxTwoPoint(a, b)
            for ind in offspring:
                if random.random() < mutpb:
                    mutate(ind)
            assign(offspring, gen)
            pop = tools.selNSGA2(pop + offspring, mu)
            history.append({"generation": gen, "evaluations": len(pop_eval.results),
                            "best": list(min(raw_objectives(objective, pop_eval.results[tuple(i)]) for i in pop))})
            save(gen)
            report.step(gen, pop)
    except BaseException:
        aborted = True
        raise
    finally:
        report.close()
        pop_eval.close(abort=aborted)
        random.setstate(rng_state)
    all_points = {g: raw_objectives(objective, r) for g, r in pop_eval.results.items()}
    return SearchResult(
        spec=spec, objective=objective, names=names, results=pop_eval.results, order=pop_eval.order,
        seeds=seeds, front=pareto_front(all_points), final_population=[tuple(i) for i in pop],
        evaluations=len(pop_eval.results), eval_seconds=pop_eval.seconds,
        seconds=previous_seconds + time.perf_counter() - start, budget=budget, history=history,
    )


class SearchInterrupted(Exception):
    """`run_search(stop_after=k)` stopped after generation k (its state is saved)."""

    def __init__(self, generation: int):
        super().__init__(f"search stopped after generation {generation}")
        self.generation = generation


def search_settings(evaluator: Evaluator, spec: GenomeSpec, **options: Any) -> dict[str, Any]:
    """What a resumed search must share with the saved one: the options, the genome, the step's
    options (the model file by content, not by path)."""
    import dataclasses
    import hashlib
    from pathlib import Path

    step = dataclasses.asdict(evaluator.config)
    if not step["frozen"]:
        del step["frozen"]  # (as states saved before `--freeze` existed hold it: they still resume)
    for name, default in (("offchip", ""), ("mapper", "fast"), ("mapper_objective", "latency"),
                          ("grad_dataflow", "auto")):
        if step.get(name) == default:
            del step[name]  # (likewise before --offchip and --mapper: the defaults are what they ran)
    model = step.pop("model")
    try:
        step["model_sha256"] = hashlib.sha256(Path(model).read_bytes()).hexdigest()
    except OSError:
        step["model_sha256"] = model
    return {**options, "step": step, "genes": spec}


class _Progress:
    """The search's progress: one bar line per generation for the terminal (`sink`) and one line
    per generation appended to `log` (generations, evaluations, evaluations per second in this
    run, the best first objective of the population, workers alive)."""

    def __init__(self, sink: Callable[[str], None] | None, log: Path | None, generations: int,
                 names: Sequence[str], pop_eval: Population, start: float, append: bool = False,
                 live: Callable[[str], None] | None = None):
        self.sink = sink
        self.live_sink = live
        self.best_text = "-"
        self.last_live = 0.0
        self.log = log.open("a" if append else "w") if log is not None else None
        self.generations = max(1, generations)
        self.names = names
        self.pop_eval = pop_eval
        self.start = start
        self.first_evaluations = 0

    def resumed(self, evaluations: int) -> None:
        self.first_evaluations = evaluations
        if self.log is not None:
            self._write(f"resumed with {evaluations} evaluations")

    def _write(self, text: str) -> None:
        import datetime

        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert self.log is not None
        self.log.write(f"{stamp} {text}\n")
        self.log.flush()

    def _bar(self, gen: int) -> str:
        width = 24
        done = int(width * min(gen, self.generations) / self.generations)
        return f"[{'#' * done}{'.' * (width - done)}] gen {gen}/{self.generations}"

    def live(self, gen: int) -> Callable[[int, int], None] | None:
        """The callback of generation `gen`'s evaluations: the line redrawn (at most 5 times a
        second) with the results arrived so far."""
        if self.live_sink is None:
            return None

        def arrived(done: int, new: int) -> None:
            now = time.perf_counter()
            if now - self.last_live < 0.2 and done < new:
                return
            self.last_live = now
            evaluations = len(self.pop_eval.results) + done
            elapsed = now - self.start
            rate = (evaluations - self.first_evaluations) / elapsed if elapsed > 0 else 0.0
            assert self.live_sink is not None
            self.live_sink(f"{self._bar(gen - 1 if gen else 0)}  evals {evaluations} ({rate:.1f}/s; generation {gen}: "
                           f"{done}/{new})  best {self.names[0]} {self.best_text}  "
                           f"workers {self.pop_eval.workers_alive()}  {elapsed:.1f} s")

        return arrived

    def step(self, gen: int, pop, resumed: bool = False) -> None:
        if self.sink is None and self.log is None:
            return
        pop_eval = self.pop_eval
        evaluations = len(pop_eval.results)
        elapsed = time.perf_counter() - self.start
        rate = (evaluations - self.first_evaluations) / elapsed if elapsed > 0 else 0.0
        best = min(raw_objectives(pop_eval.objective, pop_eval.results[tuple(i)]) for i in pop)
        best_text = self.best_text = f"{best[0]:,.0f}" if best[0] < PENALTY else "none"
        workers = pop_eval.workers_alive()
        if self.sink is not None:
            self.sink(f"{self._bar(gen)}  evals {evaluations} "
                      f"({rate:.1f}/s)  best {self.names[0]} {best_text}  workers {workers}  {elapsed:.1f} s"
                      + ("  (resumed)" if resumed else ""))
        if self.log is not None:
            self._write(f"generation {gen}/{self.generations} evaluations {evaluations} evals_per_s {rate:.2f} "
                        f"best_{self.names[0]} {best[0]:.6g} workers {workers} elapsed_s {elapsed:.1f}")

    def close(self) -> None:
        if self.log is not None:
            self.log.close()
            self.log = None

