"""The compact graph the scheduler works on, extracted once from a training-step function.

The scheduler never walks or rebuilds IR: `extract(fn)` turns every op into a `Task` (its
cost-model signature, phase, origin node and the tensors it reads and writes) and every SSA value
or argument into a `TensorInfo` (bytes, kind, persistence, producer, consumers). Views
(`nn.reshape`) alias their input's storage (`root`), so memory is counted once.

Dependencies are data dependencies plus three training-specific orderings:
- an in-place optimizer update of a parameter runs after every other reader of that parameter
  (write-after-read);
- a recompute op runs once the backward op that precedes it in program order has started
  (where `activation-checkpoint` placed it, just before the first backward use), not as soon as
  its inputs exist;
- optimizer steps run after the whole backward pass, as `optimizer.step()` follows
  `loss.backward()` (so every gradient is alive when the optimizer starts).

The extractor reads a *program* (`ProgramOp`s): the function's ops by default, or IR ops with
other operands and tilings plus planned copies, which is how `monet explore` evaluates a
candidate without rewriting IR. `ExtractCache` keeps what it reads from ops across programs.

A graph holds its tasks and tensors as columns (`TaskTable`, `TensorTable`: a list per field,
a task or tensor is its position), not as an object each: a search builds, schedules and frees
a graph of thousands of tasks per candidate, and the columns are filled a list at a time (a
fused run's tasks and tensors in a few `extend`s), read by the scheduler directly and freed as
a few dozen lists. Indexing a table gives a view of one task or tensor (`TaskView`,
`TensorView`) with the fields of a `Task` or `TensorInfo`, for the readers of a graph (reports,
paging, tests); `Task` and `TensorInfo` are the records appended to a table.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, filterfalse, repeat
from operator import attrgetter, eq, is_, itemgetter, ne
from typing import Any, NamedTuple

from xdsl.dialects import func
from xdsl.ir import Operation, SSAValue

from dialects import nn
from dialects.interfaces import InPlaceUpdate, LoopNestOp
from dialects.base import shape_of
from monet_ir import graph
from monet_ir.analysis.ir_signatures import signature_of, tensor_bytes_at, value_bytes
from monet_ir.cost.signature import LoopNestSig, VectorSig
from monet_ir.types import tensor_bytes


@dataclass(slots=True)
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


@dataclass(slots=True)
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
    page: str = ""
    """`out` or `in` for the page tasks of a paged activation (`monet_ir.schedule.paging`)."""
    touched_bytes: tuple[int, ...] | None = None
    """The bytes of the tensors the task touches, each once: its reads, then its writes
    (`touched_bytes`); what a vector op streams through DRAM depends on them (the scheduler).
    Filled by the extractor (a fused run's tasks share their tuples); None: not known yet."""


TASK_FIELDS = ("op", "node", "phase", "sig", "reads", "writes", "preds", "in_place", "op_index", "roles", "page",
               "touched_bytes")
TENSOR_FIELDS = ("name", "bytes", "kind", "persistent", "producer", "consumers", "root")


def _field(column: str) -> property:
    """A view's field: the entry of the table's column at the view's position."""
    get_column = attrgetter(column)

    def get(view):
        return get_column(view.table)[view.position]

    def put(view, value):
        get_column(view.table)[view.position] = value

    return property(get, put, doc=f"`{column}[i]` of the table")


class _View:
    """What `TaskView` and `TensorView` share: entry `position` of a table (`_Table`), its
    fields (`FIELDS`) read and written in the columns, equal to the record (`RECORD`) with the
    same fields."""

    __slots__ = ("table", "position")
    FIELDS: tuple[str, ...] = ()
    RECORD: type = object
    KEY = ""  # the record's name for its position

    def __init__(self, table: _Table, position: int):
        self.table = table
        self.position = position

    def record(self) -> Any:
        """A `RECORD` with this entry's fields (the same objects)."""
        return self.RECORD(self.position, *(getattr(self, name) for name in self.FIELDS))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (self.RECORD, type(self))):
            return NotImplemented
        return (getattr(other, self.KEY) == self.position
                and all(getattr(self, f) == getattr(other, f) for f in self.FIELDS))

    __hash__ = None  # (mutable, as the records)

    def __repr__(self) -> str:
        return repr(self.record()).replace(f"{self.RECORD.__name__}(", f"{type(self).__name__}(", 1)


class TaskView(_View):
    """Task `index` of a `TaskTable`: the fields of a `Task`, read and written in the columns."""

    __slots__ = ()
    FIELDS, RECORD, KEY = TASK_FIELDS, Task, "index"

    @property
    def index(self) -> int:
        return self.position

    op, node, phase, sig, reads, writes, preds, in_place, op_index, roles, page, touched_bytes = map(_field, TASK_FIELDS)

    as_task = _View.record


class TensorView(_View):
    """Tensor `id` of a `TensorTable`: the fields of a `TensorInfo`, read and written in the
    columns."""

    __slots__ = ()
    FIELDS, RECORD, KEY = TENSOR_FIELDS, TensorInfo, "id"

    @property
    def id(self) -> int:
        return self.position

    name, bytes, kind, persistent, producer, consumers, root = map(_field, TENSOR_FIELDS)

    as_tensor = _View.record


class _Table:
    """What `TaskTable` and `TensorTable` share: a sequence of views over columns (one list per
    field in `FIELDS`, equally long)."""

    __slots__ = ()
    FIELDS: tuple[str, ...] = ()
    VIEW: type = object

    def __init__(self, records: Iterable[Any] = ()):
        for name in self.FIELDS:
            setattr(self, name, [])
        for record in records:
            self.append(record)

    def __len__(self) -> int:
        return len(getattr(self, self.FIELDS[0]))

    def __getitem__(self, position):
        if isinstance(position, slice):
            return [self.VIEW(self, i) for i in range(len(self))[position]]
        count = len(self)
        if position < 0:
            position += count
        if not 0 <= position < count:
            raise IndexError(f"{type(self).__name__} index out of range")
        return self.VIEW(self, position)

    def __iter__(self) -> Iterator[Any]:
        return map(self.VIEW, repeat(self), range(len(self)))

    def __setitem__(self, position: int, record: Any) -> None:
        """Every field of entry `position` from `record` (a `Task` or `TensorInfo`, or a view)."""
        for name in self.FIELDS:
            getattr(self, name)[position] = getattr(record, name)

    def append(self, record: Any) -> None:
        """Append `record` (a `Task` or `TensorInfo`, or a view), whose position must be the
        table's length."""
        if self._position(record) != len(self):
            raise ValueError(f"appending entry {self._position(record)} to a {type(self).__name__} of {len(self)}")
        for name in self.FIELDS:
            getattr(self, name).append(getattr(record, name))

    def copy(self):
        """A table with copies of the columns (the entries themselves are shared)."""
        table = type(self)()
        for name in self.FIELDS:
            setattr(table, name, list(getattr(self, name)))
        return table

    def __eq__(self, other: object) -> bool:
        if isinstance(other, type(self)):
            return all(getattr(self, name) == getattr(other, name) for name in self.FIELDS)
        if isinstance(other, list):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self)!r})"

    @staticmethod
    def _position(record: Any) -> int:
        raise NotImplementedError


class TaskTable(_Table):
    """The tasks of a graph, a column per `Task` field but `index` (a task is its position):
    task `i` reads `reads[i]`, waits for `preds[i]`, ... (see `Task`)."""

    __slots__ = TASK_FIELDS
    FIELDS = TASK_FIELDS
    VIEW = TaskView

    def add(self, op: str, node: str, phase: str, sig: Any, reads: tuple[int, ...], writes: tuple[int, ...],
            preds: set[int], in_place: tuple[int, ...], op_index: int, roles: dict[int, str], page: str = "",
            touched_bytes: tuple[int, ...] | None = None) -> int:
        """Append a task; returns its index."""
        index = len(self.op)
        self.op.append(op)
        self.node.append(node)
        self.phase.append(phase)
        self.sig.append(sig)
        self.reads.append(reads)
        self.writes.append(writes)
        self.preds.append(preds)
        self.in_place.append(in_place)
        self.op_index.append(op_index)
        self.roles.append(roles)
        self.page.append(page)
        self.touched_bytes.append(touched_bytes)
        return index

    def fill_touched_bytes(self, sizes: Sequence[int]) -> None:
        """`touched_bytes` of the tasks that have none, from the tensors' `sizes`."""
        column = self.touched_bytes
        for index in compress(range(len(column)), map(is_, column, repeat(None))):
            column[index] = touched_bytes(self.reads[index], self.writes[index], sizes)

    @staticmethod
    def _position(record: Any) -> int:
        return record.index


class TensorTable(_Table):
    """The tensors of a graph, a column per `TensorInfo` field but `id` (a tensor is its
    position): tensor `t` has `bytes[t]` bytes, is read by `consumers[t]`, ... (see
    `TensorInfo`)."""

    __slots__ = TENSOR_FIELDS
    FIELDS = TENSOR_FIELDS
    VIEW = TensorView

    def add(self, name: str, nbytes: int, kind: str, persistent: bool, producer: int | None) -> int:
        """Append a tensor that is its own storage, read by no task yet; returns its id."""
        tid = len(self.name)
        self.name.append(name)
        self.bytes.append(nbytes)
        self.kind.append(kind)
        self.persistent.append(persistent)
        self.producer.append(producer)
        self.consumers.append([])
        self.root.append(tid)
        return tid

    def add_all(self, names: Sequence[str], sizes: Iterable[int], kinds: Iterable[str], persistent: Iterable[bool],
                producers: Iterable[int | None]) -> range:
        """Append tensors that are their own storage, read by no task yet, a column at a time
        (`names`, ...: one entry per tensor); returns their ids."""
        first = len(self.name)
        self.name += names
        self.bytes += sizes
        self.kind += kinds
        self.persistent += persistent
        self.producer += producers
        ids = range(first, len(self.name))
        self.consumers += [[] for _ in ids]
        self.root += ids
        return ids

    @staticmethod
    def _position(record: Any) -> int:
        return record.id


def touched_bytes(reads: tuple[int, ...], writes: tuple[int, ...], sizes: Sequence[int]) -> tuple[int, ...]:
    """The bytes (`sizes`) of the tensors a task reading `reads` and writing `writes` touches,
    each once, in that order (`Task.touched_bytes`)."""
    touched = reads + writes
    if len(touched) > 1 and len(set(touched)) < len(touched):
        touched = tuple(dict.fromkeys(touched))
    return tuple(map(sizes.__getitem__, touched))


@dataclass
class TaskGraph:
    """A step's tasks and tensors (given as tables, or as lists of `Task` and `TensorInfo`
    records, which become tables)."""

    tasks: TaskTable
    tensors: TensorTable
    storage_plan: Any = None
    """The tensors a plan keeps in storage (`monet_ir.schedule.paging.StoragePlan`), or None."""
    barrier: tuple[tuple[int, ...], tuple[int, ...]] | None = None
    """(sinks, waiters): the optimizer barrier the extractor adds (`_optimizer_after_backward`):
    every waiter (an optimizer task) waits for every sink of the backward sub-graph, on top of
    its own `preds`, which do not list the sinks (sinks x waiters edges would grow with the
    square of the model's depth). Readers that need a task's every predecessor use
    `predecessors`; the scheduler's tables (`monet_ir.schedule.scheduler.GraphTables`) join the
    sinks into one node. None: no barrier."""

    def __post_init__(self) -> None:
        if not isinstance(self.tasks, TaskTable):
            self.tasks = TaskTable(self.tasks)
        if not isinstance(self.tensors, TensorTable):
            self.tensors = TensorTable(self.tensors)

    def predecessors(self, index: int) -> set[int]:
        """Every task `index` waits for: its `preds` and, for a waiter, the barrier's sinks
        (a new set then; for checks and tools, not for a per-task loop)."""
        preds = self.tasks.preds[index]
        barrier = self.barrier
        if barrier is not None and index in barrier[1]:
            return preds | set(barrier[0])
        return preds


class ProgramOp(NamedTuple):
    """One op of the program the extractor reads: an IR op, or a copy of one that only exists
    as a plan (`monet explore` turns `activation-checkpoint`'s rewrite plan into a program
    without cloning IR). Operands and results are keys: an SSA value, or any hashable naming
    a copy's value; `suffix` is appended to the result names of a copy; `tiling` is the op's
    `monet.tiling` (`fuse-layers`), None when it is not fused."""

    op: Operation
    phase: str
    operands: Sequence[Hashable]
    results: Sequence[Hashable]
    suffix: str = ""
    tiling: Any = None


def ir_program(fn: func.FuncOp) -> Iterator[ProgramOp]:
    """The ops of the step function as they are."""
    for op in graph.compute_ops(fn):
        yield ProgramOp(op, graph.op_phase(op), tuple(op.operands), op.results, "", op.attributes.get("monet.tiling"))


def extract(fn: func.FuncOp, bits: int | None = None,
            signatures: Mapping[Operation, LoopNestSig | VectorSig | None] | None = None,
            program: Iterable[ProgramOp] | None = None,
            cache: ExtractCache | None = None, prefix_key: Hashable = None,
            paged: Iterable[Hashable] | None = None,
            stored: tuple[Iterable[str], int | None] | None = None) -> TaskGraph:
    """The task graph of a step; `bits` overrides the width of float tensors (see
    `monet_ir.analysis.ir_signatures.signature_of`). An op tiled by `fuse-layers`
    (`monet.tiling`) becomes one task per tile, each producing its rows of the result as a
    tensor of its own and reading only the operand rows it needs (`monet_ir.schedule.tiling`).
    `signatures` may give ops' signatures already known (`monet explore` reuses its base step's).
    `program` replaces the function's ops (`ir_program(fn)`, the default); the function still
    gives the arguments and which results are gradients. `cache` keeps what the extractor reads
    from ops, filled as it goes; a caller extracting many programs of the same ops (with the
    same `bits` and `signatures`) passes the same cache every time. With a `prefix_key`, the
    cache also keeps the extraction of the program's leading forward ops under that key, and
    a later program with the same key starts from it (`monet explore`: candidates with the same
    fusion differ only from the backward pass on); its ops are checked to be the same.
    `paged`: the values (keys) whose storage is paged out and back (`monet_ir.schedule.paging`);
    None reads the `monet.page` marks of the program's forward ops. `stored`: (tensor names, tile
    bytes or None) kept in storage (`monet_ir.schedule.paging.add_storage_tasks`); None reads
    the step function's `monet.storage` marks."""
    ops = list(ir_program(fn) if program is None else program)
    return _Extractor(fn, bits, signatures or {}, ExtractCache() if cache is None else cache).run(ops, prefix_key,
                                                                                                 paged, stored)


class OpFacts(NamedTuple):
    """What the extractor reads from an op: its node, signature, and per result the bytes and
    name hint (reading them from xDSL objects costs more than the rest of the extraction)."""

    node: str
    sig: Any
    result_bytes: tuple[int, ...]
    result_names: tuple[str | None, ...]
    view: bool  # nn.reshape: its result is its operand's storage
    const: bool
    roles: tuple[tuple[str, ...], str] | None  # loop-nest roles of operands and result
    name: str = ""  # the op's name
    in_place: tuple[SSAValue, ...] | None = None  # the values an optimizer or accumulation op updates
    paged: tuple[int, ...] = ()  # the results a plan pages (`monet.page`)


class _Layout:
    """How a value stored as row pieces splits its rows: the pieces' `bounds` along `axis`, and
    per rows a reader needs (`operand_rows`) the pieces it reads (`memo`). One object per
    (axis, bounds) in an `ExtractCache`, so that identical layouts compare by identity."""

    __slots__ = ("axis", "bounds", "memo")

    def __init__(self, axis: int, bounds: tuple[tuple[int, int], ...]):
        self.axis = axis
        self.bounds = bounds
        self.memo: dict[Any, tuple[int, ...]] = {}

    def overlapping(self, needed) -> tuple[int, ...]:
        """The pieces a reader of `needed` rows reads, in order: all of them for a whole read or
        one along another axis, else those whose rows meet the needed ones."""
        found = self.memo.get(needed)
        if found is None:
            if needed is None:
                found = tuple(range(len(self.bounds)))
            else:
                axis, (lo, hi) = needed
                found = tuple(i for i, (start, end) in enumerate(self.bounds)
                              if self.axis != axis or (start < hi and lo < end))
            self.memo[needed] = found
        return found


class TilePlan(NamedTuple):
    """An op run as tiles along `axis` of its `full` result rows: per tile its rows, the operand
    rows it reads (`operand_rows`, per operand) and its signature; `whole`: the operand rows the
    whole result reads; `barrier`: every tile waits for the whole input; `layout`: how its
    results are stored (a piece per tile)."""

    full: int
    bounds: list[tuple[int, int]]
    needed: list[list[Any]]
    sigs: list[Any]
    whole: list[Any]
    barrier: bool
    layout: _Layout | None = None
    split: tuple[tuple[int, int], ...] = ()  # (operand, axis) of the operands the whole result reads in rows


@dataclass
class ExtractCache:
    """What the extractor reads from ops (reading xDSL objects costs more than the rest of the
    extraction): per op its `OpFacts`, per (op, axis, tiles) its `TilePlan`."""

    ops: dict[Operation, OpFacts] = field(default_factory=dict)
    tiles: dict[tuple[Operation, int, int], TilePlan] = field(default_factory=dict)
    sigs: dict[Any, Any] = field(default_factory=dict)
    """One object per distinct tile signature: the scheduler prices a signature object once."""
    prefixes: OrderedDict[Hashable, _Prefix] = field(default_factory=OrderedDict)
    prefix_limit: int = 16
    seen: OrderedDict[Hashable, None] = field(default_factory=OrderedDict)
    """Prefix keys met once: a prefix is saved the second time its key is met (a key met only
    once, as most are in a random search over fused stacks, would cost a copy for nothing)."""
    layouts: dict[tuple, _Layout] = field(default_factory=dict)
    templates: dict[tuple, list] = field(default_factory=dict)
    """Per (op, tiling, layouts of its operands, suffix): per tile, the operand pieces it reads,
    their roles, its signature and its results' names and bytes (`_Extractor.add_tiled`)."""
    arguments: tuple[Any, list] | None = None  # (function, per argument its key, name, bytes, kind, persistence)
    compiled: dict[int, tuple] = field(default_factory=dict)  # id(item.results) -> `_Extractor.compiled(item)`
    compiled_limit: int = 20_000
    gradients: tuple[Any, set] | None = None  # (function, its results that are gradients)
    pieces: dict[tuple, tuple] = field(default_factory=dict)  # `_Extractor.add_pieces`: per result, its pieces
    page_marks: tuple[Any, bool] | None = None  # (function, whether an op of it has `monet.page` marks)
    tilings: dict[int, tuple] = field(default_factory=dict)  # id(monet.tiling) -> (it, axis, tiles, stack)
    splits: dict[tuple[int, int], tuple] = field(default_factory=dict)  # (id(op), id(tiling)) -> `splits_of`
    runs: dict[tuple, Any] = field(default_factory=dict)
    """Per run of fused ops and the storage of its inputs, its tasks and tensors (`_FusedRun`;
    False: not recordable, added op by op)."""
    runs_limit: int = 4096
    reuse: bool = True
    """False: no prefix, tile template, recorded run or compiled item is used, every op goes through the
    general path (the tests compare both ways)."""

    def layout(self, axis: int, bounds: Iterable[tuple[int, int]]) -> _Layout:
        bounds = tuple(bounds)
        layout = self.layouts.get((axis, bounds))
        if layout is None:
            layout = self.layouts[(axis, bounds)] = _Layout(axis, bounds)
        return layout


@dataclass
class _Prefix:
    """The extractor's state after a program's leading forward ops. Its tasks are shared by
    every graph extracted from it (nothing changes a task once the ops after it are added, but
    for the stack pacing, which adds the same dependencies each time): each graph gets copies
    of the columns; its tensors too, but for their consumers, kept as tuples and made lists
    anew for each graph (later readers append to them)."""

    ops: list[Operation]
    tilings: list[Any]
    tasks: TaskTable
    tensors: TensorTable  # (consumers as tuples)
    parts: dict[Hashable, tuple[tuple[int, ...], _Layout | None]]
    stacks: dict[int, list[list[int]]]
    hints: dict[Hashable, tuple[int, int]]
    """The split hints of the values it holds: a tiled backward op reading a forward value
    splits it into row pieces, and recomputation can change which value that op reads."""


# A value's storage (`_Extractor.parts`): (its tensors, their layout). Layout None: one tensor,
# the whole value; else row pieces along the layout's axis, a tensor per piece. A view's value
# is the same object as its operand's.
_Stored = tuple[tuple[int, ...], _Layout | None]


class _Extractor:
    def __init__(self, fn: func.FuncOp, bits: int | None, signatures: Mapping[Operation, Any],
                 cache: ExtractCache):
        self.fn = fn
        self.bits = bits
        self.known = signatures
        self.cache = cache
        self.facts = cache.ops
        self.tile_plans = cache.tiles
        self.sigs = cache.sigs
        self.templates = cache.templates
        self.tensors = TensorTable()
        self.tasks = TaskTable()
        self.parts: dict[Hashable, _Stored] = {}
        self.stacks: dict[int, list[list[int]]] = {}  # stack -> per op, its tile task indices
        known = cache.gradients
        if known is None or known[0] is not fn:
            known = cache.gradients = (fn, _gradient_results(fn))
        self.grad_results = known[1]
        self.position = -1

    def new_tensor(self, name: str, nbytes: int, kind: str, persistent: bool, producer: int | None) -> int:
        return self.tensors.add(name, nbytes, kind, persistent, producer)

    def arguments(self) -> list:
        """Per argument of the function: its key, name, bytes, kind and persistence."""
        known = self.cache.arguments
        if known is not None and known[0] is self.fn:
            return known[1]
        args = []
        for info, arg in zip(graph.arg_infos(self.fn), self.fn.body.block.args, strict=True):
            role = info.role or "input"
            args.append((arg, info.name or f"arg{info.index}", self.value_size(arg), role, role in ("param", "state")))
        self.cache.arguments = (self.fn, args)
        return args

    def run(self, program: list[ProgramOp], prefix_key: Hashable = None,
            paged: Iterable[Hashable] | None = None,
            stored: tuple[Iterable[str], int | None] | None = None) -> TaskGraph:
        self.split_hints = self.find_split_hints(program)
        reuse = self.cache.reuse
        if not reuse:
            prefix_key = None
        start = self.restore(program, prefix_key) if prefix_key is not None else 0
        if start == 0:
            for arg, name, nbytes, role, persistent in self.arguments():
                self.parts[arg] = ((self.new_tensor(name, nbytes, role, persistent, None),), None)
        saving = prefix_key is not None and start == 0 and self.wants_prefix(prefix_key)
        tasks, tensors, parts, hints = self.tasks, self.tensors, self.parts, self.split_hints
        consumers, producer_of, add_tensor, add_task = tensors.consumers, tensors.producer, tensors.add, tasks.add
        compiled = self.cache.compiled
        resume = start  # (past the last run of fused ops added)
        for position in range(start, len(program)):
            if position < resume:
                continue
            item = program[position]
            op, phase, operands, results, suffix, tiling = item
            if saving and phase != "forward":
                self.save(program[:position], prefix_key)
                saving = False
            if tiling is not None and op.results:
                if reuse:
                    resume = self.add_fused_run(program, position)
                    continue
                # a fused reshape stays a view: its tiles are its operand's tiles
                if not isinstance(op, nn.ReshapeOp):
                    self.position = position
                    self.add_tiled(item, tiling)
                    continue
            if not reuse:
                self.position = position
                self.add_op(item)
                continue
            known = compiled.get(id(results))
            if known is None or known[0] is not results or known[1] is not op or known[2] != phase or known[3] != suffix:
                known = self.compiled(item)
            _, _, _, _, name, node, sig, view, roles_of, in_place_values, const, outs = known
            # `add_op`, inline
            count = len(operands)
            if count == 1:
                reads = parts[operands[0]][0]
            elif count == 2:
                reads = parts[operands[0]][0] + parts[operands[1]][0]
            else:
                reads = tuple([t for v in operands for t in parts[v][0]])
            index = len(tasks)
            preds: set[int] = set()
            for t in (reads if len(reads) < 2 or (len(reads) == 2 and reads[0] != reads[1]) else dict.fromkeys(reads)):
                consumers[t].append(index)
                producer = producer_of[t]
                if producer is not None:
                    preds.add(producer)
            if view:
                add_task(name, node, phase, sig, reads, (), preds, (), position, {})
                stored_as = parts[operands[0]]  # the result is the operand's storage, piece for piece
                for r in results:
                    parts[r] = stored_as
                continue
            writes = []
            for r, (tensor_name, nbytes, kind, persistent) in zip(results, outs):
                if hints and not const and r in hints:  # stored as row pieces (tiles read it)
                    writes += self.add_pieces(item, r, tensor_name, nbytes, kind, persistent, index)
                    continue
                tid = add_tensor(tensor_name, nbytes, kind, persistent, index)
                parts[r] = ((tid,), None)
                writes.append(tid)
            roles: dict[int, str] = {}
            if roles_of is not None:  # (every tensor of every operand is read)
                operand_roles, result_role = roles_of
                for v, role in zip(operands, operand_roles, strict=False):
                    for t in parts[v][0]:
                        roles[t] = role
                for t in writes:
                    roles[t] = result_role
            in_place = () if in_place_values is None else tuple([parts[v][0][0] for v in in_place_values])
            add_task(name, node, phase, sig, reads, tuple(writes), preds, in_place, position, roles)
        self.add_paging(program, paged)
        storage_plan = self.add_storage(stored)
        self.tasks.fill_touched_bytes(self.tensors.bytes)
        _order_in_place_updates(self.tasks, self.tensors)
        _pace_stacks(self.tasks.preds, self.stacks)
        _recompute_when_needed(self.tasks)
        barrier = _optimizer_after_backward(self.tasks)
        return TaskGraph(self.tasks, self.tensors, storage_plan, barrier)

    def add_storage(self, stored: tuple[Iterable[str], int | None] | None) -> Any:
        """Keep the named tensors in storage (`monet_ir.schedule.paging.add_storage_tasks`):
        `stored` is (names, tile bytes), else the step function's `monet.storage` marks."""
        from monet_ir.analysis.paging_plan import stored_names
        from monet_ir.schedule.paging import add_storage_tasks

        names, tile = stored_names(self.fn) if stored is None else stored
        names = set(names)
        if not names:
            return None
        tensors = self.tensors
        roots = [t for t, (root, name) in enumerate(zip(tensors.root, tensors.name)) if root == t and
                 (name in names or (name.endswith("]") and name.split("[", 1)[0] in names))]
        return add_storage_tasks(self.tasks, tensors, roots, tile, Task, TensorInfo)

    def add_paging(self, program: list[ProgramOp], paged: Iterable[Hashable] | None) -> None:
        """Page tasks for the paged values: `paged` (value keys), else the results of forward
        ops marked `monet.page` by `activation-checkpoint{policy="plan=..."}`."""
        from monet_ir.schedule.paging import add_page_tasks

        if paged is None:
            facts = self.facts
            paged = [item.results[i] for item in program if item.phase == "forward"
                     for i in (facts.get(item.op) or self.facts_of(item.op)).paged] if self.page_marks() else ()
        nothing: _Stored = ((), None)
        tensors = [t for key in paged for t in self.parts.get(key, nothing)[0]]
        if tensors:
            add_page_tasks(self.tasks, self.tensors, tensors, Task, TensorInfo)

    def page_marks(self) -> bool:
        """Whether an op of the function has `monet.page` marks (read once per cache)."""
        from monet_ir.analysis.paging_plan import paged_results

        known = self.cache.page_marks
        if known is None or known[0] is not self.fn:
            known = self.cache.page_marks = (self.fn, any(paged_results(op) for op in graph.compute_ops(self.fn)))
        return known[1]

    def wants_prefix(self, key: Hashable) -> bool:
        """Whether to save the prefix of `key`: the second time it is met."""
        seen = self.cache.seen
        if key in seen:
            del seen[key]
            return True
        seen[key] = None
        if len(seen) > 64 * self.cache.prefix_limit:
            seen.popitem(last=False)
        return False

    def save(self, leading: list[ProgramOp], key: Hashable) -> None:
        prefixes = self.cache.prefixes
        tensors = self.tensors.copy()
        tensors.consumers = list(map(tuple, tensors.consumers))
        prefixes[key] = _Prefix([item.op for item in leading], [item.tiling for item in leading],
                                self.tasks.copy(), tensors,
                                dict(self.parts), {k: list(v) for k, v in self.stacks.items()},
                                self.hints_within(self.parts))
        if len(prefixes) > self.cache.prefix_limit:
            prefixes.popitem(last=False)

    def hints_within(self, values: Mapping[Hashable, Any]) -> dict[Hashable, tuple[int, int]]:
        return {k: v for k, v in self.split_hints.items() if k in values}

    def restore(self, program: list[ProgramOp], key: Hashable) -> int:
        """Start from the saved prefix of `key` if this program begins with its ops; returns
        the number of program ops it covers (0: none saved, or another program)."""
        prefix = self.cache.prefixes.get(key)
        if prefix is None or len(prefix.ops) > len(program):
            return 0
        if any(item.op is not op or item.phase != "forward" or (item.tiling is not tiling and item.tiling != tiling)
               for item, op, tiling in zip(program, prefix.ops, prefix.tilings)):
            return 0
        if self.hints_within(prefix.parts) != prefix.hints:
            return 0
        self.cache.prefixes.move_to_end(key)
        self.tasks = prefix.tasks.copy()
        self.tensors = prefix.tensors.copy()
        self.tensors.consumers = list(map(list, prefix.tensors.consumers))
        self.parts = dict(prefix.parts)
        self.stacks = {k: list(v) for k, v in prefix.stacks.items()}
        return len(prefix.ops)

    def value_size(self, value) -> int:
        """Bytes of a value at the step's precision (a policy sizes each by its class)."""
        return value_bytes(value, self.bits)

    def signature(self, op: Operation):
        if op in self.known:
            return self.known[op]
        return signature_of(op, self.bits)

    def facts_of(self, op: Operation) -> OpFacts:
        from monet_ir.analysis.paging_plan import paged_results

        facts = self.facts.get(op)
        if facts is None:
            in_place = op.updated_operands() if isinstance(op, InPlaceUpdate) else None
            facts = self.facts[op] = OpFacts(graph.op_node(op), self.signature(op),
                                             tuple(self.value_size(r) for r in op.results),
                                             tuple(r.name_hint for r in op.results),
                                             isinstance(op, nn.ReshapeOp), isinstance(op, nn.ConstantOp),
                                             _roles_of(op), op.name, in_place, paged_results(op))
        return facts

    def tile_plan(self, op: Operation, axis: int, tiles: int) -> TilePlan:
        from monet_ir.schedule.tiling import operand_rows, tile_bounds, tile_signature, waits_for_all_rows

        key = (op, axis, tiles)
        plan = self.tile_plans.get(key)
        if plan is None:
            full = shape_of(op.results[0].type)[axis]
            bounds = tile_bounds(full, tiles)
            count = len(op.operands)
            sig = self.facts_of(op).sig
            whole = [operand_rows(op, i, axis, 0, full) for i in range(count)]
            plan = self.tile_plans[key] = TilePlan(
                full, bounds,
                [[operand_rows(op, i, axis, lo, hi) for i in range(count)] for lo, hi in bounds],
                [self.sigs.setdefault(s, s) for s in (tile_signature(sig, op, axis, hi - lo, full) for lo, hi in bounds)],
                whole, waits_for_all_rows(op), self.cache.layout(axis, bounds),
                tuple((i, needed[0]) for i, needed in enumerate(whole) if needed is not None))
        return plan

    def find_split_hints(self, program: list[ProgramOp]) -> dict[Hashable, tuple[int, int]]:
        """Values computed whole but read by tiles: (axis, tiles) to store them as row pieces,
        so that each tile reads only its rows."""
        hints: dict[Hashable, tuple[int, int]] = {}
        splits = self.cache.splits
        for item in program:
            tiling = item.tiling
            if tiling is None:
                continue
            op = item.op
            known = splits.get((id(op), id(tiling)))
            if known is None or known[0] is not op or known[1] is not tiling:
                known = splits[(id(op), id(tiling))] = (op, tiling, self.splits_of(op, tiling))
            operands = item.operands
            for index, hint in known[2]:
                operand = operands[index]
                if operand not in hints:
                    hints[operand] = hint
        return hints

    def splits_of(self, op: Operation, tiling) -> tuple[tuple[int, tuple[int, int]], ...]:
        """Per operand of a tiled op read whole by it in rows: (operand index, its split hint)."""
        if not op.results:
            return ()
        _, axis, tiles, _ = self.tiling_of(tiling)
        return tuple((index, (operand_axis, tiles)) for index, operand_axis in self.tile_plan(op, axis, tiles).split)

    def tiling_of(self, tiling) -> tuple[Any, int, int, int]:
        """(tiling, axis, tiles, stack) of a `monet.tiling`, read once per attribute object."""
        known = self.cache.tilings.get(id(tiling))
        if known is None or known[0] is not tiling:
            known = self.cache.tilings[id(tiling)] = (tiling, tiling.axis.data, tiling.tiles.data, tiling.stack.data)
        return known

    def kind_of(self, facts: OpFacts, result: Hashable, phase: str) -> tuple[str, bool]:
        if facts.const:
            return "const", True
        if result in self.grad_results or phase not in ("forward", "recompute"):
            return "gradient", False
        return "activation", False

    def new_task(self, item: ProgramOp, facts: OpFacts, sig, reads: tuple[int, ...]) -> TaskView:
        """A task reading `reads` (a tensor may appear more than once), appended; its writes,
        in-place updates and roles are set by the caller (through the view returned)."""
        index = len(self.tasks)
        preds: set[int] = set()
        consumers, producer_of = self.tensors.consumers, self.tensors.producer
        for t in (dict.fromkeys(reads) if len(reads) > 1 else reads):
            consumers[t].append(index)
            if producer_of[t] is not None:
                preds.add(producer_of[t])
        self.tasks.add(facts.name, facts.node, item.phase, sig, reads, (), preds, (), self.position, {})
        return TaskView(self.tasks, index)

    def compiled(self, item: ProgramOp) -> tuple:
        """(results, op, phase, suffix; the op's name, node, signature, view, roles, in-place
        values and constness (`OpFacts`); per result the name, bytes, kind and persistence of
        its tensor when it is stored whole), kept by the identity of the item's
        results: the base step's items are in every program of a search, with their results
        or another item with the same op and results (other operands)."""
        op = item.op
        facts = self.facts.get(op) or self.facts_of(op)
        outs = []
        for index, r in enumerate(item.results):
            kind, persistent = self.kind_of(facts, r, item.phase)
            hint_name = facts.result_names[index]
            name = f"{hint_name}{item.suffix}" if hint_name else facts.node or op.name
            outs.append((name, facts.result_bytes[index], kind, persistent))
        compiled = self.cache.compiled
        if len(compiled) > self.cache.compiled_limit:
            compiled.clear()  # (the items of past programs)
        known = compiled[id(item.results)] = (item.results, op, item.phase, item.suffix, facts.name, facts.node,
                                              facts.sig, facts.view, facts.roles, facts.in_place, facts.const,
                                              tuple(outs))
        return known

    def add_op(self, item: ProgramOp) -> None:
        facts = self.facts.get(item.op) or self.facts_of(item.op)
        parts = self.parts
        operands = item.operands
        if len(operands) == 1:
            reads = parts[operands[0]][0]
        else:
            reads = tuple([t for v in operands for t in parts[v][0]])
        task = self.new_task(item, facts, facts.sig, reads)
        if facts.view:
            # the result is the operand's storage, piece for piece
            for r in item.results:
                parts[r] = parts[operands[0]]
            return
        self.add_results(item, facts, task)
        if facts.roles is not None:
            self.assign_roles(item, task, facts.roles)
        # optimizer and accumulation ops are never copied: their operands are the IR's values
        if facts.in_place is not None:
            task.in_place = tuple(parts[v][0][0] for v in facts.in_place)

    def add_results(self, item: ProgramOp, facts: OpFacts, task: TaskView) -> None:
        """The results of an op that is not tiled: whole, or as row pieces when tiles read them
        (a split hint)."""
        op = item.op
        parts = self.parts
        writes = []
        phase = item.phase
        hints = self.split_hints
        for index, r in enumerate(item.results):
            kind, persistent = self.kind_of(facts, r, phase)
            hint_name = facts.result_names[index]
            name = f"{hint_name}{item.suffix}" if hint_name else task.node or op.name
            nbytes = facts.result_bytes[index]
            if hints and not facts.const and r in hints:
                writes += self.add_pieces(item, r, name, nbytes, kind, persistent, task.index)
                continue
            tid = self.new_tensor(name, nbytes, kind, persistent, task.index)
            parts[r] = ((tid,), None)
            writes.append(tid)
        task.writes = tuple(writes)

    def add_pieces(self, item: ProgramOp, result: Hashable, name: str, nbytes: int, kind: str, persistent: bool,
                   producer: int) -> tuple[int, ...]:
        """A result computed whole that tiles read (a split hint): stored as row pieces."""
        axis, tiles = self.split_hints[result]
        op = item.op
        key = (id(op), id(item.results), id(result), axis, tiles, name, nbytes)  # (its results hold the result)
        known = self.cache.pieces.get(key)
        if known is None or known[0] is not op or known[1] is not item.results:
            from monet_ir.schedule.tiling import tile_bounds

            full = shape_of(op.results[list(item.results).index(result)].type)[axis]
            bounds = tile_bounds(full, tiles)
            known = self.cache.pieces[key] = (op, item.results, self.cache.layout(axis, bounds),
                                              tuple(f"{name}[{lo}:{hi}]" for lo, hi in bounds),
                                              tuple(-(-nbytes * (hi - lo) // full) for lo, hi in bounds))
        _, _, layout, names, sizes = known
        count = len(names)
        pieces = tuple(self.tensors.add_all(names, sizes, repeat(kind, count), repeat(persistent, count),
                                            repeat(producer, count)))
        self.parts[result] = (pieces, layout)
        return pieces

    def assign_roles(self, item: ProgramOp, task: TaskView, roles: tuple[tuple[str, ...], str] | None) -> None:
        """Loop-nest roles (`OpFacts.roles`) of the tensors the task reads and writes."""
        if roles is None:
            return
        operand_roles, result_role = roles
        reads = set(task.reads)
        task_roles = task.roles
        for operand, role in zip(item.operands, operand_roles, strict=False):
            for t in self.parts[operand][0]:
                if t in reads:
                    task_roles[t] = role
        for tid in task.writes:
            task_roles[tid] = result_role

    def add_tiled(self, item: ProgramOp, tiling) -> None:
        op = item.op
        _, axis, tiles, stack = self.tiling_of(tiling)
        facts = self.facts.get(op) or self.facts_of(op)
        plan = self.tile_plan(op, axis, tiles)
        producer_of = self.tensors.producer
        values = [self.parts[operand] for operand in item.operands]
        barrier = {producer_of[t] for v in values for t in v[0]} if plan.barrier else set()
        barrier_preds = [p for p in barrier if p is not None]
        # per result: its kind, persistence and pieces (the same for every tile)
        results = []
        for r in item.results:
            kind, persistent = self.kind_of(facts, r, item.phase)
            results.append((r, kind, persistent, []))
        if not self.cache.reuse or len({id(v) for v in values}) < len(values):
            tile_tasks = self.add_tiles_reading_twice(item, facts, plan, values, results, barrier_preds)
        else:
            tile_tasks = self.add_tiles(item, facts, plan, values, results, barrier_preds)
        for r, _, _, pieces in results:
            self.parts[r] = (tuple(pieces), plan.layout)
        self.stacks.setdefault(stack, []).append(tile_tasks)

    def add_fused_run(self, program: list[ProgramOp], start: int) -> int:
        """Add the run of fused ops from `start` (the consecutive program items of one stack and
        phase, views included); returns where it ends. The tasks and tensors of a run depend
        on its ops, on which of their operands are results of earlier ops of the run, and on
        how the other operands (its inputs) are stored: the cache keeps them per such run
        (`_FusedRun`) with the inputs' tensors as slots, and fills them in for the inputs of
        this program (most fused stacks come back in many candidates of a search)."""
        parts = self.parts
        phase = program[start].phase
        stack = self.tiling_of(program[start].tiling)[3]
        inside: dict[int, tuple[int, int]] = {}  # id(value) -> (op in the run, result index)
        outside: dict[int, int] = {}  # id(value) -> its input index
        inputs: list[_Stored] = []
        shape = []
        end = start
        while end < len(program):
            item = program[end]
            if item.tiling is None or not item.op.results or item.phase != phase:
                break
            _, axis, tiles, item_stack = self.tiling_of(item.tiling)
            if item_stack != stack:
                break
            refs: list[Any] = []
            for v in item.operands:
                ref = inside.get(id(v))
                if ref is None:
                    ref = outside.get(id(v))
                    if ref is None:
                        ref = outside[id(v)] = len(inputs)
                        inputs.append(parts[v])
                refs.append(ref)
            for i, r in enumerate(item.results):
                inside[id(r)] = (end - start, i)
            shape.append((item.op, item.results is item.op.results, item.suffix, axis, tiles, tuple(refs)))
            end += 1
        # the inputs' storage: how many tensors, their layout, and which input shares another's
        first_of: dict[int, int] = {}
        stored = tuple((len(v[0]), v[1], first_of.setdefault(id(v), k)) for k, v in enumerate(inputs))
        key = (phase, tuple(shape), stored)
        runs = self.cache.runs
        run = runs.get(key)
        if run:
            run.add(self, program, start, inputs, stack)
            return end
        tasks_before, tensors_before = len(self.tasks), len(self.tensors)
        for position in range(start, end):
            item = program[position]
            self.position = position
            if isinstance(item.op, nn.ReshapeOp):
                self.add_op(item)
            else:
                self.add_tiled(item, item.tiling)
        if run is None:  # (False: recorded as not fitting)
            if len(runs) >= self.cache.runs_limit:
                runs.clear()
            runs[key] = _FusedRun.record(self, program[start:end], start, inputs, tasks_before, tensors_before) or False
        return end

    def tile_template(self, item: ProgramOp, facts: OpFacts, plan: TilePlan, values: list[_Stored]) -> list:
        """Per tile of `item` (its operands stored as `values`, distinct): the (operand, piece)
        pairs it reads in order, their roles (operands with a loop-nest role, which come
        first), its signature, and per result the name and bytes of its piece."""
        key = (item.op, plan.layout, tuple(v[1] for v in values), item.suffix)
        template = self.templates.get(key)
        if template is not None:
            return template
        operand_roles = facts.roles[0] if facts.roles is not None else ()
        bases = [(f"{hint}{item.suffix}" if hint else facts.node, nbytes)
                 for hint, nbytes in zip(facts.result_names, facts.result_bytes, strict=True)]
        full = plan.full
        # the operands' tensors are read from their concatenation (`add_tiles`): where each starts
        offsets = [0]
        for stored, _ in values:
            offsets.append(offsets[-1] + len(stored))
        template = []
        for (lo, hi), needed_rows, tile_sig in zip(plan.bounds, plan.needed, plan.sigs, strict=True):
            picks: list[int] = []
            roles: list[str] = []
            for k, ((stored, layout), needed) in enumerate(zip(values, needed_rows, strict=True)):
                found = range(len(stored)) if needed is None or layout is None else layout.overlapping(needed)
                picks += [offsets[k] + i for i in found]
                if k < len(operand_roles):
                    roles += [operand_roles[k]] * len(found)
            outs = tuple((f"{base}[{lo}:{hi}]", -(-nbytes * (hi - lo) // full)) for base, nbytes in bases)
            getter = _slots_getter(picks)  # (the tuple of the picked tensors)
            template.append((getter, tuple(roles), tile_sig, outs))
        self.templates[key] = template
        return template

    def add_tiles(self, item: ProgramOp, facts: OpFacts, plan: TilePlan, values: list[_Stored],
                  results: list, barrier_preds: list[int]) -> list[int]:
        """The tile tasks of an op whose operands are distinct values (no tensor is read twice)."""
        template = self.tile_template(item, facts, plan, values)
        flat = values[0][0]
        for stored, _ in values[1:]:
            flat = flat + stored
        tasks, tensors = self.tasks, self.tensors
        consumers, producer_of = tensors.consumers, tensors.producer
        name, node, phase, position = facts.name, facts.node, item.phase, self.position
        result_role = facts.roles[1] if facts.roles is not None else None
        tile_tasks = []
        for getter, roles, tile_sig, outs in template:
            index = len(tasks)
            reads = getter(flat)
            preds: set[int] = set()
            for t in reads:
                consumers[t].append(index)
                if producer_of[t] is not None:
                    preds.add(producer_of[t])
            if barrier_preds:
                preds.update(barrier_preds)
            writes = []
            for (piece_name, nbytes), (_, kind, persistent, pieces) in zip(outs, results):
                tid = tensors.add(piece_name, nbytes, kind, persistent, index)
                pieces.append(tid)
                writes.append(tid)
            if result_role is not None:
                task_roles = dict(zip(reads, roles))
                for tid in writes:
                    task_roles[tid] = result_role
            else:
                task_roles = {}
            tasks.add(name, node, phase, tile_sig, reads, tuple(writes), preds, (), position, task_roles)
            tile_tasks.append(index)
        return tile_tasks

    def add_tiles_reading_twice(self, item: ProgramOp, facts: OpFacts, plan: TilePlan, values: list[_Stored],
                                results: list, barrier_preds: list[int]) -> list[int]:
        """The tile tasks of an op reading a value twice (as two operands, or as a value and
        its view)."""
        full = plan.full
        tile_tasks = []
        for (lo, hi), needed_rows, tile_sig in zip(plan.bounds, plan.needed, plan.sigs, strict=True):
            reads: list[int] = []
            for (stored, layout), needed in zip(values, needed_rows, strict=True):
                if needed is None or layout is None:
                    reads += stored
                else:
                    reads += [stored[i] for i in layout.overlapping(needed)]
            task = self.new_task(item, facts, tile_sig, tuple(reads))
            if barrier_preds:
                task.preds.update(barrier_preds)
            writes = []
            for index, (_, kind, persistent, pieces) in enumerate(results):
                hint_name = facts.result_names[index]
                base = f"{hint_name}{item.suffix}" if hint_name else facts.node
                nbytes = -(-facts.result_bytes[index] * (hi - lo) // full)
                tid = self.new_tensor(f"{base}[{lo}:{hi}]", nbytes, kind, persistent, task.index)
                pieces.append(tid)
                writes.append(tid)
            task.writes = tuple(writes)
            self.assign_roles(item, task, facts.roles)
            tile_tasks.append(task.index)
        return tile_tasks


class _FusedRun:
    """The tasks and tensors of a run of fused ops (`_Extractor.add_fused_run`), recorded as
    they were added with every tensor as a slot: the tensors of its inputs (each input that
    shares no other's storage, in order), then its own tensors. `add` adds them again after
    other tasks and tensors, for other tensors as inputs, doing what adding the ops one by one
    does: a task waits for the producers of the tensors it reads (in order) and then for those
    of a barrier op's inputs, and is a consumer of each tensor it reads. What is the same for
    every use (its own tensors but their producers; its tasks' ops, nodes, phases, signatures)
    is kept as columns, added with a few `extend`s."""

    __slots__ = ("distinct", "tensors", "producers", "tasks", "op_offsets", "ops", "stored")

    def __init__(self, distinct, tensors, producers, tasks, op_offsets, ops, stored):
        self.distinct = distinct  # the inputs whose tensors fill the first slots
        self.tensors = tensors  # its own tensors' names, bytes, kinds and persistence: a tuple per column
        self.producers = producers  # per own tensor, its producer's offset from the run's first task
        # its tasks' ops, nodes, phases, signatures and touched bytes: a tuple per column (the
        # bytes of the inputs' tensors, like those of its own, follow from its ops and the
        # inputs' layouts, which its key holds)
        self.tasks = tasks
        self.op_offsets = op_offsets  # per task, its op's offset from the run's first program item
        self.ops = ops  # per op: its barrier's slots or None, whether tiled (not a view), its results, its tasks
        self.stored = stored  # the storage of its ops' results: (slots, layout)

    @staticmethod
    def record(extractor: _Extractor, items: list[ProgramOp], start: int, inputs: list[_Stored],
               tasks_before: int, tensors_before: int) -> _FusedRun | None:
        """The run of `items` (program positions from `start`), just added from `tasks_before`
        and `tensors_before` on; None when it does not fit the record."""
        tasks, tensors, parts = extractor.tasks, extractor.tensors, extractor.parts
        distinct, flat, seen = [], [], set()
        for k, v in enumerate(inputs):
            if id(v) not in seen:
                seen.add(id(v))
                distinct.append(k)
                flat += v[0]
        slot_of = {t: i for i, t in enumerate(flat)}
        if len(slot_of) != len(flat):
            return None  # (inputs sharing tensors but not their storage: not expected)
        own = len(flat)
        own_ids = range(tensors_before, len(tensors))
        slot_of.update(zip(own_ids, range(own, own + len(own_ids))))
        slot = slot_of.__getitem__

        producer_of = tensors.producer
        if any(tensors.root[t] != t or producer_of[t] is None or producer_of[t] < tasks_before for t in own_ids):
            return None
        own_tensors = tuple(tuple(column[tensors_before:]) for column in
                            (tensors.name, tensors.bytes, tensors.kind, tensors.persistent))
        own_producers = tuple(producer_of[t] - tasks_before for t in own_ids)
        task_ids = range(tasks_before, len(tasks))
        if any(tasks.in_place[i] or tasks.page[i] for i in task_ids):
            return None
        own_tasks = tuple(tuple(column[tasks_before:]) for column in (tasks.op, tasks.node, tasks.phase, tasks.sig))
        sizes = tensors.bytes
        own_tasks += (tuple(touched_bytes(tasks.reads[i], tasks.writes[i], sizes) for i in task_ids),)
        op_offsets = tuple(tasks.op_index[i] - start for i in task_ids)
        by_op: dict[int, list[int]] = {}
        for i in task_ids:
            by_op.setdefault(tasks.op_index[i], []).append(i)
        if [i for offset in range(len(items)) for i in by_op.get(start + offset, ())] != list(task_ids):
            return None  # (the tasks of each op follow each other, in the order of the ops)
        stored_index: dict[int, int] = {}
        stored = []
        ops = []
        # per slot, the producer of its tensor when recorded
        producer = [producer_of[t] for t in flat] + [producer_of[t] for t in own_ids]
        try:
            for offset, item in enumerate(items):
                view = isinstance(item.op, nn.ReshapeOp)
                values = [parts[v] for v in item.operands]
                barrier = None
                barrier_preds: list[int] = []
                if not view:
                    _, axis, tiles, _ = extractor.tiling_of(item.tiling)
                    if extractor.tile_plan(item.op, axis, tiles).barrier:
                        barrier = _slots_getter(tuple(slot(t) for v in values for t in v[0]))
                        # (the same for each task of the op)
                        barrier_preds = [p for p in {producer[i] for i in barrier(range(len(slot_of)))} if p is not None]
                results: list[Any] = []
                for r in item.results:
                    v = parts[r]
                    if id(v) in seen:  # a view of an input: the input's storage
                        results.append(next(k for k, u in enumerate(inputs) if u is v))
                        continue
                    if id(v) not in stored_index:
                        stored_index[id(v)] = len(stored)
                        stored.append((_slots_getter(tuple(map(slot, v[0]))), v[1]))
                    results.append((stored_index[id(v)],))
                specs = []
                for i in by_op.get(start + offset, ()):
                    reads = tuple(map(slot, tasks.reads[i]))
                    once = tuple(dict.fromkeys(reads)) if len(reads) > 1 else reads
                    # the preds `add` makes (in the same order), checked against the task's
                    preds = {producer[k] for k in once if producer[k] is not None}
                    if barrier_preds:
                        preds.update(barrier_preds)
                    if list(tasks.preds[i]) != list(preds):
                        return None
                    roles = tasks.roles[i]
                    specs.append((_slots_getter(reads), None if once == reads else _slots_getter(once),
                                  _slots_getter(tuple(map(slot, tasks.writes[i]))),
                                  _slots_getter(tuple(map(slot, roles))) if roles else _no_reads,
                                  tuple(roles.values())))
                ops.append((barrier, not view, tuple(results), specs))
        except KeyError:  # a task reading a tensor of no input
            return None
        return _FusedRun(tuple(distinct), own_tensors, own_producers, own_tasks, op_offsets, ops, stored)

    def add(self, extractor: _Extractor, program: list[ProgramOp], start: int, inputs: list[_Stored],
            stack: int) -> None:
        tasks, tensors, parts = extractor.tasks, extractor.tensors, extractor.parts
        tasks_before = len(tasks)
        flat: tuple[int, ...] = ()
        for k in self.distinct:
            flat += inputs[k][0]
        names, sizes, kinds, persistent = self.tensors
        flat += tuple(tensors.add_all(names, sizes, kinds, persistent, map(tasks_before.__add__, self.producers)))
        stored = [(slots(flat), layout) for slots, layout in self.stored]
        # the columns that are the same for every use, then each task's reads, writes,
        # predecessors and roles
        ops, nodes, phases, sigs, touched = self.tasks
        count = len(ops)
        tasks.op += ops
        tasks.node += nodes
        tasks.phase += phases
        tasks.sig += sigs
        tasks.touched_bytes += touched
        tasks.op_index += map(start.__add__, self.op_offsets)
        tasks.in_place += repeat((), count)
        tasks.page += repeat("", count)
        add_reads, add_writes, add_preds, add_roles = (tasks.reads.append, tasks.writes.append, tasks.preds.append,
                                                       tasks.roles.append)
        consumers, producer_of = tensors.consumers, tensors.producer
        index = tasks_before
        for position, (barrier, tiled, results, specs) in enumerate(self.ops, start):
            barrier_preds = None
            if barrier is not None:
                barrier_preds = [p for p in {producer_of[t] for t in barrier(flat)} if p is not None]
            first = index
            for reads_of, once_of, writes_of, role_keys, roles in specs:
                reads = reads_of(flat)
                preds: set[int] = set()
                for t in reads if once_of is None else once_of(flat):
                    consumers[t].append(index)
                    producer = producer_of[t]
                    if producer is not None:
                        preds.add(producer)
                if barrier_preds:
                    preds.update(barrier_preds)
                add_reads(reads)
                add_writes(writes_of(flat))
                add_preds(preds)
                add_roles(dict(zip(role_keys(flat), roles)) if roles else {})
                index += 1
            if tiled:
                extractor.stacks.setdefault(stack, []).append(list(range(first, index)))
            for r, spec in zip(program[position].results, results):
                parts[r] = inputs[spec] if isinstance(spec, int) else stored[spec[0]]


def _single_getter(index: int):
    return lambda flat: (flat[index],)


def _slots_getter(slots: Sequence[int]):
    """A function returning the tuple of a tuple's items at `slots` (a slice when they follow
    each other: no Python call per use)."""
    count = len(slots)
    if not count:
        return _no_reads
    first = slots[0]
    if slots[-1] - first == count - 1 and (count < 3 or tuple(slots) == tuple(range(first, first + count))):
        return itemgetter(slice(first, first + count))
    return itemgetter(*slots)


def _no_reads(flat: tuple) -> tuple:
    return ()


def _roles_of(op: Operation) -> tuple[tuple[str, ...], str] | None:
    """The loop-nest roles of a loop-nest op's operands and result (`LoopNestOp.NEST_ROLES`)."""
    return op.NEST_ROLES if isinstance(op, LoopNestOp) else None


def _pace_stacks(preds: list[set[int]], stacks: dict[int, list[list[int]]]) -> None:
    """Depth-first order inside a fused stack: the first layer's tile j waits for the last
    layer's tile j - (depth + 1), so a few tiles are in flight, not whole layers. When a halo
    spans more than a tile per layer (strided layers, uneven tiles) or a value computed from
    the stack's whole results feeds a later layer, that tile may itself need first-layer tile
    j or later: the first layer then waits for the latest last-layer tile that does not, so
    pacing never closes a cycle."""
    for layers in stacks.values():
        first, last = layers[0], layers[-1]
        lag = len(layers) + 1
        if len(first) <= lag:
            continue
        reach = _first_tiles_reached(preds, first, last)
        i = -1
        for j, index in enumerate(first):
            i = min(j - lag, len(last) - 1)
            while i >= 0 and reach[last[i]] >= j:
                i -= 1
            if i >= 0:
                preds[index].add(last[i])


def _first_tiles_reached(preds: list[set[int]], first: list[int], last: list[int]) -> Mapping[int, int]:
    """For each last-layer tile, the highest first-layer tile it depends on (-1: none).

    (`preds`: each task's predecessors.) A task's reach is the highest of its own position in
    the first layer and its predecessors' reaches (those from the stack's first tile on). Tasks come after their predecessors in a
    graph as extracted, so one pass in index order from the first tile to the last layer's
    computes every reach; a predecessor that comes later (a task added after the ops, such as
    a page task) makes it walk the dependencies back instead (`_first_tiles_reached_walk`)."""
    lowest = min(first)
    top = max(last)
    reach = [-1] * (top - lowest + 1)
    for j, index in enumerate(first):
        if index <= top:
            reach[index - lowest] = j
    for index in range(lowest, top + 1):
        best = reach[index - lowest]
        for p in preds[index]:
            if p >= lowest:
                if p >= index:
                    return _first_tiles_reached_walk(preds, first, last)
                if reach[p - lowest] > best:
                    best = reach[p - lowest]
        reach[index - lowest] = best
    return {index: reach[index - lowest] for index in last}


def _first_tiles_reached_walk(preds: list[set[int]], first: list[int], last: list[int]) -> dict[int, int]:
    """`_first_tiles_reached` by walking back from each last-layer tile (for each task a
    last-layer tile depends on, the highest first-layer tile it depends on)."""
    position = {index: j for j, index in enumerate(first)}
    lowest = min(first)
    reach: dict[int, int] = {}
    expanded: set[int] = set()
    for root in last:
        stack = [root]
        while stack:
            index = stack[-1]
            if index in reach:
                stack.pop()
                continue
            if index not in expanded:  # (a task met again while expanded would be a cycle)
                expanded.add(index)
                pending = [p for p in preds[index] if p >= lowest and p not in expanded]
                if pending:
                    stack.extend(pending)
                    continue
            stack.pop()
            best = position.get(index, -1)
            for p in preds[index]:
                if p >= lowest:
                    best = max(best, reach.get(p, -1))
            reach[index] = best
    return reach


def _gradient_results(fn: func.FuncOp) -> set[SSAValue]:
    ret = fn.body.block.last_op
    if not isinstance(ret, func.ReturnOp) or fn.res_attrs is None:
        return set()
    return {v for v, a in zip(ret.operands, fn.res_attrs.data, strict=False) if "monet.grad" in a.data}


def _order_in_place_updates(tasks: TaskTable, tensors: TensorTable) -> None:
    """Readers of a tensor before an in-place update of it run before the update, readers
    after it (an MX re-quantization of the updated weight) after it."""
    preds, consumers = tasks.preds, tensors.consumers
    for index in compress(range(len(tasks)), tasks.in_place):  # (the tasks that update a tensor)
        for tid in tasks.in_place[index]:
            for reader in consumers[tid]:
                if reader < index:
                    preds[index].add(reader)
                elif reader > index:
                    preds[reader].add(index)


def _recompute_when_needed(tasks: TaskTable) -> None:
    """A recompute op reads only kept forward values, so data dependencies alone would let it
    run right after the forward pass and keep its result alive as long as storing it would.
    It runs where it stands in program order instead: once the backward op before it has
    started (its first task; the op itself when not tiled). Not after that op's last tile: in
    a fused backward stack the later tiles wait, depth-first, for tiles of the stack's later
    layers, which may read the recomputed value."""
    phases, op_index = tasks.phase, tasks.op_index
    every = range(len(phases))
    recompute = list(compress(every, map(eq, phases, repeat("recompute"))))
    if not recompute:
        return
    # the first task of each backward op: a backward task whose op is not the previous backward
    # task's (backward tasks of one op follow each other, other tasks may stand between)
    backward = list(compress(every, map(eq, phases, repeat("backward"))))
    ops = list(map(op_index.__getitem__, backward))
    firsts = list(compress(backward, map(ne, ops, [None, *ops[:-1]])))
    preds = tasks.preds
    for index in recompute:
        # the op of the last backward task before it began with the last first task before it
        before = bisect.bisect_left(firsts, index)
        if before:
            preds[index].add(firsts[before - 1])


def _optimizer_after_backward(tasks: TaskTable) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """Every optimizer task waits for the whole backward pass. Returns the barrier (sinks,
    waiters) for `TaskGraph.barrier`, None when there is none; the waiters' `preds` are left
    as they are (the barrier is the record of those edges)."""
    phases = tasks.phase
    every = range(len(phases))
    backward = list(compress(every, map(_BACKWARD_PHASES.__contains__, phases)))
    if not backward:
        return None
    # a chain through the last backward task would not order the others; depend on all of
    # them through the sinks of the backward sub-graph instead
    has_backward_succ = set().union(*map(tasks.preds.__getitem__, backward)).intersection(backward)
    sinks = tuple(filterfalse(has_backward_succ.__contains__, backward))
    waiters = tuple(compress(every, map(eq, phases, repeat("optimizer"))))
    return (sinks, waiters) if waiters else None


_BACKWARD_PHASES = frozenset(("backward", "recompute"))
