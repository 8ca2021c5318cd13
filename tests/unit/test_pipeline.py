"""Pipeline parallelism: the balanced cut into stage functions joined by send/recv, the GPipe
and 1F1B schedules (bubble, activations in flight), and the step on a system."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from xdsl.context import Context

from monet_ir import graph
from monet_ir.analysis.accounting import flops_by_phase
from monet_ir.parallel.pipeline import in_flight, run_parallel, simulate, stage_order
from monet_ir.parallel.plan import Plan
from monet_ir.parallel.stages import linear_partition, stage_functions
from passes.parallelize import ParallelizePass
from targets.system import get_system

from test_parallel import MODELS, _training_step


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p,m", [(2, 1), (4, 4), (4, 8), (8, 3), (8, 32), (3, 5)])
def test_bubble_of_balanced_stages(schedule, p, m):
    t = simulate([1.5] * p, [3.0] * p, [0.0] * p, [0.0] * p, m, schedule)
    assert t.bubble_fraction == pytest.approx((p - 1) / (m + p - 1), rel=1e-12)
    assert t.makespan == pytest.approx((m + p - 1) * 4.5)


def test_communication_and_imbalance_add_to_the_bubble():
    p, m = 4, 8
    base = simulate([1.0] * p, [2.0] * p, [0.0] * p, [0.0] * p, m, "1f1b")
    slow = simulate([1.0] * p, [2.0] * p, [0.3] * p, [0.3] * p, m, "1f1b")
    skew = simulate([1.0, 1.0, 2.0, 1.0], [2.0, 2.0, 4.0, 2.0], [0.0] * p, [0.0] * p, m, "1f1b")
    assert slow.makespan > base.makespan and slow.bubble_fraction > base.bubble_fraction
    # the slowest stage paces the pipe: it is busy m * 6, starts after two forwards of 1 and ends
    # before two backwards of 2
    assert m * 6.0 + 2 * 1.0 + 2 * 2.0 <= skew.makespan < m * 6.0 + 3 * 3.0
    assert skew.bubble_fraction > base.bubble_fraction


@pytest.mark.parametrize("p,m", [(4, 2), (4, 8), (8, 8)])
def test_1f1b_keeps_at_most_p_minus_s_microbatches(p, m):
    for s in range(p):
        order = stage_order(s, p, m, "1f1b")
        assert sorted(order) == sorted([("F", i) for i in range(m)] + [("B", i) for i in range(m)])
        live = peak = 0
        for kind, _ in order:
            live += 1 if kind == "F" else -1
            peak = max(peak, live)
        assert peak == in_flight(s, p, m, "1f1b") == min(m, p - s)
        assert in_flight(s, p, m, "gpipe") == m


def test_linear_partition_is_optimal():
    costs = [5.0, 1.0, 1.0, 7.0, 2.0, 2.0, 3.0, 1.0, 4.0]
    for parts in (1, 2, 3, 4, 9):
        starts = linear_partition(costs, parts)
        assert len(starts) == parts and starts[0] == 0 and starts == sorted(set(starts))
        got = max(sum(costs[a:b]) for a, b in zip(starts, starts[1:] + [len(costs)]))
        best = min(max(sum(costs[a:b]) for a, b in zip((0, *cut), (*cut, len(costs))))
                   for cut in itertools.combinations(range(1, len(costs)), parts - 1))
        assert got == pytest.approx(best)


def split(path: Path, pp: int, **options):
    module = _training_step(str(path)).clone()
    ParallelizePass(pp=pp, **options).apply(Context(), module)
    module.verify()
    return module


@pytest.mark.parametrize("pp", [2, 4])
def test_stages_keep_every_op_once_and_pair_sends_with_recvs(pp):
    path = MODELS / "gpt2_small_b1.onnx"
    whole = graph.step_function(_training_step(str(path)))
    module = split(path, pp)
    fns = stage_functions(module)
    assert len(fns) == pp
    total = {phase: {"matmul_conv": 0, "other": 0} for phase in ("forward", "backward", "optimizer", "recompute")}
    sends, recvs = {}, {}
    for s, fn in enumerate(fns):
        for phase, row in flops_by_phase(fn).items():
            for key in row:
                total[phase][key] += row[key]
        for op in graph.compute_ops(fn):
            if op.name == "collective.send":
                sends[(s, op.peer.value.data)] = sends.get((s, op.peer.value.data), []) + [op.input.type]
                total[graph.op_phase(op)]["other"] -= flops_by_phase_of(op)
            elif op.name == "collective.recv":
                recvs[(op.peer.value.data, s)] = recvs.get((op.peer.value.data, s), []) + [op.output.type]
                total[graph.op_phase(op)]["other"] -= flops_by_phase_of(op)
    assert total["forward"]["matmul_conv"] == flops_by_phase(whole)["forward"]["matmul_conv"]
    assert total["backward"]["matmul_conv"] == flops_by_phase(whole)["backward"]["matmul_conv"]
    assert total["optimizer"] == flops_by_phase(whole)["optimizer"]
    assert {k: sorted(map(str, v)) for k, v in sends.items()} == {k: sorted(map(str, v)) for k, v in recvs.items()}
    assert any(a < b for a, b in sends) and any(a > b for a, b in sends)  # activations, and their gradients back
    # every trainable parameter is updated by exactly one stage
    updated = [op.param for fn in fns for op in graph.compute_ops(fn) if op.name.startswith("train.")]
    names = [graph.arg_infos(op.parent_block().parent_op())[p.index].name for fn in fns
             for op in graph.compute_ops(fn) if op.name.startswith("train.") for p in [op.param]]
    assert len(names) == len(set(names)) == len(updated)


def flops_by_phase_of(op) -> int:
    from monet_ir.analysis.accounting import op_flops

    return op_flops(op)["other"]


def test_pipeline_step_on_a_system():
    path = MODELS / "gpt2_small_b1.onnx"
    system = get_system("8x_datacenter")
    runs = {}
    for schedule in ("gpipe", "1f1b"):
        plan = Plan(dp=2, pp=4, microbatches=8, schedule=schedule)
        module = split(path, 4, dp=2)
        runs[schedule] = run_parallel(module, system, plan, bits=16, schedule=schedule)
    gp, ofob = runs["gpipe"], runs["1f1b"]
    for r in (gp, ofob):
        assert r.latency_cycles >= r.no_comm_latency_cycles
        assert 0 < r.bubble_fraction < 1
        assert r.p2p_bytes > 0
        assert len(r.stages) == 4
    # activations per stage follow the schedule: GPipe holds all 8 micro-batches, 1F1B p - s
    for s in range(4):
        per_mb = gp.stage_memory[s]["activation_bytes"] / 8
        assert ofob.stage_memory[s]["activation_bytes"] == per_mb * min(8, 4 - s)
    assert ofob.memory["total_bytes"] < gp.memory["total_bytes"]


def test_pipeline_report_cli(tmp_path):
    from monet_ir.tools.monet import main

    out = tmp_path / "pp"
    with pytest.raises(SystemExit) as code:
        main(["report", str(MODELS / "gpt2_small_b1.onnx"), "--system", "2x2_edge_npu", "--parallel",
              "pp=4,microbatches=4,schedule=gpipe", "--out", str(out)])
    assert code.value.code == 0
    report = json.loads((out / "report.json").read_text())
    assert report["plan"]["pp"] == 4 and report["plan"]["schedule"] == "gpipe"
    assert len(report["memory_per_stage"]) == 4
    assert all(s["microbatches_in_flight"] == 4 for s in report["memory_per_stage"])
    assert report["communication"]["pipeline_bytes"] > 0
    assert 0 < report["bubble_fraction"] < 1
    trace = json.loads((out / "trace.json").read_text())
    names = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
    assert {"stage0", "stage3"} <= names
