"""The stage-expanded formulation of rematerialization and paging (Checkmate, Jain et al. MLSys
2020; POET, Patil et al. ICML 2022), solved by HiGHS through `scipy.optimize.milp`.

A graph (`StagedGraph`) is a list of nodes in a topological order, each with its arguments,
whether it is a backward node, its compute cost (time), the bytes of its output and, for POET's
energy objective, the energy of computing it and of paging its output out to and in from
storage. The schedule has one *stage* per node: stage t computes node t and, before it, any
earlier node again. Per stage t and node i the binaries are

- `R[t,i]`: node i is computed in stage t (`R[t,t] = 1`, `R[t,i] = 0` for i > t);
- `S[t,i]`: node i's output is in main memory at the start of stage t (i < t);
- `D[t,i]`: it is in storage at the start of stage t (i < t);
- `I[t,i]`, `O[t,i]`: it is paged in (from storage, into main memory for stage t + 1) or out
  (from main memory to storage) during stage t;
- `F[t,e]`: the source of edge e = (i, k) is freed after node k is computed in stage t,

and the constraints are Checkmate's with POET's paging:

    R[t,v] <= R[t,u] + S[t,u]                for every edge (u, v)   (arguments present)
    S[t+1,i] <= S[t,i] + R[t,i] + I[t,i]     (kept only if present)
    D[t+1,i] <= D[t,i] + O[t,i],  I[t,i] <= D[t,i],  O[t,i] <= S[t,i]
    U[t,0] = R[t,0] m_0 + sum_i S[t,i] m_i
    U[t,k+1] = U[t,k] + R[t,k+1] m_{k+1} - sum_{e = (i,k)} m_i F[t,e],   0 <= U[t,k] <= budget
    F[t,(i,k)] <= R[t,k],  F <= 1 - S[t+1,i],  F <= 1 - R[t,j] for successors j > k of i
    sum_{t,i} R[t,i] c_i <= time budget      (POET: compute time only)

minimizing `sum R c` (Checkmate) or `sum R e + sum I e_in + sum O e_out` (POET). Checkmate and
POET force `F` to 1 whenever nothing needs the value any more (two big-M rows per edge and stage);
here `F` has only its upper bounds: freeing is never worse for the memory rows and costs
nothing, so every solution of theirs is one of ours with the same objective and conversely
(lower any `F` to the forced value and U only falls), and the optimum is the same. Variables that
are zero in every solution (upper triangles, `F` of edges whose target comes after the stage,
U past the stage's node) are not created. The size is about 2.5 T^2 binaries without paging,
5 T^2 with it, plus T E / 2 frees (T nodes, E edges).

`solve` returns the optimum (or, at the time limit, the best schedule found) as a `Schedule`:
per stage, the nodes computed and the outputs kept, in storage, paged in and out.
`evaluate(graph, schedule)` re-checks any schedule independently of the solver (arguments
present, what may be kept, paged or freed) and measures its cost, energy and the peak of U.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any


class StagedError(ValueError):
    """A graph or schedule that does not fit the formulation (one-line message)."""


@dataclass
class StagedGraph:
    """A training graph as Checkmate's `DFGraph` holds it, with POET's energies."""

    names: list[str]
    args: list[tuple[int, ...]]  # per node, the nodes it reads (all earlier)
    backward: list[bool]
    cost: list[float]  # compute time of each node (Checkmate's cost_cpu)
    memory: list[float]  # bytes of each node's output (cost_ram)
    energy: list[float] | None = None  # compute energy (POET), J or any unit
    page_in_energy: list[float] | None = None
    page_out_energy: list[float] | None = None
    parameter_bytes: float = 0.0  # Checkmate's cost_ram_parameters (not part of the budget)
    source: str = ""

    def __post_init__(self) -> None:
        n = len(self.names)
        for label in ("args", "backward", "cost", "memory"):
            if len(getattr(self, label)) != n:
                raise StagedError(f"{self.source or 'graph'}: {label} has {len(getattr(self, label))} entries for {n} nodes")
        for label in ("energy", "page_in_energy", "page_out_energy"):
            values = getattr(self, label)
            if values is not None and len(values) != n:
                raise StagedError(f"{self.source or 'graph'}: {label} has {len(values)} entries for {n} nodes")
        for v, preds in enumerate(self.args):
            for u in preds:
                if not 0 <= u < v:
                    raise StagedError(f"{self.source or 'graph'}: node {self.names[v]!r} reads "
                                      f"{self.names[u] if 0 <= u < n else u!r}, which does not come before it")
        for label in ("cost", "memory", "energy", "page_in_energy", "page_out_energy"):
            for v, x in enumerate(getattr(self, label) or ()):
                if not (isinstance(x, (int, float)) and math.isfinite(x) and x >= 0):
                    raise StagedError(f"{self.source or 'graph'}: node {self.names[v]!r}: {label} {x!r} is not a "
                                      f"finite number >= 0")

    @property
    def size(self) -> int:
        return len(self.names)

    @property
    def edges(self) -> list[tuple[int, int]]:
        """(source, target) pairs, each once, ordered by source then target (Checkmate's edge_list)."""
        return sorted({(u, v) for v, preds in enumerate(self.args) for u in preds})

    @property
    def has_energy(self) -> bool:
        return self.energy is not None

    def successors(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in range(self.size)]
        for u, v in self.edges:
            out[u].append(v)
        return out

    def store_all(self) -> Schedule:
        """Checkmate's checkpoint-all: every node once, every output kept while a later node reads it."""
        succ = self.successors()
        stages = []
        for t in range(self.size):
            kept = tuple(i for i in range(t) if succ[i] and max(succ[i]) >= t)
            stages.append(Stage(computed=(t,), kept=kept))
        return Schedule(stages)


@dataclass(frozen=True)
class Stage:
    computed: tuple[int, ...]  # nodes computed in this stage, in order (the stage's node last)
    kept: tuple[int, ...] = ()  # outputs in main memory at its start
    stored: tuple[int, ...] = ()  # outputs in storage at its start
    page_in: tuple[int, ...] = ()
    page_out: tuple[int, ...] = ()


@dataclass
class Schedule:
    stages: list[Stage]

    def recomputations(self) -> int:
        return sum(len(s.computed) - 1 for s in self.stages)

    def as_json(self, graph: StagedGraph) -> list[dict]:
        name = graph.names
        return [{"stage": t, "node": name[t], "computed": [name[i] for i in s.computed], "kept": [name[i] for i in s.kept],
                 **({"stored": [name[i] for i in s.stored], "page_in": [name[i] for i in s.page_in],
                     "page_out": [name[i] for i in s.page_out]} if (s.stored or s.page_in or s.page_out) else {})}
                for t, s in enumerate(self.stages)]


@dataclass
class Evaluation:
    cost: float  # sum of compute costs of every computation
    energy: float  # compute + paging energy (nan without energies)
    peak: float  # max of U over stages and positions (Checkmate's memory, parameters excluded)
    recomputations: int
    page_ins: int
    page_outs: int


@dataclass
class StagedSolution:
    memory_budget: float
    time_budget: float
    status: str  # optimal | time limit (best feasible) | time limit (none found) | infeasible
    schedule: Schedule | None = None
    cost: float = math.nan
    energy: float = math.nan
    peak: float = math.nan
    recomputations: int = 0
    page_ins: int = 0
    page_outs: int = 0
    seconds: float = 0.0
    build_seconds: float = 0.0
    variables: int = 0
    constraints: int = 0
    objective: str = "cost"
    paging: bool = True
    recompute: bool = True

    @property
    def feasible(self) -> bool:
        return self.schedule is not None

    @property
    def value(self) -> float:
        """The objective's value: compute cost (Checkmate) or energy (POET)."""
        return self.energy if self.objective == "energy" else self.cost

    def as_json(self, graph: StagedGraph) -> dict:
        out = {"status": self.status, "objective": self.objective, "memory_budget": self.memory_budget,
               "time_budget": None if math.isinf(self.time_budget) else self.time_budget,
               "recompute": self.recompute, "paging": self.paging,
               "solve_seconds": round(self.seconds, 4), "build_seconds": round(self.build_seconds, 4),
               "variables": self.variables, "constraints": self.constraints}
        if self.schedule is not None:
            out.update({"cost": self.cost, "energy": None if math.isnan(self.energy) else self.energy,
                        "peak": self.peak, "recomputations": self.recomputations, "page_ins": self.page_ins,
                        "page_outs": self.page_outs, "schedule": self.schedule.as_json(graph)})
        return out


# ---------------------------------------------------------------------- checking a schedule


def evaluate(graph: StagedGraph, schedule: Schedule) -> Evaluation:
    """Check `schedule` against the formulation's rules and measure it (no solver). Raises
    StagedError naming the stage and node of the first broken rule."""
    T = graph.size
    if len(schedule.stages) != T:
        raise StagedError(f"schedule has {len(schedule.stages)} stages for {T} nodes")
    succ = graph.successors()
    m = graph.memory
    cost = energy = 0.0
    peak = 0.0
    ins = outs = 0
    with_energy = graph.has_energy
    for t, stage in enumerate(schedule.stages):
        computed = set(stage.computed)
        if t not in computed or any(not 0 <= i <= t for i in computed) or len(computed) != len(stage.computed):
            raise StagedError(f"stage {t}: computes {list(stage.computed)} (must compute node {t}, nodes <= {t}, each once)")
        kept, stored = set(stage.kept), set(stage.stored)
        if any(not 0 <= i < t for i in kept | stored):
            raise StagedError(f"stage {t}: keeps or stores a node not computed before stage {t}")
        if t == 0 and (kept or stored):
            raise StagedError("stage 0: nothing can be kept or stored yet")
        if t > 0:
            prev = schedule.stages[t - 1]
            for i in kept:
                if i not in prev.kept and i not in prev.computed and i not in prev.page_in:
                    raise StagedError(f"stage {t}: keeps {graph.names[i]!r}, which stage {t - 1} neither kept, "
                                      f"computed nor paged in")
            for i in stored:
                if i not in prev.stored and i not in prev.page_out:
                    raise StagedError(f"stage {t}: {graph.names[i]!r} in storage, which stage {t - 1} neither "
                                      f"stored nor paged out")
        for i in stage.page_in:
            if i not in stored:
                raise StagedError(f"stage {t}: pages in {graph.names[i]!r}, which is not in storage")
        for i in stage.page_out:
            if i not in kept:
                raise StagedError(f"stage {t}: pages out {graph.names[i]!r}, which is not in main memory")
        order = sorted(computed)
        done: set[int] = set()
        for v in order:
            for u in graph.args[v]:
                if u not in kept and u not in done:
                    raise StagedError(f"stage {t}: computes {graph.names[v]!r} without its argument {graph.names[u]!r}")
            done.add(v)
        nxt = set(schedule.stages[t + 1].kept) if t + 1 < T else set()
        # U with every value freed as soon as nothing needs it (Checkmate's Free_E)
        usage = sum(m[i] for i in kept)
        for v in range(t + 1):
            if v in computed:
                usage += m[v]
                peak = max(peak, usage)
                cost += graph.cost[v]
                if with_energy:
                    energy += graph.energy[v]
            if v in computed:
                for u in set(graph.args[v]):
                    later = any(j in computed and j > v for j in succ[u])
                    if not later and u not in nxt:
                        usage -= m[u]
            elif v == 0:
                peak = max(peak, usage)
        peak = max(peak, usage)
        ins += len(stage.page_in)
        outs += len(stage.page_out)
        if with_energy:
            energy += sum(graph.page_in_energy[i] for i in stage.page_in)
            energy += sum(graph.page_out_energy[i] for i in stage.page_out)
    recomputations = schedule.recomputations()
    return Evaluation(cost, energy if with_energy else math.nan, peak, recomputations, ins, outs)


# ---------------------------------------------------------------------- the MILP


def _tri(t: int, i: int) -> int:
    """Index of (t, i), i <= t, in a lower triangle stored row by row."""
    return t * (t + 1) // 2 + i


def _strict(t: int, i: int) -> int:
    """Index of (t, i), i < t, in a strict lower triangle stored row by row."""
    return t * (t - 1) // 2 + i


def solve(graph: StagedGraph, memory_budget: float, time_budget: float = math.inf, *, objective: str = "cost",
          paging: bool = True, recompute: bool = True, time_limit: float = 60.0,
          gap: float = 1e-9) -> StagedSolution:
    """The least compute cost (`objective="cost"`, Checkmate) or energy (`"energy"`, POET) of a
    schedule whose memory U stays within `memory_budget` and whose compute time within
    `time_budget`; `paging=False` leaves storage out (Checkmate), `recompute=False` computes
    each node once (POET's paging-only baseline)."""
    import numpy as np
    from scipy.sparse import csr_matrix

    if objective not in ("cost", "energy"):
        raise StagedError(f"objective {objective!r}: cost or energy")
    if objective == "energy" and not graph.has_energy:
        raise StagedError(f"{graph.source or 'graph'}: the energy objective needs per-node energies "
                          f"(compute, page-in, page-out)")
    if paging and objective == "energy" and (graph.page_in_energy is None or graph.page_out_energy is None):
        raise StagedError(f"{graph.source or 'graph'}: paging needs page-in and page-out energies")
    begin = time.perf_counter()
    T = graph.size
    m = [float(x) for x in graph.memory]
    edges = graph.edges
    succ = graph.successors()
    in_edges: list[list[int]] = [[] for _ in range(T)]  # per target k, the edge indices (i, k)
    for e, (_, k) in enumerate(edges):
        in_edges[k].append(e)

    nR = T * (T + 1) // 2
    nS = T * (T - 1) // 2
    R0 = 0
    S0 = R0 + nR
    cols = S0 + nS
    if paging:
        D0, I0, O0 = cols, cols + nS, cols + 2 * nS
        cols += 3 * nS
    # frees: per stage t, the edges (i, k) with k <= t
    free_index: dict[tuple[int, int], int] = {}
    F0 = cols
    for t in range(T):
        for e, (_, k) in enumerate(edges):
            if k <= t:
                free_index[(t, e)] = cols
                cols += 1
    binaries = cols
    U0 = cols  # U[t, k] for k <= t
    cols += nR
    n = cols

    rows_i: list[int] = []
    rows_j: list[int] = []
    vals: list[float] = []
    lo: list[float] = []
    hi: list[float] = []

    def row(coeffs: list[tuple[int, float]], low: float, high: float) -> None:
        r = len(lo)
        for c, v in coeffs:
            rows_i.append(r)
            rows_j.append(c)
            vals.append(v)
        lo.append(low)
        hi.append(high)

    def R(t: int, i: int) -> int:
        return R0 + _tri(t, i)

    def S(t: int, i: int) -> int:
        return S0 + _strict(t, i)

    inf = math.inf
    # arguments present: R[t,v] <= R[t,u] + S[t,u]  (u < v <= t)
    for u, v in edges:
        for t in range(v, T):
            row([(R(t, v), 1.0), (R(t, u), -1.0), (S(t, u), -1.0)], -inf, 0.0)
    # kept only if present: S[t+1,i] <= S[t,i] + R[t,i] + I[t,i]
    for t in range(T - 1):
        for i in range(t + 1):
            coeffs = [(S(t + 1, i), 1.0), (R(t, i), -1.0)]
            if i < t:
                coeffs.append((S(t, i), -1.0))
                if paging:
                    coeffs.append((I0 + _strict(t, i), -1.0))
            row(coeffs, -inf, 0.0)
    if paging:
        for t in range(T):
            for i in range(t):
                k = _strict(t, i)
                row([(I0 + k, 1.0), (D0 + k, -1.0)], -inf, 0.0)  # I <= D
                row([(O0 + k, 1.0), (S(t, i), -1.0)], -inf, 0.0)  # O <= S
                if t + 1 < T:  # D[t+1,i] <= D[t,i] + O[t,i]
                    row([(D0 + _strict(t + 1, i), 1.0), (D0 + k, -1.0), (O0 + k, -1.0)], -inf, 0.0)
    # frees: F <= R[t,k]; F <= 1 - S[t+1,i]; F <= 1 - R[t,j] for successors j > k of i (j <= t)
    for (t, e), col in free_index.items():
        i, k = edges[e]
        row([(col, 1.0), (R(t, k), -1.0)], -inf, 0.0)
        if t + 1 < T:
            row([(col, 1.0), (S(t + 1, i), 1.0)], -inf, 1.0)
        for j in succ[i]:
            if k < j <= t:
                row([(col, 1.0), (R(t, j), 1.0)], -inf, 1.0)
    # tightening rows (valid for some optimal solution of the formulation above, so the optimum
    # stays; they cut the fractional points HiGHS's relaxation would otherwise use):
    # a value is freed at most once per stage, and only when present: sum_k F[t,(i,k)] <= S[t,i] + R[t,i]
    frees_of: dict[tuple[int, int], list[int]] = {}
    for (t, e), col in free_index.items():
        frees_of.setdefault((t, edges[e][0]), []).append(col)
    for (t, i), fcols in frees_of.items():
        coeffs = [(col, 1.0) for col in fcols] + [(R(t, i), -1.0)]
        if i < t:
            coeffs.append((S(t, i), -1.0))
        row(coeffs, -inf, 0.0)
    # a recomputation or a kept output serves something: read in the stage, kept on or paged out
    # (dropping one that serves nothing costs nothing and can only lower the memory)
    for t in range(T):
        for i in range(t):
            readers = [(R(t, j), -1.0) for j in succ[i] if j <= t]
            keep_on = [(S(t + 1, i), -1.0)] if t + 1 < T else []
            row([(R(t, i), 1.0), *readers, *keep_on], -inf, 0.0)
            out = [(O0 + _strict(t, i), -1.0)] if paging else []
            row([(S(t, i), 1.0), *readers, *keep_on, *out], -inf, 0.0)
    # memory: U[t,0] = R[t,0] m_0 + sum S[t,i] m_i; U[t,k+1] = U[t,k] + R[t,k+1] m_{k+1} - frees of k's arguments
    for t in range(T):
        coeffs = [(U0 + _tri(t, 0), 1.0), (R(t, 0), -m[0])]
        coeffs += [(S(t, i), -m[i]) for i in range(t) if m[i]]
        row(coeffs, 0.0, 0.0)
        for k in range(t):
            coeffs = [(U0 + _tri(t, k + 1), 1.0), (U0 + _tri(t, k), -1.0), (R(t, k + 1), -m[k + 1])]
            coeffs += [(free_index[(t, e)], m[edges[e][0]]) for e in in_edges[k] if m[edges[e][0]]]
            row(coeffs, 0.0, 0.0)
    # time budget (compute only, as POET's)
    if math.isfinite(time_budget):
        row([(R(t, i), float(graph.cost[i])) for t in range(T) for i in range(t + 1) if graph.cost[i]], -inf,
            float(time_budget))

    c = np.zeros(n)
    weights = graph.energy if objective == "energy" else graph.cost
    for t in range(T):
        for i in range(t + 1):
            c[R(t, i)] = weights[i]
    if paging and objective == "energy":
        for t in range(T):
            for i in range(t):
                c[I0 + _strict(t, i)] = graph.page_in_energy[i]
                c[O0 + _strict(t, i)] = graph.page_out_energy[i]
    scale = float(np.abs(c).max()) or 1.0
    lower = np.zeros(n)
    upper = np.ones(n)
    for t in range(T):
        lower[R(t, t)] = 1.0
        if not recompute:
            for i in range(t):
                upper[R(t, i)] = 0.0
    if paging:  # a value reaches storage by a page-out, which its own stage cannot do: D[t+1,t] = 0
        for t in range(1, T):
            upper[D0 + _strict(t, t - 1)] = 0.0
    upper[U0:U0 + nR] = memory_budget
    integrality = np.zeros(n)
    integrality[:binaries] = 1
    A = csr_matrix((vals, (rows_i, rows_j)), shape=(len(lo), n))
    # a start: the best schedule of a few simple policies that meets the budgets (HiGHS keeps it
    # as its first incumbent, so a time limit returns at least that)
    layout = _Layout(T, edges, free_index, R0, S0, (D0, I0, O0) if paging else None, U0, n)
    heuristic = best_heuristic(graph, memory_budget, time_budget, objective=objective, paging=paging,
                               recompute=recompute)
    x0 = layout.vector(graph, heuristic) if heuristic is not None else None
    build = time.perf_counter() - begin
    start = time.perf_counter()
    if memory_budget < 0:
        status, x = "infeasible", None
    else:
        status, x = _run_highs(c / scale, A, np.array(lo), np.array(hi), lower, upper, integrality, time_limit, gap,
                               x0)
    seconds = time.perf_counter() - start
    solution = StagedSolution(memory_budget, time_budget, status, seconds=seconds, build_seconds=build, variables=n,
                              constraints=len(lo), objective=objective, paging=paging, recompute=recompute)
    if x is None:
        return solution
    x = x > 0.5
    stages = []
    for t in range(T):
        computed = tuple(i for i in range(t + 1) if x[R(t, i)])
        kept = tuple(i for i in range(t) if x[S(t, i)])
        if paging:
            stored = tuple(i for i in range(t) if x[D0 + _strict(t, i)])
            ins = tuple(i for i in range(t) if x[I0 + _strict(t, i)])
            outs = tuple(i for i in range(t) if x[O0 + _strict(t, i)])
        else:
            stored = ins = outs = ()
        stages.append(Stage(computed, kept, stored, ins, outs))
    schedule = _pruned(graph, Schedule(stages))
    measured = evaluate(graph, schedule)
    solution.schedule = schedule
    solution.cost, solution.energy, solution.peak = measured.cost, measured.energy, measured.peak
    solution.recomputations, solution.page_ins, solution.page_outs = (measured.recomputations, measured.page_ins,
                                                                      measured.page_outs)
    return solution


def _run_highs(c, A, lo, hi, lower, upper, integrality, time_limit: float, gap: float, start) -> tuple[str, Any]:
    """HiGHS on the MILP, with `start` as its first incumbent when given. The start goes through
    the HiGHS bundled with scipy (`scipy.optimize._highspy`, not public: when it is missing the
    solve runs through `scipy.optimize.milp` without a start)."""
    import numpy as np

    try:
        from scipy.optimize._highspy import _core as h
    except ImportError:  # pragma: no cover - depends on the scipy build
        h = None
    if h is None or not hasattr(h, "_Highs") or not hasattr(h._Highs, "setSolution"):
        from scipy.optimize import Bounds, LinearConstraint, milp

        result = milp(c, constraints=LinearConstraint(A, lo, hi), integrality=integrality, bounds=Bounds(lower, upper),
                      options={"time_limit": time_limit, "mip_rel_gap": gap, "presolve": True})
        if result.status == 2:
            return "infeasible", None
        if result.status == 0:
            return "optimal", result.x
        if result.status == 1:
            return ("time limit (best feasible)" if result.x is not None else "time limit (none found)"), result.x
        return f"not solved: {result.message}", None
    csc = A.tocsc()
    lp = h.HighsLp()
    lp.num_col_, lp.num_row_ = A.shape[1], A.shape[0]
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = A.shape[1], A.shape[0]
    lp.a_matrix_.format_ = h.MatrixFormat.kColwise
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = c, lower, upper
    lp.row_lower_, lp.row_upper_ = lo, hi
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = csc.indptr, csc.indices, csc.data
    lp.integrality_ = [h.HighsVarType(int(v)) for v in integrality]
    highs = h._Highs()
    options = h.HighsOptions()
    options.output_flag = False
    options.time_limit = float(time_limit)
    options.mip_rel_gap = float(gap)
    options.threads = 1
    highs.passOptions(options)
    highs.passModel(lp)
    if start is not None:
        solution = h.HighsSolution()
        solution.col_value = list(start)
        solution.value_valid = True
        highs.setSolution(solution)
    highs.run()
    status = highs.getModelStatus()
    info = highs.getInfo()
    has_x = info.primal_solution_status == h.SolutionStatus.kSolutionStatusFeasible
    x = np.array(highs.getSolution().col_value) if has_x else None
    if status == h.HighsModelStatus.kOptimal:
        return "optimal", x
    if status == h.HighsModelStatus.kInfeasible:
        return "infeasible", None
    if status == h.HighsModelStatus.kTimeLimit:
        return ("time limit (best feasible)" if x is not None else "time limit (none found)"), x
    return f"not solved: {highs.modelStatusToString(status)}", x


@dataclass
class _Layout:
    """Where each variable of the MILP sits (see `solve`)."""

    T: int
    edges: list[tuple[int, int]]
    free_index: dict[tuple[int, int], int]
    R0: int
    S0: int
    paging: tuple[int, int, int] | None
    U0: int
    n: int

    def vector(self, graph: StagedGraph, schedule: Schedule):
        """The MILP's variables for a schedule `evaluate` accepts (frees where nothing needs a
        value any more, U by the recurrence)."""
        import numpy as np

        x = np.zeros(self.n)
        succ = graph.successors()
        m = graph.memory
        stages = schedule.stages
        for t, stage in enumerate(stages):
            for i in stage.computed:
                x[self.R0 + _tri(t, i)] = 1
            for i in stage.kept:
                x[self.S0 + _strict(t, i)] = 1
            if self.paging:
                D0, I0, O0 = self.paging
                for i in stage.stored:
                    x[D0 + _strict(t, i)] = 1
                for i in stage.page_in:
                    x[I0 + _strict(t, i)] = 1
                for i in stage.page_out:
                    x[O0 + _strict(t, i)] = 1
            computed = set(stage.computed)
            nxt = set(stages[t + 1].kept) if t + 1 < self.T else set()
            usage = sum(m[i] for i in stage.kept) + (m[0] if 0 in computed else 0.0)
            x[self.U0 + _tri(t, 0)] = usage
            for k in range(t):
                freed = 0.0
                for e, (i, kk) in enumerate(self.edges):
                    if kk != k or k not in computed:
                        continue
                    if i not in nxt and not any(j in computed and k < j <= t for j in succ[i]):
                        x[self.free_index[(t, e)]] = 1
                        freed += m[i]
                usage += (m[k + 1] if k + 1 in computed else 0.0) - freed
                x[self.U0 + _tri(t, k + 1)] = usage
        return x


def best_heuristic(graph: StagedGraph, memory_budget: float, time_budget: float = math.inf, *,
                   objective: str = "cost", paging: bool = True, recompute: bool = True) -> Schedule | None:
    """The cheapest of a few simple schedules that meet the budgets (None if none does):
    store-all; with recomputation, checkpoints every k-th forward output (the others recomputed
    from the nearest kept ones where needed, `_checkpointed`); with paging, the outputs of a
    size class paged out between uses (`_paged`)."""
    candidates = [graph.store_all()]
    forward = [v for v in range(graph.size) if not graph.backward[v]]
    if recompute:
        for k in sorted({2, 3, 4, 6, 8, 12, 16, max(1, int(math.sqrt(len(forward)))), len(forward) + 1}):
            candidates.append(_checkpointed(graph, set(forward[k - 1::k])))
    if paging:
        sizes = sorted({graph.memory[v] for v in range(graph.size)})
        for q in (0.0, 0.5, 0.75, 0.9):
            threshold = sizes[int(q * (len(sizes) - 1))] if sizes else 0.0
            candidates.append(_paged(graph, {v for v in range(graph.size) if graph.memory[v] >= threshold}))
    best, best_value = None, math.inf
    for schedule in candidates:
        try:
            ev = evaluate(graph, schedule)
        except StagedError:
            continue
        if ev.peak > memory_budget or ev.cost > time_budget * (1 + 1e-12):
            continue
        value = ev.energy if objective == "energy" else ev.cost
        if value < best_value:
            best, best_value = schedule, value
    return best


def _checkpointed(graph: StagedGraph, checkpoints: set[int]) -> Schedule:
    """Forward outputs in `checkpoints` and every backward output kept from their stage to their
    last use; every other value recomputed in each stage that needs it (Checkmate's `solve_r_opt`
    for this choice of kept values)."""
    T = graph.size
    kept_kind = {v for v in range(T) if graph.backward[v] or v in checkpoints}
    computed: list[list[int]] = []
    last_use = [-1] * T
    for t in range(T):
        todo, chosen = [t], {t}
        while todo:
            v = todo.pop()
            for u in graph.args[v]:
                if u in kept_kind and u < t:
                    last_use[u] = max(last_use[u], t)
                elif u not in chosen:
                    chosen.add(u)
                    todo.append(u)
        computed.append(sorted(chosen))
    stages = [Stage(tuple(computed[t]), tuple(u for u in range(t) if u in kept_kind and u < t <= last_use[u]))
              for t in range(T)]
    return Schedule(stages)


def _paged(graph: StagedGraph, pageable: set[int]) -> Schedule:
    """Each node computed once; an output kept in main memory at the stages that read it, and
    between two of them either kept or, if in `pageable` and the gap allows, paged out after
    its first stage in memory and paged in the stage before the next reader."""
    T = graph.size
    uses: list[list[int]] = [[] for _ in range(T)]
    for v in range(T):
        for u in set(graph.args[v]):
            uses[u].append(v)
    kept: list[set[int]] = [set() for _ in range(T)]
    stored: list[set[int]] = [set() for _ in range(T)]
    ins: list[set[int]] = [set() for _ in range(T)]
    outs: list[set[int]] = [set() for _ in range(T)]
    for i in range(T):
        if not uses[i]:
            continue
        in_memory = sorted(set(uses[i]) | {i + 1})
        stages = {i + 1}
        paged_out = False
        for s in in_memory[1:]:
            previous = max(stages)
            if i in pageable and s - 1 >= i + 2 and s - 1 > previous:
                if not paged_out:
                    outs[i + 1].add(i)
                    paged_out = True
                ins[s - 1].add(i)
                stages.add(s)
            else:
                stages.update(range(previous + 1, s + 1))
        for s in stages:
            kept[s].add(i)
        if paged_out:
            for s in range(i + 2, T):
                stored[s].add(i)
    schedule = Schedule([Stage((t,), tuple(sorted(kept[t])), tuple(sorted(stored[t])), tuple(sorted(ins[t])),
                               tuple(sorted(outs[t]))) for t in range(T)])
    return _pruned(graph, schedule)


def _pruned(graph: StagedGraph, schedule: Schedule) -> Schedule:
    """The solver's schedule without what has no use (a stored copy never paged in again, a
    copy in storage kept with nothing reading it): zero-cost variables the solver may leave at 1.
    Costs and energy are unchanged; memory can only fall."""
    T = graph.size
    stages = list(schedule.stages)
    # storage that no later page-in reads: drop it (and the chain of D back to its page-out,
    # whose energy stays: removing a page-out changes energy, so only D entries go)
    needed_in_storage: set[int] = set()
    out = []
    for t in range(T - 1, -1, -1):
        s = stages[t]
        needed_in_storage |= set(s.page_in)
        stored = tuple(i for i in s.stored if i in needed_in_storage)
        out.append(Stage(s.computed, s.kept, stored, s.page_in, s.page_out))
        # values paged out here start a chain: before it, storage holds them only if an earlier copy existed
        needed_in_storage -= {i for i in s.page_out if i not in s.stored}
    out.reverse()
    # outputs kept with nothing reading them in the stage, paging them out, or keeping them on
    next_kept: set[int] = set()
    pruned = []
    for t in range(T - 1, -1, -1):
        s = out[t]
        reads = {u for v in s.computed for u in graph.args[v]} | set(s.page_out)
        carried = next_kept - set(s.computed) - set(s.page_in)  # stage t + 1 has them only if kept here
        kept = tuple(i for i in s.kept if i in reads or i in carried)
        pruned.append(Stage(s.computed, kept, s.stored, s.page_in, s.page_out))
        next_kept = set(kept)
    pruned.reverse()
    return Schedule(pruned)


# ---------------------------------------------------------------------- tiny graphs, exhaustively


def exhaustive(graph: StagedGraph, memory_budget: float) -> float | None:
    """The least compute cost over every Checkmate schedule (no paging) within the budget, by
    dynamic programming over the outputs kept between stages: independent of the MILP, for
    tests on graphs of at most about 8 nodes. None: no schedule fits."""
    from itertools import combinations

    T = graph.size
    succ = graph.successors()
    m = graph.memory
    states: dict[frozenset[int], float] = {frozenset(): 0.0}
    for t in range(T):
        new: dict[frozenset[int], float] = {}
        earlier = list(range(t))
        for kept, so_far in states.items():
            for r in range(len(earlier) + 1):
                for extra in combinations(earlier, r):
                    computed = set(extra) | {t}
                    ok = all(u in kept or u in computed for v in computed for u in graph.args[v])
                    ok = ok and all(u in kept or u < v for v in computed for u in graph.args[v] if u in computed)
                    if not ok:
                        continue
                    present = sorted(kept | computed)
                    for q in range(len(present) + 1):
                        for nxt in combinations([i for i in present if i <= t], q):
                            nxt_set = frozenset(nxt) if t + 1 < T else frozenset()
                            if t + 1 == T and q:
                                continue
                            usage = sum(m[i] for i in kept)
                            peak = 0.0
                            for v in range(t + 1):
                                if v in computed:
                                    usage += m[v]
                                    peak = max(peak, usage)
                                    for u in set(graph.args[v]):
                                        if not any(j in computed and j > v for j in succ[u]) and u not in nxt_set:
                                            usage -= m[u]
                            if peak > memory_budget + 1e-9 or sum(m[i] for i in kept) > memory_budget + 1e-9:
                                continue
                            total = so_far + sum(graph.cost[i] for i in computed)
                            if new.get(nxt_set, math.inf) > total:
                                new[nxt_set] = total
        states = new
    return min(states.values()) if states else None
