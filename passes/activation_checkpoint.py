"""`activation-checkpoint`: recompute saved activations in the backward pass instead of storing
them, or page them out to the target's storage and back.

    activation-checkpoint{policy=store-all|recompute-all|sqrt|memory-budget|list|plan budget=BYTES recompute=NODE,...}

Options:
- `policy` (default `store-all`): which saved activations to recompute.
  - `store-all`: keep every saved activation; no op changes (only the `monet.saved` marks are
    refreshed).
  - `recompute-all`: recompute every recomputable saved activation. Nothing recomputable is
    kept, so the whole forward pass is one segment, recomputed once from the inputs and
    parameters when the backward pass first needs it: FLOPs of about one more forward pass,
    saved activations down to the loss op's and random ops' results, but every recomputed value
    then lives from the start of the backward pass to its last backward use, as the stored one
    did, so this policy does not lower the activation high-water mark.
  - `sqrt`: Chen et al.'s sqrt(n) segments: of the n recomputable saved activations in forward
    order, keep about one every ceil(sqrt(n)) as a checkpoint, at values that separate the forward
    graph (ResNet block outputs, a transformer's residual stream), and recompute the others
    from the nearest kept values: at most one more forward pass.
  - `memory-budget`: recompute, greedily by saved bytes per recompute FLOP, until the
    saved-activation bytes (`saved_bytes_by_kind(fn)["activation"]`) are at most `budget`.
    Fails when even `recompute-all` saves more than the budget.
  - `list`: recompute exactly the saved results of the forward nodes named by `recompute`.
  - `plan=FILE.json`: per forward node, `keep`, `recompute` or `page` its saved results, as a
    plan file says (`monet_ir.analysis.paging_plan`; `monet explore` writes one as `plan.json`):
    `{"activations": {"/conv1/Conv": "page", "/relu/Relu": "recompute"}}`, unnamed nodes kept.
    Recomputed nodes are rewritten as with `list`; paged ones are marked on their producing op
    (`monet.page = array<i64: result indices>`), values unchanged: the scheduler writes each
    paged storage to the target's storage level after its last forward use and reads it back
    before its first backward use (`monet_ir.schedule.paging`). The plan's `storage` list
    (tensors whose home is the storage level: parameters, optimizer state, gradients, any
    value by name) and `tile_bytes` are recorded on the step function (`monet.storage`,
    `monet.storage_tile`) for the scheduler, which pages them in and out around each use.
    A bad file, an unknown node or tensor, a node without saved results, or recompute of a
    non-recomputable node is an error naming the file and the node.
  The value can also be written into the policy, quoted, since xDSL splits option values at
  commas and does not lex `=`: `policy="memory-budget=4000000"`, `policy="list=/fc1/Gemm,/Relu"`
  (names separated by commas or spaces). `ActivationCheckpointPass(policy=TEXT)` takes the same
  text, so a command line can pass a user's `--checkpoint TEXT` as is; `parse_policy(TEXT)`
  checks it (ValueError with a one-line message).
- `budget`: the byte budget of `policy=memory-budget`: an integer; in the quoted policy form an
  integer with an optional unit (`4MB`, `4MiB`, `512KiB`, ...).
- `recompute`: the ONNX node names of `policy=list`, quoted (node names contain `/` and `.`):
  `recompute="/layer1/layer1.0/relu/Relu","/layer1/layer1.0/relu_1/Relu"`.

Spellings on the command line:

    -p 'activation-checkpoint{policy=sqrt}'
    -p 'activation-checkpoint{policy=memory-budget budget=4000000}'
    -p 'activation-checkpoint{policy="memory-budget=4MB"}'
    -p 'activation-checkpoint{policy=list recompute="/fc1/Gemm","/Relu"}'
    -p 'activation-checkpoint{policy="list=/fc1/Gemm /Relu"}'

What is recomputed (see `monet_ir.analysis.checkpoint_policies`): values computed by pure `nn`
ops of the forward phase. Inputs and parameters are never activations. The mask and result of
`nn.dropout` (random) are always stored (or paged, with a plan), and become saved if a
recomputation reads them. The loss op's results are always stored (the backward pass reads them
first). Naming one of these with `list` is an error.

Rewriting: for each saved activation chosen for recomputation, every backward op reading it
(directly or through an `nn.reshape` view) reads a recomputed copy instead. The copy is made by
clones of the forward ops computing it from the nearest kept values (arguments, constants,
random results, kept saved activations), inserted right before the first backward op that
needs it. Clones are shared within a segment (the forward ops between two kept saved
activations): each op is cloned at most once for the recomputed values of one segment, and a
later backward op of the segment reuses the clone. A clone has the forward op's properties and
`node`, `phase = "recompute"`, and its result's SSA name is the original's with `_rc` appended.
Forward ops and their forward uses are not changed, so an original value now dies after its last
forward use; optimizer ops are not touched. The clones compute the same ops on the same values
as the forward pass, so every result is bit-identical to the stored one.

Idempotence: `store-all` changes no op, whatever it is run on (it only refreshes the marks), so
running it again is a no-op. Any other policy on a function that already has recompute ops is an
error: checkpointing is decided once, on the step `autodiff` produced (before or after
`insert-optimizer`). After the pass, the `monet.saved` marks are current
(`monet_ir.analysis.saved.mark_saved`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import partial
from collections.abc import Set
from typing import NamedTuple

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from monet_ir import graph
from monet_ir.analysis import checkpoint_policies as plans
from monet_ir.analysis.paging_plan import PAGE_ATTR, mark_paged, mark_storage, plan_paged, read_plan_file
from monet_ir.analysis.saved import SAVED_ATTR, mark_saved, storage_of

POLICIES = ("store-all", "recompute-all", "sqrt", "memory-budget", "list", "plan")
POLICY_HELP = "store-all, recompute-all, sqrt, memory-budget=BYTES, list=NODE,NODE,... or plan=FILE.json"
RECOMPUTE_SUFFIX = "_rc"

@dataclass(frozen=True)
class Policy:
    """A parsed policy: its kind, the byte budget (memory-budget) and node names (list)."""

    kind: str
    budget: int | None = None
    names: tuple[str, ...] = ()
    path: str = ""


def parse_bytes(text: str) -> int:
    from monet_ir.options import size_in_bytes

    value = size_in_bytes(text)
    if value is None:
        raise ValueError(f"'{text}' is not a byte count (a number, optionally with B, kB, MB, GB (powers of 1000) "
                         "or KiB, MiB, GiB (powers of 1024))")
    return int(math.ceil(value))


def split_names(texts: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Node names from comma- or space-separated lists."""
    return tuple(name for text in texts for name in re.split(r"[,\s]+", text) if name)


def parse_policy(policy: str, budget: int | None = None, recompute: tuple[str, ...] = ()) -> Policy:
    """The policy of the pass options; raises ValueError with a one-line message."""
    kind, has_value, value = (part.strip() for part in policy.partition("="))
    if kind not in POLICIES:
        from monet_ir.errors import did_you_mean

        raise ValueError(f"unknown policy '{policy}'{did_you_mean(kind, POLICIES)} (expected {POLICY_HELP})")
    if budget is not None and kind != "memory-budget":
        raise ValueError(f"the budget option only applies to policy=memory-budget, not '{kind}'")
    if recompute and kind != "list":
        raise ValueError(f"the recompute option only applies to policy=list, not '{kind}'")
    if kind == "memory-budget":
        if has_value and budget is not None:
            raise ValueError("the budget is given twice (in the policy and in the budget option)")
        if has_value:
            budget = parse_bytes(value)
        if budget is None or budget < 0:
            raise ValueError("policy=memory-budget needs a non-negative budget in bytes (memory-budget=BYTES)")
        return Policy(kind, budget=budget)
    if kind == "list":
        names = split_names([value, *recompute])
        if not names:
            raise ValueError("policy=list needs node names (list=NODE,NODE,... or recompute=\"NODE\",...)")
        return Policy(kind, names=names)
    if kind == "plan":
        if not value:
            raise ValueError("policy=plan needs a plan file (plan=FILE.json)")
        return Policy(kind, path=value)
    if has_value:
        raise ValueError(f"policy '{kind}' takes no value, got '{policy}'")
    return Policy(kind)


@dataclass(frozen=True)
class ActivationCheckpointPass(ModulePass):
    """Recompute saved activations in the backward pass (see the module docstring)."""

    name = "activation-checkpoint"

    policy: str = "store-all"
    """store-all | recompute-all | sqrt | memory-budget[=BYTES] | list[=NODE,...] | plan=FILE.json"""
    budget: int | None = None
    """Saved-activation byte budget of policy=memory-budget."""
    recompute: tuple[str, ...] = ()
    """Node names of policy=list."""

    def parsed_policy(self) -> Policy:
        try:
            return parse_policy(self.policy, self.budget, tuple(self.recompute))
        except ValueError as e:
            raise PassFailedException(f"activation-checkpoint: {e}") from None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        self.checkpoint(graph.step_function(op))

    def checkpoint(self, fn: func.FuncOp, mark: bool = True) -> list[str]:
        """Apply the pass to one step function; returns the nodes whose saved results are now
        recomputed, in forward order. `mark=False` skips refreshing the `monet.saved` marks
        (`monet explore` schedules thousands of candidates and never reads them)."""
        policy = self.parsed_policy()
        if policy.kind != "store-all":
            reject_checkpointed(fn)
        problem = plans.CheckpointProblem(fn)
        paged: frozenset[SSAValue] = frozenset()
        try:
            if policy.kind == "plan":
                dropped, paged = choose_plan(problem, policy.path)
                plan = read_plan_file(policy.path)
                mark_storage(fn, plan.storage, plan.tile_bytes, where=f"{policy.path}: ")
            else:
                dropped = choose(problem, policy)
        except plans.PlanError as e:
            raise PassFailedException(f"activation-checkpoint{{policy={self.policy}}}: {e}") from None
        recompute(fn, problem, dropped)
        mark_paged(paged)
        if mark:
            mark_saved(fn)
        return plans.describe(problem, dropped)


def reject_checkpointed(fn: func.FuncOp) -> None:
    for op in graph.compute_ops(fn):
        if PAGE_ATTR in op.attributes:
            raise PassFailedException(
                f"activation-checkpoint: the function already pages saved activations ({op.name}, node "
                f"'{graph.op_node(op)}'); checkpointing is applied once, to the step autodiff produced"
            )
        if graph.op_phase(op) == "recompute":
            raise PassFailedException(
                f"activation-checkpoint: the function already has recompute ops ({op.name}, node "
                f"'{graph.op_node(op)}'); checkpointing is applied once, to the step autodiff produced"
            )


def choose(problem: plans.CheckpointProblem, policy: Policy) -> frozenset[SSAValue]:
    """The saved storages the policy recomputes."""
    if policy.kind == "recompute-all":
        return plans.plan_recompute_all(problem)
    if policy.kind == "sqrt":
        return plans.plan_sqrt(problem)
    if policy.kind == "memory-budget":
        assert policy.budget is not None
        return plans.plan_memory_budget(problem, policy.budget)
    if policy.kind == "list":
        return plans.plan_named(problem, policy.names)
    return frozenset()


def choose_plan(problem: plans.CheckpointProblem, path: str) -> tuple[frozenset[SSAValue], frozenset[SSAValue]]:
    """The storages a plan file recomputes and those it pages."""
    decisions = read_plan_file(path).activations
    for node in decisions:
        if node not in problem.forward_by_node:
            raise plans.PlanError(f"{path}: activations.{node}: no forward op has this node")
    try:
        dropped = plans.plan_named(problem, [n for n, d in decisions.items() if d == "recompute"])
        paged = plan_paged(problem, [n for n, d in decisions.items() if d == "page"])
    except plans.PlanError as e:
        raise plans.PlanError(f"{path}: {e}") from None
    return dropped, paged


# ---------------------------------------------------------------------- rewriting


CloneKey = tuple[int, SSAValue]
"""The copy of a forward value recomputed in a segment: (segment, original value)."""


class PlannedClone(NamedTuple):
    """A recompute copy of forward op `op` in segment `region`; each of its `operands` is the
    original value (kept: read where it is) or the `CloneKey` of a copy made before it."""

    op: Operation
    region: int
    operands: tuple[SSAValue | CloneKey, ...]


_planned_clone = partial(tuple.__new__, PlannedClone)  # (`PlannedClone(...)` without its Python-level __new__)


@dataclass
class RecomputeRewrite:
    """The whole rewrite, decided without touching the IR: per backward op, the clones to insert
    right before it (in order) and which of its operands read a copy (index -> `CloneKey`)."""

    clones_before: dict[Operation, list[PlannedClone]]
    rewired: dict[Operation, dict[int, CloneKey]]

    @property
    def clone_count(self) -> int:
        return sum(len(c) for c in self.clones_before.values())


def plan_rewrite(fn: func.FuncOp, problem: plans.CheckpointProblem, dropped: frozenset[SSAValue]) -> RecomputeRewrite:
    """Where the copies go (see the module docstring). `monet explore` turns the same plan into
    a task graph directly, without cloning IR (`monet_ir.explore.evaluate`), so the pass and the
    explorer cannot disagree on what is recomputed where."""
    rewrite = RecomputeRewrite({}, {})
    if not dropped:
        return rewrite
    # values are compared by identity: their ids hash faster than they do
    dropped_ids = frozenset(map(id, dropped))
    segment = problem.segment_ids(dropped_ids)
    made: set[tuple[int, int]] = set()  # (segment, id of the op) of the clones planned
    for op, reads in problem.backward_reads:  # (the other operands are always kept)
        for i, value, _, root_id, saved in reads:
            if saved and root_id not in dropped_ids:
                continue  # kept
            region = segment[root_id]  # (the root of a forward value is its storage)
            plan_copy(value, region, problem, dropped_ids, made, rewrite.clones_before.setdefault(op, []))
            rewrite.rewired.setdefault(op, {})[i] = (region, value)
    rewrite.clones_before = {op: clones for op, clones in rewrite.clones_before.items() if clones}
    return rewrite


def plan_copy(
    value: SSAValue,
    region: int,
    problem: plans.CheckpointProblem,
    dropped_ids: Set[int],
    made: set[tuple[int, int]],
    out: list[PlannedClone],
) -> None:
    """Append to `out` the clones the copy of `value` in `region` still lacks (`dropped_ids`:
    the ids of the dropped storages).

    Iterative post-order walk: operands are cloned before their users, and cones can be as
    deep as the whole forward pass (recompute-all), deeper than Python's recursion limit."""
    stack = [value.owner]  # the ops to clone (a value is copied with its op)
    operand_roots = problem.operand_roots
    while stack:
        op = stack[-1]
        key = (region, id(op))
        if key in made:
            stack.pop()
            continue
        # an operand is kept when its root is None, or a saved storage that is not dropped
        roots = operand_roots(op)
        missing = [owner for _, r, owner, root_id, saved in roots
                   if r is not None and (root_id in dropped_ids or not saved) and (region, id(owner)) not in made]
        if missing:
            stack.extend(missing)
            continue
        stack.pop()
        # kept operands are read where they are, even if a clone of their op exists
        operands = tuple([o if r is None or (saved and root_id not in dropped_ids) else (region, o)
                          for o, r, _, root_id, saved in roots])
        out.append(_planned_clone((op, region, operands)))
        made.add(key)


def recompute(fn: func.FuncOp, problem: plans.CheckpointProblem, dropped: frozenset[SSAValue]) -> int:
    """Rewire the backward readers of the dropped storages to recomputed copies; returns the
    number of clones inserted."""
    rewrite = plan_rewrite(fn, problem, dropped)
    copies: dict[CloneKey, SSAValue] = {}
    for op in list(fn.body.block.ops):
        for planned in rewrite.clones_before.get(op, ()):
            clone_op(planned, op, copies)
        for i, key in rewrite.rewired.get(op, {}).items():
            op.operands[i] = copies[key]
    return rewrite.clone_count


def clone_op(planned: PlannedClone, before: Operation, copies: dict[CloneKey, SSAValue]) -> None:
    op = planned.op
    mapper = {o: copies[key] for o, key in zip(op.operands, planned.operands, strict=True) if isinstance(key, tuple)}
    clone = op.clone(value_mapper=mapper)
    clone.properties["phase"] = StringAttr("recompute")
    clone.attributes.pop(SAVED_ATTR, None)
    clone.attributes.pop(PAGE_ATTR, None)
    block = before.parent_block()
    assert block is not None
    block.insert_op_before(clone, before)
    for original, copy in zip(op.results, clone.results, strict=True):
        copy.name_hint = f"{original.name_hint}{RECOMPUTE_SUFFIX}" if original.name_hint else None
        copies[(planned.region, original)] = copy
