"""Pipeline parallelism: micro-batches through the stages, GPipe or 1F1B.

Each stage function (`monet_ir.parallel.stages`) is one micro-batch's step on that stage's
chips; `run_step` schedules it on the chip (with its data-parallel collectives on the
network). From that schedule a stage has `F` (its forward pass of one micro-batch: the end of
its last forward op), `B` (its backward pass: from there to the end of its last backward or
recompute op) and a tail (what follows: the optimizer step and exposed gradient
communication), once per step. Activations go from stage s to s+1 after each forward, and
their gradients back after each backward: `collective.send` bytes, sent as one message on the
network between the two stages' chips.

`simulate(F, B, fwd_comm, bwd_comm, m, schedule)` places the m micro-batches:

- `gpipe`: every stage runs the m forwards, then the m backwards (Huang et al. 2019);
- `1f1b`: stage s runs min(p - s - 1, m) forwards, then alternates one forward and one
  backward, then the remaining backwards (PipeDream-flush, Narayanan et al. 2021), so it keeps
  at most p - s micro-batches' activations instead of m.

A forward of micro-batch i on stage s starts when the stage is free and stage s-1's forward of
i has arrived; a backward when stage s+1's backward of i has arrived (the last stage: after its
own forward). The bubble is the stages' idle share of the pipeline's makespan T:
`1 - sum_s m (F_s + B_s) / (p T)`; on balanced stages without communication it is
(p - 1)/(m + p - 1) for both schedules.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SCHEDULES = ("gpipe", "1f1b")


@dataclass
class PipelineTimes:
    makespan: float
    stage_end: list[float]  # end of each stage's last backward
    ops: list[list[tuple[str, int, float, float]]] = field(default_factory=list)  # per stage (kind, mb, start, end)
    bubble_fraction: float = 0.0


def stage_order(s: int, p: int, m: int, schedule: str) -> list[tuple[str, int]]:
    if schedule == "gpipe":
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
    warm = min(p - s - 1, m)
    order = [("F", i) for i in range(warm)]
    f, b = warm, 0
    while f < m:
        order.append(("F", f))
        f += 1
        order.append(("B", b))
        b += 1
    order += [("B", i) for i in range(b, m)]
    return order


def in_flight(s: int, p: int, m: int, schedule: str) -> int:
    """Micro-batches whose activations stage s holds at most at once."""
    return m if schedule == "gpipe" else min(m, p - s)


def simulate(F: list[float], B: list[float], fwd_comm: list[float], bwd_comm: list[float], m: int,
             schedule: str = "1f1b") -> PipelineTimes:
    """`fwd_comm[s]`: time from stage s to s+1 (activations); `bwd_comm[s]`: from s+1 to s."""
    p = len(F)
    orders = [stage_order(s, p, m, schedule) for s in range(p)]
    done: dict[tuple[str, int, int], float] = {}
    free = [0.0] * p
    pos = [0] * p
    ops: list[list[tuple[str, int, float, float]]] = [[] for _ in range(p)]
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for s in range(p):
            while pos[s] < len(orders[s]):
                kind, i = orders[s][pos[s]]
                if kind == "F":
                    dep = 0.0 if s == 0 else done.get(("F", s - 1, i))
                    if dep is not None and s > 0:
                        dep += fwd_comm[s - 1]
                    dur = F[s]
                else:
                    if s == p - 1:
                        dep = done.get(("F", s, i))
                    else:
                        dep = done.get(("B", s + 1, i))
                        if dep is not None:
                            dep += bwd_comm[s]
                    dur = B[s]
                if dep is None:
                    break
                start = max(free[s], dep)
                end = start + dur
                done[(kind, s, i)] = end
                free[s] = end
                ops[s].append((kind, i, start, end))
                pos[s] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            raise RuntimeError("pipeline schedule deadlocked")
    makespan = max(free)
    busy = sum(m * (F[s] + B[s]) for s in range(p))
    bubble = 1.0 - busy / (p * makespan) if makespan > 0 else 0.0
    return PipelineTimes(makespan, list(free), ops, bubble)


@dataclass
class ParallelResult:
    """A whole step of a plan on a system: per stage its `StepResult` (one micro-batch on one
    of its chips, with its data-parallel collectives), the pipeline's times, and totals."""

    system: object
    plan: object
    schedule: str
    stages: list  # StepResult per stage
    pipeline: PipelineTimes
    latency_cycles: float
    no_comm_latency_cycles: float
    comm_cycles: float  # data-parallel collectives in flight (slowest stage) + point-to-point time
    p2p_bytes: int  # activation and gradient bytes between stages per step (all micro-batches, one replica)
    p2p_energy_pj: float
    memory: dict
    stage_memory: list

    @property
    def frequency_hz(self) -> float:
        return self.system.chip.frequency_hz

    @property
    def exposed_cycles(self) -> float:
        return max(0.0, self.latency_cycles - self.no_comm_latency_cycles)

    @property
    def bubble_fraction(self) -> float:
        return self.pipeline.bubble_fraction if self.plan.pp > 1 else 0.0


def _phase_ends(result, retimed: bool) -> tuple[float, float, float]:
    from monet_ir.parallel.step import COMMUNICATING

    g = result.chip_schedule.graph
    f_end = b_end = 0.0
    for st in result.chip_schedule.tasks:
        task = g.tasks[st.task]
        if task.sig is None or task.op in COMMUNICATING:
            continue
        end = result.task_times[st.task][1] if retimed else st.end
        if task.phase == "forward":
            f_end = max(f_end, end)
        elif task.phase in ("backward", "recompute"):
            b_end = max(b_end, end)
    total = result.latency_cycles if retimed else result.chip_latency_cycles
    b_end = max(b_end, f_end)
    return f_end, b_end - f_end, total - b_end


@dataclass
class StageSteps:
    """What `combine` needs from a plan's stage functions: one micro-batch's step per stage
    (`run_step`), the bytes they send between stages, and their per-device memory."""

    stages: list
    fwd_bytes: list[int]
    bwd_bytes: list[int]
    memory: list[dict]


def stage_steps(module, system, plan, bits) -> StageSteps:
    """Schedule every stage function of a parallelized module on the system (the costly part;
    `combine` then places any number of micro-batches with either schedule)."""
    from dialects.collective import SendOp
    from monet_ir import graph as step_graph
    from monet_ir.analysis.ir_signatures import tensor_bytes_at
    from monet_ir.network.sim import NetworkSim
    from monet_ir.parallel.stages import stage_functions
    from monet_ir.parallel.step import run_step
    from monet_ir.types import tensor_bytes

    size = (lambda t: tensor_bytes_at(t, bits)) if bits is not None else tensor_bytes
    fns = stage_functions(module)
    p = len(fns)
    sim = NetworkSim(system.network)
    results = [run_step(fn, system, plan, bits, stage=s, sim=sim) for s, fn in enumerate(fns)]
    fwd_bytes, bwd_bytes = [0] * p, [0] * p
    for s, fn in enumerate(fns):
        for op in step_graph.compute_ops(fn):
            if isinstance(op, SendOp):
                peer = op.peer.value.data
                nbytes = size(op.input.type)
                if peer > s:
                    fwd_bytes[min(s, p - 2)] += nbytes
                else:
                    bwd_bytes[max(s - 1, 0)] += nbytes
    # run_step read each stage's per-device memory already
    memory = [{k: v for k, v in r.memory.items() if k not in ("dram_peak_bytes", "capacity_bytes")} for r in results]
    return StageSteps(results, fwd_bytes, bwd_bytes, memory)


def run_parallel(module, system, plan, bits, schedule: str = "1f1b") -> ParallelResult:
    return combine(stage_steps(module, system, plan, bits), system, plan, schedule)


def combine(steps: StageSteps, system, plan, schedule: str = "1f1b") -> ParallelResult:
    """The step of `plan` (its micro-batches) from its stages' one-micro-batch steps."""
    results = steps.stages
    p, m = len(results), plan.microbatches
    fwd_bytes, bwd_bytes = steps.fwd_bytes, steps.bwd_bytes
    freq = system.chip.frequency_hz
    net = system.network
    fwd_comm, bwd_comm, p2p_energy = [0.0] * p, [0.0] * p, 0.0
    for s in range(p - 1):
        a, b = plan.chip(s, 0, 0), plan.chip(s + 1, 0, 0)
        for nbytes, there, back in ((fwd_bytes[s], a, b), (bwd_bytes[s], b, a)):
            if not nbytes:
                continue
            t = (net.latency_s(there, back) + nbytes / net.bandwidth_bytes_per_s(there, back)) * freq
            if there == a:
                fwd_comm[s] = t
            else:
                bwd_comm[s] = t
            p2p_energy += nbytes * 8 * sum(net.links[i].energy_pj_per_bit for i in net.route(there, back))
    timed = [_phase_ends(r, True) for r in results]
    bare = [_phase_ends(r, False) for r in results]
    pipe = simulate([t[0] for t in timed], [t[1] for t in timed], fwd_comm, bwd_comm, m, schedule)
    latency = max(pipe.stage_end[s] + timed[s][2] for s in range(p))
    pipe0 = simulate([t[0] for t in bare], [t[1] for t in bare], [0.0] * p, [0.0] * p, m, schedule)
    no_comm = max(pipe0.stage_end[s] + bare[s][2] for s in range(p))
    comm = max(r.comm_cycles for r in results) + m * (sum(fwd_comm) + sum(bwd_comm))
    stage_memory = []
    for s, (base, r) in enumerate(zip(steps.memory, results, strict=True)):
        mem = dict(base)
        held = in_flight(s, p, m, schedule)
        act = mem["activation_bytes"]
        mem["microbatches_in_flight"] = held
        mem["activation_bytes"] = act * held
        mem["total_bytes"] += act * (held - 1)
        mem["dram_peak_bytes"] = r.memory["dram_peak_bytes"] + act * (held - 1)
        mem["capacity_bytes"] = r.memory["capacity_bytes"]
        stage_memory.append(mem)
    worst = max(stage_memory, key=lambda mm: mm["total_bytes"])
    return ParallelResult(system, plan, schedule, results, pipe, latency, no_comm, comm,
                          m * plan.dp * (sum(fwd_bytes) + sum(bwd_bytes)), m * plan.dp * p2p_energy,
                          dict(worst), stage_memory)
