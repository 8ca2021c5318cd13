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

from collections.abc import Callable, Iterable
from typing import Any

STORAGE = -2  # location id of the storage level (DRAM is -1)
LATE_PHASES = ("backward", "recompute", "optimizer")
PAGE_PHASE = "paging"


def add_page_tasks(tasks: list[Any], tensors: list[Any], paged: Iterable[int],
                   make_task: Callable[..., Any], make_tensor: Callable[..., Any]) -> None:
    """Append a page-out and a page-in task for each paged tensor (a storage root) that a late
    (backward, recompute) task reads, and rewire those readers to the paged-in copy. The
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
        self.problem = ""

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
