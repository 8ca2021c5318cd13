"""List scheduling of a training step on a multi-core accelerator, with transfers and memory.

`schedule(task_graph, target, allocation=None)` assigns every task to a core able to run it (the
one that finishes it earliest, or one the allocation allows), orders tasks by data readiness,
and models:

- transfers between cores over the interconnect (a direct link, else a shared bus, else through
  DRAM) and between DRAM and cores over the DRAM interface; each link, bus and the DRAM interface
  is a resource that carries one transfer at a time at its full bandwidth, in request order
  (Stream's model), so concurrent transfers share bandwidth by queueing;
- the occupancy of each core's top memory and of DRAM over time: parameters, optimizer state,
  constants and the batch live in DRAM for the whole step; a value produced on a core is
  allocated there (if it is too large for the memory it is written to DRAM) and freed after its
  last consumer; a value another core reads is copied there; when a memory is full, the resident
  value whose next use is furthest away is evicted (written back to DRAM if no copy is there)
  and reloaded when needed; each costs time on the DRAM interface and energy;
- in-place optimizer updates write the parameter and its state back to DRAM.
- saved activations a plan pages (`monet_ir.schedule.paging`): written to the target's storage
  level after their forward use and read back into DRAM before their backward use, on the
  storage's channel (`_place_page`).

Times are cycles of the target's reference clock; a core's cycles are converted with its clock.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import reduce
from itertools import accumulate, compress, islice, repeat
from operator import add, and_, eq, is_, is_not, itemgetter, ne, not_
from typing import Any

from monet_ir.cost.signature import Cost, LoopNestSig
from monet_ir.errors import InternalError, MonetError, expected_errors
from monet_ir.schedule.taskgraph import TaskGraph, TaskView, touched_bytes
from targets import Core, Target

DRAM = -1  # location id of off-chip memory


class ScheduleError(MonetError):
    """An impossible configuration: no core can run an op, DRAM too small, bad allocation."""


class DramTooSmall(ScheduleError):
    """The step needs more main memory than the target's DRAM holds: `peak` and `capacity` bytes
    (the tools add what would help: `monet_ir.tools.advice`)."""

    def __init__(self, message: str, peak: int, capacity: int):
        super().__init__(message)
        self.peak, self.capacity = peak, capacity


@dataclass(slots=True)
class ScheduledTask:
    task: int
    core: int
    start: float
    end: float
    energy_pj: float
    compute_pj: float
    onchip_pj: float
    offchip_pj: float
    dram_bytes: int = 0


@dataclass(slots=True)
class Transfer:
    tensor: int
    src: int  # core id or DRAM
    dst: int
    start: float
    end: float
    bytes: int
    energy_pj: float
    resource: str
    reason: str  # load | store | copy | evict | writeback


@dataclass
class MemoryTrace:
    """Occupancy of one memory over time.

    `events` are (time, order, delta) triples. At one instant, frees of buffers allocated
    earlier come first (order 0: their space is reused at once), then allocations (1), then
    frees of buffers allocated at that same instant (2), so occupancy is never negative and a
    peak never counts a buffer together with the one that replaces it.
    """

    name: str
    capacity: float
    events: list[tuple[float, int, int]] = field(default_factory=list)

    def alloc(self, time: float, nbytes: int) -> None:
        self.events.append((time, 1, nbytes))

    def free(self, time: float, nbytes: int, allocated_at: float) -> None:
        self.events.append((time, 2 if time <= allocated_at else 0, -nbytes))

    def peak(self) -> int:
        """The most bytes in use at once: the highest level over the events in (time, order,
        delta) order. Events of one (time, order) all allocate (order 1, delta >= 0) or all
        free (delta <= 0), so their own order never changes the highest level, which is at
        the end of a group of allocations: sorted by time, then order, with two stable sorts on
        one key each (cheaper than comparing the triples), the answer is the same."""
        events = sorted(self.events, key=_second)
        events.sort(key=_first)
        return max(0, max(accumulate(map(_third, events)), default=0))

    def timeline(self) -> list[tuple[float, int]]:
        """(time, bytes in use after the event), one point per event."""
        level, points = 0, []
        for time, _, delta in sorted(self.events):
            level += delta
            points.append((time, level))
        return points


@dataclass
class Schedule:
    graph: TaskGraph
    target: Target
    tasks: list[ScheduledTask]
    transfers: list[Transfer]
    memories: dict[str, MemoryTrace]

    @property
    def latency_cycles(self) -> float:
        ends = [t.end for t in self.tasks] + [t.end for t in self.transfers]
        return max(ends, default=0.0)

    def peaks(self) -> dict[str, int]:
        """Peak bytes per memory (`MemoryTrace.peak`), in `memories` order."""
        return {name: trace.peak() for name, trace in self.memories.items()}

    def energy_breakdown_pj(self) -> dict[str, float]:
        """Energy of the step by where it is spent: compute, on-chip memory, off-chip memory
        (DRAM accesses of ops and transfers routed through DRAM) and the interconnect."""
        compute = onchip = offchip = interconnect = 0.0
        sigs = self.graph.tasks.sig
        for st in self.tasks:
            if sigs[st.task] is None:
                continue
            compute += st.compute_pj
            onchip += st.onchip_pj
            offchip += st.offchip_pj
        for tr in self.transfers:
            if tr.resource.startswith(("dram", "storage")):
                offchip += tr.energy_pj  # core-to-core copies routed through DRAM and paging included
            else:
                interconnect += tr.energy_pj
        return {"compute": compute, "onchip_memory": onchip, "offchip_memory": offchip, "interconnect": interconnect}


class Resource:
    """A link, bus or DRAM interface: one transfer at a time at `bits_per_cycle`."""

    def __init__(self, name: str, bits_per_cycle: float, energy_pj_per_bit: float):
        if bits_per_cycle <= 0:
            raise ScheduleError(f"{name}: bandwidth must be positive")
        self.name = name
        self.bits_per_cycle = bits_per_cycle
        self.energy_pj_per_bit = energy_pj_per_bit
        self.free_at = 0.0

    def reserve(self, ready: float, nbytes: int) -> tuple[float, float, float]:
        start = max(ready, self.free_at)
        end = start + nbytes * 8 / self.bits_per_cycle
        self.free_at = end
        return start, end, nbytes * 8 * self.energy_pj_per_bit


class PortDirection(Resource):
    """Reads or writes of a port both use (a DRAM with one read-write port): its own name and
    energy per bit, the port's timeline (one transfer at a time in either direction)."""

    def __init__(self, port: Resource, name: str, energy_pj_per_bit: float):
        self.port = port
        self.name = name
        self.bits_per_cycle = port.bits_per_cycle
        self.energy_pj_per_bit = energy_pj_per_bit

    @property
    def free_at(self) -> float:  # type: ignore[override]
        return self.port.free_at

    @free_at.setter
    def free_at(self, value: float) -> None:
        self.port.free_at = value


def top_memory(core: Core) -> tuple[str, float]:
    """Name and capacity (bytes) of the memory values live in between ops on a core: its
    outermost level (the last declared, ZigZag order)."""
    if not core.memories:
        return f"core{core.id}", 0.0
    top = max(core.memories, key=lambda m: (m.size_bits, core.memories.index(m)))
    return f"core{core.id}.{top.name}", top.size_bytes


class ScheduleMemo:
    """What repeated schedules on one target (with the same `cost_of` and `can_run`) share:
    per (signature, allowed cores) the cost options and cycles `Scheduler.price` found, and per
    task graph the tables `Scheduler._run` derives from it (successors, storage roots, consumer
    lists). A caller that schedules many candidates (`monet explore`'s evaluator) passes one
    memo to every `Scheduler`; its graphs must not change once scheduled. Entries are keyed by
    object identity and hold the object, so an identity is never reused while its entry lives."""

    GRAPH_TASKS = 4_000
    """The tasks of the graphs whose tables are kept, in all (least recently used dropped first,
    the newest always kept; each entry keeps its graph alive). A graph is scheduled again when
    only the allocation changes, which in a search is rare and comes soon if at all (see
    `monet_ir.explore.evaluate.GRAPH_CACHE_TASKS`); a graph kept longer is freed later, when its
    tens of thousands of objects have left the processor's caches: freeing a search
    candidate's graph (GPT-2 small b8, ~2,200 tasks) took 1.55 ms 8 evaluations after it was
    built against 0.51 ms right after, and every graph kept is walked by young collections."""

    def __init__(self) -> None:
        self.prices: dict[tuple[int, tuple[int, ...]], tuple[Any, dict, dict]] = {}
        self.stream_picks: dict[tuple, Any] = {}  # (budget, sizes) -> `_stream_picks`
        self.graphs: OrderedDict[int, tuple[TaskGraph, GraphTables]] = OrderedDict()

    def tables(self, graph: TaskGraph) -> GraphTables:
        entry = self.graphs.get(id(graph))
        if entry is not None and entry[0] is graph:
            self.graphs.move_to_end(id(graph))
            return entry[1]
        tables = GraphTables(graph)
        graphs = self.graphs
        graphs[id(graph)] = (graph, tables)
        while len(graphs) > 1 and sum(len(kept.tasks) for kept, _ in graphs.values()) > self.GRAPH_TASKS:
            graphs.popitem(last=False)
        return tables

    def forget(self, graph: TaskGraph) -> None:
        """Drop the tables of `graph` (its owner is done with it: the memo no longer keeps it alive)."""
        entry = self.graphs.get(id(graph))
        if entry is not None and entry[0] is graph:
            del self.graphs[id(graph)]


class GraphTables:
    """Tables of a task graph the list scheduler reads and never changes. The graph's columns
    serve as they are (`root_of`, `bytes_of`: `paging.prepare` sizes a buffer in both at once)."""

    def __init__(self, g: TaskGraph) -> None:
        tensors = g.tensors
        count = len(tensors)
        self.root_of = tensors.root
        self.bytes_of = tensors.bytes
        self.tensors = tensors
        # the tensors that share another's storage (the page tasks' copies of a view)
        views: dict[int, list[int]] = {}  # root -> the tensors other than itself that share its storage
        for tid in compress(range(count), map(ne, tensors.root, range(count))):
            views.setdefault(tensors.root[tid], []).append(tid)
        self.views = views
        # remaining uses per storage root before any task runs (0 for the other tensors; copied per run)
        uses = list(map(len, tensors.consumers))
        for root, others in views.items():
            for tid in others:
                uses[root] += uses[tid]
                uses[tid] = 0
        self.uses = uses
        # arguments and constants, in DRAM from the start (tensors kept in storage are not)
        producers, kinds, roots = tensors.producer, tensors.kind, tensors.root
        initial = {tid for tid in compress(range(count), map(is_, producers, repeat(None))) if roots[tid] == tid}
        initial.update(compress(range(count), map(eq, kinds, repeat("const"))))
        self.initial = sorted(tid for tid in initial if kinds[tid] != "stored")
        # storages whose DRAM copy is freed after their last use: values the step produces
        self.dram_freeable = list(map(and_, map(not_, tensors.persistent), map(is_not, producers, repeat(None))))
        self.consumers: dict[int, list[int]] = {}  # root -> its readers, sorted (`root_consumers`, on demand)
        # per task, the bytes of the tensors it touches (`Task.touched_bytes`; the extractor
        # fills them, a graph made of other tasks may not have them)
        self.touched_bytes = g.tasks.touched_bytes
        if None in self.touched_bytes:
            self.touched_bytes = [known if known is not None else touched_bytes(reads, writes, tensors.bytes)
                                  for known, reads, writes in zip(g.tasks.touched_bytes, g.tasks.reads, g.tasks.writes)]
        # the successors of each task, with the in-degrees and the tasks without predecessors
        n = len(g.tasks)
        all_preds = g.tasks.preds
        self.sources = sources = []
        barrier = g.barrier
        if barrier is None:
            self.indegree = indegree = [0] * n
            self.succ = succ = [[] for _ in range(n)]
            for index, preds in enumerate(all_preds):
                if preds:
                    indegree[index] = len(preds)
                    for p in preds:
                        succ[p].append(index)
                else:
                    sources.append(index)
            return
        # The optimizer barrier (`TaskGraph.barrier`) as one join node, last in the tables and
        # named -1 (its position from the end) in successor lists and the readiness heap: each
        # sink -> the join -> each waiter, whose in-degree counts the join once, instead of an
        # edge per (sink, waiter). A sink a waiter reads directly feeds it through the join only.
        sinks, waiters = barrier
        self.indegree = indegree = [0] * (n + 1)
        self.succ = succ = [[] for _ in range(n + 1)]
        indegree[n] = len(sinks)
        for p in sinks:
            succ[p].append(-1)
        joined = succ[n]
        sink_set = frozenset(sinks)
        waiting = bytearray(n)
        for index in waiters:
            waiting[index] = 1
        for index, preds in enumerate(all_preds):
            if waiting[index]:
                joined.append(index)
                direct = preds - sink_set if preds else preds
                indegree[index] = len(direct) + 1
                for p in direct:
                    succ[p].append(index)
            elif preds:
                indegree[index] = len(preds)
                for p in preds:
                    succ[p].append(index)
            else:
                sources.append(index)

    def root_consumers(self, root: int) -> list[int]:
        """The tasks that read a storage (through any tensor sharing it), in task order."""
        consumers = self.consumers.get(root)
        if consumers is None:
            readers = self.tensors.consumers
            consumers = list(readers[root])
            for view in self.views.get(root, ()):
                consumers.extend(readers[view])
            consumers.sort()
            self.consumers[root] = consumers
        return consumers


class ScheduleSummary:
    """What `monet explore` scores a schedule by, without the per-task and per-transfer objects
    of a `Schedule` (`Scheduler.run_summary`): the latency, the energy by part and the memory
    traces. Each figure is computed as `Schedule` computes it, floating-point sums in the same
    order, so `evaluation_of_schedule` gives the same `Evaluation` from either."""

    __slots__ = ("target", "memories", "latency_cycles", "_energy", "_peaks")

    def __init__(self, target: Target, memories: dict[str, MemoryTrace], latency_cycles: float,
                 energy: dict[str, float], peaks: dict[str, int]):
        self.target = target
        self.memories = memories
        self.latency_cycles = latency_cycles
        self._energy = energy
        self._peaks = peaks

    def energy_breakdown_pj(self) -> dict[str, float]:
        return dict(self._energy)

    def peaks(self) -> dict[str, int]:
        """Peak bytes per memory (`MemoryTrace.peak`), in `memories` order."""
        return dict(self._peaks)


class Scheduler:
    def __init__(self, graph: TaskGraph, target: Target, allocation: Callable[[TaskView], tuple[int, ...] | None] | None,
                 cost_of: Callable, can_run: Callable, memo: ScheduleMemo | None = None):
        self.g = graph
        self.memo = memo
        self.target = target
        self.allocation = allocation
        self.cost_of = cost_of
        self.can_run = can_run
        self.freq = target.frequency_hz
        n_cores = len(target.cores)
        self.core_free = [0.0] * n_cores
        # per task, once placed: its core, start, end, the energy parts of its cost (`split_energy`)
        # and its cost (None: a view or a page task); `ScheduledTask`s are built by `run` only
        n = len(graph.tasks)
        self.done = bytearray(n)  # 1 once a task is placed
        self.task_core = [0] * n
        self.task_start = [0.0] * n
        self.task_end = [0.0] * n
        self.task_cost: list[Cost | None] = [None] * n
        self.task_parts: list[tuple[float, float, float] | None] = [None] * n
        # `Transfer` fields, one tuple per resource hop (`Transfer`s are built by `run` only)
        self.transfers: list[tuple] = []
        # per storage root: where valid copies of it are and when each became ready (None: never seen)
        self.copies: list[dict[int, float] | None] = [None] * len(graph.tensors)
        self.resident_bytes = [0] * n_cores
        self.resident: list[dict[int, float]] = [dict() for _ in range(n_cores)]  # root -> when allocated
        self.dram_allocated_at = [0.0] * len(graph.tensors)
        # frees already decided but at a time later than allocations still to come may use:
        # those bytes still occupy the memory until then
        self.pending_frees: list[list[tuple[float, int]]] = [[] for _ in range(n_cores)]
        self.pending_bytes = [0] * n_cores  # sum over pending_frees
        # running sums of the bytes of pending_frees (entry i: every byte freed up to and with
        # the i-th), and that sum before its first entry: the bytes freed between two times are
        # a difference, found by bisection, however long the list grows (it does when many
        # tasks queue for one core: a step's optimizer updates)
        self.pending_sums: list[list[int]] = [[] for _ in range(n_cores)]
        self.pending_floor = [0] * n_cores
        self.op_core: dict[int, int] = {}  # IR op -> the core its (first) tile runs on
        self.next_use_from: dict[int, int] = {}  # root -> index in root_consumers before which all are scheduled
        self.mem_names = []
        self.capacity = []
        self.memories: dict[str, MemoryTrace] = {}
        for core in target.cores:
            name, cap = top_memory(core)
            self.mem_names.append(name)
            self.capacity.append(cap)
            self.memories[name] = MemoryTrace(name, cap)
        dram = target.dram
        self.dram_name = dram.name if dram is not None else "dram"
        self.memories[self.dram_name] = MemoryTrace(self.dram_name, dram.capacity_bytes if dram else float("inf"))
        if dram is None or dram.ports < 2:
            # one port: reads and writes take turns, each at its own energy and on its own Gantt lane
            port = self._dram_resource("read")
            self.dram_read = PortDirection(port, "dram read", port.energy_pj_per_bit)
            self.dram_write = PortDirection(port, "dram write", dram.write_energy_pj_per_bit if dram else 0.0)
        else:
            self.dram_read = self._dram_resource("read")
            self.dram_write = self._dram_resource("write")
        self.from_dram, self.to_dram = [self.dram_read], [self.dram_write]
        self.through_dram = [self.dram_write, self.dram_read]  # a core-to-core copy without a link or bus
        self.links = {(l.src, l.dst): Resource(f"link {l.src}->{l.dst}", l.bandwidth_bits, l.energy_pj_per_bit)
                      for l in target.interconnect.links}
        # (src + 1, dst + 1) -> `_route` (DRAM is -1)
        self.routes: list[list[list[Resource] | None]] = [[None] * (n_cores + 1) for _ in range(n_cores + 1)]
        self.buses = [(set(b.cores), Resource(f"bus {','.join(map(str, b.cores))}", b.bandwidth_bits, b.energy_pj_per_bit))
                      for b in target.interconnect.buses]
        self.costs: list[dict[int, Cost]] = []
        self.every_core = tuple(range(n_cores))
        # per task, for each core it may run on: its cycles there, the energy parts of its cost
        # there (`split_energy`) and what the op streams through DRAM itself (`stream_of`)
        self.on_core: list[dict[int, tuple[float, tuple[float, float, float], Any]]] = []
        self.stream_picks = memo.stream_picks if memo is not None else {}  # (budget, sizes) -> `_stream_picks`

    def _dram_resource(self, direction: str) -> Resource:
        dram = self.target.dram
        if dram is None:
            return Resource("dram", float("inf"), 0.0)
        energy = dram.read_energy_pj_per_bit if direction == "read" else dram.write_energy_pj_per_bit
        return Resource(f"dram {direction}", dram.bits_per_cycle(self.freq), energy)

    # ------------------------------------------------------------------ costs

    def price(self) -> None:
        # tasks of one signature (an op's backward twin, recompute copies, repeated layers)
        # share their options: a graph has far fewer signatures than tasks
        # (kept across schedules by a memo: the entry holds the signature, so its id stays its own)
        seen: dict[tuple[int, tuple[int, ...]], tuple[Any, dict, dict]] = {} if self.memo is None else self.memo.prices
        from monet_ir.schedule.mapping import Allocation, onnx_names

        allocation = self.allocation
        # an `Allocation` answers by a task's node first, then by its op, the op's ONNX names, its
        # phase and `default` (`Allocation.__call__`): the answers without the node are asked
        # once per op and phase, and each answer's cores are checked once
        entries = allocation.entries if type(allocation) is Allocation else None
        by_op: dict[tuple[str, str], tuple[int, ...] | None] = {}
        checked: dict[tuple[int, ...], tuple[int, ...]] = {}
        every = self.every_core
        add_costs, add_on_core = self.costs.append, self.on_core.append
        # consecutive tasks mostly come from one op (its tiles): they share the answer of an
        # `Allocation` (it depends on the node, op and phase only) and mostly their signature
        node = op = phase = None
        sig = sig_allowed = known = None
        allowed = every
        tasks = self.g.tasks
        index = -1
        for index, (task_node, task_op, task_phase, task_sig) in enumerate(zip(tasks.node, tasks.op, tasks.phase,
                                                                                tasks.sig)):
            if allocation is None:
                pass
            elif entries is None:  # any other callable answers task by task
                self.current = index
                allowed = self.allowed_cores(tasks[index])
            elif task_node != node or task_op != op or task_phase != phase:
                node, op, phase = task_node, task_op, task_phase
                chosen = entries.get(node)
                if chosen is None:
                    which = (op, phase)
                    if which in by_op:
                        chosen = by_op[which]
                    else:
                        keys = (op, *onnx_names(op), phase, "default")
                        chosen = by_op[which] = next((entries[key] for key in keys if key in entries), None)
                if chosen is None:
                    allowed = every
                else:
                    allowed = checked.get(chosen)
                    if allowed is None:
                        self.current = index
                        allowed = checked[chosen] = self._checked(tasks[index], chosen)
            if task_sig is not sig or allowed is not sig_allowed:
                sig, sig_allowed = task_sig, allowed
                known = seen.get((id(sig), allowed))
                if known is None or known[0] is not sig:
                    self.current = index
                    known = seen[(id(sig), allowed)] = self._options(tasks[index], allowed)
            add_costs(known[1])
            add_on_core(known[2])
        if index >= 0:
            self.current = index

    def _options(self, task: TaskView, allowed: tuple[int, ...]) -> tuple[Any, dict, dict]:
        """(signature, cost per allowed core able to run the task, (its cycles there, the
        energy parts of that cost, `stream_of` it)), as `on_core` holds them."""
        sig = task.sig
        if sig is None:  # views: free, run where the data is
            return None, {c: None for c in allowed}, {c: (0.0, None, None) for c in allowed}
        from monet_ir.cost import CostError

        cores = self.target.cores
        options = {}
        refusals = []
        for c in allowed:
            core = cores[c]
            if self.can_run(sig, core):
                try:
                    options[c] = self.cost_of(sig, core)
                except CostError as e:  # e.g. no loop order fits this core's memories
                    refusals.append(str(e))
        if not options:
            kind = "loop nest" if isinstance(sig, LoopNestSig) else sig.kind
            where = "the allowed cores " + str(list(allowed)) if self.allocation else f"target '{self.target.name}'"
            why = f": {refusals[0]}" if refusals else ""
            raise ScheduleError(f"no core of {where} can run {task.op} (node '{task.node}', {kind} op){why}")
        loop_nest = isinstance(sig, LoopNestSig)
        return sig, options, {c: (self.cycles(cost, c), split_energy(cost), stream_of(cost, loop_nest))
                              for c, cost in options.items()}

    def allowed_cores(self, task: TaskView) -> tuple[int, ...]:
        every = self.every_core
        if self.allocation is None:
            return every
        chosen = self.allocation(task)
        if chosen is None:
            return every
        return self._checked(task, chosen)

    def _checked(self, task: TaskView, chosen: tuple[int, ...]) -> tuple[int, ...]:
        """The cores an allocation chose for a task, as a tuple, once each is one of the target's."""
        every = self.every_core
        bad = [c for c in chosen if c not in every]
        if bad:
            raise ScheduleError(f"allocation of node '{task.node}' names core(s) {bad}, the target has {list(every)}")
        return tuple(chosen)

    def cycles(self, cost: Cost, core_id: int) -> float:
        return cost.latency_cycles * self.freq / self.target.cores[core_id].clock_hz

    # ------------------------------------------------------------------ driver

    def run(self) -> Schedule:
        self._guarded()
        g = self.g
        tasks = []
        core_of, start_of, end_of, cost_of, parts_of = (self.task_core, self.task_start, self.task_end, self.task_cost,
                                                        self.task_parts)
        for i in range(len(g.tasks)):
            cost = cost_of[i]
            if cost is None:
                tasks.append(ScheduledTask(i, core_of[i], start_of[i], end_of[i], 0.0, 0.0, 0.0, 0.0))
            else:
                compute, onchip, offchip = parts_of[i]
                tasks.append(ScheduledTask(i, core_of[i], start_of[i], end_of[i], cost.energy_pj, compute, onchip,
                                           offchip, int(cost.dram_bytes)))
        transfers = [Transfer(*t) for t in self.transfers]
        return Schedule(g, self.target, tasks, transfers, self.memories)

    def run_summary(self) -> ScheduleSummary:
        """Schedule, and return only what a search scores (see `ScheduleSummary`): the same
        figures as `run()`'s `Schedule` gives, without building its objects."""
        self._guarded()
        # `Schedule.latency_cycles`: the latest end of a task or a transfer
        latency = max(self.task_end, default=0.0)
        if self.transfers:
            latency = max(latency, max(map(_fifth, self.transfers)))
        # `Schedule.energy_breakdown_pj`: tasks with a signature in task order, then the transfers,
        # each sum added up in that order (`functools.reduce`; `sum` of floats may compensate)
        costed = list(filter(None, self.task_parts))  # (None: a task without a cost)
        compute = reduce(add, map(_first, costed), 0.0)
        onchip = reduce(add, map(_second, costed), 0.0)
        offchip = reduce(add, map(_third, costed), 0.0)
        energies, resources = list(map(_seventh, self.transfers)), list(map(_eighth, self.transfers))
        off_chip = {name for name in set(resources) if name.startswith(("dram", "storage"))}
        through = list(map(off_chip.__contains__, resources))
        offchip = reduce(add, compress(energies, through), offchip)
        interconnect = reduce(add, compress(energies, map(not_, through)), 0.0)
        energy = {"compute": compute, "onchip_memory": onchip, "offchip_memory": offchip, "interconnect": interconnect}
        peaks = {}
        for name, trace in self.memories.items():
            peaks[name] = self.dram_peak if name == self.dram_name and self.dram_peak is not None else trace.peak()
        return ScheduleSummary(self.target, self.memories, latency, energy, peaks)

    def _guarded(self) -> None:
        try:
            self._run()
        except (ScheduleError, InternalError, KeyboardInterrupt):
            raise
        except expected_errors():
            raise
        except Exception as e:  # noqa: BLE001  (a bug: say which op it was on)
            task = self.g.tasks[self.current] if self.current is not None else None
            where = f"op {task.op} (node '{task.node}')" if task is not None else "the scheduler"
            raise InternalError(where, e) from e

    def _run(self) -> None:
        self.current: int | None = None
        self.dram_peak: int | None = None
        self.price()
        g = self.g
        tables = GraphTables(g) if self.memo is None else self.memo.tables(g)
        self.root_of = tables.root_of
        self.bytes_of = tables.bytes_of
        self.core_events = [self.memories[name].events for name in self.mem_names]
        self.dram_events = self.memories[self.dram_name].events
        self.remaining_uses = list(tables.uses)
        self.tables = tables
        self._initial_dram()
        self.touched_bytes = tables.touched_bytes
        if g.storage_plan is not None:  # (`paging.prepare` has just sized its buffers)
            self.touched_bytes = [touched_bytes(reads, writes, self.bytes_of) for reads, writes in
                                  zip(g.tasks.reads, g.tasks.writes)]
        self._place_all()
        if 0 in self.done:  # (a task never ready)
            raise ScheduleError("the task graph has a cycle")
        self._check_dram()

    def _initial_dram(self) -> None:
        events = self.dram_events
        if self.g.storage_plan is not None:  # tensors a plan keeps in storage (monet_ir.schedule.paging)
            from monet_ir.schedule.paging import prepare

            prepare(self, self.g.storage_plan, (ScheduledTask, Transfer, MemoryTrace, ScheduleError))
        copies = self.copies
        sizes = self.g.tensors.bytes
        for tid in self.tables.initial:  # arguments and constants: in DRAM from the start
            copies[tid] = {DRAM: 0.0}
            events.append((0.0, 1, sizes[tid]))  # `MemoryTrace.alloc`

    def _check_dram(self) -> None:
        dram = self.target.dram
        if dram is None:
            return
        peak = self.dram_peak = self.memories[self.dram_name].peak()
        if peak > dram.capacity_bytes:
            hint = ""
            if self.target.storage is not None and not self.g.storage_plan:
                # the one way such a step runs here: keep what does not fit in the storage level
                hint = (f"; keep tensors in its storage '{self.target.storage.name}' with --checkpoint plan=FILE.json "
                        f"(monet explore --objective energy --memory-budget BYTES writes one; docs/poet.md)")
            raise DramTooSmall(
                f"target '{self.target.name}': DRAM '{dram.name}' holds {dram.capacity_bytes} bytes, "
                f"the training step needs {peak} bytes in it{hint}", peak, int(dram.capacity_bytes)
            )

    # ------------------------------------------------------------------ the tasks

    def _place_all(self) -> None:
        """Place the tasks in order of readiness (a task is ready when its predecessors are
        done); those never ready are left undone. The body of the loop places one task with a
        signature (views and page tasks: `_place_view`, `_place_page`); it is one function,
        its state in locals, because it runs once per task of every candidate a search scores."""
        tables = self.tables
        tasks = self.g.tasks
        reads_of, writes_of, sig_of, page_of, op_index_of, roles_of, in_place_of = (
            tasks.reads, tasks.writes, tasks.sig, tasks.page, tasks.op_index, tasks.roles, tasks.in_place)
        indegree = list(tables.indegree)
        succ = tables.succ
        ready_time = [0.0] * len(indegree)  # (with the barrier's join last, `GraphTables`)
        joined = succ[-1] if succ else ()  # the waiters of the barrier's join, when it has one
        heap = [(0.0, index) for index in tables.sources]
        heapq.heapify(heap)
        pop, push = heapq.heappop, heapq.heappush
        costs, on_core = self.costs, self.on_core
        op_core = self.op_core
        core_free = self.core_free
        all_copies = self.copies
        root_of, bytes_of = self.root_of, self.bytes_of
        remaining = self.remaining_uses
        resident_of, resident_bytes, pending_bytes = self.resident, self.resident_bytes, self.pending_bytes
        capacities = self.capacity
        core_events, dram_events = self.core_events, self.dram_events
        dram_allocated_at, dram_freeable = self.dram_allocated_at, tables.dram_freeable
        done_flags = self.done
        task_core, task_start, task_end = self.task_core, self.task_start, self.task_end
        task_cost, task_parts = self.task_cost, self.task_parts
        room_at, free, transfer = self._room_at, self._free, self._transfer
        routes, add_transfer = self.routes, self.transfers.append
        stream_picks, touched_of = self.stream_picks, self.touched_bytes
        while heap:
            ready, index = pop(heap)  # `ready` is ready_time[index]: its predecessors are all done
            if index < 0:
                # The barrier's join (`GraphTables`), pushed as (ready, -1) once its last sink is
                # placed, `ready` the latest end of the sinks. Real tasks pop in exactly the order
                # of a graph with an edge per (sink, waiter): (1) until the last sink is placed,
                # neither the join nor a waiter whose preds hold every sink is in the heap, in
                # either graph; (2) from then until the join pops, every pop is a real entry
                # (r, i) < (ready, -1), i.e. r < ready, while every such waiter (if its other
                # preds are done) is in the old heap at (r_w, w) with r_w >= ready: the old heap
                # pops the same entries; (3) the join pops before any entry (ready, i), the
                # first moment the old heap's least entry could be a waiter's, and then gives
                # each waiter the old ready time (max of its other preds' ends and the sinks'
                # ends) and pushes those whose other preds are done: from here both heaps hold
                # the same entries. Ties stay ordered by index; a join at (ready, n) would let a
                # task (ready, i > w) pop before a waiter w.
                for s in joined:
                    if ready > ready_time[s]:
                        ready_time[s] = ready
                    indegree[s] = left = indegree[s] - 1
                    if not left:
                        push(heap, (ready_time[s], s))
                continue
            self.current = index
            if page_of[index]:
                end = self._place_page(tasks[index], ready)
            elif sig_of[index] is None:
                end = self._place_view(tasks[index], ready)
            else:
                options = costs[index]
                runs = on_core[index]
                op_index = op_index_of[index]
                pinned = op_core.get(op_index)
                if pinned is not None and pinned in options:
                    # the tiles of one op share a core, as Stream allocates a layer's CNs: its
                    # weights are loaded once and stay resident across tiles
                    core = pinned
                    cost = options[pinned]
                elif len(options) == 1:
                    core, = options
                    cost = options[core]
                else:
                    best = None
                    arrivals = self._estimate_arrivals(reads_of[index], options, ready)
                    for (c, cost), arrival in zip(options.items(), arrivals):
                        start = max(ready, core_free[c], arrival)
                        key = (start + runs[c][0], cost.energy_pj, c)
                        if best is None or key < best[0]:
                            best = (key, c, cost)
                    _, core, cost = best
                if pinned != core:
                    op_core[op_index] = core
                # tensors this task moves through DRAM instead of holding them (its own cost
                # counts the traffic, or no room on chip); `unpaid`: outputs streamed by us
                cycles, parts, spill = runs[core]
                reads, writes = reads_of[index], writes_of[index]
                # (a task's reads may name a tensor twice)
                n = len(reads)
                unique = n < 2 or (reads[0] != reads[1] if n == 2 else len(set(reads)) == n)
                if spill is None:
                    streamed = NOTHING
                elif spill.__class__ is frozenset:  # a loop-nest op: the roles its model spilled
                    streamed = frozenset([t for t, role in roles_of[index].items() if role in spill])
                else:
                    # a vector op: its largest tensors up to the DRAM bytes its cost counts, each
                    # once (its writes are the tensors it produces, never one it reads nor one
                    # another); which of them depends only on the budget and the sizes in operand
                    # order (`touched_bytes`)
                    touched = reads + writes if unique else tuple(dict.fromkeys(reads + writes))
                    key = (spill, touched_of[index])
                    picks = stream_picks.get(key)
                    if picks is None:
                        picks = stream_picks[key] = _stream_picks(key[1], spill)
                    streamed = frozenset(touched if picks is True else picks(touched))
                unpaid = None
                capacity = capacities[core]
                # inputs start arriving as soon as they exist and there is room (prefetch while
                # the core finishes earlier work), as Stream fills idle link time
                arrival = 0.0
                for tid in reads:
                    root = root_of[tid]
                    copies = all_copies[root]
                    if copies is None:
                        copies = all_copies[root] = {}
                    here = copies.get(core)
                    if here is None:
                        if tid in streamed:
                            # the op reads it from DRAM itself (its cost counts that traffic)
                            here = copies.get(DRAM)
                            if here is None:
                                if copies:
                                    self._ensure_in_dram(root, copies)
                                here = copies.get(DRAM, 0.0)
                        else:
                            # `_fetch`: bring it here
                            if len(copies) == 1:
                                (src, at), = copies.items()
                            else:
                                src, at = min(copies.items(), key=_second)
                            nbytes = bytes_of[root]
                            when = at if at > ready else ready
                            if resident_bytes[core] + pending_bytes[core] + nbytes > capacity:
                                when = room_at(core, nbytes, reads, when, ready)
                            if when is None:
                                # no room even after evicting: it streams through from DRAM, and we pay that
                                self._ensure_in_dram(root, copies)
                                here = transfer(root, DRAM, core, max(copies[DRAM], ready), "load")
                            else:
                                route = routes[src + 1][core + 1]
                                if route is not None and len(route) == 1:
                                    # `_transfer` over one hop, inlined
                                    res = route[0]
                                    sent = res.free_at
                                    if when > sent:
                                        sent = when
                                    here = res.free_at = sent + nbytes * 8 / res.bits_per_cycle
                                    add_transfer((root, src, core, sent, here, nbytes, nbytes * 8 * res.energy_pj_per_bit,
                                                  res.name, "load" if src == DRAM else "copy"))
                                else:
                                    here = transfer(root, src, core, when, "load" if src == DRAM else "copy")
                                resident_of[core][root] = when  # allocated here
                                resident_bytes[core] += nbytes
                                core_events[core].append((when, 1, nbytes))
                                copies[core] = here
                    if here > arrival:
                        arrival = here
                start = core_free[core]  # the latest of `ready`, the core's last end and `arrival`
                if ready > start:
                    start = ready
                if arrival > start:
                    start = arrival
                # outputs are placed together: check each one with those before it (the tensors
                # it writes that are storages of their own, not views of existing ones)
                need = 0
                for tid in writes:
                    if tid in streamed or root_of[tid] != tid:
                        continue
                    nbytes = bytes_of[tid]
                    if resident_bytes[core] + pending_bytes[core] + need + nbytes <= capacity:
                        need += nbytes  # `_room_at`'s first answer: fits even before any pending free
                        continue
                    when = room_at(core, need + nbytes, reads, start, ready)
                    if when is None:
                        if unpaid is None:
                            unpaid = set()
                        unpaid.add(tid)
                    else:
                        start, need = when, need + nbytes
                end = start + cycles
                core_free[core] = end
                done_flags[index] = 1
                task_core[index] = core
                task_start[index] = start
                task_end[index] = end
                task_cost[index] = cost
                task_parts[index] = parts
                # the outputs
                for tid in writes:
                    if root_of[tid] != tid:
                        continue
                    if tid in streamed or (unpaid is not None and tid in unpaid):
                        # the op writes it to DRAM as it goes (spilled by the op, or no room on chip)
                        all_copies[tid] = {DRAM: end}
                        dram_allocated_at[tid] = start  # `_dram_alloc`
                        dram_events.append((start, 1, bytes_of[tid]))
                        if unpaid is not None and tid in unpaid:
                            transfer(tid, core, DRAM, start, "store")
                        if remaining[tid] == 0:
                            free(tid, end)
                        continue
                    nbytes = bytes_of[tid]
                    resident_of[core][tid] = start  # allocated here
                    resident_bytes[core] += nbytes
                    core_events[core].append((start, 1, nbytes))
                    all_copies[tid] = {core: end}
                    if remaining[tid] == 0:
                        free(tid, end)
                if in_place_of[index]:
                    self._write_back(in_place_of[index], core, end)
                # `_release_inputs`
                for tid in reads if unique else set(reads):
                    root = root_of[tid]
                    remaining[root] = left = remaining[root] - 1
                    if left <= 0:
                        copies = all_copies[root]
                        if not copies:
                            continue
                        if len(copies) == 1 and DRAM in copies:
                            # `_free` of a storage only in DRAM
                            if dram_freeable[root]:
                                at = dram_allocated_at[root]
                                dram_events.append((end, 2 if end <= at else 0, -bytes_of[root]))  # `MemoryTrace.free`
                                del copies[DRAM]
                        else:
                            free(root, end)
            for s in succ[index]:
                if end > ready_time[s]:
                    ready_time[s] = end
                indegree[s] = left = indegree[s] - 1
                if not left:
                    push(heap, (ready_time[s], s))

    def _done(self, index: int, core: int, start: float, end: float) -> None:
        """Record a task without a cost (a view, a page task) as placed."""
        self.done[index] = 1
        self.task_core[index] = core
        self.task_start[index] = start
        self.task_end[index] = end

    def _place_view(self, task: TaskView, ready: float) -> float:
        """A view: free, on a core where its data is; it allocates nothing (its storage is its
        operand's). Returns when it is done."""
        core = self._where_data_is(task, tuple(self.costs[task.index]))
        start = max(ready, self._inputs_ready_at(task, core))
        self._done(task.index, core, start, start)
        self._release_inputs(task, start)
        return start

    def _where_data_is(self, task: TaskView, allowed: tuple[int, ...]) -> int:
        for tid in task.reads:
            for loc in self.copies[self.root_of[tid]] or ():
                if loc != DRAM and loc in allowed:
                    return loc
        return allowed[0]

    def _inputs_ready_at(self, task: TaskView, core: int) -> float:
        copies = self.copies
        times = []
        for t in task.reads:
            here = copies[self.root_of[t]]
            times.append(min((here if here is not None else {0: 0.0}).values()))
        return max(times, default=0.0)

    def _estimate_arrivals(self, reads: tuple[int, ...], cores: dict[int, Any], ready: float) -> list[float]:
        """When the inputs of a task (the tensors it `reads`) would be on each of `cores`, in their
        order (the task's tensors streamed through DRAM are not known yet: every input counts as
        brought to the core). Each input's nearest copy is found once for all the cores, and its
        arrival once per route (from DRAM, every core's route is the DRAM interface: an input
        only in DRAM arrives on every core at once)."""
        arrivals = [0.0] * len(cores)
        root_of, bytes_of, all_copies, routes = self.root_of, self.bytes_of, self.copies, self.routes
        dram = self.from_dram[0]
        from_dram = 0.0  # the latest arrival of the inputs only in DRAM
        for tid in reads:
            root = root_of[tid]
            copies = all_copies[root]
            if not copies:
                continue
            if len(copies) == 1 and DRAM in copies:
                at = copies[DRAM]
                arrives = max(max(at, ready), dram.free_at) + bytes_of[root] * 8 / dram.bits_per_cycle
                if arrives > from_dram:
                    from_dram = arrives
                continue
            src = None
            for k, core in enumerate(cores):
                here = copies.get(core)
                if here is None:
                    if src is None:  # the earliest copy (the first of equal times)
                        if len(copies) == 1:
                            (src, at), = copies.items()
                        else:
                            src, at = min(copies.items(), key=_second)
                        earliest = max(at, ready)
                        bits = bytes_of[root] * 8
                        from_src = routes[src + 1]
                        last = None
                    res = from_src[core + 1] or self._route(src, core)
                    if res is not last:  # (nothing is reserved meanwhile: a route's answer holds)
                        last = res
                        # hop by hop, as `sum` adds them (a route has one or two hops)
                        travel = bits / res[0].bits_per_cycle
                        if len(res) == 2:
                            travel += bits / res[1].bits_per_cycle
                        arrives = max(earliest, res[0].free_at) + travel
                    here = arrives
                if here > arrivals[k]:
                    arrivals[k] = here
        return [from_dram if from_dram > arrival else arrival for arrival in arrivals]

    def _route(self, src: int, dst: int) -> list[Resource]:
        route = self.routes[src + 1][dst + 1]
        if route is not None:
            return route
        # the routes through DRAM are one list each, whatever the core (`_estimate_arrivals`
        # computes an arrival once per route)
        if src == DRAM:
            route = self.from_dram
        elif dst == DRAM:
            route = self.to_dram
        else:
            link = self.links.get((src, dst))
            if link is not None:
                route = [link]
            else:
                route = next(([bus] for members, bus in self.buses if src in members and dst in members),
                             self.through_dram)
        self.routes[src + 1][dst + 1] = route
        return route

    def _ensure_in_dram(self, root: int, copies: dict[int, float]) -> None:
        if DRAM not in copies and copies:
            src, at = min(copies.items(), key=_second)
            self._dram_alloc(root, at)
            copies[DRAM] = self._transfer(root, src, DRAM, at, "store")

    def _transfer(self, root: int, src: int, dst: int, ready: float, reason: str) -> float:
        nbytes = self.bytes_of[root]
        time = ready
        route = self.routes[src + 1][dst + 1] or self._route(src, dst)
        transfers = self.transfers
        for res in route:
            # `Resource.reserve`, inlined
            free_at = res.free_at
            start = free_at if free_at > time else time
            end = start + nbytes * 8 / res.bits_per_cycle
            res.free_at = end
            transfers.append((root, src, dst, start, end, nbytes, nbytes * 8 * res.energy_pj_per_bit, res.name, reason))
            time = end
        if len(route) == 2:
            # a core-to-core copy without a link goes through DRAM, which holds it meanwhile
            first = transfers[-2][3]
            self.dram_events.append((first, 1, nbytes))  # `MemoryTrace.alloc`, then `.free`
            self.dram_events.append((time, 2 if time <= first else 0, -nbytes))
        return time

    def _write_back(self, updated: tuple[int, ...], core: int, end: float) -> None:
        """An in-place update on `core` of the tensors `updated` (a task's `in_place`) written
        back to DRAM."""
        for tid in updated:
            root = self.root_of[tid]
            copies = self.copies[root]
            if copies is None:
                copies = self.copies[root] = {}
            if core in copies:
                done = self._transfer(root, core, DRAM, end, "writeback")
                # other on-chip copies are stale now
                for loc in [l for l in copies if l not in (core, DRAM)]:
                    self._drop(loc, root, end)
                copies[DRAM] = done

    def _release_inputs(self, task: TaskView, end: float) -> None:
        """Count the task's reads as done, and free the storages nothing reads any more. A task
        counts once per tensor it reads (as in the tensors' consumer lists), however many
        operands name it; the order of the frees changes nothing (memory events are sorted)."""
        reads = task.reads
        root_of, remaining = self.root_of, self.remaining_uses
        for tid in reads if len(reads) == 1 else set(reads):
            root = root_of[tid]
            left = remaining[root] - 1
            remaining[root] = left
            if left <= 0:
                self._free(root, end)

    # ------------------------------------------------------------------ memory

    def _dram_alloc(self, root: int, time: float) -> None:
        self.dram_allocated_at[root] = time
        self.dram_events.append((time, 1, self.bytes_of[root]))  # `MemoryTrace.alloc`

    def _drop(self, core: int, root: int, time: float) -> None:
        at = self.resident[core].pop(root, None)
        if at is None:
            return
        nbytes = self.bytes_of[root]
        self.resident_bytes[core] -= nbytes
        self.core_events[core].append((time, 2 if time <= at else 0, -nbytes))  # `MemoryTrace.free`
        frees, sums = self.pending_frees[core], self.pending_sums[core]
        entry = (time, nbytes)
        if not frees or entry >= frees[-1]:  # (where `bisect.insort` puts it: mostly last)
            frees.append(entry)
            sums.append((sums[-1] if sums else self.pending_floor[core]) + nbytes)
        else:
            at = bisect.bisect_right(frees, entry)
            frees.insert(at, entry)
            sums.insert(at, (sums[at - 1] if at else self.pending_floor[core]) + nbytes)
            sums[at + 1:] = [total + nbytes for total in islice(sums, at + 1, None)]
        self.pending_bytes[core] += nbytes
        copies = self.copies[root]
        if copies is not None:
            copies.pop(core, None)

    def _room_at(self, core: int, nbytes: int, reads: tuple[int, ...], time: float, ready: float) -> float | None:
        """The earliest time >= `time` at which `nbytes` fit in the core's top memory for the
        task being placed (ready at `ready`, reading `reads`): waiting for frees already
        decided, then evicting (never the storage of a tensor the task reads). Returns when the
        bytes can be placed."""
        capacity = self.capacity[core]
        resident = self.resident_bytes[core]
        pending = self.pending_bytes[core]
        if resident + pending + nbytes <= capacity:
            return time  # fits even if no pending free has happened yet
        if nbytes > capacity and not self.resident[core]:
            return None  # larger than the memory, nothing to evict: the answer below, sooner
        frees = self.pending_frees[core]  # sorted (`_drop` inserts in order)
        sums = self.pending_sums[core]
        # tasks are placed in order of readiness and nothing is allocated before the ready
        # time of the task being placed, so earlier frees can be forgotten
        if frees and frees[0][0] <= ready:
            forget = bisect.bisect_right(frees, (ready, math.inf))
            floor = sums[forget - 1]
            pending -= floor - self.pending_floor[core]
            self.pending_floor[core] = floor
            self.pending_bytes[core] = pending
            del frees[:forget], sums[:forget]
        # the bytes freed after `time`
        if not frees or frees[0][0] > time:
            first = 0
            still = pending
        else:
            first = bisect.bisect_right(frees, (time, math.inf))
            still = pending - (sums[first - 1] - self.pending_floor[core])
        if resident + nbytes <= capacity and resident + still + nbytes > capacity and first < len(frees):
            # waiting for the next frees is enough; prefer it to evicting live values: wait for
            # the first after which the bytes still to be freed leave room (else the last). An
            # integer fits a capacity exactly when it fits its integer part: the sums that do
            # are found by bisection, in integers
            before = sums[first - 1] if first else self.pending_floor[core]
            last = bisect.bisect_left(sums, before + resident + still + nbytes - math.floor(capacity), first)
            if last == len(frees):
                last -= 1
            time = frees[last][0]
            still -= sums[last] - before
        if resident + still + nbytes > capacity and self.resident[core]:
            # (with nothing resident there is nothing to evict: `_make_room` would return `time`)
            time = self._make_room(core, nbytes + still, {self.root_of[t] for t in reads}, time)
            resident = self.resident_bytes[core]
        if resident + still + nbytes > capacity:
            return None  # the op's own operands fill the memory: this one is streamed instead
        return time

    def _free(self, root: int, time: float) -> None:
        copies = self.copies[root]
        if not copies:
            return
        for loc in list(copies):
            if loc == DRAM:
                if self.tables.dram_freeable[root]:  # not persistent, and produced by the step
                    # `MemoryTrace.free`
                    at = self.dram_allocated_at[root]
                    self.dram_events.append((time, 2 if time <= at else 0, -self.bytes_of[root]))
                    copies.pop(DRAM)
            else:
                self._drop(loc, root, time)

    def _make_room(self, core: int, nbytes: int, keep: set[int], time: float) -> float:
        """Evict until `nbytes` fit; returns when the room exists: a victim leaves once it is
        complete on this core (produced or loaded), never before it arrived."""
        capacity = self.capacity[core]
        room_at = time
        # the candidates and their next uses do not change while evicting (only the victim
        # leaves): found once, the victim is the first with the furthest next use each time
        victims: list[int] | None = None
        uses: list[int] | None = None
        all_copies = self.copies
        while self.resident_bytes[core] + nbytes > capacity:
            if victims is None:
                victims = [r for r in self.resident[core] if r not in keep]
            if not victims:
                return room_at  # nothing left to evict: the op's own operands exceed the memory
            if len(victims) > 1:
                if uses is None:
                    uses = []  # the next use of each: its first reader not placed yet
                    tables = self.tables
                    next_from, done = self.next_use_from, self.done
                    for r in victims:
                        consumers = tables.consumers.get(r)
                        if consumers is None:
                            consumers = tables.root_consumers(r)
                        j, n = next_from.get(r, 0), len(consumers)
                        while j < n and done[consumers[j]]:
                            j += 1
                        next_from[r] = j
                        uses.append(consumers[j] if j < n else 1 << 60)
                i = uses.index(max(uses))  # the first with the furthest next use
                del uses[i]
            else:
                i = 0
            victim = victims.pop(i)
            copies = all_copies[victim]
            if copies is None:
                copies = all_copies[victim] = {}
            at = copies.get(core, time)
            if time > at:
                at = time
            if DRAM not in copies and self.remaining_uses[victim] > 0:
                self._dram_alloc(victim, at)
                copies[DRAM] = self._transfer(victim, core, DRAM, at, "evict")
            self._drop(core, victim, at)
            if at > room_at:
                room_at = at
        return room_at

    def _place_page(self, task: TaskView, ready: float) -> float:
        """A page task (paged activation or tensor kept in storage), on the storage channel
        (`monet_ir.schedule.paging.place_page`); no core works on it. Returns when it is done."""
        from monet_ir.schedule.paging import place_page

        return place_page(self, task, ready, (ScheduledTask, Transfer, MemoryTrace, ScheduleError))



_first = itemgetter(0)
_second = itemgetter(1)
_third = itemgetter(2)
_fifth = itemgetter(4)
_seventh = itemgetter(6)
_eighth = itemgetter(7)


NOTHING: frozenset[int] = frozenset()


def _stream_picks(sizes: tuple[int, ...], budget: float) -> Any:
    """What a vector op streams through DRAM of the tensors it touches (`sizes`: their bytes,
    each once, reads first): True for all of them, else a function taking the tensors and
    returning those it streams (`_largest_within`, in order of size)."""
    picks = _largest_within(sizes, budget)
    if len(picks) == len(sizes):
        return True
    if not picks:
        return _nothing
    if len(picks) == 1:
        return itemgetter(slice(picks[0], picks[0] + 1))
    return itemgetter(*picks)


def _nothing(touched: tuple[int, ...]) -> tuple[int, ...]:
    return ()


def _largest_within(sizes: tuple[int, ...], budget: float) -> tuple[int, ...]:
    """Positions of the largest sizes (equal sizes in order) taken while `budget` lasts: each
    is taken while the budget, less the sizes taken before it, is still positive."""
    if sum(sizes) < budget:
        return tuple(range(len(sizes)))  # the budget lasts past the last one, in any order
    picks = []
    # largest first; equal sizes in their order (a reverse sort is stable too)
    for i in sorted(range(len(sizes)), key=sizes.__getitem__, reverse=True):
        if budget <= 0:
            break
        picks.append(i)
        budget -= sizes[i]
    return tuple(picks)


def stream_of(cost: Cost, loop_nest: bool) -> Any:
    """What an op moves to or from DRAM itself, by its cost there (found once per signature and
    core, `Scheduler._options`): None for nothing; for a loop-nest op, the roles its model spilled
    (a frozenset); for a vector op, the DRAM bytes its cost counts (it streams the part of its
    data that does not fit its memory: its largest tensors, up to those bytes)."""
    if loop_nest:
        return frozenset(k.split(".", 1)[1] for k in cost.breakdown_pj if k.startswith("dram.")) or None
    budget = cost.dram_bytes
    return budget if budget > 0 else None


def split_energy(cost: Cost) -> tuple[float, float, float]:
    """(compute, on-chip memory, off-chip memory) parts of an op's energy."""
    compute = onchip = offchip = 0.0
    for key, value in cost.breakdown_pj.items():
        if key in ("mac", "ops", "compute"):
            compute += value
        elif key.startswith("dram") or key.startswith("offchip"):
            offchip += value
        else:
            onchip += value
    return compute, onchip, offchip


def schedule(graph: TaskGraph, target: Target, allocation=None) -> Schedule:
    from monet_ir.cost import can_run, cost_of

    return Scheduler(graph, target, allocation, cost_of, can_run).run()

