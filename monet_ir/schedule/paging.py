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

Both tasks have the phase `paging` and no signature: they occupy no core. The scheduler prices
them with a `Paging` (its `Scheduler._place_page` hook) on the storage channel: one
transfer at a time, `latency_s` plus bytes / bandwidth of the direction, energy per bit of the
direction, bytes rounded up to whole pages; moving the value out of or into main memory adds
that memory's read or write energy per bit. The storage's occupancy is a memory trace of its
own (the report's peaks, the memory plot, the Perfetto counters); transfers have the reasons
`page_out` and `page_in` on the resource `storage <name>`. Overflowing the storage, or paging
on a target without one, is a `ScheduleError`.

Paging never changes what is computed: the page tasks move bytes only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

STORAGE = -2  # location id of the storage level
DRAM = -1  # as the scheduler's
LATE_PHASES = ("backward", "recompute", "optimizer")
PAGE_PHASE = "paging"


def add_page_tasks(tasks: list[Any], tensors: list[Any], paged: Iterable[int],
                   make_task: Callable[..., Any], make_tensor: Callable[..., Any]) -> None:
    """Append a page-out and a page-in task for each paged tensor (a storage root) that a late
    (backward, recompute) task reads, and rewire those readers to the paged-in copy. `tasks`
    and `tensors` are a graph's tables (`TaskTable`, `TensorTable`, or lists of records); the
    extractor passes its `Task` and `TensorInfo` classes as `make_task` and `make_tensor`."""
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

    def tensor(name: str, nbytes: int, kind: str, producer: int, root: int = -1) -> int:
        tid = len(tensors)
        tensors.append(make_tensor(tid, name, nbytes, kind, False, producer, root=tid if root < 0 else root))
        return tid

    for tid in paged:
        original = tensors[tid]
        members = [tid, *views.get(tid, ())]
        late = sorted({c for m in members for c in tensors[m].consumers if tasks[c].phase in LATE_PHASES})
        if not late or original.producer is None:
            continue  # nothing reads it after the forward pass: nothing to page
        early = {c for m in members for c in tensors[m].consumers if tasks[c].phase not in LATE_PHASES}
        producer = tasks[original.producer]
        out_index, in_index = len(tasks), len(tasks) + 1
        stored = tensor(f"{original.name}@storage", original.bytes, "paged", out_index)
        copy = tensor(f"{original.name}@paged_in", original.bytes, original.kind, in_index)
        tasks.append(make_task(out_index, "page_out", producer.node, PAGE_PHASE, None, (tid,), (stored,),
                               {original.producer, *early}, op_index=producer.op_index, page="out"))
        anchor = before[late[0]]
        tasks.append(make_task(in_index, "page_in", producer.node, PAGE_PHASE, None, (stored,), (copy,),
                               {out_index} | ({anchor} if anchor is not None else set()),
                               op_index=producer.op_index, page="in"))
        original.consumers.append(out_index)
        tensors[stored].consumers.append(in_index)
        renamed = {tid: copy}
        for view in members[1:]:
            if any(tasks[c].phase in LATE_PHASES for c in tensors[view].consumers):
                v = tensors[view]
                renamed[view] = tensor(f"{v.name}@paged_in", v.bytes, v.kind, in_index, root=copy)
        late_set = set(late)
        for m in members:
            tensors[m].consumers = [c for c in tensors[m].consumers if c not in late_set]
        copies = set(renamed.values())
        for index in late:
            task = tasks[index]
            task.reads = tuple(renamed.get(r, r) for r in task.reads)
            task.roles = {renamed.get(r, r): role for r, role in task.roles.items()}
            task.preds.add(in_index)
            for r in dict.fromkeys(task.reads):
                if r in copies:
                    tensors[r].consumers.append(index)


class Paging:
    """The storage channel (one transfer at a time, in request order) and the storage's
    occupancy, for one schedule. `page_out` and `page_in` return when the transfer runs, the
    bytes it moves and its energy; `problem` is set when the storage overflows."""

    def __init__(self, storage: Any, frequency_hz: float, main_memory: Any):
        self.storage = storage
        self.main = main_memory  # the target's Dram (None: free)
        self.freq = frequency_hz
        self.free_at = 0.0
        self.resource = f"storage {storage.name}"
        self.used = 0
        self.written: dict[int, tuple[float, float, int]] = {}  # stored tensor -> (start, end, bytes held)
        self.held: dict[int, tuple[float, int]] = {}  # tensor kept in storage -> (since, bytes held)
        self.problem = ""

    def hold(self, home: int, nbytes: int, at: float = 0.0) -> int:
        """Room in storage for a tensor kept there (from `at`); returns the bytes it takes."""
        held = self.storage.rounded(nbytes)
        self.held[home] = (at, held)
        self.used += held
        if self.used > self.storage.capacity_bytes and not self.problem:
            self.problem = (f"storage '{self.storage.name}' holds {self.storage.capacity_bytes} bytes, "
                            f"the tensors kept and paged there need {self.used} bytes")
        return held

    def _move(self, ready: float, nbytes: int, buffer: int, write: bool) -> tuple[float, float, float, int]:
        """A transfer of `nbytes` through a buffer of `buffer` bytes: one piece per buffer-full,
        each a latency plus its whole pages at the direction's bandwidth."""
        s = self.storage
        pieces = max(1, -(-nbytes // max(1, buffer)))
        whole, last = divmod(nbytes, max(1, buffer))
        moved = s.rounded(buffer) * whole + (s.rounded(last) if last else 0) if nbytes > buffer else s.rounded(nbytes)
        bandwidth = s.write_bandwidth_bytes_per_s if write else s.read_bandwidth_bytes_per_s
        start = max(ready, self.free_at)
        end = start + (pieces * s.latency_s + moved / bandwidth) * self.freq
        self.free_at = end
        energy = moved * 8 * (s.write_energy_pj_per_bit if write else s.read_energy_pj_per_bit)
        return start, end, energy, moved

    def write(self, ready: float, nbytes: int, buffer: int, from_main: bool) -> tuple[float, float, int, float]:
        """(start, end, bytes moved, energy) of writing a stored tensor out (main memory's read
        energy added when it comes from there)."""
        start, end, energy, moved = self._move(ready, nbytes, buffer, write=True)
        if from_main and self.main is not None:
            energy += nbytes * 8 * self.main.read_energy_pj_per_bit
        return start, end, moved, energy

    def read(self, ready: float, nbytes: int, buffer: int) -> tuple[float, float, int, float]:
        """(start, end, bytes moved, energy) of reading a stored tensor into main memory."""
        start, end, energy, moved = self._move(ready, nbytes, buffer, write=False)
        if self.main is not None:
            energy += nbytes * 8 * self.main.write_energy_pj_per_bit
        return start, end, moved, energy

    def _reserve(self, ready: float, nbytes: int, write: bool) -> tuple[float, float, float, int]:
        s = self.storage
        moved = s.rounded(nbytes)
        bandwidth = s.write_bandwidth_bytes_per_s if write else s.read_bandwidth_bytes_per_s
        start = max(ready, self.free_at)
        end = start + (s.latency_s + moved / bandwidth) * self.freq
        self.free_at = end
        energy = moved * 8 * (s.write_energy_pj_per_bit if write else s.read_energy_pj_per_bit)
        return start, end, energy, moved

    def page_out(self, stored: int, ready: float, nbytes: int, from_main: bool) -> tuple[float, float, int, float]:
        """(start, end, bytes moved, energy) of writing `nbytes` out; reading them from main
        memory (`from_main`) adds its read energy."""
        start, end, energy, moved = self._reserve(ready, nbytes, write=True)
        if from_main and self.main is not None:
            energy += nbytes * 8 * self.main.read_energy_pj_per_bit
        self.used += moved
        if self.used > self.storage.capacity_bytes and not self.problem:
            self.problem = (f"storage '{self.storage.name}' holds {self.storage.capacity_bytes} bytes, "
                            f"paging needs {self.used} bytes in it")
        self.written[stored] = (start, end, moved)
        return start, end, moved, energy

    def page_in(self, stored: int, ready: float, nbytes: int) -> tuple[float, float, int, float, float, int]:
        """(start, end, bytes moved, energy, when the stored copy was written, bytes it held)
        of reading a paged tensor back into main memory (whose write energy is added)."""
        written_at, written, held = self.written[stored]
        start, end, energy, moved = self._reserve(max(ready, written), nbytes, write=False)
        if self.main is not None:
            energy += nbytes * 8 * self.main.write_energy_pj_per_bit
        self.used -= held
        return start, end, moved, energy, written_at, held


# ---------------------------------------------------------------------- tensors kept in storage
#
# A plan's `storage` list gives tensors a home in the storage level (POET keeps what does not
# fit in RAM in the larger, slower store): parameters, optimizer state, gradients, any value.
# Such a tensor is in main memory only around its uses:
#
# - an argument (parameter, optimizer state, batch) is in storage from the start;
# - a value is written by its producer into a buffer in main memory and paged out (a `write`
#   task; the buffer is freed when the write ends);
# - each op that reads it gets a page-in (a `read` task) into a buffer in main memory that its
#   tasks read; it starts once the first task of the op before it in program order is done (as
#   recompute copies and paged activations wait), so the copy lives around its use only;
# - an in-place update (the optimizer's) updates that buffer and pages it back (a `write`).
#
# A buffer holds the whole tensor, or, when it is larger than the tile (`tile_bytes` of the plan;
# default a sixteenth of main memory, whole pages), one tile at a time: the transfer is cut into
# tiles of that size (one latency each), so a tensor larger than main memory streams through it.
# A loop-nest op reading two such tensors larger than the tile reads the larger one once per
# tile of the smaller (blocked: a tile of the smaller stays while the larger streams past).


@dataclass
class StoragePlan:
    """What `add_storage_tasks` added, resolved against a target by `prepare`."""

    tile: int | None  # the plan's tile_bytes (None: the target's default)
    homes: list[int] = field(default_factory=list)  # tensors in storage (arguments and page-out targets)
    buffers: list[tuple[int, int]] = field(default_factory=list)  # (buffer tensor, full bytes)
    reads: dict[int, tuple[int, int, tuple[int, ...]]] = field(default_factory=dict)
    """read task -> (buffer tensor, full bytes, full bytes of the other stored operands of a loop
    nest that reads it, each larger than a tile)"""
    writes: dict[int, tuple[int, int]] = field(default_factory=dict)  # write task -> (buffer, full bytes)
    moves: dict[int, tuple[int, int]] = field(default_factory=dict)  # page task -> (bytes moved, buffer), by `prepare`


def default_tile(target: Any) -> int:
    """A sixteenth of main memory, rounded down to whole storage pages (at least one page)."""
    main, storage = target.dram, target.storage
    capacity = main.capacity_bytes if main is not None else float("inf")
    if not math.isfinite(capacity):
        return 1 << 62
    page = storage.page_bytes if storage is not None and storage.page_bytes > 0 else 1
    return max(page, int(capacity // 16) // page * page)


def tile_passes(full: int, others: Iterable[int], tile: int) -> int:
    """How many times a loop nest reads a stored operand of `full` bytes (see above)."""
    if full <= tile:
        return 1
    return max([1] + [-(-b // tile) for b in others if tile < b <= full])


def add_storage_tasks(tasks: list[Any], tensors: list[Any], stored: Iterable[int], tile: int | None,
                      make_task: Callable[..., Any], make_tensor: Callable[..., Any]) -> StoragePlan | None:
    """Keep the `stored` root tensors in storage (see above); returns what was added."""
    from monet_ir.cost.signature import LoopNestSig

    # a saved activation the plan also pages keeps that decision
    stored = [tid for tid in dict.fromkeys(stored) if tensors[tid].root == tid and tensors[tid].kind != "paged"
              and not any(tasks[c].page for c in tensors[tid].consumers)]
    if not stored:
        return None
    plan = StoragePlan(tile)
    views: dict[int, list[int]] = {}
    for t in tensors:
        if t.root != t.id:
            views.setdefault(t.root, []).append(t.id)
    readers_of = {tid: sorted({c for m in (tid, *views.get(tid, ())) for c in tensors[m].consumers})
                  for tid in stored}
    # the ops that page (read, write or update a stored tensor), in program order: each page-in
    # waits for the one before its op (its first task) and for that op's page-outs, so the
    # buffers of one paging op leave main memory before the next one's come in
    first_of_op: dict[int, int] = {}
    for task in tasks:
        if not task.page:
            first_of_op.setdefault(task.op_index, task.index)
    paging_ops = {tasks[c].op_index for tid in stored for c in readers_of[tid]}
    paging_ops |= {tasks[tensors[tid].producer].op_index for tid in stored if tensors[tid].producer is not None}
    order = sorted(paging_ops)
    previous = {op: order[i - 1] for i, op in enumerate(order) if i > 0}
    every = sorted(first_of_op)
    just_before = {op: first_of_op[every[i - 1]] for i, op in enumerate(every) if i > 0}
    # (and for the op just before it in program order, so the copy is not made ops ahead)
    before = {op: {first_of_op.get(prev), just_before.get(op)} for op, prev in previous.items()}
    updates: dict[int, list[int]] = {}
    for task in tasks:
        for tid in task.in_place:
            updates.setdefault(tensors[tid].root, []).append(task.index)
    stored_set = set(stored)
    full_bytes = {tid: tensors[tid].bytes for tid in stored}

    def tensor(name: str, nbytes: int, kind: str, producer: int | None, root: int = -1) -> int:
        tid = len(tensors)
        tensors.append(make_tensor(tid, name, nbytes, kind, False, producer, root=tid if root < 0 else root))
        return tid

    def add(name: str, node: str, reads: tuple, writes: tuple, preds: set, op_index: int, page: str) -> int:
        index = len(tasks)
        tasks.append(make_task(index, name, node, PAGE_PHASE, None, reads, writes, {p for p in preds if p is not None},
                               op_index=op_index, page=page))
        return index

    # per loop-nest task, the stored tensors it reads (before any read is rewired to a copy)
    stored_reads = {task.index: {tensors[r].root for r in task.reads} & stored_set
                    for task in tasks if isinstance(task.sig, LoopNestSig)}
    writes_of_op: dict[int, list[int]] = {}  # op -> the page-outs after it

    def big_operands(index: int, root: int) -> tuple[int, ...]:
        return tuple(full_bytes[r] for r in stored_reads.get(index, ()) if r != root)

    for tid in stored:
        t = tensors[tid]
        full = full_bytes[tid]
        members = [tid, *views.get(tid, ())]
        readers = readers_of[tid]
        writers = set(updates.get(tid, ()))
        last_write = None
        if t.producer is None:
            home = tid
            t.kind = "stored"
        else:
            if t.kind == "const":  # a constant kept in storage: in main memory only until paged out
                t.kind, t.persistent = "activation", False
            producer = tasks[t.producer]
            home = tensor(f"{t.name}@storage", full, "paged", None)
            out = add("page_out", producer.node, (tid,), (home,), {t.producer}, producer.op_index, "write")
            tensors[home].producer = out
            plan.writes[out] = (tid, full)
            plan.buffers.append((tid, full))
            writes_of_op.setdefault(producer.op_index, []).append(out)
            last_write = out
        plan.homes.append(home)
        for m in members:
            tensors[m].consumers = []
        if t.producer is not None:
            tensors[tid].consumers = [last_write]
        groups: dict[int, list[int]] = {}
        for c in readers:
            groups.setdefault(tasks[c].op_index, []).append(c)
        page_ins: list[int] = []
        for op_index, group in sorted(groups.items(), key=lambda kv: kv[1][0]):
            node = tasks[group[0]].node
            index = len(tasks)
            copy = tensor(f"{t.name}@in", full, "param" if t.kind == "stored" else t.kind, index)
            add("page_in", node, (home,), (copy,), {*before.get(op_index, {just_before.get(op_index)}), last_write},
                op_index, "read")
            tensors[home].consumers.append(index)
            plan.buffers.append((copy, full))
            plan.reads[index] = (copy, full, tuple(sorted({b for c in group for b in big_operands(c, tid)})))
            page_ins.append(index)
            renamed = {tid: copy}
            for view in members[1:]:
                if any(c in group for c in tensors[view].consumers):
                    v = tensors[view]
                    renamed[view] = tensor(f"{v.name}@in", v.bytes, v.kind, index, root=copy)
            for c in group:
                # copies: the tasks of a forward prefix are shared by the graphs extracted from it
                task = tasks[c]
                task.preds, task.roles = set(task.preds), dict(task.roles)
                task.reads = tuple(renamed.get(r, r) for r in task.reads)
                task.roles = {renamed.get(r, r): role for r, role in task.roles.items()}
                task.preds.add(index)
                for r in dict.fromkeys(task.reads):
                    if r in renamed.values():
                        tensors[r].consumers.append(c)
            for c in group:
                if c in writers:
                    task = tasks[c]
                    task.in_place = tuple(copy if x == tid else x for x in task.in_place)
                    back = add("page_out", node, (copy,), (home,), {c, *page_ins}, op_index, "write")
                    tensors[copy].consumers.append(back)
                    plan.writes[back] = (copy, full)
                    writes_of_op.setdefault(op_index, []).append(back)
                    last_write = back
        for m in members[1:]:
            tensors[m].consumers = [c for c in tensors[m].consumers if tasks[c].page]
    # a page-in also waits for the page-outs after the op before it: the buffers of one op leave
    # main memory before the next op's come in (the storage channel takes requests in order,
    # and page-ins ready at the same time would otherwise overtake the write-backs)
    for index, (copy, _, _) in plan.reads.items():
        before_op = previous.get(tasks[index].op_index)
        if before_op is not None:
            tasks[index].preds.update(writes_of_op.get(before_op, ()))
    return plan


def prepare(scheduler: Any, plan: StoragePlan, kinds: tuple) -> None:
    """Resolve the plan on the scheduler's target: buffer sizes (whole, or a tile), the bytes
    each transfer moves, and the arguments held in storage from the start. `kinds`: the
    scheduler's (ScheduledTask, Transfer, MemoryTrace, ScheduleError) classes."""
    tile = plan.tile if plan.tile is not None else default_tile(scheduler.target)
    sizes = scheduler.bytes_of
    for tid, full in plan.buffers:
        sizes[tid] = scheduler.g.tensors[tid].bytes = min(full, tile)
    plan.moves = {}
    for index, (copy, full, others) in plan.reads.items():
        plan.moves[index] = (full * tile_passes(full, others, tile), min(full, tile))
    for index, (buffer, full) in plan.writes.items():
        plan.moves[index] = (full, min(full, tile))
    for home in plan.homes:
        t = scheduler.g.tensors[home]
        if t.producer is None:
            paging = _paging(scheduler, t.name, kinds)
            held = paging.hold(home, t.bytes)
            scheduler.memories[paging.storage.name].alloc(0.0, held)
            scheduler.copies[home] = {}
            if paging.problem:
                raise kinds[3](f"target '{scheduler.target.name}': {paging.problem}")


def _paging(scheduler: Any, node: str, kinds: tuple) -> Paging:
    paging = getattr(scheduler, "paging", None)
    if paging is None:
        _, _, MemoryTrace, ScheduleError = kinds
        storage = scheduler.target.storage
        if storage is None:
            raise ScheduleError(f"target '{scheduler.target.name}' has no storage level to page node '{node}' "
                                "to (add a storage: section to the target)")
        paging = scheduler.paging = Paging(storage, scheduler.freq, scheduler.target.dram)
        scheduler.memories[storage.name] = MemoryTrace(storage.name, storage.capacity_bytes)
    return paging


def place_page(scheduler: Any, task: Any, ready: float, kinds: tuple) -> float:
    """Place a page task (`Scheduler._place_page`): a paged activation's page-out / page-in, or a
    stored tensor's write / read. No core works on it. Returns when it is done. `kinds`: as
    for `prepare`. The scheduler keeps its transfers as tuples of `Transfer`'s fields and its
    copies per storage root in a list (None: no copy was ever made)."""
    ScheduleError = kinds[3]
    s = scheduler
    paging = _paging(s, task.node, kinds)
    trace = s.memories[paging.storage.name]
    stored_of = getattr(s.g, "storage_plan", None)
    if task.page == "out":
        root, stored = s.root_of[task.reads[0]], task.writes[0]
        src, at = min((s.copies[root] or {DRAM: ready}).items(), key=_second)
        start, end, moved, energy = paging.page_out(stored, max(ready, at), s.bytes_of[root], src == DRAM)
        s.transfers.append((root, src, STORAGE, start, end, moved, energy, paging.resource, "page_out"))
        trace.alloc(start, moved)
        if paging.problem:
            raise ScheduleError(f"target '{s.target.name}': {paging.problem}")
        s.copies[stored] = {}
    elif task.page == "in":
        stored, copy = task.reads[0], task.writes[0]
        start, end, moved, energy, written_at, held = paging.page_in(stored, ready, s.bytes_of[copy])
        s.transfers.append((copy, STORAGE, DRAM, start, end, moved, energy, paging.resource, "page_in"))
        trace.free(end, held, written_at)
        s._dram_alloc(copy, start)
        s.copies[copy] = {DRAM: end}
    elif task.page == "write":
        root, home = s.root_of[task.reads[0]], task.writes[0]
        nbytes, buffer = stored_of.moves[task.index]
        src, at = min((s.copies[root] or {DRAM: ready}).items(), key=_second)
        start, end, moved, energy = paging.write(max(ready, at), nbytes, buffer, src == DRAM)
        s.transfers.append((root, src, STORAGE, start, end, moved, energy, paging.resource, "page_out"))
        if home not in paging.held:
            trace.alloc(start, paging.hold(home, s.bytes_of[home], start))
            if paging.problem:
                raise ScheduleError(f"target '{s.target.name}': {paging.problem}")
        s.copies[home] = {}
    else:  # read
        home, copy = task.reads[0], task.writes[0]
        nbytes, buffer = stored_of.moves[task.index]
        start, end, moved, energy = paging.read(ready, nbytes, buffer)
        s.transfers.append((copy, STORAGE, DRAM, start, end, moved, energy, paging.resource, "page_in"))
        s._dram_alloc(copy, start)
        s.copies[copy] = {DRAM: end}
    s._done(task.index, 0, end, end)
    s._release_inputs(task, end)
    if task.page in ("in", "read") and s.remaining_uses[task.writes[0]] == 0:
        s._free(task.writes[0], end)
    if task.page == "read" and s.remaining_uses[home] <= 0 and s.g.tensors[home].producer is not None:
        since, held = paging.held.pop(home, (None, 0))
        if since is not None:
            trace.free(end, held, since)
            paging.used -= held
    return end


def _second(item: tuple) -> Any:
    return item[1]
