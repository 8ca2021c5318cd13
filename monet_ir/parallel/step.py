"""One training step of a parallelized step function on a multi-chip system.

`run_step(fn, system, plan, bits)`:

1. **One chip's schedule.** The function (after `parallelize`) is what every chip of a
   data-parallel group runs; the existing list scheduler schedules it on one chip of the
   system (`monet_ir.schedule.scheduler.schedule`), collectives included: a reducing
   collective is a vector op adding the (N-1)/N of the data the chip receives, an all-gather
   or shard a copy, so their local work, buffers and DRAM traffic are the chip's.
2. **The network.** The chip's schedule is then re-timed in start order: each task keeps its
   core order and the gaps the scheduler left (transfers), and is delayed by as much as any of
   its predecessors or the previous task on its core was. A collective starts when the chip
   reaches it; it is sent on the network simulator (`monet_ir.network.sim`) for every group
   of the plan at once (data-parallel groups side by side contend for shared links), and ends
   when the last message arrives (or the chip's local work ends, if later). Collectives run one
   after another in program order per chip, as on one communication stream.
3. **Figures.** Step latency; the chip's latency without communication; communication time
   (union of the intervals a collective is in flight), exposed (what the step got longer) and
   overlapped (the rest; the collectives' local work, adding and copying, is part of the
   chip's schedule); energy (the chip's times the chips, plus the links'); bytes sent;
   per-device memory.

Per-device memory (`memory_per_device`) is read from the IR after `parallelize`: parameters
(trainable parameter arguments, shards under ZeRO-3) and buffers at the compute precision;
gradients at the compute precision, whole under ZeRO 0-1 (every gradient is kept until the
optimizer step) and the optimizer's gradient shards under ZeRO 2-3; optimizer state in fp32
(the moment arguments, shards under ZeRO >= 1, plus an fp32 master copy of the parameters
the chip updates when the compute precision is narrower than fp32: mixed precision); the
optimizer's step counters apart (4 bytes each, not per parameter); the saved activations
(`monet_ir.analysis.accounting`). With mixed-precision Adam this is the ZeRO paper's
16Ψ, 4Ψ + 12Ψ/N, 2Ψ + 14Ψ/N and 16Ψ/N for stages 0-3 (Ψ/N exactly when N divides every
parameter's element count; shards are rounded up per tensor otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from monet_ir.network.collectives import rounds
from monet_ir.network.sim import NetworkSim, Request
from monet_ir.parallel.plan import Plan
from monet_ir.schedule.scheduler import Schedule, schedule
from monet_ir.schedule.taskgraph import extract

def _network_ops(network: str) -> frozenset[str]:
    from dialects.collective import COLLECTIVE

    return frozenset(op.name for op in COLLECTIVE.operations if op.NETWORK == network)


COMMUNICATING = _network_ops("collective")  # the ops whose group exchanges data over the network
POINT_TO_POINT = _network_ops("point-to-point")


@dataclass
class CollectiveRun:
    op: str
    node: str
    phase: str
    group: str
    bytes: int  # per chip: the whole tensor (all-reduce, reduce-scatter input, all-gather output)
    start: float  # cycles: the chip reaches it
    end: float  # the chip may go on: the network and the chip's local work are done
    net_end: float = 0.0  # the last message arrives
    sent_bytes: int = 0  # bytes all chips put on the network for it
    energy_pj: float = 0.0


@dataclass
class StepResult:
    system: Any
    plan: Plan
    chip_schedule: Schedule
    task_times: list[tuple[float, float]]  # re-timed (start, end) per task, cycles
    collectives: list[CollectiveRun]
    sim: NetworkSim
    latency_cycles: float
    chip_latency_cycles: float
    comm_cycles: float
    exposed_cycles: float
    memory: dict[str, Any] = field(default_factory=dict)
    exposed_by_group: dict[str, float] = field(default_factory=dict)  # cycles the step is longer for each group's network time

    @property
    def frequency_hz(self) -> float:
        return self.system.chip.frequency_hz


def _elements(t) -> int:
    n = 1
    for d in t.get_shape():
        n *= d
    return n


def run_step(fn, system, plan: Plan, bits: int | None, allocation=None, stage: int = 0,
             sim: NetworkSim | None = None) -> StepResult:
    """The step of `fn` (pipeline stage `stage` of the plan) on every chip running it; send and
    recv are left to the pipeline (`monet_ir.parallel.pipeline`): here they take no time. A
    collective's local work is its `CollectiveWork` (`dialects.interfaces`)."""
    from monet_ir import graph as step_graph
    from monet_ir.analysis.ir_signatures import tensor_bytes_at
    from monet_ir.types import tensor_bytes

    ops = list(step_graph.compute_ops(fn))
    g = extract(fn, bits=bits)
    sched = schedule(g, system.chip, allocation)
    size = (lambda t: tensor_bytes_at(t, bits)) if bits is not None else tensor_bytes
    freq = system.chip.frequency_hz
    net = system.network
    sim = sim if sim is not None else NetworkSim(net)
    per_stage = plan.dp * plan.tp
    groups = {kind: [net.ring_order(grp) for grp in plan.groups(kind) if grp[0] // per_stage == stage]
              for kind in ("dp", "tp")}

    times, runs, delay = _retime(sched, g, ops, groups, size, net, freq, sim)
    chip_latency = sched.latency_cycles
    last = max(sched.tasks, key=lambda st: st.end) if sched.tasks else None
    latency = max([e for _, e in times] + [chip_latency + (delay[last.task] if last else 0.0)])
    comm = _union([(r.start, r.net_end) for r in runs])
    result = StepResult(system, plan, sched, times, runs, sim, latency, chip_latency, comm,
                        max(0.0, latency - chip_latency))
    # per process group: how much shorter the step would be if its collectives took no network time
    for kind in sorted({r.group for r in runs}):
        t2, _, d2 = _retime(sched, g, ops, groups, size, net, freq, NetworkSim(net), free=kind)
        without = max([e for _, e in t2] + [chip_latency + (d2[last.task] if last else 0.0)])
        result.exposed_by_group[kind] = max(0.0, latency - without)
    result.memory = memory_per_device(fn, plan, bits)
    dram = system.chip.dram
    trace = sched.memories.get(dram.name if dram is not None else "dram")
    result.memory["dram_peak_bytes"] = trace.peak() if trace is not None else 0
    result.memory["capacity_bytes"] = dram.capacity_bytes if dram is not None else float("inf")
    return result


def _retime(sched, g, ops, groups, size, net, freq, sim, free: str | None = None):
    """The chip's schedule re-timed with the collectives on the network (module docstring);
    the collectives of group `free` take no network time. Returns (times, runs, delay)."""
    order = sorted(sched.tasks, key=lambda st: (st.start, st.task))
    delay = [0.0] * len(g.tasks)  # what the task's data consumers wait longer
    core_delay = [0.0] * len(g.tasks)  # what the next task on its core waits longer
    times: list[tuple[float, float]] = [(st.start, st.end) for st in sched.tasks]
    last_on_core: dict[int, int] = {}
    runs: list[CollectiveRun] = []
    # the optimizer barrier (`TaskGraph.barrier`): a waiter also follows every sink, whose
    # largest delay so far is kept as they are re-timed (delays are never negative)
    sinks = frozenset(g.barrier[0]) if g.barrier else frozenset()
    waiters = frozenset(g.barrier[1]) if g.barrier else frozenset()
    sinks_delay = 0.0
    for st in order:
        task = g.tasks[st.task]
        d = max((delay[p] for p in task.preds), default=0.0)
        if st.task in waiters and sinks_delay > d:
            d = sinks_delay
        prev = last_on_core.get(st.core)
        if prev is not None:
            d = max(d, core_delay[prev])
        last_on_core[st.core] = st.task
        core_delay[st.task] = d  # the network, not the core, carries a collective
        start, end = st.start + d, st.end + d
        if task.op in COMMUNICATING:
            op = ops[task.op_index]
            kind = task.op.split(".", 1)[1]
            nbytes = sum(size(v.type) for v in (op.results if kind == "all_gather" else op.operands))
            group_kind = op.group.data
            requests = [] if group_kind == free else [
                Request(f"{kind} {task.node}", rounds(kind, op.get_algorithm(), grp, nbytes, net.node_chips), start / freq)
                for grp in groups.get(group_kind, [])]
            results = sim.run(requests) if requests else []
            net_end = max((r.end_s for r in results), default=start / freq) * freq
            end = max(end, net_end)
            runs.append(CollectiveRun(task.op, task.node, task.phase, group_kind, nbytes, start, end, net_end,
                                      sum(r.bytes for r in results), sum(r.energy_pj for r in results)))
            d = end - st.end
        delay[st.task] = d
        if st.task in sinks and d > sinks_delay:
            sinks_delay = d
        times[st.task] = (start, end)
    return times, runs, delay


def _union(spans: list[tuple[float, float]]) -> float:
    total, reach = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b <= reach:
            continue
        total += b - max(a, reach)
        reach = b
    return total


def memory_per_device(fn, plan: Plan, bits: int | None) -> dict[str, Any]:
    """Model-state and activation bytes one chip holds (module docstring)."""
    from xdsl.ir import BlockArgument

    from dialects import collective as c
    from dialects import train
    from monet_ir import graph as step_graph
    from monet_ir.analysis.accounting import memory_summary

    elem = (bits / 8) if bits is not None else None

    def nbytes(t, fp32: bool = False) -> float:
        width = 4 if fp32 else (elem if elem is not None else _width(t))
        return _elements(t) * width

    infos = step_graph.arg_infos(fn)
    args = fn.body.block.args
    params = buffers = 0.0
    for info, arg in zip(infos, args, strict=True):
        if info.role == "param":
            if info.trainable:
                params += nbytes(arg.type)
            else:
                buffers += nbytes(arg.type)
    grads_full = grads_shard = state = master = steps = 0.0
    psi = 0
    seen_state = set()
    for op in step_graph.compute_ops(fn):
        if not isinstance(op, train.OptimizerOp):
            continue
        grad = op.grad
        full = grad
        owner = grad.owner
        if isinstance(owner, c.AllReduceOp | c.ReduceScatterOp):
            full = owner.operands[list(owner.results).index(grad)]
        psi += _elements(full.type)
        grads_full += nbytes(full.type)
        grads_shard += nbytes(grad.type)
        owned = op.operands[0]
        narrow = nbytes(owned.type) < nbytes(owned.type, fp32=True)
        if narrow:
            master += nbytes(owned.type, fp32=True)
        for s in op.state_operands():
            if s in seen_state or not isinstance(s, BlockArgument):
                continue
            seen_state.add(s)
            if s.type.get_shape() == owned.type.get_shape():
                state += nbytes(s.type, fp32=True)
            else:
                steps += 4 * max(1, _elements(s.type))
    grads = grads_shard if plan.zero >= 2 else grads_full
    summary = memory_summary(fn, bits)
    activations = summary["saved_activation_bytes"]
    model_state = params + grads + state + master
    out = {
        "parameter_count": psi,
        "parameter_bytes": int(params),
        "gradient_bytes": int(grads),
        "optimizer_state_bytes": int(state + master),
        "master_weight_bytes": int(master),
        "optimizer_step_bytes": int(steps),
        "model_state_bytes": int(model_state),
        "buffer_bytes": int(buffers),
        "activation_bytes": int(activations),
        "input_bytes": int(summary["input_bytes"]),
    }
    out["total_bytes"] = int(model_state + steps + buffers + activations + summary["input_bytes"])
    return out


def _width(t) -> float:
    from monet_ir.types import tensor_bytes

    n = _elements(t)
    return tensor_bytes(t) / n if n else 4
