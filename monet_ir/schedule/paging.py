"""Paging of saved activations to the target's storage level (POET's page-out / page-in).

A saved activation that a plan pages (`monet.page` on its producing forward op, see
`monet_ir.analysis.paging_plan`) gets two tasks in the task graph (`add_page_tasks`, called by
the extractor):

- **page-out** reads the value once its forward consumers are done (it depends on them) and
  writes it to the storage; the value's memory is freed when the write completes (page-out is
  its last reader: the backward readers read the paged-in copy instead);
- **page-in** reads it back into main memory as a new tensor (same bytes) that the backward
  (and recompute) readers of the value and of its views read. It starts when the backward op
  before its first reader in program order has started (as recompute copies do,
  `taskgraph._recompute_when_needed`), so the read overlaps that op and the copy does not live
  longer than needed.

Both tasks have the phase `paging` and no signature: they occupy no core. The scheduler hands
them to `place_page_task`, which prices them on the storage channel (`StorageChannel`): one
transfer at a time, `latency_s` plus bytes / bandwidth of the direction, energy per bit of the
direction, bytes rounded up to whole pages; moving the value out of or into main memory adds
that memory's read or write energy per bit. The storage's occupancy is a memory trace of its
own (the report's peaks, the memory plot, the Perfetto counters); transfers have the reasons
`page_out` and `page_in` on the resource `storage <name>`. Overflowing the storage, or paging
on a target without one, is a `ScheduleError`.

Paging never changes what is computed: the page tasks move bytes only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from monet_ir.schedule.taskgraph import Task, TensorInfo

if TYPE_CHECKING:
    from monet_ir.schedule.scheduler import Scheduler

STORAGE = -2  # location id of the storage level (DRAM is -1)
LATE_PHASES = ("backward", "recompute", "optimizer")
PAGE_PHASE = "paging"


def add_page_tasks(tasks: list[Task], tensors: list[TensorInfo], paged: Iterable[int]) -> None:
    """Append a page-out and a page-in task for each paged tensor (a storage root) that a late
    (backward, recompute) task reads, and rewire those readers to the paged-in copy."""
    paged = [tid for tid in dict.fromkeys(paged) if tensors[tid].root == tid]
    if not paged:
        return
    # per task: the first task of the backward op before it in program order
    before: list[int | None] = []
    last_op, first = None, None
    for task in tasks:
        before.append(first)
        if task.phase == "backward" and task.op_index != last_op:
            last_op, first = task.op_index, task.index
    views: dict[int, list[int]] = {}
    for t in tensors:
        if t.root != t.id:
            views.setdefault(t.root, []).append(t.id)
    for tid in paged:
        original = tensors[tid]
        members = [tid, *views.get(tid, ())]
        late = sorted({c for m in members for c in tensors[m].consumers if tasks[c].phase in LATE_PHASES})
        if not late or original.producer is None:
            continue  # nothing reads it after the forward pass: nothing to page
        early = {c for m in members for c in tensors[m].consumers if tasks[c].phase not in LATE_PHASES}
        producer = tasks[original.producer]
        out_index, in_index = len(tasks), len(tasks) + 1
        stored = _tensor(tensors, f"{original.name}@{'storage'}", original.bytes, "paged", out_index)
        copy = _tensor(tensors, f"{original.name}@paged_in", original.bytes, original.kind, in_index)
        tasks.append(Task(out_index, "page_out", producer.node, PAGE_PHASE, None, (tid,), (stored,),
                          {original.producer, *early}, op_index=producer.op_index, page="out"))
        anchor = before[late[0]]
        tasks.append(Task(in_index, "page_in", producer.node, PAGE_PHASE, None, (stored,), (copy,),
                          {out_index} | ({anchor} if anchor is not None else set()),
                          op_index=producer.op_index, page="in"))
        original.consumers.append(out_index)
        tensors[stored].consumers.append(in_index)
        renamed = {tid: copy}
        for view in members[1:]:
            if any(tasks[c].phase in LATE_PHASES for c in tensors[view].consumers):
                v = tensors[view]
                renamed[view] = _tensor(tensors, f"{v.name}@paged_in", v.bytes, v.kind, in_index, root=copy)
        late_set = set(late)
        for m in members:
            tensors[m].consumers = [c for c in tensors[m].consumers if c not in late_set]
        for index in late:
            task = tasks[index]
            task.reads = tuple(renamed.get(r, r) for r in task.reads)
            task.roles = {renamed.get(r, r): role for r, role in task.roles.items()}
            task.preds.add(in_index)
            for r in dict.fromkeys(task.reads):
                if r in renamed.values():
                    tensors[r].consumers.append(index)


def _tensor(tensors: list[TensorInfo], name: str, nbytes: int, kind: str, producer: int, root: int = -1) -> int:
    tid = len(tensors)
    tensors.append(TensorInfo(tid, name, nbytes, kind, False, producer, root=tid if root < 0 else root))
    return tid


class StorageChannel:
    """The storage's one channel: a transfer at a time, in request order."""

    def __init__(self, storage, frequency_hz: float):
        self.storage = storage
        self.freq = frequency_hz
        self.free_at = 0.0

    def reserve(self, ready: float, nbytes: int, write: bool) -> tuple[float, float, float, int]:
        """(start, end, energy pJ, bytes moved) of moving `nbytes` out (`write`) or in."""
        s = self.storage
        moved = s.rounded(nbytes)
        bandwidth = s.write_bandwidth_bytes_per_s if write else s.read_bandwidth_bytes_per_s
        start = max(ready, self.free_at)
        end = start + (s.latency_s + moved / bandwidth) * self.freq
        self.free_at = end
        energy = moved * 8 * (s.write_energy_pj_per_bit if write else s.read_energy_pj_per_bit)
        return start, end, energy, moved


class PagingState:
    """What the scheduler tracks for paging: the channel, the storage's trace and occupancy,
    and when each paged tensor was written."""

    def __init__(self, scheduler: Scheduler):
        from monet_ir.schedule.scheduler import MemoryTrace, ScheduleError

        target = scheduler.target
        storage = target.storage
        if storage is None:
            task = scheduler.g.tasks[scheduler.current]
            raise ScheduleError(f"target '{target.name}' has no storage level to page node '{task.node}' to "
                                "(add a storage: section to the target)")
        self.storage = storage
        self.channel = StorageChannel(storage, target.frequency_hz)
        self.resource = f"storage {storage.name}"
        self.trace = scheduler.memories.setdefault(storage.name, MemoryTrace(storage.name, storage.capacity_bytes))
        self.used = 0
        self.written: dict[int, tuple[float, float, int]] = {}  # stored tensor -> (start, end, bytes held)


def place_page_task(s: Scheduler, task: Task, ready: float) -> float:
    """Schedule a page-out or page-in task (see the module docstring); returns when it is done."""
    from monet_ir.schedule.scheduler import DRAM, ScheduledTask, ScheduleError, Transfer

    state: PagingState | None = getattr(s, "paging", None)
    if state is None:
        state = s.paging = PagingState(s)
    dram = s.target.dram
    if task.page == "out":
        root = s.root_of[task.reads[0]]
        stored = task.writes[0]
        copies = s.copies.get(root) or {DRAM: ready}
        src, at = min(copies.items(), key=lambda kv: kv[1])
        nbytes = s.bytes_of[root]
        start, end, energy, moved = state.channel.reserve(max(ready, at), nbytes, write=True)
        if src == DRAM and dram is not None:
            energy += nbytes * 8 * dram.read_energy_pj_per_bit
        s.transfers.append(Transfer(root, src, STORAGE, start, end, moved, energy, state.resource, "page_out"))
        state.trace.alloc(start, moved)
        state.used += moved
        if state.used > state.storage.capacity_bytes:
            raise ScheduleError(f"target '{s.target.name}': storage '{state.storage.name}' holds "
                                f"{state.storage.capacity_bytes} bytes, paging needs {state.used} bytes in it")
        state.written[stored] = (start, end, moved)
        s.copies[stored] = {}
    else:
        stored = task.reads[0]
        copy = task.writes[0]
        written_at, written, held = state.written[stored]
        nbytes = s.bytes_of[copy]
        start, end, energy, moved = state.channel.reserve(max(ready, written), nbytes, write=False)
        if dram is not None:
            energy += nbytes * 8 * dram.write_energy_pj_per_bit
        s.transfers.append(Transfer(copy, STORAGE, DRAM, start, end, moved, energy, state.resource, "page_in"))
        state.trace.free(end, held, written_at)
        state.used -= held
        s._dram_alloc(copy, start)
        s.copies[copy] = {DRAM: end}
    # no core works on it: recorded as a zero-length task (like a view) when its transfer ends
    s.scheduled[task.index] = ScheduledTask(task.index, 0, end, end, 0.0, 0.0, 0.0, 0.0)
    s._release_inputs(task, end)
    if task.page == "in" and s.remaining_uses.get(task.writes[0], 0) == 0:
        s._free(task.writes[0], end)
    return end
