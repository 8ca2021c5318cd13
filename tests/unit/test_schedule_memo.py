"""Speed paths of `monet explore`'s evaluator give what the plain paths give: a `ScheduleMemo`
shared across schedules (prices per signature and cores, per-graph tables) changes no scheduled
task or transfer, and the objectives taken straight from a schedule equal those of its report."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from monet_ir.emit.step_report import schedule_report
from monet_ir.explore.evaluate import Candidate, Evaluator, StepConfig, evaluation_of, evaluation_of_schedule
from monet_ir.schedule.mapping import Allocation
from monet_ir.schedule.scheduler import Scheduler, ScheduleMemo

DATA = Path(__file__).resolve().parents[1] / "data" / "models"


def _candidates(ev: Evaluator, count: int, seed: int) -> list[Candidate]:
    rng = random.Random(seed)
    out = [Candidate()]
    for _ in range(count):
        rec = tuple(g.node for g in ev.checkpoint_genes if rng.random() < 0.5)
        alloc = tuple((g.node, o) for g in ev.allocation_genes if (o := rng.choice(g.options)) is not None)
        fusion = tuple(g.spec for g in ev.fusion_genes if rng.random() < 0.6)
        out.append(Candidate(rec, alloc, fusion, rng.choice((0, 2, 4)) if fusion else 0))
    # the same graph again under other allocations: the memo's per-graph tables are reused
    out += [dataclasses.replace(c, allocation=out[-1].allocation) for c in out[1:4]]
    return out


def _rows(s):
    return ([dataclasses.astuple(t) for t in s.tasks], [dataclasses.astuple(t) for t in s.transfers],
            {name: (m.capacity, sorted(m.events)) for name, m in s.memories.items()})


@pytest.mark.parametrize("model", ["lenet5_b4.onnx", "mlp_b4.onnx"])
def test_memo_and_direct_objectives_change_nothing(model):
    ev = Evaluator(StepConfig(str(DATA / model), "tpu_like_quad_core"))
    memo = ScheduleMemo()
    for c in _candidates(ev, 6, seed=len(model)):
        g = ev.graph(c)
        allocation = Allocation(dict(c.allocation), "test") if c.allocation else None
        can_run, cost_of = ev.prices.functions(g.tasks)
        plain = Scheduler(g, ev.target, allocation, cost_of=cost_of, can_run=can_run).run()
        memoized = Scheduler(g, ev.target, allocation, cost_of=cost_of, can_run=can_run, memo=memo).run()
        assert _rows(memoized) == _rows(plain)
        assert evaluation_of_schedule(memoized) == evaluation_of(schedule_report(plain, layers=False))
        assert ev.evaluate(c) == evaluation_of(schedule_report(plain, layers=False))
    assert memo.prices and memo.graphs


def test_fusion_plan_memo_gives_the_same_plan():
    """`FuseLayersPass.plan` with a memo kept across stack lists (the explorer's) plans the same
    stacks, tiles and attributes as without, and refuses a bad stack with the same message."""
    from xdsl.utils.exceptions import PassFailedException

    from monet_ir import graph as ir_graph
    from passes.fuse_layers import FuseLayersPass

    ev = Evaluator(StepConfig(str(DATA / "lenet5_b4.onnx"), "tpu_like_quad_core"))
    ops = list(ir_graph.compute_ops(ir_graph.step_function(ev.module)))
    specs = [g.spec for g in ev.fusion_genes]
    assert specs
    memo: dict = {}
    rng = random.Random(5)
    for _ in range(8):
        chosen = tuple(s for s in specs if rng.random() < 0.6) or tuple(specs[:1])
        tiles = rng.choice((0, 2, 3, 16))
        fuse = FuseLayersPass(mode="explicit", tiles=tiles, target="tpu_like_quad_core", stacks=chosen)
        assert fuse.plan(ops, memo) == fuse.plan(ops)
    bad = FuseLayersPass(mode="explicit", target="tpu_like_quad_core", stacks=(specs[0], "nope:nothing"))
    messages = []
    for kwargs in ({}, {"memo": memo}):
        with pytest.raises(PassFailedException) as e:
            bad.plan(ops, **kwargs)
        messages.append(str(e.value))
    assert messages[0] == messages[1]
