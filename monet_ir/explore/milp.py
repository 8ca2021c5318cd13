"""The checkpoint choice solved exactly: a MILP (HiGHS through `scipy.optimize.milp`).

The model is the one `Evaluator.checkpoint_cost` measures on the rewritten IR, written over the
binary decisions of the genetic search (one per checkpoint gene, i.e. per forward node that
`activation-checkpoint{policy=list}` can name). docs/explore.md states it in full; in short,
on the step after `autodiff` and `insert-optimizer`, with `CheckpointProblem`'s vocabulary:

- `d_g` in {0,1}: gene g is recomputed; it drops the storages `D_g` (`plan_named([node])`);
- `z_s` in [0,1]: storage s is dropped: `z_s >= d_g` for each g with s in D_g and
  `z_s <= sum of those d_g` (storages of no gene: z_s = 0);
- `r_j` in {0,1}: forward op j is recomputed (it is cloned by the pass). A dropped storage's
  producer and the view ops of its saved views are recomputed: `r_{op(w)} >= z_s` for every
  saved view w of s (s itself included when backward reads it directly). A recomputed op needs
  its operands: for an operand v of a recomputable op j, with root = the storage v views,
  - v an argument, a backward value, a constant or a view of one: nothing (always kept);
  - root produced by a non-recomputable op (random): `y_root >= r_j` when root is not already
    a saved storage (it becomes saved);
  - root a saved storage: `r_{op(v)} >= r_j + z_root - 1` (needed only if root is dropped);
  - root not saved (an intermediate the backward pass never reads): `r_{op(v)} >= r_j`;
- objective: minimize `sum_j c_j r_j`, with `c_j` the op's latency on the fastest core of the
  target able to run it (`Evaluator.op_cycles`);
- memory: `sum_s bytes_s (1 - z_s) + sum_v bytes_v y_v <= budget`: the saved-activation bytes
  of the rewritten step (`saved_bytes_by_kind(fn)["activation"]`).

`r_j` is the union of the recompute cones, each op once. `activation-checkpoint` recomputes an
op once per *segment* that needs it, so on graphs where an op feeds dropped values of two
segments (skip connections) the pass may clone it twice and the MILP's cost is then a lower
bound; on chains (MLP, LeNet, chains of layers) it is exact, which the tests check by measuring
the MILP's solution on the IR. `predict(decisions)` evaluates this model in Python for any
decision vector (the same rules, without a solver).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.ir import BlockArgument, OpResult

from monet_ir import graph as ir_graph
from monet_ir.explore.evaluate import CheckpointCost, Evaluator, ExploreError


@dataclass
class MilpSolution:
    budget: int
    status: str
    optimal: bool
    recompute: tuple[str, ...] = ()
    recompute_cycles: float = math.nan
    saved_bytes: int = 0
    seconds: float = 0.0
    variables: int = 0
    constraints: int = 0


@dataclass
class CheckpointModel:
    """The data of the MILP, built once per step (see the module docstring)."""

    genes: list[str]
    storages: list[OpResult]
    storage_bytes: list[int]
    gene_storages: list[list[int]]  # per gene, indices into storages
    ops: list  # recomputable forward ops
    op_cost: list[float]
    view_needs: list[tuple[int, int]] = field(default_factory=list)  # (op index, storage index): r_op >= z_s
    chained: list[tuple[int, int, int]] = field(default_factory=list)  # (producer op, consumer op, storage or -1)
    frontier: list[int] = field(default_factory=list)  # bytes of the non-recomputable unsaved roots
    frontier_users: list[tuple[int, int]] = field(default_factory=list)  # (frontier index, op index): y >= r_op

    @property
    def max_bytes(self) -> int:
        return sum(self.storage_bytes)


def build_model(evaluator: Evaluator) -> CheckpointModel:
    from monet_ir.analysis import checkpoint_policies as plans
    from monet_ir.analysis.saved import storage_of
    from monet_ir.types import tensor_bytes
    from dialects import nn

    fn = ir_graph.step_function(evaluator.module)
    problem = plans.CheckpointProblem(fn)
    storages = list(problem.storages)
    s_index = {s: i for i, s in enumerate(storages)}
    genes = [g.node for g in evaluator.checkpoint_genes]
    gene_storages = [sorted(s_index[s] for s in plans.plan_named(problem, [g])) for g in genes]
    ops = [op for op in problem.position if plans.is_recomputable(op)]
    o_index = {op: i for i, op in enumerate(ops)}
    model = CheckpointModel(genes, storages, [tensor_bytes(s.type) for s in storages], gene_storages, ops,
                            [evaluator.op_cycles(op) for op in ops])
    for s in storages:
        for w in problem.saved_views[s]:
            if isinstance(w, OpResult) and w.op in o_index:
                model.view_needs.append((o_index[w.op], s_index[s]))
    frontier: dict[OpResult, int] = {}
    for j, op in enumerate(ops):
        for v in op.operands:
            if isinstance(v, BlockArgument) or not isinstance(v, OpResult) or v.op not in problem.position:
                continue
            root = storage_of(v)
            if not isinstance(root, OpResult) or root.op not in problem.position or isinstance(root.op, nn.ConstantOp):
                continue
            if not plans.is_recomputable(root.op):
                if root not in s_index:
                    k = frontier.setdefault(root, len(frontier))
                    if k == len(model.frontier):
                        model.frontier.append(tensor_bytes(root.type))
                    model.frontier_users.append((k, j))
                continue
            if v.op not in o_index:
                raise ExploreError(f"{v.op.name}: a view of a recomputable value that is not itself recomputable")
            model.chained.append((o_index[v.op], j, s_index.get(root, -1)))
    return model


def predict(model: CheckpointModel, recompute: Sequence[str]) -> CheckpointCost:
    """The model's recompute cycles and saved bytes for a recompute set (no solver)."""
    chosen = set(recompute)
    z = [False] * len(model.storages)
    for g, members in zip(model.genes, model.gene_storages, strict=True):
        if g in chosen:
            for s in members:
                z[s] = True
    r = [False] * len(model.ops)
    for j, s in model.view_needs:
        if z[s]:
            r[j] = True
    changed = True
    while changed:
        changed = False
        for producer, consumer, s in model.chained:
            if r[consumer] and not r[producer] and (s < 0 or z[s]):
                r[producer] = changed = True
    y = [False] * len(model.frontier)
    for k, j in model.frontier_users:
        if r[j]:
            y[k] = True
    cycles = sum(c for c, on in zip(model.op_cost, r, strict=True) if on)
    saved = sum(b for b, dropped in zip(model.storage_bytes, z, strict=True) if not dropped)
    saved += sum(b for b, on in zip(model.frontier, y, strict=True) if on)
    return CheckpointCost(cycles, saved)


def solve(model: CheckpointModel, budget: int, time_limit: float = 60.0) -> MilpSolution:
    """Minimum recompute cycles with saved-activation bytes <= budget."""
    import numpy as np
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import lil_matrix

    G, S, J, F = len(model.genes), len(model.storages), len(model.ops), len(model.frontier)
    d0, z0, r0, y0 = 0, G, G + S, G + S + J
    n = G + S + J + F
    rows: list[tuple[dict[int, float], float, float]] = []  # (coefficients, lower, upper)
    in_gene: list[list[int]] = [[] for _ in range(S)]
    for g, members in enumerate(model.gene_storages):
        for s in members:
            in_gene[s].append(g)
            rows.append(({z0 + s: 1.0, d0 + g: -1.0}, 0.0, math.inf))  # z_s >= d_g
    upper_z = np.zeros(S)
    for s, gs in enumerate(in_gene):
        if gs:
            upper_z[s] = 1.0
            coeffs = {z0 + s: 1.0}
            for g in gs:
                coeffs[d0 + g] = coeffs.get(d0 + g, 0.0) - 1.0
            rows.append((coeffs, -math.inf, 0.0))  # z_s <= sum d_g
    for j, s in model.view_needs:
        rows.append(({r0 + j: 1.0, z0 + s: -1.0}, 0.0, math.inf))
    for producer, consumer, s in model.chained:
        if producer == consumer:
            continue
        if s < 0:
            rows.append(({r0 + producer: 1.0, r0 + consumer: -1.0}, 0.0, math.inf))
        else:  # r_p - r_c - z_s >= -1
            rows.append(({r0 + producer: 1.0, r0 + consumer: -1.0, z0 + s: -1.0}, -1.0, math.inf))
    for k, j in model.frontier_users:
        rows.append(({y0 + k: 1.0, r0 + j: -1.0}, 0.0, math.inf))
    # memory: sum b_s (1 - z_s) + sum b_v y_v <= budget
    memory = {z0 + s: -float(b) for s, b in enumerate(model.storage_bytes)}
    memory.update({y0 + k: float(b) for k, b in enumerate(model.frontier)})
    rows.append((memory, -math.inf, float(budget - model.max_bytes)))

    A = lil_matrix((len(rows), n))
    lower = np.empty(len(rows))
    upper = np.empty(len(rows))
    for i, (coeffs, lo, hi) in enumerate(rows):
        for col, value in coeffs.items():
            A[i, col] = value
        lower[i], upper[i] = lo, hi
    cost = np.zeros(n)
    cost[r0:r0 + J] = model.op_cost
    var_upper = np.ones(n)
    var_upper[z0:z0 + S] = upper_z
    integrality = np.ones(n)
    integrality[z0:z0 + S] = 0  # z follows the binary d
    start = time.perf_counter()
    result = milp(cost, constraints=LinearConstraint(A.tocsr(), lower, upper), integrality=integrality,
                  bounds=Bounds(np.zeros(n), var_upper),
                  options={"time_limit": time_limit, "mip_rel_gap": 0.0, "presolve": True})
    seconds = time.perf_counter() - start
    solution = MilpSolution(budget, result.message, result.status == 0, seconds=seconds, variables=n,
                            constraints=len(rows))
    if result.x is None:
        return solution
    chosen = tuple(g for g, value in zip(model.genes, result.x[d0:d0 + G], strict=True) if value > 0.5)
    predicted = predict(model, chosen)
    solution.recompute = chosen
    solution.recompute_cycles = predicted.recompute_cycles
    solution.saved_bytes = predicted.saved_bytes
    return solution


def default_budgets(model: CheckpointModel, count: int = 5) -> list[int]:
    """`count` budgets spread between the bytes of recomputing every gene and of storing all."""
    low = predict(model, model.genes).saved_bytes
    high = model.max_bytes
    if count <= 1 or high <= low:
        return [high]
    return [int(round(low + (high - low) * i / (count - 1))) for i in range(count)]
