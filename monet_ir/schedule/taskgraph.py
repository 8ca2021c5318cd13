"""The compact graph the scheduler works on, extracted once from a training-step function.

The scheduler never walks or rebuilds IR: `extract(fn)` turns every op into a `Task` (its
cost-model signature, phase, origin node and the tensors it reads and writes) and every SSA value
or argument into a `TensorInfo` (bytes, kind, persistence, producer, consumers). Views
(`nn.reshape`) alias their input's storage (`root`), so memory is counted once.

Dependencies are data dependencies plus three training-specific orderings:
- an in-place optimizer update of a parameter runs after every other reader of that parameter
  (write-after-read);
- a recompute op runs after the backward op that precedes it in program order (where
  `activation-checkpoint` placed it, just before the first backward use), not as soon as its
  inputs exist;
- optimizer steps run after the whole backward pass, as `optimizer.step()` follows
  `loss.backward()` (so every gradient is alive when the optimizer starts).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from xdsl.dialects import func
from xdsl.ir import Operation, SSAValue

from dialects import nn, train
from dialects.base import shape_of
from monet_ir import graph
from monet_ir.cost.ir_signatures import signature_of, tensor_bytes_at
from monet_ir.cost.signature import LoopNestSig, VectorSig
from monet_ir.types import tensor_bytes


@dataclass
class TensorInfo:
    """One tensor of the step. `root` is the tensor whose storage it shares (itself if none)."""

    id: int
    name: str
    bytes: int
    kind: str  # input | param | state | const | activation | gradient | loss
    persistent: bool
    producer: int | None = None
    consumers: list[int] = field(default_factory=list)
    root: int = -1


@dataclass
class Task:
    """One op: what it computes (sig; None for views), where it comes from, what it touches."""

    index: int
    op: str
    node: str
    phase: str
    sig: LoopNestSig | VectorSig | None
    reads: tuple[int, ...]
    writes: tuple[int, ...]
    preds: set[int] = field(default_factory=set)
    in_place: tuple[int, ...] = ()
    op_index: int = -1
    """Position of the IR op (in program order, terminator excluded) this task runs."""
    roles: dict[int, str] = field(default_factory=dict)
    """Loop-nest role (W, I or O) of each tensor the task reads or writes, for loop-nest ops:
    the cost model says per role which operands it streams from DRAM itself."""


@dataclass
class TaskGraph:
    tasks: list[Task]
    tensors: list[TensorInfo]

    def successors(self) -> list[list[int]]:
        succ: list[list[int]] = [[] for _ in self.tasks]
        for t in self.tasks:
            for p in t.preds:
                succ[p].append(t.index)
        return succ


def extract(fn: func.FuncOp, bits: int | None = None,
            signatures: Mapping[Operation, LoopNestSig | VectorSig | None] | None = None) -> TaskGraph:
    """The task graph of a step; `bits` overrides the width of float tensors (see
    `monet_ir.cost.ir_signatures.signature_of`). An op tiled by `fuse-layers`
    (`monet.tiling`) becomes one task per tile, each producing its rows of the result as a
    tensor of its own and reading only the operand rows it needs (`monet_ir.schedule.tiling`).
    `signatures` may give ops' signatures already known (`monet explore` maps the ops of each
    rewritten clone to those of its base step)."""
    return _Extractor(fn, bits, signatures or {}).run()


@dataclass
class _Part:
    """One stored piece of an SSA value: a tensor, and the rows it holds along `axis` (whole
    value when `rows` is None)."""

    tensor: int
    rows: tuple[int, int] | None = None
    axis: int = -1


class _Extractor:
    def __init__(self, fn: func.FuncOp, bits: int | None, signatures: Mapping[Operation, Any]):
        self.fn = fn
        self.bits = bits
        self.known = signatures
        self.size = tensor_bytes if bits is None else (lambda t: tensor_bytes_at(t, bits))
        self.tensors: list[TensorInfo] = []
        self.tasks: list[Task] = []
        self.parts: dict[SSAValue, list[_Part]] = {}
        self.stacks: dict[int, list[list[int]]] = {}  # stack -> per op, its tile task indices
        self.grad_results = _gradient_results(fn)
        self.position = -1

    def new_tensor(self, name: str, nbytes: int, kind: str, persistent: bool, producer: int | None) -> int:
        tid = len(self.tensors)
        self.tensors.append(TensorInfo(tid, name, nbytes, kind, persistent, producer, root=tid))
        return tid

    def run(self) -> TaskGraph:
        for info, arg in zip(graph.arg_infos(self.fn), self.fn.body.block.args, strict=True):
            role = info.role or "input"
            tid = self.new_tensor(info.name or f"arg{info.index}", self.size(arg.type), role,
                                  role in ("param", "state"), None)
            self.parts[arg] = [_Part(tid)]
        self.split_hints = self.find_split_hints()
        for position, op in enumerate(graph.compute_ops(self.fn)):
            self.position = position
            tiling = op.attributes.get("monet.tiling")
            # a fused reshape stays a view: its tiles are its operand's tiles
            if tiling is not None and op.results and not isinstance(op, nn.ReshapeOp):
                self.add_tiled(op, tiling)
            else:
                self.add_op(op)
        _order_in_place_updates(self.tasks, self.tensors)
        _pace_stacks(self.tasks, self.stacks)
        _recompute_when_needed(self.tasks)
        _optimizer_after_backward(self.tasks)
        return TaskGraph(self.tasks, self.tensors)

    def signature(self, op: Operation):
        if op in self.known:
            return self.known[op]
        return signature_of(op, self.bits)

    def find_split_hints(self) -> dict[SSAValue, tuple[int, int]]:
        """Values computed whole but read by tiles: (axis, tiles) to store them as row pieces,
        so that each tile reads only its rows."""
        from monet_ir.schedule.tiling import operand_rows

        hints: dict[SSAValue, tuple[int, int]] = {}
        for op in graph.compute_ops(self.fn):
            tiling = op.attributes.get("monet.tiling")
            if tiling is None or not op.results:
                continue
            size = shape_of(op.results[0].type)[tiling.axis.data]
            for index, operand in enumerate(op.operands):
                needed = operand_rows(op, index, tiling.axis.data, 0, size)
                if needed is not None and operand not in hints:
                    hints[operand] = (needed[0], tiling.tiles.data)
        return hints

    def kind_of(self, op: Operation, result: SSAValue, phase: str) -> tuple[str, bool]:
        if isinstance(op, nn.ConstantOp):
            return "const", True
        if result in self.grad_results or phase not in ("forward", "recompute"):
            return "gradient", False
        return "activation", False

    def new_task(self, op: Operation, sig, reads: list[int]) -> Task:
        task = Task(len(self.tasks), op.name, graph.op_node(op), graph.op_phase(op), sig, tuple(reads), (),
                    op_index=self.position)
        for t in dict.fromkeys(reads):
            self.tensors[t].consumers.append(task.index)
            producer = self.tensors[t].producer
            if producer is not None:
                task.preds.add(producer)
        self.tasks.append(task)
        return task

    def add_op(self, op: Operation) -> None:
        reads = [p.tensor for v in op.operands for p in self.parts[v]]
        task = self.new_task(op, self.signature(op), reads)
        self.assign_roles(op, task)
        writes = []
        for r in op.results:
            if isinstance(op, nn.ReshapeOp):
                # a view: the result is the operand's storage, piece for piece
                self.parts[r] = self.parts[op.operands[0]]
                continue
            kind, persistent = self.kind_of(op, r, task.phase)
            name = r.name_hint or task.node or op.name
            hint = self.split_hints.get(r)
            if hint is not None and not isinstance(op, nn.ConstantOp):
                from monet_ir.schedule.tiling import tile_bounds

                axis, tiles = hint
                full = shape_of(r.type)[axis]
                pieces = []
                for lo, hi in tile_bounds(full, tiles):
                    nbytes = -(-self.size(r.type) * (hi - lo) // full)
                    pieces.append(_Part(self.new_tensor(f"{name}[{lo}:{hi}]", nbytes, kind, persistent, task.index),
                                        (lo, hi), axis))
                self.parts[r] = pieces
                writes += [p.tensor for p in pieces]
                continue
            tid = self.new_tensor(name, self.size(r.type), kind, persistent, task.index)
            self.parts[r] = [_Part(tid)]
            writes.append(tid)
        task.writes = tuple(writes)
        self.assign_roles(op, task)
        if isinstance(op, train.OptimizerOp):
            task.in_place = tuple(self.parts[v][0].tensor for v in (op.param, *op.state_operands()))
        elif isinstance(op, train.AccumulateOp):
            task.in_place = (self.parts[op.buffer][0].tensor,)

    def assign_roles(self, op: Operation, task: Task) -> None:
        roles = _roles_of(op)
        if roles is None:
            return
        operand_roles, result_role = roles
        for operand, role in zip(op.operands, operand_roles, strict=False):
            for part in self.parts[operand]:
                if part.tensor in task.reads:
                    task.roles[part.tensor] = role
        for tid in task.writes:
            task.roles[tid] = result_role

    def add_tiled(self, op: Operation, tiling) -> None:
        from monet_ir.schedule.tiling import operand_rows, tile_bounds, tile_signature, waits_for_all_rows

        axis = tiling.axis.data
        full = shape_of(op.results[0].type)[axis]
        sig = self.signature(op)
        bounds = tile_bounds(full, tiling.tiles.data)
        result_parts: dict[SSAValue, list[_Part]] = {r: [] for r in op.results}
        tile_tasks = []
        barrier = {self.tensors[p.tensor].producer for v in op.operands for p in self.parts[v]} \
            if waits_for_all_rows(op) else set()
        for lo, hi in bounds:
            reads: list[int] = []
            for index, operand in enumerate(op.operands):
                needed = operand_rows(op, index, axis, lo, hi)
                reads += [p.tensor for p in self.parts[operand] if _overlaps(p, needed)]
            task = self.new_task(op, tile_signature(sig, op, axis, hi - lo, full), reads)
            task.preds.update(p for p in barrier if p is not None)
            writes = []
            for r in op.results:
                kind, persistent = self.kind_of(op, r, task.phase)
                nbytes = -(-self.size(r.type) * (hi - lo) // full)
                tid = self.new_tensor(f"{r.name_hint or task.node}[{lo}:{hi}]", nbytes, kind, persistent, task.index)
                result_parts[r].append(_Part(tid, (lo, hi), axis))
                writes.append(tid)
            task.writes = tuple(writes)
            self.assign_roles(op, task)
            tile_tasks.append(task.index)
        self.parts.update(result_parts)
        self.stacks.setdefault(tiling.stack.data, []).append(tile_tasks)


# loop-nest roles of (operands, result) per op: the same nest with the output in another role
LOOP_NEST_ROLES = {
    "nn.conv": (("I", "W", "O"), "O"), "nn.matmul": (("I", "W"), "O"), "nn.gemm": (("I", "W", "O"), "O"),
    "nn.conv_transpose": (("O", "W", "I"), "I"), "grad.conv_input": (("O", "W"), "I"),
    "grad.conv_weight": (("O", "I"), "W"), "grad.matmul_lhs": (("O", "W"), "I"), "grad.matmul_rhs": (("O", "I"), "W"),
}


def _roles_of(op: Operation) -> tuple[tuple[str, ...], str] | None:
    return LOOP_NEST_ROLES.get(op.name)


def _overlaps(part: _Part, needed) -> bool:
    if needed is None or part.rows is None:
        return True
    axis, (lo, hi) = needed
    return part.axis != axis or (part.rows[0] < hi and lo < part.rows[1])


def _pace_stacks(tasks: list[Task], stacks: dict[int, list[list[int]]]) -> None:
    """Depth-first order inside a fused stack: the first layer's tile j waits for the last
    layer's tile j - (depth + 1), so a few tiles are in flight, not whole layers (the
    look-ahead covers a halo of one tile per layer)."""
    for layers in stacks.values():
        first, last = layers[0], layers[-1]
        lag = len(layers) + 1
        for j, index in enumerate(first):
            if j - lag >= 0 and j - lag < len(last):
                tasks[index].preds.add(last[j - lag])


def _gradient_results(fn: func.FuncOp) -> set[SSAValue]:
    ret = fn.body.block.last_op
    if not isinstance(ret, func.ReturnOp) or fn.res_attrs is None:
        return set()
    return {v for v, a in zip(ret.operands, fn.res_attrs.data, strict=False) if "monet.grad" in a.data}


def _order_in_place_updates(tasks: list[Task], tensors: list[TensorInfo]) -> None:
    for task in tasks:
        for tid in task.in_place:
            for reader in tensors[tid].consumers:
                if reader != task.index and reader < task.index:
                    task.preds.add(reader)


def _recompute_when_needed(tasks: list[Task]) -> None:
    """A recompute op reads only kept forward values, so data dependencies alone would let it
    run right after the forward pass and keep its result alive as long as storing it would.
    It runs where it stands in program order instead: after the backward op before it."""
    last_backward: int | None = None
    for task in tasks:
        if task.phase == "recompute" and last_backward is not None:
            task.preds.add(last_backward)
        elif task.phase == "backward":
            last_backward = task.index


def _optimizer_after_backward(tasks: list[Task]) -> None:
    backward = [t.index for t in tasks if t.phase in ("backward", "recompute")]
    if not backward:
        return
    # a chain through the last backward task would not order the others; depend on all of
    # them through the sinks of the backward sub-graph instead
    has_backward_succ = set()
    for t in tasks:
        if t.phase in ("backward", "recompute"):
            has_backward_succ.update(p for p in t.preds if tasks[p].phase in ("backward", "recompute"))
    sinks = [i for i in backward if i not in has_backward_succ]
    for t in tasks:
        if t.phase == "optimizer":
            t.preds.update(sinks)
            t.preds.discard(t.index)
