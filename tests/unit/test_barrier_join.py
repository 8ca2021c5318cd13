"""The optimizer barrier (`TaskGraph.barrier`): recorded once instead of as sinks x waiters
edges in the waiters' `preds`, joined into one node in the scheduler's tables (`GraphTables`);
schedules, critical paths and re-timed parallel steps are the ones the explicit edges give."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from xdsl.context import Context

from monet_ir import import_onnx
from monet_ir.cost.signature import Cost, VectorSig
from monet_ir.graph import step_function
from monet_ir.schedule.scheduler import GraphTables, Scheduler, schedule
from monet_ir.schedule.taskgraph import Task, TaskGraph, TensorInfo, extract
from passes.autodiff import AutodiffPass
from passes.insert_optimizer import InsertOptimizerPass
from targets import get_target

DATA = Path(__file__).resolve().parents[1] / "data"
TARGET = DATA / "stream_hw" / "tpu_like_quad_core.yaml"


def _rows(s):
    return ([(t.task, t.core, t.start, t.end, t.energy_pj) for t in s.tasks],
            [(t.tensor, t.src, t.dst, t.start, t.end, t.resource, t.reason) for t in s.transfers],
            {name: sorted(trace.events) for name, trace in s.memories.items()})


def _tie_graph(barrier) -> TaskGraph:
    """Backward sinks 0 and 3 (3 ends last, both on one core); the optimizer task 1 waits at the
    barrier and task 2 reads 3's result: 3's end readies 1 and 2 at the same time. `barrier`
    is the record (by hand here), or None."""
    tensors = [TensorInfo(0, "x", 16, "input", False, None, [0, 3], 0)]

    def out(name: str, producer: int, consumers: list[int]) -> int:
        tid = len(tensors)
        tensors.append(TensorInfo(tid, name, 16, "activation", False, producer, consumers, tid))
        return tid

    g0, g3 = out("g0", 0, [1]), out("g3", 3, [1, 2])
    w, y = out("w", 1, []), out("y", 2, [])
    # a signature per task (its cycles, `_on_core0`)
    sig = [VectorSig("elementwise", 16 + i, bytes_read=16, bytes_written=16) for i in range(4)]
    tasks = [
        Task(0, "a", "a", "backward", sig[0], (0,), (g0,), set()),
        Task(1, "adam", "adam", "optimizer", sig[1], (g0, g3), (w,), {0, 3}),
        Task(2, "late", "late", "other", sig[2], (g3,), (y,), {3}),
        Task(3, "b", "b", "backward", sig[3], (0,), (g3,), set()),
    ]
    return TaskGraph(tasks, tensors, None, barrier)


def _on_core0(graph: TaskGraph):
    """Every task on core 0, with cycles 10, 7, 5, 3 by index."""
    target = get_target(str(TARGET))
    costs = {t.sig: Cost(cycles, 1.0) for t, cycles in zip(graph.tasks, (10.0, 7.0, 5.0, 3.0), strict=True)}
    return Scheduler(graph, target, lambda task: (0,), lambda sig, core: costs[sig], lambda sig, core: True).run()


def test_join_keeps_the_order_of_ties():
    joined = _tie_graph(((0, 3), (1,)))
    tables = GraphTables(joined)
    assert tables.succ[0] == [-1] and sorted(tables.succ[3]) == [-1, 2]  # the sinks feed the join
    assert tables.succ[-1] == [1] and tables.indegree[1] == 1 and tables.indegree[-1] == 2
    s = _on_core0(joined)
    plain = _on_core0(_tie_graph(None))
    assert _rows(s) == _rows(plain)
    by_task = {t.task: t for t in s.tasks}
    # sink 3 ends last and readies both; the waiter (index 1) takes the core before task 2:
    # equal ready times pop by index, and the join pops before both
    assert by_task[0].end < by_task[3].end == by_task[1].start < by_task[2].start


def test_a_waiter_waits_for_sinks_it_does_not_read():
    # task 2 reads only sink 3's result; the record makes it wait for sink 0 too
    graph = _tie_graph(((0, 3), (1, 2)))
    assert graph.predecessors(2) == {0, 3} and graph.tasks[2].preds == {3}
    tables = GraphTables(graph)
    assert tables.succ[-1] == [1, 2] and tables.indegree[2] == 1 and 2 not in tables.succ[3]
    explicit = _tie_graph(None)
    explicit.tasks[2].preds.add(0)
    assert _rows(_on_core0(graph)) == _rows(_on_core0(explicit))


def _explicit(graph: TaskGraph) -> TaskGraph:
    """The graph with the barrier written out as an edge per (sink, waiter), no record."""
    tasks = [dataclasses.replace(t.as_task(), preds=graph.predecessors(t.index) | set()) for t in graph.tasks]
    return dataclasses.replace(graph, tasks=tasks, barrier=None)


def _lenet_step_graph():
    module = import_onnx(DATA / "models" / "lenet5_b4.onnx")
    AutodiffPass().apply(Context(), module)
    InsertOptimizerPass(kind="adam").apply(Context(), module)
    return extract(step_function(module), bits=8)


def test_extracted_steps_schedule_as_with_explicit_edges():
    graph = _lenet_step_graph()
    sinks, waiters = graph.barrier
    assert waiters == tuple(t.index for t in graph.tasks if t.phase == "optimizer")
    # a waiter's preds are its own (data, in-place order), never the whole set of sinks
    assert all(not set(sinks) <= graph.tasks[w].preds for w in waiters)
    assert all(set(sinks) <= graph.predecessors(w) for w in waiters)
    tables = GraphTables(graph)
    direct = sum(len(graph.tasks[w].preds - set(sinks)) for w in waiters)
    others = sum(len(t.preds) for t in graph.tasks if t.index not in set(waiters))
    assert sum(map(len, tables.succ)) == others + direct + len(sinks) + len(waiters)
    target = get_target(str(TARGET))
    joined, explicit = schedule(graph, target), schedule(_explicit(graph), target)
    assert _rows(joined) == _rows(explicit)
    from monet_ir.emit.step_report import critical_path_cycles

    assert critical_path_cycles(joined) == critical_path_cycles(explicit) > 0
