"""Evaluate one design point of a training step quickly: a recompute set and a core allocation.

An `Evaluator` builds the training step once (import, `autodiff`, `insert-optimizer`, exactly
as `monet report` does) and keeps it in memory. A `Candidate` is

- `recompute`: ONNX node names whose saved activations are recomputed in the backward pass
  (`activation-checkpoint{policy="list=..."}`; empty = `store-all`);
- `allocation`: (node name, core ids) pairs: every op of that node (forward, backward,
  recompute) runs on one of those cores (an `Allocation` entry; nodes not named may run on any
  core able to run them, the scheduler's default);
- `fusion`, `tiles`: fused layer stacks as `"FIRST:LAST"` node pairs and the tiles per fused
  layer (0 = sized from the target's memory): `fuse-layers{mode=explicit}`, applied after the
  checkpoint pass as `monet report --fusion ... --tiles ...` does;
- `precision`: a precision policy (the precision gene) or None (the step's own): the candidate
  is evaluated by `Evaluator.variant(precision)`, the evaluator `monet report --precision
  POLICY` corresponds to.

Under an MX policy `monet report` runs `quantize` between the checkpoint and fusion passes; the
planned graphs below do not know its casts, so such an evaluator builds each graph by running
the passes on a clone of the step (`quantized_graph`), in the report's order.

`Evaluator.evaluate(candidate)` builds the candidate's task graph, schedules it with the
allocation and returns an `Evaluation`. The graph comes straight from the base step and the
passes' plans, without cloning IR: the checkpoint pass's rewrite plan (`plan_rewrite`: which
forward ops are copied before which backward op, and which operands read the copies) and the
fusion pass's tiling plan (`FuseLayersPass.plan`: the `monet.tiling` of each fused forward op)
make a program of IR ops and planned copies that `extract` reads. The graph is the one
`monet report` extracts after running both passes with the same options (the test suite
compares them task by task). The `Evaluation`:

- `latency_cycles`: `report.json`'s `latency_cycles` (makespan, rounded to a cycle);
- `energy_pj`: `report.json`'s `energy_pj`;
- `peak_memory_bytes`: the sum over every memory the scheduler tracks (each core's top memory
  and DRAM) of its peak occupancy (`report.json`'s `memory.peak_bytes`, summed). DRAM's peak
  includes the parameters, gradients, optimizer state and the batch, so the value is the whole
  footprint of the step, not only activations;
- `fits`: every memory's peak is within its capacity (`memory.capacity_bytes`).

These are the numbers `monet report --checkpoint list=... --mapping ...` prints for the same
point (the test suite checks equality). Speed: task graphs are cached per recompute set (the
allocation does not change the graph), and the per-op costs are looked up once per signature
and core (the cost model itself is memoized) and handed to the scheduler as plain tables.

`Evaluator.checkpoint_cost(recompute)` is the cheaper model the exact MILP solves (see
`monet_ir.explore.milp` and docs/explore.md): `recompute_cycles` (sum over the recompute ops the
pass inserted of the op's latency on the fastest core able to run it) and `saved_bytes`
(`saved_bytes_by_kind(fn)["activation"]` of the rewritten step), both measured on the IR.
"""

from __future__ import annotations

import gc
import math
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from monet_ir import graph as ir_graph
from monet_ir.errors import MonetError
from monet_ir.options import StepOptions


class ExploreError(MonetError):
    """A problem with the exploration's inputs; str() is one line."""


YOUNG_COLLECTION_THRESHOLD = 500_000

GRAPH_CACHE_TASKS = 4_000
"""The tasks of the task graphs an `Evaluator` keeps, in all: candidates that differ only in their
allocation share a graph, but in a search they rarely come within a few evaluations of each other
(GPT-2 small b8, every gene, 64 x 50: 2 of 3,029 evaluations within 8 of the last with the same
graph, 9 within 32; ResNet-18 b1 layer by layer, 64 x 20: 25 of 1,225 within 32), while every
graph kept alive is walked again by the garbage collector and freed late, out of the processor's
caches (`monet_ir.schedule.scheduler.ScheduleMemo.GRAPH_TASKS`, which keeps the tables of as
many). Layer by layer, 8-13 graphs of ~300-500 tasks fit; fused graphs of ~2,000 tasks keep the
last one or two."""


@contextmanager
def tuned_collection() -> Iterator[None]:
    """Garbage collection for a search: each evaluation allocates a task graph and a schedule,
    tens of thousands of short-lived objects, next to the long-lived step (IR, plans, caches).
    With Python's default thresholds the full collections it triggers walk that whole heap
    again and again (a third of an evaluation's time on the small GPT-2). Inside, the objects
    that exist are frozen out of collection and young objects are collected every 500,000
    allocations instead of 700; both are restored on exit. Results do not depend on it.
    (A collection walks the young objects still alive, mostly the graphs the evaluator caches,
    whatever the threshold: with every gene on GPT-2 small b8, 50,000 gave 16 collections per
    132 evaluations, 1.7 s of 13 s CPU; 300,000 gave 3, 0.65 s; the peak RSS was 152 MB in
    both: an evaluation's garbage is freed by reference counting, not by the collector.)"""
    threshold = gc.get_threshold()
    if threshold[0] == YOUNG_COLLECTION_THRESHOLD:
        yield  # already tuned by an enclosing search or benchmark: its exit restores
        return
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


StepConfig = StepOptions
"""The options of the step a search explores (`monet_ir.options.StepOptions`; the explorer's
older name)."""


def build_step(config: StepOptions) -> ModuleOp:
    """The training step before any candidate's decision (autodiff and insert-optimizer, from
    the one pipeline `monet report` runs: `monet_ir.pipeline`); a model that already holds its
    backward and optimizer ops (an ONNX Runtime training graph) is taken as imported."""
    from monet_ir.pipeline import build_step as build, resolve

    return build(resolve(config), stages=("train",)).module


def checkpoint_policy(recompute: Sequence[str]) -> str:
    """The `activation-checkpoint` policy text (and `monet report --checkpoint` value)."""
    return "list=" + ",".join(recompute) if recompute else "store-all"


def write_candidate_plan(path: str, candidate: Candidate) -> None:
    """The plan file (`activation-checkpoint{policy="plan=FILE.json"}`, `monet report
    --checkpoint plan=FILE.json`) of a candidate that pages: its recomputed and paged nodes and
    the tensors it keeps in storage."""
    from monet_ir.analysis.paging_plan import write_plan

    decisions = {node: "recompute" for node in candidate.recompute}
    decisions.update({node: "page" for node in candidate.paged if node not in decisions})
    write_plan(path, decisions, storage=candidate.stored)


def apply_plan(module: ModuleOp, candidate: Candidate) -> None:
    """`activation-checkpoint{policy="plan=..."}` with the candidate's plan (see
    `write_candidate_plan`), as `monet report --checkpoint plan=FILE.json` applies it."""
    import os
    import tempfile

    from passes.activation_checkpoint import ActivationCheckpointPass

    handle, path = tempfile.mkstemp(suffix=".json")
    os.close(handle)
    try:
        write_candidate_plan(path, candidate)
        ActivationCheckpointPass(policy=f"plan={path}").checkpoint(ir_graph.step_function(module), mark=False)
    finally:
        os.unlink(path)


def paging_genes(evaluator: Any) -> list[PagingGene]:
    """The paging decisions of a step (see `PagingGene`): every forward node with saved
    activations, then per parameter (in argument order) its optimizer state, the parameter and its
    gradient (`d_NAME`, when the step has a value of that name), then each other argument (the
    batch, labels) of at least one storage page."""
    from monet_ir.analysis.paging_plan import step_tensor_names
    from monet_ir.analysis.ir_signatures import tensor_bytes_at

    fn = ir_graph.step_function(evaluator.module)
    problem = evaluator.checkpoint_problem
    genes = [PagingGene("activation", node) for node in dict.fromkeys(ir_graph.op_node(s.op) for s in problem.storages)]
    names = step_tensor_names(fn)
    infos = ir_graph.arg_infos(fn)
    page = max(1, evaluator.target.storage.page_bytes) if evaluator.target.storage is not None else 1
    states: dict[str, list[str]] = {}
    for info in infos:
        if info.role == "state" and info.name:
            owner = next((p.name for p in infos if p.role == "param" and p.name and info.name.startswith(p.name + ".")), None)
            if owner is not None:
                states.setdefault(owner, []).append(info.name)
    for info, arg in zip(infos, fn.body.block.args, strict=True):
        if not info.name or info.role == "state":
            continue
        if info.role == "param":
            state = tuple(states.get(info.name, ()))
            grad = f"d_{info.name}"
            everything = (*state, info.name, *((grad,) if grad in names else ()))
            values = ((), state, everything) if state else ((), everything)
            genes.append(PagingGene("tensor", info.name, values))
        elif tensor_bytes_at(arg.type, evaluator.bits) >= page:
            genes.append(PagingGene("tensor", info.name, ((), (info.name,))))
    return genes


def apply_checkpoint(module: ModuleOp, recompute: Sequence[str]) -> None:
    """Apply `activation-checkpoint` with the policy of `checkpoint_policy(recompute)` (nothing
    for an empty set: `monet report` applies no pass for `store-all` either)."""
    if not recompute:
        return
    from passes.activation_checkpoint import ActivationCheckpointPass

    ActivationCheckpointPass(policy=checkpoint_policy(recompute)).checkpoint(ir_graph.step_function(module), mark=False)


# ---------------------------------------------------------------------- decisions


@dataclass(frozen=True)
class CheckpointGene:
    """A forward node whose saved results may be recomputed (`policy=list` names it)."""

    node: str
    bytes: int  # saved-activation bytes of its storages


@dataclass(frozen=True)
class AllocationGene:
    """A node whose ops may be pinned: `options[0]` is None (any able core, the default); each
    other option is a tuple of core ids: one preferred core plus, for the node's ops that core
    cannot run, the cores that can."""

    node: str
    options: tuple[tuple[int, ...] | None, ...]


@dataclass(frozen=True)
class FusionGene:
    """A stack `fuse-layers{mode=auto}` would form, by its first and last node: fused or not."""

    first: str
    last: str
    ops: int
    phase: str = "forward"  # or backward

    @property
    def spec(self) -> str:
        """The stack as `fuse-layers{mode=explicit}` (and `monet report --fusion`) names it."""
        from passes.fuse_layers import BACKWARD_PREFIX

        return f"{BACKWARD_PREFIX if self.phase == 'backward' else ''}{self.first}:{self.last}"


TILE_CHOICES = (0, 2, 4, 8, 16)  # tiles per fused layer (0 = from the target's memory)


@dataclass(frozen=True)
class PagingGene:
    """A paging decision (`--search paging`, targets with a storage level): a forward node's saved
    activations (`kind` activation: 0 keep, 1 page) or a parameter's tensors (`kind` tensor:
    0 in main memory, 1 its optimizer state in storage, 2 also the parameter and its gradient;
    the batch: 0 or 1). `values[v]`: the tensor names value v keeps in storage."""

    kind: str
    name: str
    values: tuple[tuple[str, ...], ...] = ((), ())


@dataclass(frozen=True)
class Candidate:
    recompute: tuple[str, ...] = ()
    allocation: tuple[tuple[str, tuple[int, ...]], ...] = ()
    fusion: tuple[str, ...] = ()
    tiles: int = 0
    precision: str | None = None  # a policy's spec (`PrecisionPolicy.spec`); None: the step's own
    paged: tuple[str, ...] = ()  # forward nodes whose saved activations are paged
    stored: tuple[str, ...] = ()  # tensors kept in storage (a plan's storage list)

    @property
    def graph_key(self) -> tuple:
        key = (self.recompute, self.fusion, self.tiles if self.fusion else 0)
        return key + (self.paged, self.stored) if self.paged or self.stored else key

    @property
    def pages(self) -> bool:
        return bool(self.paged or self.stored)

    def mapping_entries(self) -> list[dict[str, Any]]:
        """The allocation as a `--mapping` YAML document (a list of name/core_allocation)."""
        return [{"name": node, "core_allocation": list(cores)} for node, cores in self.allocation]


@dataclass(frozen=True)
class Evaluation:
    latency_cycles: float
    energy_pj: float
    peak_memory_bytes: float
    fits: bool
    peaks: tuple[tuple[str, int], ...] = ()
    error: str = ""

    @property
    def objectives(self) -> tuple[float, float, float]:
        return (self.latency_cycles, self.energy_pj, self.peak_memory_bytes)

    @staticmethod
    def failed(message: str) -> Evaluation:
        return Evaluation(math.inf, math.inf, math.inf, False, (), message)


@dataclass(frozen=True)
class CheckpointCost:
    """The checkpoint-only model (what the MILP optimizes)."""

    recompute_cycles: float
    saved_bytes: int


@dataclass(frozen=True)
class FailedCost:
    """A checkpoint-objective evaluation that raised: its one-line reason, infinite costs."""

    error: str
    recompute_cycles: float = math.inf
    saved_bytes: float = math.inf


# ---------------------------------------------------------------------- costs


class PriceBook:
    """Per signature and core: whether the core can run it and its `Cost`, from the memoized
    cost model; a graph's lookups go by the identity of its signature objects (hashing a
    signature costs more than the lookup)."""

    def __init__(self) -> None:
        self.tables: dict[Any, dict[int, Any]] = {}

    def table(self, sig: Any) -> dict[int, Any]:
        table = self.tables.get(sig)
        if table is None:
            table = self.tables[sig] = {}
        return table

    def functions(self, tasks: Iterable[Any]):
        """`can_run(sig, core)` and `cost_of(sig, core)` for the scheduler, for these tasks (a
        graph's `TaskTable`, or tasks)."""
        from monet_ir.cost import can_run, cost_of
        from monet_ir.schedule.taskgraph import TaskTable

        by_id: dict[int, dict[int, Any]] = {}  # id(signature) -> its table, for those asked about
        ids: set[int] = set()  # the identities of the tasks' signatures (on first use: a scheduler
        # with a warm memo asks for no price, and one that does asks about a few signatures)
        missing = object()
        sigs = tasks.sig if isinstance(tasks, TaskTable) else [t.sig for t in tasks]

        def priced(sig, core):
            """The table entry (a Cost, or None when the core cannot run it); `missing` for a
            signature that is not one of these tasks'."""
            table = by_id.get(id(sig))
            if table is None:
                if not ids:
                    ids.update(map(id, sigs))
                if sig is None or id(sig) not in ids:
                    return missing
                table = by_id[id(sig)] = self.table(sig)
            entry = table.get(core.id, missing)
            if entry is missing:
                entry = table[core.id] = cost_of(sig, core) if can_run(sig, core) else None
            return entry

        def fast_can_run(sig, core) -> bool:
            entry = priced(sig, core)
            return can_run(sig, core) if entry is missing else entry is not None

        def fast_cost_of(sig, core):
            entry = priced(sig, core)
            # not priced, or not runnable: the cost model answers (and raises its own error)
            return cost_of(sig, core) if entry is missing or entry is None else entry

        return fast_can_run, fast_cost_of


# ---------------------------------------------------------------------- evaluator


class Evaluator:
    """The base step in memory, and evaluation of candidates on it (see the module docstring)."""

    def __init__(self, config: StepOptions, graph_cache: int = 32):
        from monet_ir.pipeline import build_step as build, resolve
        from monet_ir.schedule.taskgraph import ExtractCache, extract

        self.config = config
        self.step = resolve(config)  # the target and the precision on it, loaded once
        if self.step.target is None:
            raise ExploreError("an evaluator needs a target (--target)")
        base = build(self.step, stages=("train",))
        self.module, self.training = base.module, base.training
        self.target = self.step.target
        self.bits = self.step.bits
        # an MX policy (given, or the target's default): `monet report` runs `quantize` after the
        # checkpoint pass, so candidates are built the same way (see `quantized_graph`)
        self.quantize = self.step.mx_policy
        self._variants: dict[str, Evaluator] = {}  # other precision policies (the precision gene)
        self.prices = PriceBook()
        from monet_ir.schedule.scheduler import ScheduleMemo

        self.schedule_memo = ScheduleMemo()  # prices per (signature, cores) and graph tables, across candidates
        self._graphs: OrderedDict[tuple, Any] = OrderedDict()
        self._graph_cache = graph_cache
        self._extract_cache = ExtractCache()  # what the extractor reads from the base step's ops, kept across candidates
        self._tilings: dict[tuple, dict] = {}  # fusion plans by (stacks, tiles)
        self._plan_ops: list | None = None  # the base step's compute ops, as fuse-layers plans them
        self._plan_memo: dict = {}  # fuse-layers' per-stack plans (`FuseLayersPass.plan`'s memo)
        self._base_program: list | None = None  # the base step as `ProgramOp`s
        self._base_positions: dict = {}  # id(op) -> its position in the base program (whose items hold the ops)
        self._copy_results: dict = {}  # (id(op), segment) -> (op, the result keys of its recompute copy)
        from monet_ir.analysis.ir_signatures import signature_of

        # the signatures of the base step's ops, reused for their copies in every candidate
        self.base_signatures = {op: signature_of(op, self.bits)
                                for op in ir_graph.compute_ops(ir_graph.step_function(self.module))}
        if self.quantize:
            # the store-all step after `quantize` (`quantized_graph` without fusion); under an MX
            # policy candidates are fused in such a step, with quantize's casts between the ops
            stacked = self.quantized_module(Candidate())
            base = extract(ir_graph.step_function(stacked), bits=self.bits)
        else:
            stacked = self.module
            base = extract(ir_graph.step_function(self.module), bits=self.bits, signatures=self.base_signatures,
                           cache=self._extract_cache)
        self._graphs[Candidate().graph_key] = base
        self.checkpoint_genes = find_checkpoint_genes(self.checkpoint_problem)
        self.allocation_genes = find_allocation_genes(base, self.target, self.prices)
        # the stacks fuse-layers accepts in the step candidates are fused in
        self.fusion_genes = find_fusion_genes(ir_graph.step_function(stacked), self.target)

    # -------------------------------------------------------------- graphs

    def rewritten(self, recompute: Sequence[str], fusion: Sequence[str] = (), tiles: int = 0) -> ModuleOp:
        """A clone of the step with the checkpoint pass (and fusion) applied, as `monet report`
        builds it (searches do not need it: `graph` works from the passes' plans)."""
        module = self.module.clone()
        apply_checkpoint(module, recompute)
        self.fuse(module, fusion, tiles)
        return module

    def fuse_pass(self, fusion: Sequence[str], tiles: int):
        """`fuse-layers` as the pipeline runs it for `monet report --fusion A:B,... --tiles N`
        (None without stacks)."""
        from monet_ir.pipeline import stage_passes

        passes = stage_passes(self.step, "fuse", fusion=",".join(fusion) or "none", tiles=tiles)
        return passes[0] if passes else None

    def fuse(self, module: ModuleOp, fusion: Sequence[str], tiles: int) -> None:
        fuse = self.fuse_pass(fusion, tiles)
        if fuse is not None:
            fuse.apply(Context(), module)

    @cached_property
    def step_fn(self):
        """The step function of the base module (which no candidate changes)."""
        return ir_graph.step_function(self.module)

    @cached_property
    def checkpoint_problem(self):
        from monet_ir.analysis.checkpoint_policies import CheckpointProblem

        return CheckpointProblem(ir_graph.step_function(self.module))

    def tiling_plan(self, fusion: Sequence[str], tiles: int) -> dict:
        """The `monet.tiling` of each fused forward op, as the pipeline's `fuse-layers` sets it."""
        if not fusion:
            return {}
        key = (tuple(fusion), tiles)
        plan = self._tilings.get(key)
        if plan is None:
            fuse = self.fuse_pass(fusion, tiles)
            if self._plan_ops is None:
                self._plan_ops = list(ir_graph.compute_ops(ir_graph.step_function(self.module)))
            plan = fuse.plan(self._plan_ops, self._plan_memo)
            self._tilings[key] = plan
            if len(self._tilings) > self._graph_cache:
                self._tilings.pop(next(iter(self._tilings)))
        return plan

    def program(self, recompute: Sequence[str], fusion: Sequence[str] = (), tiles: int = 0) -> list:
        """The program `activation-checkpoint{policy="list=..."}` and then
        `fuse-layers{mode=explicit}` would leave in the step, as base ops with rewired operands
        and tilings, and planned copies (`ProgramOp`s; see `extract`)."""
        from xdsl.utils.exceptions import PassFailedException

        from monet_ir.analysis.checkpoint_policies import PlanError, plan_named
        from monet_ir.schedule.taskgraph import ProgramOp, ir_program
        from passes.activation_checkpoint import RECOMPUTE_SUFFIX, plan_rewrite

        _program_op = partial(tuple.__new__, ProgramOp)  # (`ProgramOp(...)` without its Python-level __new__)

        tiling = self.tiling_plan(fusion, tiles)
        fn = self.step_fn
        if self._base_program is None:
            self._base_program = list(ir_program(fn))
            self._base_positions = {id(item.op): i for i, item in enumerate(self._base_program)}
        try:
            dropped = plan_named(self.checkpoint_problem, recompute)
        except PlanError as e:
            raise PassFailedException(f"activation-checkpoint{{policy={checkpoint_policy(recompute)}}}: {e}") from None
        rewrite = plan_rewrite(fn, self.checkpoint_problem, dropped)
        if not rewrite.rewired and not tiling:
            return self._base_program
        # the base program, but at the ops the plans change (copies before them, other operands
        # or a tiling): runs of unchanged ops are copied as slices. (The plans' dicts are read
        # by position, keyed by the ops' ids: an op's own hash is a Python call.)
        base_program, where, copy_results = self._base_program, self._base_positions, self._copy_results
        clones_at = {where[id(op)]: clones for op, clones in rewrite.clones_before.items()}
        rewired_at = {where[id(op)]: rewired for op, rewired in rewrite.rewired.items()}
        tiling_at = {where[id(op)]: op_tiling for op, op_tiling in tiling.items()}
        program = []
        last = 0
        for position in sorted({*clones_at, *rewired_at, *tiling_at}):
            program += base_program[last:position]
            last = position + 1
            base = base_program[position]
            for copy in clones_at.get(position, ()):
                # the same results object for the same copy each time (the extractor keeps
                # what it reads from a program item by its results)
                known = copy_results.get((id(copy.op), copy.region))
                if known is None or known[0] is not copy.op:
                    known = copy_results[(id(copy.op), copy.region)] = (
                        copy.op, tuple((copy.region, r) for r in copy.op.results))
                program.append(_program_op((copy.op, "recompute", copy.operands, known[1], RECOMPUTE_SUFFIX, None)))
            rewired = rewired_at.get(position)
            op_tiling = tiling_at.get(position)
            if rewired is None and op_tiling is None:
                program.append(base)
                continue
            operands = base.operands
            if rewired is not None:
                operands = tuple([rewired.get(i, v) for i, v in enumerate(operands)])
            program.append(_program_op((base.op, base.phase, operands, base.results, "", op_tiling)))
        program += base_program[last:]
        return program

    def quantized_graph(self, candidate: Candidate):
        """The task graph of a candidate under an MX policy, from the passes themselves, in
        `monet report`'s order: `activation-checkpoint`, `quantize`, `fuse-layers` on a clone
        of the step (slower than the planned graphs of `graph`, which do not know the casts)."""
        from monet_ir.schedule.taskgraph import extract

        module = self.quantized_module(candidate)
        self.fuse(module, candidate.fusion, candidate.tiles)
        return extract(ir_graph.step_function(module), bits=self.bits)

    def quantized_module(self, candidate: Candidate) -> ModuleOp:
        """A clone of the step with the candidate's checkpoint plan and then the pipeline's
        `quantize` applied."""
        from monet_ir.pipeline import stage_passes

        module = self.module.clone()
        if candidate.pages:
            apply_plan(module, candidate)
        else:
            apply_checkpoint(module, candidate.recompute)
        for quantize in stage_passes(self.step, "quantize", self.training):
            quantize.apply(Context(), module)
        return module

    def variant(self, precision: str | None) -> Evaluator:
        """The evaluator of the same step under another precision policy (built once, on first
        use): the step `monet report --precision POLICY` builds."""
        if precision is None or precision == self.config.precision:
            return self
        other = self._variants.get(precision)
        if other is None:
            import dataclasses

            other = self._variants[precision] = Evaluator(dataclasses.replace(self.config, precision=precision),
                                                          self._graph_cache)
        return other

    def graph(self, candidate: Candidate):
        from monet_ir.schedule.taskgraph import extract

        key = candidate.graph_key
        g = self._graphs.get(key)
        if g is not None:
            self._graphs.move_to_end(key)
            return g
        self._make_room_for_graph()
        if self.quantize:
            g = self.quantized_graph(candidate)
        else:
            paged = stored = None
            program = self.program(*key[:3])
            if candidate.pages:
                from monet_ir.analysis.paging_plan import plan_paged

                # in program order, as `monet report` reads the plan's marks (a set's order would
                # change from one process to the next)
                paged_set = plan_paged(self.checkpoint_problem, candidate.paged)
                paged = [r for item in program if item.phase == "forward" for r in item.results if r in paged_set]
                stored = (candidate.stored, None)
            g = extract(self.step_fn, bits=self.bits, signatures=self.base_signatures, program=program, cache=self._extract_cache, prefix_key=key[1:3],
                        paged=paged, stored=stored)
        graphs = self._graphs
        graphs[key] = g
        # at most `graph_cache` graphs, and of GRAPH_CACHE_TASKS tasks in all (but the newest)
        while len(graphs) > self._graph_cache or (
                len(graphs) > 1 and sum(len(kept.tasks) for kept in graphs.values()) > GRAPH_CACHE_TASKS):
            self._drop_graph()
        return g

    def _make_room_for_graph(self) -> None:
        """Before a graph is built: drop the graphs its arrival would drop, taking it to be as
        large as the last one. Freed now, their memory is reused by the new graph's objects
        while it is still in the processor's caches (freed afterwards, they have left them)."""
        graphs = self._graphs
        if not graphs:
            return
        expected = len(next(reversed(graphs.values())).tasks)
        while graphs and (len(graphs) >= self._graph_cache or
                          sum(len(kept.tasks) for kept in graphs.values()) + expected > GRAPH_CACHE_TASKS):
            self._drop_graph()

    def _drop_graph(self) -> None:
        """Drop the least recently used graph, and the scheduler's tables of it."""
        _, g = self._graphs.popitem(last=False)
        self.schedule_memo.forget(g)

    # -------------------------------------------------------------- schedule

    def schedule(self, candidate: Candidate, summary: bool = False):
        """The candidate's `Schedule`; with `summary`, only what scores it (a `ScheduleSummary`:
        the same objectives, without the per-task and per-transfer objects)."""
        from monet_ir.schedule.mapping import Allocation
        from monet_ir.schedule.scheduler import Scheduler

        if candidate.precision is not None and candidate.precision != self.config.precision:
            import dataclasses

            return self.variant(candidate.precision).schedule(dataclasses.replace(candidate, precision=None), summary)
        g = self.graph(candidate)
        allocation = Allocation(dict(candidate.allocation), "explore") if candidate.allocation else None
        can_run, cost_of = self.prices.functions(g.tasks)
        scheduler = Scheduler(g, self.target, allocation, cost_of=cost_of, can_run=can_run, memo=self.schedule_memo)
        return scheduler.run_summary() if summary else scheduler.run()

    def evaluate(self, candidate: Candidate) -> Evaluation:
        from xdsl.utils.exceptions import PassFailedException

        from monet_ir.cost import CostError
        from monet_ir.schedule.scheduler import ScheduleError

        try:
            s = self.schedule(candidate, summary=True)
        except (ScheduleError, CostError, PassFailedException) as e:
            return Evaluation.failed(str(e).strip().splitlines()[0])
        except Exception as e:  # a bug elsewhere must not stop a long search: recorded per point
            return Evaluation.failed(f"internal error: {type(e).__name__}: {e}")
        return evaluation_of_schedule(s)

    # -------------------------------------------------------------- checkpoint-only model

    def unit_cycles(self, sig) -> float:
        """Latency (reference cycles) of an op on the fastest core able to run it."""
        if sig is None:
            return 0.0
        table = self.prices.table(sig)
        best = math.inf
        from monet_ir.cost import can_run, cost_of

        for core in self.target.cores:
            if core.id not in table:
                table[core.id] = cost_of(sig, core) if can_run(sig, core) else None
            cost = table[core.id]
            if cost is not None:
                best = min(best, cost.latency_cycles * self.target.frequency_hz / core.clock_hz)
        if best == math.inf:
            raise ExploreError(f"no core of target '{self.target.name}' can run a {getattr(sig, 'kind', sig)} op")
        return best

    def op_cycles(self, op) -> float:
        from monet_ir.analysis.ir_signatures import signature_of

        return self.unit_cycles(signature_of(op, self.bits))

    def checkpoint_cost(self, recompute: Sequence[str]) -> CheckpointCost:
        from monet_ir.analysis.saved import saved_bytes_by_kind

        fn = ir_graph.step_function(self.rewritten(recompute))
        cycles = sum(self.op_cycles(op) for op in ir_graph.compute_ops(fn) if ir_graph.op_phase(op) == "recompute")
        return CheckpointCost(cycles, saved_bytes_by_kind(fn)["activation"])


def evaluation_of(report: dict[str, Any]) -> Evaluation:
    """The objectives of a `schedule_report` (or of `report.json`)."""
    peaks = report["memory"]["peak_bytes"]
    capacity = report["memory"]["capacity_bytes"]
    fits = all(peaks[name] <= capacity.get(name, math.inf) for name in peaks)
    storage = (report.get("paging") or {}).get("storage")  # the storage level holds what is paged: not counted
    return Evaluation(report["latency_cycles"], report["energy_pj"],
                      sum(v for name, v in peaks.items() if name != storage), fits, tuple(sorted(peaks.items())))


def evaluation_of_schedule(s) -> Evaluation:
    """The objectives of a schedule (a `Schedule`, or the `ScheduleSummary` of one), computed as
    `schedule_report` computes those fields (`evaluation_of(schedule_report(s))` gives the same
    `Evaluation`; the rest of the report, e.g. the critical path, is not needed to score a
    candidate)."""
    latency = round(s.latency_cycles)
    energy = sum(s.energy_breakdown_pj().values())
    peaks = s.peaks()
    fits = all(peaks[name] <= trace.capacity for name, trace in s.memories.items())
    storage = s.target.storage.name if s.target.storage is not None else None  # not counted in the peak
    return Evaluation(latency, energy, sum(v for name, v in peaks.items() if name != storage), fits,
                      tuple(sorted(peaks.items())))


def find_checkpoint_genes(problem) -> list[CheckpointGene]:
    """Forward nodes whose saved results are all recomputable, in forward order (`problem`:
    the step's `CheckpointProblem`)."""
    from monet_ir.analysis import checkpoint_policies as plans
    from monet_ir.types import tensor_bytes

    genes: list[CheckpointGene] = []
    seen: set[str] = set()
    for storage in problem.storages:
        node = ir_graph.op_node(storage.op)
        if not node or node in seen:
            continue
        seen.add(node)
        try:
            dropped = plans.plan_named(problem, [node])
        except plans.PlanError:
            continue
        genes.append(CheckpointGene(node, sum(tensor_bytes(s.type) for s in dropped)))
    return genes


def find_allocation_genes(g, target, prices: PriceBook) -> list[AllocationGene]:
    """Nodes with a real choice of cores (see `AllocationGene`), in program order."""
    can_run, _ = prices.functions(g.tasks)
    able: dict[str, list[frozenset[int]]] = {}
    for task in g.tasks:
        if task.sig is None or not task.node:
            continue
        able.setdefault(task.node, []).append(frozenset(c.id for c in target.cores if can_run(task.sig, c)))
    genes = []
    for node, sets in able.items():
        if any(not s for s in sets):
            continue  # no core can run one of its ops: the scheduler reports it
        union = frozenset().union(*sets)
        options: list[tuple[int, ...]] = []
        for core in sorted(union):
            chosen = {core}.union(*(s for s in sets if core not in s))
            option = tuple(sorted(chosen))
            if frozenset(option) != union and option not in options:
                options.append(option)
        if options:
            genes.append(AllocationGene(node, (None, *options)))
    return genes


def find_fusion_genes(fn, target) -> list[FusionGene]:
    """The stacks `fuse-layers{mode=auto}` forms for this target (sized to the smallest top
    memory of its MAC cores), forward then backward, kept when `mode=explicit` with their spec
    selects the same ops."""
    try:
        from passes.fuse_layers import auto_stacks, explicit_stacks, phase_ops
    except ImportError:
        return []
    from xdsl.utils.exceptions import PassFailedException

    from monet_ir.schedule.scheduler import top_memory

    forward, backward = phase_ops(list(ir_graph.compute_ops(fn)))
    memories = [top_memory(c)[1] for c in target.cores if c.kind == "mac_array"]
    memory = int(min(memories)) if memories else 0
    genes = []
    for phase, ops_in in (("forward", forward), ("backward", backward)):
        for _, ops in auto_stacks(ops_in, memory, backward=phase == "backward"):
            gene = FusionGene(ir_graph.op_node(ops[0]), ir_graph.op_node(ops[-1]), len(ops), phase)
            try:
                again = explicit_stacks(forward, (gene.spec,), backward)
            except PassFailedException:
                continue
            if len(again) == 1 and again[0][1] == ops:
                genes.append(gene)
    return genes
