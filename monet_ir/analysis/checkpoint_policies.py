"""Which saved activations a checkpointing policy recomputes: the planning half of
`activation-checkpoint` (the pass in `passes/activation_checkpoint.py` does the rewriting).

Vocabulary (a step function after `autodiff`, see `monet_ir.analysis.saved`):

- A *storage* is the buffer of a saved activation: a forward op result that a backward op
  reads, directly or through `nn.reshape` views. Plans are sets of storages to *drop*: such a
  storage is no longer kept for the backward pass, its backward readers get a recomputed copy.
- A storage is a *candidate* (recomputable) when the op producing it is a pure `nn` op of the
  forward phase, other than the loss op. Ops without the `Pure` trait (`nn.dropout`: its mask and
  result are random) are never recomputed: their results are always stored. The loss op's
  results (a cross-entropy's log-probabilities) are stored too: the backward pass starts by
  reading them, right after they are computed, so a recomputed copy would cost FLOPs and save
  no memory. Inputs and parameters are not activations.
- A value is *kept* (readable by the backward pass as is) when it is a function argument, a
  constant, the result of a non-recomputable op, a view of one of these, or a view of a saved
  storage that is not dropped. Recomputing a value clones its producer and, recursively, the
  producers of its operands that are not kept: its *cone*. The kept values a cone reads are its
  *frontier*; they are saved after the rewrite (a dropout result read by a cone becomes saved).
- A *segment* is the run of forward ops after a kept storage, up to the next one (in forward
  order); `segments(dropped)` numbers the dropped storages by segment. The rewrite clones each op
  at most once per segment and shares the clones within it.
- A *cut* is a candidate that separates the forward graph (`cuts()`): right after it is computed,
  no other recomputable forward value computed so far is read later in the forward pass, so the
  cone of anything after it stops at it. Block outputs of a ResNet, the residual stream of a
  transformer between sub-blocks. Inside a residual block the skip input is alive, so a
  checkpoint there does not stop cones reaching back across it.

Plans (each returns the frozenset of dropped storages):

- `plan_recompute_all`: every candidate.
- `plan_sqrt`: Chen et al.'s sqrt(n) segments: of the n candidates in forward order, keep one
  about every k = ceil(sqrt(n)): the first cut at least k candidates after the previous
  checkpoint (any candidate when the graph has no cut), and drop the others. Restricting
  checkpoints to cuts is Checkmate's articulation-point variant: no cone then crosses a
  checkpoint, so each forward op is recomputed at most once (one extra forward pass at most).
- `plan_memory_budget(budget)`: greedy: drop the candidate that frees the most saved bytes per
  FLOP of its cone (given what is already dropped; FLOPs of
  `monet_ir.analysis.accounting.op_flops`), until the saved-activation bytes after the rewrite
  are at most `budget`. Raises `PlanError` when even dropping every candidate does not meet it.
  The bytes freed are exact; the cone FLOPs are an estimate (a cone reaching into another
  segment is cloned again there).
- `plan_named(names)`: the storages of the results of the forward ops whose `node` is named;
  `PlanError` for an unknown node, one with no saved result, or a non-candidate.

`saved_activation_bytes(dropped)` is `saved_bytes_by_kind(fn)["activation"]` after the rewrite
(the rewrite changes which values are saved, not their sizes).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Set
from dataclasses import dataclass
from functools import cached_property

from xdsl.dialects import func
from xdsl.ir import Operation, OpResult, SSAValue
from xdsl.traits import Pure

from dialects import nn
from dialects.base import MonetOp
from monet_ir import graph
from monet_ir.analysis.accounting import op_flops
from monet_ir.analysis.saved import saved_activations, storage_of
from monet_ir.types import tensor_bytes


class PlanError(ValueError):
    """A policy cannot be applied to this function (unknown name, budget out of reach, ...)."""


def is_recomputable(op: Operation) -> bool:
    """A forward op whose results can be computed again with the same values: a pure MONET op
    (not `nn.dropout`, whose mask is random) that is not a constant (constants are program data)."""
    return (
        isinstance(op, MonetOp)
        and graph.op_phase(op) == "forward"
        and op.has_trait(Pure)
        and not isinstance(op, nn.ConstantOp)
        and not op.regions
    )


def loss_producer(fn: func.FuncOp) -> Operation | None:
    """The op computing the `monet.loss` result of the step, if any."""
    ret = fn.body.block.last_op
    if not isinstance(ret, func.ReturnOp) or fn.res_attrs is None:
        return None
    for value, attrs in zip(ret.operands, fn.res_attrs.data, strict=False):
        if "monet.loss" in attrs.data and isinstance(value, OpResult):
            return value.op
    return None


class CheckpointProblem:
    """The saved activations of a step function and what recomputing each would take."""

    def __init__(self, fn: func.FuncOp):
        self.fn = fn
        forward = [op for op in graph.compute_ops(fn) if graph.op_phase(op) == "forward"]
        self.position = {op: i for i, op in enumerate(forward)}  # forward order, 0..n-1
        by_storage: dict[SSAValue, list[SSAValue]] = {}
        for sv in saved_activations(fn):
            if sv.kind == "activation":
                by_storage.setdefault(sv.storage, []).append(sv.value)
        # storages in forward order (producer position, then result index)
        self.storages: list[OpResult] = sorted(by_storage, key=self.order_key)  # type: ignore[arg-type]
        self.saved_views = by_storage
        self.loss_op = loss_producer(fn)
        self.candidates = [s for s in self.storages if is_recomputable(s.op) and s.op is not self.loss_op]
        # per forward value: the storage it needs recomputed if dropped, None if always kept
        # (views of arguments, constants and random results are read where they are)
        self.root: dict[SSAValue, SSAValue | None] = {}
        for op in self.position:
            for value in op.results:
                root = storage_of(value)
                recomputable = isinstance(root, OpResult) and is_recomputable(root.op)
                self.root[value] = root if recomputable else None
        self.flops = {op: sum(op_flops(op).values()) for op in self.position}

    @cached_property
    def backward_ops(self) -> list[Operation]:
        """The backward-phase ops of the function, in program order."""
        return [op for op in self.fn.body.block.ops if graph.op_phase(op) == "backward"]

    @cached_property
    def backward_reads(self) -> list[tuple[Operation, tuple[tuple[int, SSAValue, SSAValue, int, bool], ...]]]:
        """The backward ops (in program order) that read forward values a plan may drop, each
        with those reads: (operand index, value, the storage it needs recomputed if dropped,
        that storage's id, whether it is saved). The other operands are always kept."""
        root, saved = self.root, self.saved_views
        reads = []
        for op in self.backward_ops:
            dropable = tuple((i, v, root[v], id(root[v]), root[v] in saved)
                             for i, v in enumerate(op.operands) if root.get(v) is not None)
            if dropable:
                reads.append((op, dropable))
        return reads

    def segment_ids(self, dropped_ids: Set[int]) -> dict[int, int]:
        """`segments`, by the ids of the storages (`dropped_ids`: the ids of the dropped ones)."""
        order = self._storage_order
        kept_positions = [position for sid, position in order if sid not in dropped_ids]  # (in forward order)
        return {sid: bisect_left(kept_positions, position) for sid, position in order if sid in dropped_ids}

    @cached_property
    def _storage_order(self) -> list[tuple[int, int]]:
        """(id, forward position of its op) of each storage, sorted by position."""
        return sorted(((id(s), self.position[s.op]) for s in self.storages), key=lambda e: e[1])

    def operand_roots(self, op: Operation) -> tuple[tuple[SSAValue, SSAValue | None, Operation | None, int, bool], ...]:
        """Each operand of a forward op with its `root` (None: always kept) and, when it has
        one, its producing op, the root's id and whether the root is saved; read once per op."""
        known = self._operand_roots.get(id(op))
        if known is None or known[0] is not op:
            root, saved = self.root, self.saved_views
            known = self._operand_roots[id(op)] = (op, tuple(
                (o, r, o.op, id(r), r in saved) if r is not None else (o, None, None, 0, False)  # type: ignore[attr-defined]
                for o, r in ((o, root.get(o)) for o in op.operands)))
        return known[1]

    @cached_property
    def _operand_roots(self) -> dict[int, tuple[Operation, tuple]]:
        return {}

    @cached_property
    def _named(self) -> dict[str, frozenset[SSAValue] | str]:
        """`plan_named`'s answer per node name: its storages, or the `PlanError` message."""
        return {}

    @cached_property
    def forward_by_node(self) -> dict[str, list[Operation]]:
        """Forward ops by their `node`, in forward order."""
        by_node: dict[str, list[Operation]] = {}
        for op in self.position:
            by_node.setdefault(graph.op_node(op), []).append(op)
        return by_node

    @cached_property
    def saved_values(self) -> set[SSAValue]:
        """Every saved activation and its storage."""
        return {v for views in self.saved_views.values() for v in views} | set(self.saved_views)

    def order_key(self, value: OpResult) -> tuple[int, int]:
        return self.position[value.op], value.index

    # ------------------------------------------------------------------ cones

    def kept(self, value: SSAValue, dropped: frozenset[SSAValue]) -> bool:
        """Whether the backward pass can read `value` as is (see the module docstring)."""
        root = self.root.get(value)
        if root is None:
            return True  # arguments, values of the backward pass, always-kept forward values
        return root in self.saved_views and root not in dropped

    def cone(
        self, values: Iterable[SSAValue], dropped: frozenset[SSAValue], covered: Set[Operation] = frozenset()
    ) -> tuple[set[Operation], set[SSAValue]]:
        """The ops recomputing `values` from kept values, and the kept values they read; ops in
        `covered` (already recomputed) are not walked again."""
        ops: set[Operation] = set()
        frontier: set[SSAValue] = set()
        stack = list(values)
        while stack:
            value = stack.pop()
            if self.kept(value, dropped):
                frontier.add(value)
                continue
            assert isinstance(value, OpResult)
            if value.op in ops or value.op in covered:
                continue
            ops.add(value.op)
            stack.extend(value.op.operands)
        return ops, frontier

    def cone_flops(self, storage: SSAValue, dropped: frozenset[SSAValue]) -> int:
        ops, _ = self.cone(self.saved_views[storage], dropped | {storage})
        return sum(self.flops[op] for op in ops)

    def saved_activation_bytes(self, dropped: frozenset[SSAValue]) -> int:
        """Saved-activation bytes after recomputing the `dropped` storages."""
        stored = {s for s in self.storages if s not in dropped}
        needed = [v for s in self.storages if s in dropped for v in self.saved_views[s]]
        _, frontier = self.cone(needed, dropped)
        stored |= {root for root in map(storage_of, frontier) if self.is_activation(root)}
        return sum(tensor_bytes(s.type) for s in stored)

    def is_activation(self, storage: SSAValue) -> bool:
        """Whether a storage is computed by the forward pass (not an argument or a constant)."""
        return (
            isinstance(storage, OpResult) and storage.op in self.position and not isinstance(storage.op, nn.ConstantOp)
        )

    def cuts(self) -> set[SSAValue]:
        """The candidates that separate the forward graph: once such a value is computed, no
        other recomputable forward value computed so far is read by a later forward op (the
        articulation points of Chen's and Checkmate's sqrt(n)). A segment that starts at a
        cut is recomputed from it alone; one that starts elsewhere also reaches back across
        the values alive around it (a residual connection's skip input, for example)."""
        live = [0] * (len(self.position) + 1)  # recomputable values crossing each position
        crossing: dict[SSAValue, int] = {}  # value -> last forward position reading it
        for op, q in self.position.items():
            for v in op.operands:
                if isinstance(v, OpResult) and v.op in self.position and is_recomputable(v.op):
                    crossing[v] = max(crossing.get(v, -1), q)
        for v, last in crossing.items():
            live[self.position[v.op]] += 1
            live[last] -= 1
        alive, running = [], 0
        for q in range(len(self.position)):
            running += live[q]
            alive.append(running)  # values produced at <= q and read after q
        return {s for s in self.candidates if alive[self.position[s.op]] == (1 if s in crossing else 0)}

    # ------------------------------------------------------------------ segments

    def segments(self, dropped: frozenset[SSAValue]) -> dict[SSAValue, int]:
        """The segment of each dropped storage: how many kept storages precede its producer."""
        kept_positions = sorted(self.position[s.op] for s in self.storages if s not in dropped)
        return {s: bisect_left(kept_positions, self.position[s.op]) for s in self.storages if s in dropped}


# ---------------------------------------------------------------------- plans


def plan_recompute_all(problem: CheckpointProblem) -> frozenset[SSAValue]:
    return frozenset(problem.candidates)


def plan_sqrt(problem: CheckpointProblem) -> frozenset[SSAValue]:
    n = len(problem.candidates)
    if n == 0:
        return frozenset()
    k = math.ceil(math.sqrt(n))
    cuts = problem.cuts()
    # without cuts (no value separates the forward graph) any candidate can be a checkpoint
    eligible = cuts if cuts else set(problem.candidates)
    kept, last = set(), -1
    for i, storage in enumerate(problem.candidates):
        if storage in eligible and i - last >= k:
            kept.add(storage)
            last = i
    return frozenset(s for s in problem.candidates if s not in kept)


def plan_memory_budget(problem: CheckpointProblem, budget: int) -> frozenset[SSAValue]:
    greedy = _GreedyDrop(problem)
    if greedy.saved <= budget:
        return greedy.dropped
    floor = problem.saved_activation_bytes(frozenset(problem.candidates))
    if floor > budget:
        raise PlanError(
            f"the memory budget of {budget} bytes cannot be met: recomputing every recomputable activation "
            f"still saves {floor} bytes (the loss op's results and those of random ops, like nn.dropout, "
            "are always stored)"
        )
    remaining = list(problem.candidates)
    while greedy.saved > budget:
        options = [(greedy.option(s), s) for s in remaining]
        option, storage = max(options, key=lambda o: (o[0].score, -problem.order_key(o[1])[0]))
        greedy.drop(storage, option)
        remaining.remove(storage)
    return greedy.dropped


@dataclass
class _Option:
    """What dropping one more storage would add: cone ops, frontier, saved bytes after."""

    ops: set[Operation]
    frontier: set[SSAValue]
    removed: set[SSAValue]
    saved: int
    score: float


class _GreedyDrop:
    """The cone of a growing dropped set, extended one storage at a time (a full cone per
    option would make the greedy cubic in the number of candidates)."""

    def __init__(self, problem: CheckpointProblem):
        self.problem = problem
        self.dropped: frozenset[SSAValue] = frozenset()
        self.ops: set[Operation] = set()
        self.frontier: set[SSAValue] = set()
        self.stored: set[SSAValue] = set(problem.storages)
        self.saved = sum(tensor_bytes(s.type) for s in self.stored)

    def option(self, storage: SSAValue) -> _Option:
        problem = self.problem
        removed = {v for v in self.frontier if problem.root.get(v) is storage}
        ops, frontier = problem.cone(removed | set(problem.saved_views[storage]), self.dropped | {storage}, self.ops)
        saved = self.saved - tensor_bytes(storage.type)
        for root in {storage_of(v) for v in frontier} - self.stored - {storage}:
            if problem.is_activation(root):
                saved += tensor_bytes(root.type)
        # the cost is the storage's whole cone: ops another segment recomputes are cloned again
        freed, flops = self.saved - saved, problem.cone_flops(storage, self.dropped)
        # most bytes freed per recompute FLOP first; dropping that frees nothing comes last
        score = (float("inf") if flops == 0 else freed / flops) if freed > 0 else freed - 1.0
        return _Option(ops, frontier, removed, saved, score)

    def drop(self, storage: SSAValue, option: _Option) -> None:
        self.dropped = self.dropped | {storage}
        self.ops |= option.ops
        self.frontier = (self.frontier - option.removed) | option.frontier
        self.stored.discard(storage)
        self.stored |= {r for r in map(storage_of, option.frontier) if self.problem.is_activation(r)}
        self.saved = option.saved


def plan_named(problem: CheckpointProblem, names: Iterable[str]) -> frozenset[SSAValue]:
    dropped: set[SSAValue] = set()
    known = problem._named
    for name in names:
        storages = known.get(name)
        if storages is None:
            try:
                storages = _named_storages(problem, name)
            except PlanError as e:
                storages = str(e)
            known[name] = storages
        if isinstance(storages, str):
            raise PlanError(storages)
        dropped |= storages
    return frozenset(dropped)


def _named_storages(problem: CheckpointProblem, name: str) -> frozenset[SSAValue]:
    """The storages `plan_named` drops for one node name (a `PlanError` if it cannot)."""
    saved, by_node = problem.saved_values, problem.forward_by_node
    ops = by_node.get(name, [])
    if not ops:
        raise PlanError(f"no forward op has node '{name}'")
    storages = {storage_of(r) for op in ops for r in op.results if r in saved}
    if not storages:
        raise PlanError(f"no result of node '{name}' is saved for the backward pass: there is nothing to recompute")
    for s in sorted(storages, key=problem.order_key):
        if not is_recomputable(s.op):
            raise PlanError(
                f"node '{name}' ({s.op.name}) has random results: they are always stored, not recomputed"
            )
        if s.op is problem.loss_op:
            raise PlanError(
                f"node '{name}' computes the loss: the backward pass starts by reading its results, "
                "so they are stored (a recomputed copy would save no memory)"
            )
    return frozenset(storages)


def describe(problem: CheckpointProblem, dropped: frozenset[SSAValue]) -> list[str]:
    """The nodes of the dropped storages, in forward order (for messages and reports)."""
    return [graph.op_node(s.op) for s in problem.storages if s in dropped]

