"""Scheduling invariants on real training steps (MLP, LeNet, ResNet-18) on Stream's
tpu_like_quad_core (a copy in tests/data/stream_hw)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from xdsl.context import Context

from monet_ir import import_onnx
from monet_ir.emit.step_report import schedule_report
from monet_ir.graph import step_function
from monet_ir.schedule.scheduler import DRAM, ScheduleError, schedule
from monet_ir.schedule.taskgraph import extract
from passes.autodiff import AutodiffPass
from passes.insert_optimizer import InsertOptimizerPass
from targets import get_target

DATA = Path(__file__).resolve().parents[1] / "data"
REPO = DATA.parents[1]
SYSTEM = DATA / "stream_hw" / "tpu_like_quad_core.yaml"


def training_step(path: Path):
    module = import_onnx(path)
    AutodiffPass().apply(Context(), module)
    InsertOptimizerPass(kind="adam").apply(Context(), module)
    return module


@pytest.fixture(scope="module", params=["mlp_b4", "lenet5_b4", "resnet18_b1"])
def scheduled(request):
    path = REPO / "examples" / "models" / "resnet18_b1.onnx" if request.param == "resnet18_b1" \
        else DATA / "models" / f"{request.param}.onnx"
    module = training_step(path)
    graph = extract(step_function(module), bits=8)
    target = get_target(str(SYSTEM))
    return graph, target, schedule(graph, target)


def test_latency_bounds(scheduled):
    graph, target, s = scheduled
    durations = {t.task: t.end - t.start for t in s.tasks}
    # a task never starts before its predecessors end, so the makespan covers every path
    for t in s.tasks:
        for p in graph.predecessors(t.task):  # (the optimizer barrier's sinks included)
            assert s.tasks[p].end <= t.start + 1e-6
    longest: dict[int, float] = {}
    for task in graph.tasks:
        longest[task.index] = durations[task.index] + max((longest[p] for p in graph.predecessors(task.index)),
                                                          default=0.0)
    assert s.latency_cycles >= max(longest.values()) - 1e-6
    busy: dict[int, float] = {}
    for t in s.tasks:
        busy[t.core] = busy.get(t.core, 0.0) + durations[t.task]
    assert all(s.latency_cycles >= b - 1e-6 for b in busy.values())
    # tasks on one core never overlap
    by_core: dict[int, list] = {}
    for t in s.tasks:
        if t.end > t.start:
            by_core.setdefault(t.core, []).append((t.start, t.end))
    for spans in by_core.values():
        spans.sort()
        assert all(a[1] <= b[0] + 1e-6 for a, b in zip(spans, spans[1:]))


def test_energy_is_the_sum_of_its_parts(scheduled):
    _, _, s = scheduled
    report = schedule_report(s)
    assert report["energy_pj"] == pytest.approx(sum(report["energy_breakdown_pj"].values()), rel=1e-12)
    ops = sum(t.energy_pj for t in s.tasks)
    transfers = sum(t.energy_pj for t in s.transfers)
    assert report["energy_pj"] == pytest.approx(ops + transfers, rel=1e-9)


def test_memory_holds_the_training_state_and_everything_is_freed(scheduled):
    graph, target, s = scheduled
    persistent = sum(t.bytes for t in graph.tensors if t.persistent and t.root == t.id)
    grads = sum(t.bytes for t in graph.tensors if t.kind == "gradient" and t.root == t.id
                and any(graph.tasks[c].phase == "optimizer" for c in t.consumers))
    peaks = {name: trace.peak() for name, trace in s.memories.items()}
    assert sum(peaks.values()) >= persistent + grads
    for name, trace in s.memories.items():
        final = trace.timeline()[-1][1] if trace.events else 0
        if name == target.dram.name:
            inputs = sum(t.bytes for t in graph.tensors if t.producer is None and t.root == t.id)
            consts = sum(t.bytes for t in graph.tensors if t.kind == "const")
            assert final == inputs + consts  # parameters, state, the batch and constants stay
        else:
            assert final == 0, name
            assert peaks[name] <= trace.capacity, name


def test_transfers_respect_their_resources(scheduled):
    _, _, s = scheduled
    by_resource: dict[str, list] = {}
    for tr in s.transfers:
        assert tr.end >= tr.start and tr.bytes > 0
        by_resource.setdefault(tr.resource, []).append((tr.start, tr.end))
    for spans in by_resource.values():
        spans.sort()
        assert all(a[1] <= b[0] + 1e-6 for a, b in zip(spans, spans[1:]))
    assert any(tr.src == DRAM for tr in s.transfers)


def test_optimizer_runs_after_the_whole_backward(scheduled):
    graph, _, s = scheduled
    last_backward = max(t.end for t in s.tasks if graph.tasks[t.task].phase == "backward")
    first_optimizer = min(t.start for t in s.tasks if graph.tasks[t.task].phase == "optimizer")
    assert first_optimizer >= last_backward - 1e-6


def test_too_little_dram_is_a_clear_error():
    import dataclasses

    module = training_step(DATA / "models" / "mlp_b4.onnx")
    target = get_target(str(SYSTEM))
    small = dataclasses.replace(target, dram=dataclasses.replace(target.dram, capacity_bytes=100_000))
    with pytest.raises(ScheduleError, match=r"DRAM '.*' holds 100000 bytes, the training step needs \d+ bytes"):
        schedule(extract(step_function(module), bits=8), small)


def test_no_core_able_to_run_an_op_is_a_clear_error():
    import dataclasses

    module = training_step(DATA / "models" / "mlp_b4.onnx")
    target = get_target(str(SYSTEM))
    arrays_only = dataclasses.replace(target, cores=target.cores[:4])
    with pytest.raises(ScheduleError, match="no core of target 'tpu_like_quad_core' can run nn.relu"):
        schedule(extract(step_function(module), bits=8), arrays_only)


def test_identical_inputs_give_identical_reports(tmp_path):
    from monet_ir.tools.monet import main

    outs = []
    for run in ("a", "b"):
        out = tmp_path / run
        with pytest.raises(SystemExit) as done:
            main(["report", str(DATA / "models" / "lenet5_b4.onnx"), "--target", str(SYSTEM), "--precision", "int8",
                  "--out", str(out), "--no-plots"])
        assert done.value.code == 0
        outs.append((out / "report.json").read_bytes())
        trace = json.loads((out / "trace.json").read_text())
        assert trace["traceEvents"]
    assert outs[0] == outs[1]
    report = json.loads(outs[0])
    assert report["latency_s"] == pytest.approx(report["latency_cycles"] / report["frequency_hz"], rel=1e-5)
    assert {"forward", "backward", "optimizer", "recompute"} == set(report["phases"])
    assert all(set(row) >= {"name", "phase", "core", "start_cycle", "latency_cycles", "energy_pj"} for row in report["layers"])


def test_allocation_file_pins_ops(tmp_path):
    from monet_ir.schedule.mapping import load_allocation

    alloc = tmp_path / "alloc.yaml"
    alloc.write_text("- name: default\n  core_allocation: [0, 1, 2, 3, 4, 5]\n- name: Gemm\n  core_allocation: [2]\n"
                     "- name: Relu\n  core_allocation: [5]\n- name: optimizer\n  core_allocation: [5]\n")
    module = training_step(DATA / "models" / "mlp_b4.onnx")
    graph = extract(step_function(module), bits=8)
    target = get_target(str(SYSTEM))
    s = schedule(graph, target, load_allocation(str(alloc)))
    for t in s.tasks:
        task = graph.tasks[t.task]
        if task.op in ("nn.gemm", "grad.matmul_lhs", "grad.matmul_rhs"):
            assert t.core == 2
        if task.phase == "optimizer" or task.op in ("nn.relu", "grad.relu"):
            assert t.core == 5
