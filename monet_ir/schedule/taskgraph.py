"""The compact graph the scheduler works on, extracted once from a training-step function.

The scheduler never walks or rebuilds IR: `extract(fn)` turns every op into a `Task` (its
cost-model signature, phase, origin node and the tensors it reads and writes) and every SSA value
or argument into a `TensorInfo` (bytes, kind, persistence, producer, consumers). Views
(`nn.reshape`) alias their input's storage (`root`), so memory is counted once.

Dependencies are data dependencies plus two training-specific orderings:
- an in-place optimizer update of a parameter runs after every other reader of that parameter
  (write-after-read), and
- optimizer steps run after the whole backward pass, as `optimizer.step()` follows
  `loss.backward()` (so every gradient is alive when the optimizer starts).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects import func
from xdsl.ir import SSAValue

from dialects import nn, train
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


def extract(fn: func.FuncOp, bits: int | None = None) -> TaskGraph:
    """The task graph of a step; `bits` overrides the width of float tensors (see
    `monet_ir.cost.ir_signatures.signature_of`)."""
    tensors: list[TensorInfo] = []
    ids: dict[SSAValue, int] = {}
    size = tensor_bytes if bits is None else (lambda t: tensor_bytes_at(t, bits))

    def new_tensor(value: SSAValue, name: str, kind: str, persistent: bool, producer: int | None) -> int:
        tid = len(tensors)
        tensors.append(TensorInfo(tid, name, size(value.type), kind, persistent, producer, root=tid))
        ids[value] = tid
        return tid

    for info, arg in zip(graph.arg_infos(fn), fn.body.block.args, strict=True):
        role = info.role or "input"
        new_tensor(arg, info.name or f"arg{info.index}", role, role in ("param", "state"), None)

    grad_results = _gradient_results(fn)
    tasks: list[Task] = []
    for op in graph.compute_ops(fn):
        index = len(tasks)
        phase = graph.op_phase(op)
        reads = tuple(ids[v] for v in op.operands)
        writes: list[int] = []
        for r in op.results:
            if isinstance(op, nn.ConstantOp):
                kind, persistent = "const", True
            elif r in grad_results:
                kind, persistent = "gradient", False
            else:
                kind, persistent = ("activation" if phase in ("forward", "recompute") else "gradient"), False
            tid = new_tensor(r, r.name_hint or graph.op_node(op) or op.name, kind, persistent, index)
            writes.append(tid)
            if isinstance(op, nn.ReshapeOp):
                tensors[tid].root = tensors[reads[0]].root
        in_place: tuple[int, ...] = ()
        if isinstance(op, train.OptimizerOp | train.AccumulateOp):
            in_place = (reads[0], *(ids[v] for v in op.state_operands())) if isinstance(op, train.OptimizerOp) \
                else (reads[0],)
        task = Task(index, op.name, graph.op_node(op), phase, signature_of(op, bits), reads, tuple(writes),
                    in_place=in_place)
        for t in reads:
            tensors[t].consumers.append(index)
            producer = tensors[t].producer
            if producer is not None:
                task.preds.add(producer)
        tasks.append(task)

    _order_in_place_updates(tasks, tensors)
    _optimizer_after_backward(tasks)
    return TaskGraph(tasks, tensors)


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
