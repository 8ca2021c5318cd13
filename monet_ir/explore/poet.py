"""Keep, recompute or page each saved activation: the exact choice as a MILP (HiGHS through
`scipy.optimize.milp`), minimizing the step's energy under a peak-memory budget on main memory
and a latency budget (POET's problem, Patil et al. ICML 2022, on our task graph and our plans).

The decision space is what `activation-checkpoint{policy="plan=..."}` applies: per forward node
with saved results (a *gene*), keep, recompute (only for recomputable nodes), page or keep in
storage (only on a target with a storage level), and per other tensor name (parameters,
optimizer state, the batch, gradients, other values) main memory or storage (a plan's
`storage` list; `_storage_homes`, variables t_g, h_c, S_p, v in docs/poet.md). docs/poet.md states the model in full; in short, with the ops of
the step in program order as *points* p = 0..N-1:

- binaries `d_g` (recompute gene g), `q_g` (page it), `d_g + q_g <= 1`; a storage s follows
  its gene: `z_s = d_g(s)`, `pz_s = q_g(s)`;
- recompute cones as in `monet_ir.explore.milp` (binaries `r_j` per recomputable forward op,
  `y_v` per random value that becomes saved);
- memory at every point p: `base(p) + sum_s m_s alive_s(p) + sum_v m_v y_v <= budget`, where
  `base(p)` is every other value alive at p (parameters, optimizer state, the batch, gradients,
  values the backward pass never reads; each from its producer to its last reader) and a saved
  storage s is alive
  - kept: from its producer to its last backward reader;
  - recomputed: from its producer to its last forward reader, and its copy from the first
    backward reader of its *segment* (the dropped storages after it up to the next storage not
    dropped, whose cones the pass clones together) to its last backward reader: continuous
    `w_{s,p} >= z_s + z_{s+1} - 1` where s+1 is first read at or before p, else
    `w_{s,p} >= z_s + w_{s+1,p} - 1` (O(storages x points) rows);
  - paged: from its producer to its last forward reader, and its paged-in copy from the op
    before its first backward reader (the page-in starts there) to its last backward reader;
- latency: `T_store-all + sum_j c_j r_j + sum_s t_s pz_s <= time budget` (recompute ops run
  once more; paging counted serially: page-out plus page-in time on the storage channel);
- objective: `E_store-all + sum_j e_j r_j + sum_s e_s pz_s` (the recomputed ops' energy, the
  storage's and main memory's energy per bit of both transfers), in pJ.

`solve(model, memory_budget, time_budget, ...)` returns the optimum, or on the time limit the
best feasible answer found (`status` says which). The model counts every value in main memory
on one timeline and ignores the cone intermediates of recomputation: it is exact on chains
(`chain_model`, tested against an independent dynamic program) and an estimate elsewhere, so
`solve_measured` re-schedules the answer with the real scheduler and, when a budget is missed,
tightens it by the excess and solves again (at most `rounds` times), reporting both figures.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DECISIONS = ("keep", "recompute", "page", "store")


@dataclass
class PoetModel:
    """The data of the MILP (see the module docstring). Positions are program points."""

    genes: list[str]
    can_recompute: list[bool]
    points: int
    base: list[float]  # bytes alive at each point that no decision changes
    # per saved storage, in forward order
    storage_gene: list[int]
    storage_bytes: list[float]
    prod: list[int]
    last_forward: list[int]
    first_backward: list[int]
    last_backward: list[int]
    page_cycles: list[float]  # page-out + page-in time, reference cycles
    page_energy: list[float]  # pJ
    # recompute cones (as in monet_ir.explore.milp)
    op_cycles: list[float]
    op_energy: list[float]
    view_needs: list[tuple[int, int]] = field(default_factory=list)  # (op, storage): r_op >= z_s
    chained: list[tuple[int, int, int]] = field(default_factory=list)  # (producer op, consumer op, storage or -1)
    frontier_bytes: list[float] = field(default_factory=list)
    frontier_life: list[tuple[int, int]] = field(default_factory=list)
    frontier_users: list[tuple[int, int]] = field(default_factory=list)  # (frontier, op): y >= r_op
    # recomputed intermediates (results of cone ops the backward pass never reads): alive when
    # a dropped storage downstream of them is recomputed, at its first backward reader
    intermediate_bytes: list[float] = field(default_factory=list)  # per op (0: its result is a storage)
    downstream: list[tuple[int, int]] = field(default_factory=list)  # (op, storage)
    # the clones of one first backward reader run in forward order: intermediate j is alive from
    # clone j to its last cone reader (through views), so at that point the intermediates count
    # as the largest sum alive at one clone, not all of them
    intermediate_span: list[tuple[int, int]] = field(default_factory=list)  # per op (lo, hi) in cone order
    can_page: bool = True
    base_latency: float = 0.0
    base_energy: float = 0.0
    budgeted: str = "dram"
    # tensors that can be kept in storage (a plan's "storage" list), see `_storage_homes`:
    # other tensors (parameters, optimizer state, the batch, gradients, values no backward op
    # reads), each counted in `base` from lo to hi when in main memory ...
    # (a name may stand for several tensors, e.g. the partial gradients of a value read twice:
    # one decision for all of them; per tensor its (lo, hi, bytes))
    homes: list[str] = field(default_factory=list)
    home_members: list[list[tuple[int, int, float]]] = field(default_factory=list)
    # ... and, when kept in storage, buffers around their uses: point -> bytes
    home_points: list[dict[int, float]] = field(default_factory=list)
    home_cycles: list[float] = field(default_factory=list)  # its transfers' time, reference cycles
    home_energy: list[float] = field(default_factory=list)  # pJ
    # a gene stored: its saved storages kept in storage (names, or None when one cannot be named)
    storage_name: list[str | None] = field(default_factory=list)
    storage_points: list[list[int]] = field(default_factory=list)
    storage_buffer: list[float] = field(default_factory=list)
    storage_cycles: list[float] = field(default_factory=list)
    storage_energy: list[float] = field(default_factory=list)
    tile: int = 0
    # a recompute clone reading a tensor kept in storage pages it in again: per pair (kind "home"
    # or "storage", its index, the recomputable op j, cycles, pJ, buffer bytes), counted when both
    # the tensor is kept in storage and j is recomputed, its buffer at clone_points[j]
    clone_reads: list[tuple[str, int, int, float, float, float]] = field(default_factory=list)
    clone_points: dict[int, list[int]] = field(default_factory=dict)

    def can_store(self, g: int) -> bool:
        """Whether gene g's saved storages can all be kept in storage."""
        if not self.can_page or not self.storage_name:
            return False
        names = [self.storage_name[s] for s, gene in enumerate(self.storage_gene) if gene == g]
        return bool(names) and all(names)

    def stored_names(self, decisions: Mapping[str, str], stored: Sequence[str] = ()) -> list[str]:
        """The plan's storage list: the homes chosen and the storages of the genes stored."""
        gene_index = {g: i for i, g in enumerate(self.genes)}
        chosen = {gene_index[g] for g, d in decisions.items() if d == "store"}
        names = [n for s, n in enumerate(self.storage_name) if self.storage_gene[s] in chosen and n]
        return list(dict.fromkeys([*names, *stored]))


@dataclass
class PoetSolution:
    memory_budget: float
    time_budget: float
    status: str  # optimal | time limit (best feasible) | time limit (none found) | infeasible
    decisions: dict[str, str] = field(default_factory=dict)
    energy_pj: float = math.nan
    latency_cycles: float = math.nan
    peak_bytes: float = math.nan
    seconds: float = 0.0
    variables: int = 0
    constraints: int = 0
    measured: dict[str, float] = field(default_factory=dict)
    rounds: int = 0
    stored: list[str] = field(default_factory=list)  # homes kept in storage

    @property
    def feasible(self) -> bool:
        return bool(self.decisions) or self.status.startswith(("optimal", "time limit (best"))

    def plan(self) -> dict[str, str]:
        return {g: d for g, d in self.decisions.items() if d != "keep"}


# ---------------------------------------------------------------------- evaluation of the model


def predict(model: PoetModel, decisions: Mapping[str, str], stored: Sequence[str] = ()) -> tuple[float, float, float]:
    """(energy pJ, latency cycles, peak bytes) of the model for these decisions and homes kept
    in storage (no solver)."""
    index = {g: i for i, g in enumerate(model.genes)}
    d = [0] * len(model.genes)
    q = [0] * len(model.genes)
    st = [0] * len(model.genes)
    for g, choice in decisions.items():
        if choice == "recompute":
            d[index[g]] = 1
        elif choice == "page":
            q[index[g]] = 1
        elif choice == "store":
            st[index[g]] = 1
    z = [d[g] for g in model.storage_gene]
    pz = [q[g] for g in model.storage_gene]
    sz = [st[g] for g in model.storage_gene]
    r = [0] * len(model.op_cycles)
    for j, s in model.view_needs:
        r[j] = max(r[j], z[s])
    changed = True
    while changed:
        changed = False
        for p, c, s in model.chained:
            if r[c] and not r[p] and (s < 0 or z[s]):
                r[p] = 1
                changed = True
    y = [0] * len(model.frontier_bytes)
    for k, j in model.frontier_users:
        y[k] = max(y[k], r[j])
    energy = model.base_energy + sum(e * on for e, on in zip(model.op_energy, r)) + \
        sum(e * on for e, on in zip(model.page_energy, pz))
    latency = model.base_latency + sum(c * on for c, on in zip(model.op_cycles, r)) + \
        sum(c * on for c, on in zip(model.page_cycles, pz))
    extra = [0.0] * model.points
    home_index = {n: c for c, n in enumerate(model.homes)}
    for name in stored:
        c = home_index[name]
        energy += model.home_energy[c]
        latency += model.home_cycles[c]
        for lo, hi, nbytes in model.home_members[c]:
            for p in range(lo, hi + 1):
                extra[p] -= nbytes
        for p, nbytes in model.home_points[c].items():
            extra[p] += nbytes
    for s, on in enumerate(sz):
        if on:
            energy += model.storage_energy[s]
            latency += model.storage_cycles[s]
            for p in range(model.prod[s], model.last_backward[s] + 1):
                extra[p] -= model.storage_bytes[s]
            for p in model.storage_points[s]:
                extra[p] += model.storage_buffer[s]
    stored_homes = {home_index[n] for n in stored}
    for kind, i, j, cycles, pj, nbytes in model.clone_reads:
        if r[j] and (i in stored_homes if kind == "home" else sz[i]):
            energy += pj
            latency += cycles
            for p in model.clone_points.get(j, ()):
                extra[p] += nbytes
    alive_at: dict[int, list[int]] = {}
    for j, s in model.downstream:
        if r[j] and z[s] and model.intermediate_bytes[j]:
            alive_at.setdefault(model.first_backward[s], []).append(j)
    for p, js in alive_at.items():
        extra[p] += _largest_alive(model, js)
    load = list(model.base)
    for p, value in enumerate(extra):
        load[p] += value
    for k, (lo, hi) in enumerate(model.frontier_life):
        if y[k]:
            for p in range(lo, hi + 1):
                load[p] += model.frontier_bytes[k]
    copy_until: list[int] = [-1] * len(z)  # per storage: its copy (own or for its segment) from this point
    for s in range(len(z) - 1, -1, -1):
        m, lo, hi = model.storage_bytes[s], model.prod[s], model.last_backward[s]
        if not z[s] and not pz[s]:
            spans = [(lo, hi)]
        else:
            spans = [(lo, min(hi, model.last_forward[s]))]
            if pz[s]:
                spans.append((max(model.last_forward[s] + 1, model.first_backward[s] - 1), hi))
            elif z[s]:
                start = model.first_backward[s]
                if s + 1 < len(z) and z[s + 1] and copy_until[s + 1] >= 0:
                    start = min(start, copy_until[s + 1])
                copy_until[s] = start
                spans.append((max(model.last_forward[s] + 1, start), hi))
        for a, b in spans:
            for p in range(a, b + 1):
                load[p] += m
    return energy, latency, max(load, default=0.0)


def _starts(model: PoetModel, js: Sequence[int]) -> dict[int, list[int]]:
    """Per clone position k (a start of one of the intermediates js, by index into js), the
    indices of those alive at k; without spans, one position with all of them."""
    if not model.intermediate_span:
        return {0: list(range(len(js)))}
    spans = [model.intermediate_span[j] for j in js]
    return {k: [i for i, (lo, hi) in enumerate(spans) if lo <= k <= hi] for k in sorted({lo for lo, _ in spans})}


def _largest_alive(model: PoetModel, js: Sequence[int]) -> float:
    return max((sum(model.intermediate_bytes[js[i]] for i in alive) for alive in _starts(model, js).values()),
               default=0.0)


def _alive(model: PoetModel, s: int, p: int, z: Sequence[int], pz: Sequence[int]) -> int:
    if p < model.prod[s] or p > model.last_backward[s]:
        return 0
    if not z[s] and not pz[s]:
        return 1
    if p <= model.last_forward[s]:
        return 1
    if pz[s]:
        return int(p >= model.first_backward[s] - 1)
    if p >= model.first_backward[s]:
        return 1
    # a recompute copy made for a later dropped storage of the same segment read at or before p
    for t in range(s + 1, len(z)):
        if not z[t]:
            return 0
        if model.first_backward[t] <= p:
            return 1
    return 0


# ---------------------------------------------------------------------- the MILP


def solve(model: PoetModel, memory_budget: float, time_budget: float = math.inf, *, recompute: bool = True,
          page: bool = True, time_limit: float = 60.0) -> PoetSolution:
    """Minimum energy with peak memory <= memory_budget and latency <= time_budget."""
    import numpy as np
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    G, S, J, F = len(model.genes), len(model.storage_bytes), len(model.op_cycles), len(model.frontier_bytes)
    at_point: dict[int, list[tuple[int, int]]] = {}
    for j, s in model.downstream:
        if model.intermediate_bytes and model.intermediate_bytes[j]:
            at_point.setdefault(model.first_backward[s], []).append((j, s))
    page = page and model.can_page
    H = len(model.homes) if page else 0
    d0, q0, r0, y0 = 0, G, 2 * G, 2 * G + J
    t0, h0 = 2 * G + J + F, 3 * G + J + F  # store gene g; keep home c in storage
    s0 = h0 + H  # S_p: bytes of the homes kept in storage that would be alive at p (continuous)
    binaries = s0
    w_index: dict[tuple[int, int], int] = {}
    n = s0 + (model.points if H else 0)

    rows: list[tuple[dict[int, float], float, float]] = []

    def add(coeffs: dict[int, float], lo: float, hi: float) -> None:
        rows.append((coeffs, lo, hi))

    def col_z(s: int) -> int:
        return d0 + model.storage_gene[s]

    def col_pz(s: int) -> int:
        return q0 + model.storage_gene[s]

    for g in range(G):
        add({d0 + g: 1.0, q0 + g: 1.0, t0 + g: 1.0}, -math.inf, 1.0)
    if H:
        starts: dict[int, list[int]] = {}
        ends: dict[int, list[int]] = {}
        for c, members in enumerate(model.home_members):
            for lo, hi, nbytes in members:
                starts.setdefault(lo, []).append((c, nbytes))
                ends.setdefault(hi + 1, []).append((c, nbytes))
        for p in range(model.points):
            coeffs = {s0 + p: 1.0}
            if p:
                coeffs[s0 + p - 1] = -1.0
            for c, nbytes in starts.get(p, ()):
                coeffs[h0 + c] = coeffs.get(h0 + c, 0.0) - nbytes
            for c, nbytes in ends.get(p, ()):
                coeffs[h0 + c] = coeffs.get(h0 + c, 0.0) + nbytes
            add(coeffs, 0.0, 0.0)
    home_at: dict[int, list[tuple[int, float]]] = {}
    for c, pts in enumerate(model.home_points[:H]):
        for p, nbytes in pts.items():
            home_at.setdefault(p, []).append((c, nbytes))
    store_at: dict[int, list[int]] = {}
    for s_, pts in enumerate(model.storage_points):
        for p in pts:
            store_at.setdefault(p, []).append(s_)
    for j, s in model.view_needs:
        add({r0 + j: 1.0, col_z(s): -1.0}, 0.0, math.inf)
    for p_, c, s in model.chained:
        if p_ == c:
            continue
        if s < 0:
            add({r0 + p_: 1.0, r0 + c: -1.0}, 0.0, math.inf)
        else:
            add({r0 + p_: 1.0, r0 + c: -1.0, col_z(s): -1.0}, -1.0, math.inf)
    for k, j in model.frontier_users:
        add({y0 + k: 1.0, r0 + j: -1.0}, 0.0, math.inf)
    # recompute copies alive before their own first backward reader (segments), from the last
    # storage down: w_{s,p} >= z_s + z_{s+1} - 1 when s+1 is first read at or before p (its own
    # copy exists), w_{s,p} >= z_s + w_{s+1,p} - 1 otherwise (a copy made for a later one)
    for s in range(S - 2, -1, -1):
        t = s + 1
        lo = max(model.last_forward[s] + 1, 0)
        hi = min(model.first_backward[s] - 1, model.last_backward[s])
        for p in range(lo, hi + 1):
            if p >= model.first_backward[t]:
                source = {col_z(t): 1.0}
            elif (t, p) in w_index:
                source = {w_index[(t, p)]: 1.0}
            else:
                continue
            w_index[(s, p)] = n
            n += 1
            coeffs = {w_index[(s, p)]: 1.0}
            coeffs[col_z(s)] = coeffs.get(col_z(s), 0.0) - 1.0
            for col, value in source.items():
                coeffs[col] = coeffs.get(col, 0.0) - value
            add(coeffs, -1.0, math.inf)
    # intermediates: u >= r_j + z_s - 1 (continuous), alive at s's first backward reader
    u_index: dict[tuple[int, int], int] = {}
    for pairs in at_point.values():
        for j, s in pairs:
            if (j, s) not in u_index:
                u_index[(j, s)] = n
                n += 1
                add({u_index[(j, s)]: 1.0, r0 + j: -1.0, col_z(s): -1.0}, -1.0, math.inf)
    # intermediates at a point: M_p >= the sum of those alive at each clone position
    m_index: dict[int, int] = {}
    for p, pairs in at_point.items():
        m_index[p] = n
        n += 1
        for alive in _starts(model, [j for j, _ in pairs]).values():
            coeffs = {m_index[p]: 1.0}
            for i in alive:
                j, s = pairs[i]
                coeffs[u_index[(j, s)]] = coeffs.get(u_index[(j, s)], 0.0) - model.intermediate_bytes[j]
            add(coeffs, 0.0, math.inf)
    # a clone reading a tensor kept in storage: v >= x + r_j - 1 (continuous), paged in again
    v_index: list[int] = []
    clone_at: dict[int, list[tuple[int, float]]] = {}
    if page:
        for kind, i, j, _, _, nbytes in model.clone_reads:
            x_col = (h0 + i) if kind == "home" else (t0 + model.storage_gene[i])
            if kind == "home" and i >= H:
                continue
            v_index.append(n)
            add({n: 1.0, x_col: -1.0, r0 + j: -1.0}, -1.0, math.inf)
            for p in model.clone_points.get(j, ()):
                clone_at.setdefault(p, []).append((n, nbytes))
            n += 1
    # memory at every point
    for p in range(model.points):
        coeffs: dict[int, float] = {}
        constant = model.base[p]
        for col, nbytes in clone_at.get(p, ()):
            coeffs[col] = coeffs.get(col, 0.0) + nbytes
        if p in m_index:
            coeffs[m_index[p]] = 1.0
        for s in range(S):
            m = model.storage_bytes[s]
            if p < model.prod[s] or p > model.last_backward[s]:
                continue
            # kept: alive; dropped or paged: alive up to the last forward reader
            constant += m
            if p > model.last_forward[s]:
                coeffs[col_z(s)] = coeffs.get(col_z(s), 0.0) - m
                coeffs[col_pz(s)] = coeffs.get(col_pz(s), 0.0) - m
                if p >= model.first_backward[s] - 1:
                    coeffs[col_pz(s)] += m  # the paged-in copy
                if p >= model.first_backward[s]:
                    coeffs[col_z(s)] += m  # the recomputed copy
                elif (s, p) in w_index:
                    coeffs[w_index[(s, p)]] = m
        for k, (lo, hi) in enumerate(model.frontier_life):
            if lo <= p <= hi:
                coeffs[y0 + k] = coeffs.get(y0 + k, 0.0) + model.frontier_bytes[k]
        if model.storage_points:
            for s_ in range(S):
                if model.prod[s_] <= p <= model.last_backward[s_]:
                    col = t0 + model.storage_gene[s_]
                    coeffs[col] = coeffs.get(col, 0.0) - model.storage_bytes[s_]
            for s_ in store_at.get(p, ()):
                col = t0 + model.storage_gene[s_]
                coeffs[col] = coeffs.get(col, 0.0) + model.storage_buffer[s_]
        if H:
            coeffs[s0 + p] = -1.0
            for c, nbytes in home_at.get(p, ()):
                coeffs[h0 + c] = coeffs.get(h0 + c, 0.0) + nbytes
        add(coeffs, -math.inf, memory_budget - constant)
    if math.isfinite(time_budget):
        latency = {r0 + j: c for j, c in enumerate(model.op_cycles)}
        for s in range(S):
            latency[col_pz(s)] = latency.get(col_pz(s), 0.0) + model.page_cycles[s]
            if model.storage_cycles:
                col = t0 + model.storage_gene[s]
                latency[col] = latency.get(col, 0.0) + model.storage_cycles[s]
        for c in range(H):
            latency[h0 + c] = model.home_cycles[c]
        for col, pair in zip(v_index, [p_ for p_ in model.clone_reads if p_[0] != "home" or p_[1] < H]):
            latency[col] = pair[3]
        add(latency, -math.inf, time_budget - model.base_latency)

    cost = np.zeros(n)
    cost[r0:r0 + J] = model.op_energy
    for s in range(S):
        cost[col_pz(s)] += model.page_energy[s]
        if model.storage_energy:
            cost[t0 + model.storage_gene[s]] += model.storage_energy[s]
    cost[h0:h0 + H] = model.home_energy[:H]
    for col, pair in zip(v_index, [p_ for p_ in model.clone_reads if p_[0] != "home" or p_[1] < H]):
        cost[col] = pair[4]
    upper = np.ones(n)
    lower = np.zeros(n)
    if H:
        upper[s0:s0 + model.points] = math.inf  # S_p >= 0, defined by its equality rows
    for col in m_index.values():
        upper[col] = math.inf  # M_p: bytes
    for g in range(G):
        if not (recompute and model.can_recompute[g]):
            upper[d0 + g] = 0.0
        if not page:
            upper[q0 + g] = 0.0
        if not (page and model.can_store(g)):
            upper[t0 + g] = 0.0
    integrality = np.zeros(n)
    integrality[:binaries] = 1
    data, ri, ci = [], [], []
    lower_rows = np.empty(len(rows))
    upper_rows = np.empty(len(rows))
    for i, (coeffs, lo, hi) in enumerate(rows):
        for col, value in coeffs.items():
            if value:
                ri.append(i)
                ci.append(col)
                data.append(value)
        lower_rows[i], upper_rows[i] = lo, hi
    A = coo_matrix((data, (ri, ci)), shape=(len(rows), n)).tocsr()
    start = time.perf_counter()
    result = milp(cost, constraints=LinearConstraint(A, lower_rows, upper_rows), integrality=integrality,
                  bounds=Bounds(lower, upper),
                  options={"time_limit": time_limit, "mip_rel_gap": 1e-9, "presolve": True})
    seconds = time.perf_counter() - start
    if result.status == 0:
        status = "optimal"
    elif result.status == 1:
        status = "time limit (best feasible)" if result.x is not None else "time limit (none found)"
    elif result.status == 2:
        status = "infeasible"
    else:
        status = f"not solved: {result.message}"
    solution = PoetSolution(memory_budget, time_budget, status, seconds=seconds, variables=n, constraints=len(rows))
    if result.x is None:
        return solution
    x = result.x
    solution.decisions = {g: ("recompute" if x[d0 + i] > 0.5 else "page" if x[q0 + i] > 0.5 else
                              "store" if x[t0 + i] > 0.5 else "keep")
                          for i, g in enumerate(model.genes)}
    solution.stored = [model.homes[c] for c in range(H) if x[h0 + c] > 0.5]
    solution.energy_pj, solution.latency_cycles, solution.peak_bytes = predict(model, solution.decisions,
                                                                               solution.stored)
    return solution


# ---------------------------------------------------------------------- chains


def chain_model(n: int) -> PoetModel:
    """Checkmate's linear chain with unit costs (forward f_1..f_n, loss, backward b_n..b_1, b_i
    reading f_i's output; every value 1 byte, every op 1 cycle and 1 pJ), as our plans see it:
    genes f_1..f_n, all recomputable, no storage. The running gradient is 1 byte of base
    memory from the loss on."""
    points = 2 * n + 1
    prod = list(range(n))
    last_forward = [i + 1 for i in range(n)]  # f_{i+2} (or the loss) reads f_{i+1}'s output
    first_backward = [2 * n - i for i in range(n)]  # b_{i+1} at position 2n - i
    base = [0.0] * n + [1.0] * (n + 1)
    model = PoetModel(
        genes=[f"f{i + 1}" for i in range(n)], can_recompute=[True] * n, points=points, base=base,
        storage_gene=list(range(n)), storage_bytes=[1.0] * n, prod=prod, last_forward=last_forward,
        first_backward=first_backward, last_backward=list(first_backward), page_cycles=[0.0] * n,
        page_energy=[0.0] * n, op_cycles=[1.0] * n, op_energy=[1.0] * n, can_page=False,
        base_latency=float(points), base_energy=float(points), budgeted="memory")
    for i in range(n):
        model.view_needs.append((i, i))  # recomputing f_{i+1}'s output clones f_{i+1}
        if i > 0:
            model.chained.append((i - 1, i, i - 1))  # which needs f_i's output, cloned if dropped
    return model


def chain_optimum(n: int, budget: int) -> int | None:
    """The least recompute cost of the chain under `budget`, by an exact dynamic program over
    keep/drop in forward order, independent of the MILP (None: no plan fits). With k kept
    outputs, the backward pass peaks at each segment's first reader: the kept outputs before the
    segment, its whole recomputed run and the gradient; the forward pass at each op: the kept
    outputs so far, the new output, a dropped input, and at the loss the gradient."""
    best: int | None = None
    # state: (kept so far, length of the open dropped run, previous dropped) -> least drops
    states: dict[tuple[int, int, bool], int] = {(0, 0, False): 0}
    for i in range(1, n + 1):
        new: dict[tuple[int, int, bool], int] = {}
        for (kept, run, prev_dropped), drops in states.items():
            # forward at f_i: kept outputs before i, f_i's output, f_{i-1}'s if dropped
            if kept + 1 + int(prev_dropped) > budget:
                continue
            # keep f_i: closes the run before it (its backward segment peaks at kept + run + 1)
            if run == 0 or kept + run + 1 <= budget:
                key = (kept + 1, 0, False)
                if new.get(key, math.inf) > drops:
                    new[key] = drops
            key = (kept, run + 1, True)
            if new.get(key, math.inf) > drops + 1:
                new[key] = drops + 1
        states = new
    for (kept, run, last_dropped), drops in states.items():
        # the loss: every kept output, f_n's if dropped, the gradient; the last segment
        if kept + int(last_dropped) + 1 > budget:
            continue
        if run and kept + run + 1 > budget:
            continue
        best = drops if best is None else min(best, drops)
    return best


# ---------------------------------------------------------------------- a real step


def build_model(evaluator: Any, tile_bytes: int | None = None) -> PoetModel:
    """The model of the evaluator's step on its target (see the module docstring); `tile_bytes`:
    the tile of tensors kept in storage (default `monet_ir.schedule.paging.default_tile`)."""
    from xdsl.ir import BlockArgument, OpResult

    from dialects import nn
    from monet_ir import graph as ir_graph
    from monet_ir.analysis import checkpoint_policies as plans
    from monet_ir.analysis.ir_signatures import tensor_bytes_at
    from monet_ir.analysis.saved import storage_of
    from monet_ir.explore import milp

    fn = ir_graph.step_function(evaluator.module)
    problem = evaluator.checkpoint_problem
    ops = list(ir_graph.compute_ops(fn))
    position = {op: i for i, op in enumerate(ops)}
    points = len(ops)
    phase = [ir_graph.op_phase(op) for op in ops]
    bits = evaluator.bits

    def size(value) -> float:
        return float(tensor_bytes_at(value.type, bits))

    # every storage root: where it is defined and read
    readers: dict[Any, list[int]] = {}
    for i, op in enumerate(ops):
        for v in op.operands:
            readers.setdefault(storage_of(v), []).append(i)
    returned = set()
    last = fn.body.block.last_op
    if last is not None:
        returned = {storage_of(v) for v in last.operands}
    storages = list(problem.storages)
    s_index = {s: i for i, s in enumerate(storages)}
    genes: list[str] = []
    gene_of: dict[str, int] = {}
    storage_gene = []
    for s in storages:
        node = ir_graph.op_node(s.op)
        if node not in gene_of:
            gene_of[node] = len(genes)
            genes.append(node)
        storage_gene.append(gene_of[node])
    recomputable = {g.node for g in evaluator.checkpoint_genes}
    base = [0.0] * points
    roots = set(readers) | {storage_of(r) for op in ops for r in op.results}
    for arg in fn.body.block.args:
        roots.add(arg)
    spans: dict[Any, tuple[int, int, float]] = {}
    for root in roots:
        if root in s_index:
            continue
        if isinstance(root, BlockArgument) or (isinstance(root, OpResult) and isinstance(root.op, nn.ConstantOp)):
            lo, hi = 0, points - 1
        elif isinstance(root, OpResult) and root.op in position:
            lo = position[root.op]
            hi = points - 1 if root in returned else max(readers.get(root, [lo]))
        else:
            continue
        nbytes = size(root)
        spans[root] = (lo, hi, nbytes)
        for p in range(lo, hi + 1):
            base[p] += nbytes
    prod, last_forward, first_backward, last_backward = [], [], [], []
    for s in storages:
        at = position[s.op]
        uses = readers.get(s, [])
        forward = [u for u in uses if phase[u] == "forward"]
        backward = [u for u in uses if phase[u] in ("backward", "recompute")]
        prod.append(at)
        last_forward.append(max(forward, default=at))
        first_backward.append(min(backward, default=at))
        last_backward.append(max(backward, default=at))
    target = evaluator.target
    storage = target.storage
    main = target.dram
    freq = target.frequency_hz
    page_cycles, page_energy = [], []
    for s in storages:
        nbytes = size(s)
        if storage is None:
            page_cycles.append(math.inf)
            page_energy.append(math.inf)
            continue
        moved = storage.rounded(int(nbytes))
        out_s = storage.latency_s + moved / storage.write_bandwidth_bytes_per_s
        in_s = storage.latency_s + moved / storage.read_bandwidth_bytes_per_s
        page_cycles.append((out_s + in_s) * freq)
        energy = moved * 8 * (storage.write_energy_pj_per_bit + storage.read_energy_pj_per_bit)
        if main is not None:
            energy += nbytes * 8 * (main.read_energy_pj_per_bit + main.write_energy_pj_per_bit)
        page_energy.append(energy)
    cones = milp.build_model(evaluator)
    op_cycles, op_energy = [], []
    for op in cones.ops:
        cycles, energy = op_cost(evaluator, op)
        op_cycles.append(cycles)
        op_energy.append(energy)
    cone_storage = {i: s_index[s] for i, s in enumerate(cones.storages)}
    model = PoetModel(
        genes=genes, can_recompute=[g in recomputable for g in genes], points=points, base=base,
        storage_gene=storage_gene, storage_bytes=[size(s) for s in storages], prod=prod, last_forward=last_forward,
        first_backward=first_backward, last_backward=last_backward, page_cycles=page_cycles,
        page_energy=page_energy, op_cycles=op_cycles, op_energy=op_energy,
        view_needs=[(j, cone_storage[s]) for j, s in cones.view_needs],
        chained=[(p, c, cone_storage[s] if s >= 0 else -1) for p, c, s in cones.chained],
        frontier_bytes=[float(b) for b in cones.frontier],
        frontier_users=list(cones.frontier_users), can_page=storage is not None,
        budgeted=main.name if main is not None else "dram")
    # intermediates of cones and the dropped storages downstream of each recomputable op
    storage_set = set(storages)
    model.intermediate_bytes = [0.0 if any(storage_of(r) in storage_set or storage_of(r) is not r for r in op.results)
                                else sum(size(r) for r in op.results) for op in cones.ops]
    made_downstream = _downstream_storages(cones, cone_storage)
    for j in range(len(cones.ops)):
        if not model.intermediate_bytes[j]:
            continue
        found = made_downstream(j)
        model.downstream += [(j, s) for s in sorted(found)]
    readers_of: dict[int, list[int]] = {}
    for p_, c, s_ in cones.chained:
        if s_ < 0 and p_ != c:
            readers_of.setdefault(p_, []).append(c)
    is_view = [bool(op.results) and all(storage_of(r) is not r for r in op.results) for op in cones.ops]

    def last_reader(j: int) -> int:
        last, stack, seen = j, [j], {j}
        while stack:
            k = stack.pop()
            for c in readers_of.get(k, ()):
                last = max(last, c)
                if is_view[c] and c not in seen:  # a view's readers read j's storage
                    seen.add(c)
                    stack.append(c)
        return last

    model.intermediate_span = [(j, last_reader(j)) for j in range(len(cones.ops))]
    # a random value that becomes saved lives from the forward pass to the end of the backward pass
    backward_end = max((i for i in range(points) if phase[i] in ("backward", "recompute")), default=points - 1)
    frontier_roots = _frontier_roots(cones, evaluator)
    model.frontier_life = [(position.get(root.op, 0), backward_end) for root in frontier_roots]
    if storage is not None:
        home_of, transfer = _storage_homes(model, evaluator, fn, ops, phase, readers, spans, storages, size,
                                           tile_bytes)
        _clone_reads(model, cones, made_downstream, home_of, s_index, size, transfer)
    measured = measure(evaluator, {})
    model.base_latency = measured["latency_cycles"]
    model.base_energy = measured["energy_pj"]
    return model


def _storage_homes(model: PoetModel, evaluator: Any, fn: Any, ops: list[Any], phase: list[str],
                   readers: dict[Any, list[int]], spans: dict[Any, tuple[int, int, float]], storages: list[Any],
                   size: Callable[[Any], float],
                   tile_bytes: int | None = None) -> tuple[dict[Any, int], Callable[..., tuple[float, float]]]:
    """The tensors the model may keep in storage (a plan's `storage` list, see
    `monet_ir.schedule.paging`): every tensor of `spans` (in `base`) and every saved storage
    with a name of its own in the step, of at least one storage page. When kept in storage a
    tensor occupies a buffer (whole, or a tile) at each op that reads it, at its producer and
    the op after it (the page-out), and after each in-place update (the write-back); its
    transfers are priced as the scheduler prices them (pieces of a tile, one latency each; a
    loop nest reading two operands larger than a tile re-reads the larger per tile of the
    smaller, counted as if every such operand were stored)."""
    from collections import Counter

    from xdsl.ir import BlockArgument

    from monet_ir import graph as ir_graph
    from monet_ir.analysis.ir_signatures import signature_of
    from monet_ir.analysis.paging_plan import value_name
    from monet_ir.analysis.saved import storage_of
    from monet_ir.cost.signature import LoopNestSig
    from monet_ir.schedule.paging import default_tile, tile_passes

    target = evaluator.target
    storage, main, freq = target.storage, target.dram, target.frequency_hz
    tile = tile_bytes or default_tile(target)
    model.tile = tile
    arg_names = {arg: info.name for arg, info in zip(fn.body.block.args, ir_graph.arg_infos(fn)) if info.name}
    arg_roles = {arg: info.role for arg, info in zip(fn.body.block.args, ir_graph.arg_infos(fn))}
    counts = Counter(arg_names.values())
    for op in fn.body.block.ops:
        counts.update(value_name(r) for r in op.results)

    def name_of(root: Any) -> str | None:
        return arg_names.get(root) if isinstance(root, BlockArgument) else value_name(root)

    loop_nest: dict[int, bool] = {}

    def is_loop_nest(u: int) -> bool:
        known = loop_nest.get(u)
        if known is None:
            known = loop_nest[u] = isinstance(signature_of(ops[u], evaluator.bits), LoopNestSig)
        return known

    def transfer(nbytes: float, write: bool) -> tuple[float, float]:
        pieces = max(1, math.ceil(nbytes / tile))
        moved = storage.rounded(int(min(nbytes, tile))) * pieces if nbytes > tile else storage.rounded(int(nbytes))
        bandwidth = storage.write_bandwidth_bytes_per_s if write else storage.read_bandwidth_bytes_per_s
        seconds = pieces * storage.latency_s + moved / bandwidth
        energy = moved * 8 * (storage.write_energy_pj_per_bit if write else storage.read_energy_pj_per_bit)
        if main is not None:
            energy += nbytes * 8 * (main.read_energy_pj_per_bit if write else main.write_energy_pj_per_bit)
        return seconds * freq, energy

    def priced(root: Any, nbytes: float, produced_at: int | None, updated: bool) -> tuple[list[int], float, float]:
        uses = sorted(set(readers.get(root, ())))
        points = set(uses)
        cycles = energy = 0.0
        for u in uses:
            passes = 1
            if nbytes > tile and is_loop_nest(u):
                others = [size(v) for v in dict.fromkeys(storage_of(o) for o in ops[u].operands) if v is not root]
                passes = tile_passes(int(nbytes), [int(b) for b in others], tile)
            c, e = transfer(nbytes * passes, write=False)
            cycles, energy = cycles + c, energy + e
            if updated and phase[u] == "optimizer":  # the in-place update is written back
                points.add(u + 1)
                c, e = transfer(nbytes, write=True)
                cycles, energy = cycles + c, energy + e
        if produced_at is not None:
            points.update((produced_at, produced_at + 1))
            c, e = transfer(nbytes, write=True)
            cycles, energy = cycles + c, energy + e
        return sorted(p for p in points if 0 <= p < model.points), cycles, energy

    home_of: dict[Any, int] = {}
    minimum = max(storage.page_bytes, 1)
    saved_names = {name_of(s) for s in storages}
    groups: dict[str, list[tuple[int, int, float, Any]]] = {}
    for root, (lo, hi, nbytes) in spans.items():
        name = name_of(root)
        if name and name not in saved_names:
            groups.setdefault(name, []).append((lo, hi, nbytes, root))
    for name, members in sorted(groups.items(), key=lambda kv: (min(m[0] for m in kv[1]), kv[0])):
        # every tensor of that name (the scheduler keeps them all in storage: no saved storage
        # has it), not too small
        if max(m[2] for m in members) < minimum:
            continue
        points: dict[int, float] = {}
        cycles = energy = 0.0
        for lo, hi, nbytes, root in members:
            produced = None if isinstance(root, BlockArgument) else lo
            updated = arg_roles.get(root) in ("param", "state")
            at, c, e = priced(root, nbytes, produced, updated)
            for p in at:
                points[p] = points.get(p, 0.0) + float(min(nbytes, tile))
            cycles, energy = cycles + c, energy + e
        for member in members:
            home_of[member[3]] = len(model.homes)
        model.homes.append(name)
        model.home_members.append([(lo, hi, nbytes) for lo, hi, nbytes, _ in members])
        model.home_points.append(points)
        model.home_cycles.append(cycles)
        model.home_energy.append(energy)
    for s in storages:
        nbytes = size(s)
        name = name_of(s)
        name = name if name and counts[name] == 1 else None
        points, cycles, energy = priced(s, nbytes, model.prod[len(model.storage_name)], False)
        model.storage_name.append(name)
        model.storage_points.append(points)
        model.storage_buffer.append(float(min(nbytes, tile)))
        model.storage_cycles.append(cycles)
        model.storage_energy.append(energy)
    return home_of, transfer


def _clone_reads(model: PoetModel, cones: Any, made_downstream: Callable[[int], set[int]], home_of: dict[Any, int],
                 s_index: dict[Any, int], size: Callable[[Any], float],
                 transfer: Callable[..., tuple[float, float]]) -> None:
    """The reads of tensors that may be kept in storage by recomputable ops (see
    `PoetModel.clone_reads`); a clone runs before the first backward reader of a dropped storage
    downstream of it: its buffer is counted at that reader and the op before it, for each."""
    from monet_ir.analysis.saved import storage_of

    for j, op in enumerate(cones.ops):
        reads = []
        for v in dict.fromkeys(storage_of(v) for v in op.operands):
            if v in home_of:
                reads.append(("home", home_of[v], v))
            elif v in s_index and model.storage_name[s_index[v]]:
                reads.append(("storage", s_index[v], v))
        if not reads:
            continue
        found = made_downstream(j)
        points = sorted({p for s in found for p in (model.first_backward[s] - 1, model.first_backward[s])
                         if 0 <= p < model.points})
        model.clone_points[j] = points
        for kind, i, v in reads:
            nbytes = size(v)
            cycles, energy = transfer(nbytes, write=False)
            model.clone_reads.append((kind, i, j, cycles, energy, float(min(nbytes, model.tile))))


def _frontier_roots(cones: Any, evaluator: Any) -> list[Any]:
    """The random roots of the cone model's frontier, in its order (as `milp.build_model` numbers them)."""
    from xdsl.ir import BlockArgument, OpResult

    from dialects import nn
    from monet_ir.analysis import checkpoint_policies as plans
    from monet_ir.analysis.saved import storage_of

    problem = evaluator.checkpoint_problem
    s_index = set(problem.storages)
    found: dict[Any, int] = {}
    for op in cones.ops:
        for v in op.operands:
            if isinstance(v, BlockArgument) or not isinstance(v, OpResult) or v.op not in problem.position:
                continue
            root = storage_of(v)
            if not isinstance(root, OpResult) or root.op not in problem.position or isinstance(root.op, nn.ConstantOp):
                continue
            if not plans.is_recomputable(root.op) and root not in s_index:
                found.setdefault(root, len(found))
    return sorted(found, key=found.get)


def op_cost(evaluator: Any, op: Any) -> tuple[float, float]:
    """(reference cycles, energy pJ) of an op on the fastest core able to run it."""
    from monet_ir.analysis.ir_signatures import signature_of
    from monet_ir.cost import can_run, cost_of

    sig = signature_of(op, evaluator.bits)
    if sig is None:
        return 0.0, 0.0
    table = evaluator.prices.table(sig)
    best = None
    for core in evaluator.target.cores:
        if core.id not in table:
            table[core.id] = cost_of(sig, core) if can_run(sig, core) else None
        cost = table[core.id]
        if cost is not None:
            cycles = cost.latency_cycles * evaluator.target.frequency_hz / core.clock_hz
            if best is None or (cycles, cost.energy_pj) < best:
                best = (cycles, cost.energy_pj)
    return best if best is not None else (math.inf, math.inf)


# ---------------------------------------------------------------------- measured by the real scheduler


def measure(evaluator: Any, decisions: Mapping[str, str], stored: Sequence[str] = (),
            tile_bytes: int | None = None) -> dict[str, float]:
    """Latency, energy and main-memory peak of the step with this plan (genes stored: their
    storages' names in the plan's storage list, with the homes `stored`), through the real
    `activation-checkpoint{policy="plan=..."}` pass and scheduler (as `monet report`). The peak
    is measured even above main memory's capacity (the step would not run there)."""
    import os
    import tempfile

    from monet_ir import graph as ir_graph
    from monet_ir.analysis.paging_plan import write_plan
    from monet_ir.emit.step_report import schedule_report
    from monet_ir.schedule.scheduler import Scheduler
    from monet_ir.schedule.taskgraph import extract
    from passes.activation_checkpoint import ActivationCheckpointPass

    from dataclasses import replace

    module = evaluator.module.clone()
    plan = {g: d for g, d in decisions.items() if d in ("recompute", "page")}
    if plan or stored:
        handle, path = tempfile.mkstemp(suffix=".json")
        os.close(handle)
        try:
            write_plan(path, plan, storage=stored, tile_bytes=tile_bytes)
            ActivationCheckpointPass(policy=f"plan={path}").checkpoint(ir_graph.step_function(module), mark=False)
        finally:
            os.unlink(path)
    g = extract(ir_graph.step_function(module), bits=evaluator.bits)
    can_run, cost_of = evaluator.prices.functions(g.tasks)
    target = evaluator.target
    if target.dram is not None:
        target = replace(target, dram=replace(target.dram, capacity_bytes=math.inf))
    schedule = Scheduler(g, target, None, cost_of=cost_of, can_run=can_run).run()
    report = schedule_report(schedule, layers=False)
    budgeted = report["memory"]["budgeted"]
    return {"latency_cycles": float(report["latency_cycles"]), "energy_pj": float(report["energy_pj"]),
            "peak_bytes": float(report["memory"]["peak_bytes"][budgeted]),
            "paged_bytes": float(report["memory"]["paged_bytes"])}


def solve_measured(evaluator: Any, model: PoetModel, memory_budget: float, time_budget: float = math.inf, *,
                   recompute: bool = True, page: bool = True, time_limit: float = 60.0,
                   rounds: int = 4) -> PoetSolution:
    """`solve`, then the real scheduler's figures for its answer; when the schedule misses a
    budget the model's estimate was short, so the budget is tightened by the excess and the
    MILP solved again (up to `rounds` times). `measured` holds the last schedule's figures."""
    mem, lat = memory_budget, time_budget
    missed: PoetSolution | None = None
    for attempt in range(1, rounds + 1):
        solution = solve(model, mem, lat, recompute=recompute, page=page, time_limit=time_limit)
        solution.memory_budget, solution.time_budget, solution.rounds = memory_budget, time_budget, attempt
        if not solution.decisions:
            if missed is None:
                return solution
            missed.status += f"; the schedule misses a budget and the model tightened {attempt - 1} time(s) has no answer"
            return missed
        solution.measured = measure(evaluator, solution.decisions,
                                    model.stored_names(solution.decisions, solution.stored), model.tile or None)
        over_mem = solution.measured["peak_bytes"] - memory_budget
        over_lat = solution.measured["latency_cycles"] - time_budget
        if over_mem <= 0 and over_lat <= 0:
            return solution
        missed = solution
        mem -= max(0.0, over_mem)
        lat -= max(0.0, over_lat)
    assert missed is not None
    missed.status += f"; the schedule still misses a budget after {rounds} rounds"
    return missed


def _downstream_storages(cones: Any, cone_storage: dict[int, int]) -> Callable[[int], set[int]]:
    """For a cone op j, the dropped storages needed by j or by any op that reads it, directly or
    through others (computed once per op: the memory rows and the clone reads both ask)."""
    users: dict[int, list[int]] = {}
    for p_, c, _ in cones.chained:
        users.setdefault(p_, []).append(c)
    makes: dict[int, list[int]] = {}
    for j, s in cones.view_needs:
        makes.setdefault(j, []).append(cone_storage[s])
    memo: dict[int, set[int]] = {}

    def made_downstream(j: int) -> set[int]:
        if j not in memo:
            seen, stack, found = {j}, [j], set()
            while stack:
                k = stack.pop()
                found.update(makes.get(k, ()))
                for c in users.get(k, ()):
                    if c not in seen:
                        seen.add(c)
                        stack.append(c)
            memo[j] = found
        return memo[j]

    return made_downstream
