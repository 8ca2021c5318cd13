"""The search's fast path, `Scheduler.run_summary` (no `ScheduledTask`/`Transfer` objects), gives
exactly the latency, energy by part and memory peaks of the full `Schedule` of the same candidate,
and `Evaluator.evaluate` (which uses it) the objectives of the candidate's report."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from monet_ir.emit.step_report import schedule_report
from monet_ir.explore.evaluate import Candidate, Evaluator, StepConfig, evaluation_of, evaluation_of_schedule, paging_genes

DATA = Path(__file__).resolve().parents[1] / "data" / "models"


def _candidates(ev: Evaluator, count: int, seed: int, paging: bool) -> list[Candidate]:
    rng = random.Random(seed)
    genes = paging_genes(ev) if paging else []
    out = [Candidate()]
    for _ in range(count):
        rec = tuple(g.node for g in ev.checkpoint_genes if rng.random() < 0.5)
        alloc = tuple((g.node, o) for g in ev.allocation_genes if (o := rng.choice(g.options)) is not None)
        fusion = tuple(g.spec for g in ev.fusion_genes if rng.random() < 0.5)
        c = Candidate(rec, alloc, fusion, rng.choice((0, 2, 4)) if fusion else 0)
        if genes:
            paged = tuple(g.name for g in genes if g.kind == "activation" and rng.random() < 0.5)
            stored = tuple(dict.fromkeys(n for g in genes if g.kind == "tensor" and rng.random() < 0.5
                                         for n in g.values[-1]))
            c = dataclasses.replace(c, paged=paged, stored=stored)
        out.append(c)
    return out


@pytest.mark.parametrize("model,target", [("lenet5_b4.onnx", "tpu_like_quad_core"), ("mlp_b4.onnx", "hetero_chip"),
                                          ("mlp_b4.onnx", "cortex_a_board")])
def test_summary_equals_full_schedule(model, target):
    ev = Evaluator(StepConfig(str(DATA / model), target))
    paging = ev.target.storage is not None
    pages = 0
    for c in _candidates(ev, 5, seed=len(model), paging=paging):
        full = ev.schedule(c)
        summary = ev.schedule(c, summary=True)
        pages += any(tr.resource.startswith("storage") for tr in full.transfers)
        assert summary.latency_cycles == full.latency_cycles
        # same floating-point sums, bit for bit (`==` on floats: no tolerance)
        assert summary.energy_breakdown_pj() == full.energy_breakdown_pj()
        assert summary.peaks() == full.peaks()
        want = evaluation_of(schedule_report(full, layers=False))
        assert evaluation_of_schedule(summary) == evaluation_of_schedule(full) == want
        assert ev.evaluate(c) == want
    assert pages or not paging  # the paging candidates do page
