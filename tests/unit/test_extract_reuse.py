"""What `extract` reuses across the programs of a search (`ExtractCache`: saved forward
prefixes, per-tile templates of fused ops, recorded runs of fused ops, compiled program items)
must not change a graph:
candidates' graphs built by an `Evaluator` (its cache warm, prefixes saved and restored) equal,
field by field and in order, the graphs extracted from the same programs through the general
path with nothing reused (`ExtractCache(reuse=False)`)."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from monet_ir import graph as ir_graph
from monet_ir.explore.evaluate import TILE_CHOICES, Candidate, Evaluator, StepConfig, paging_genes
from monet_ir.schedule.taskgraph import ExtractCache, _FusedRun, _Layout, extract

DATA = Path(__file__).resolve().parents[1] / "data"


def dump(g) -> tuple:
    """Every field of every task and tensor, sets and dicts in their iteration order (the
    scheduler's results follow task order; a signature object's identity groups its prices)."""
    sig_ids: dict[int, int] = {}
    tasks = [(t.index, t.op, t.node, t.phase, t.sig, sig_ids.setdefault(id(t.sig), len(sig_ids)), t.reads, t.writes,
              list(t.preds), t.in_place, t.op_index, list(t.roles.items()), t.page, t.touched_bytes) for t in g.tasks]
    tensors = [(x.id, x.name, x.bytes, x.kind, x.persistent, x.producer, list(x.consumers), x.root) for x in g.tensors]
    return tasks, tensors, repr(g.storage_plan)


def candidates(ev: Evaluator, rng: random.Random, count: int) -> list[Candidate]:
    """Random recompute sets and fused stacks; each fusion comes back with other recompute
    sets (its prefix is saved the second time and restored the third)."""
    pages = paging_genes(ev) if ev.target.storage is not None else []
    out = []
    for i in range(count):
        stacks = tuple(g.spec for g in ev.fusion_genes if rng.random() < 0.6) if i % 3 else ()
        tiles = rng.choice(TILE_CHOICES)
        for _ in range(3):
            recompute = tuple(g.node for g in ev.checkpoint_genes if rng.random() < 0.5)
            c = Candidate(recompute, (), stacks, tiles)
            if pages and rng.random() < 0.5:
                paged = tuple(g.name for g in pages if g.kind == "activation" and g.name not in recompute
                              and rng.random() < 0.5)
                stored = tuple(n for g in pages if g.kind == "tensor" for n in rng.choice(g.values))
                c = dataclasses.replace(c, paged=paged, stored=stored)
            out.append(c)
    return out


@pytest.mark.parametrize("model, target", [
    ("lenet5_b4.onnx", "tpu_like_quad_core"),
    ("gpt2_small_b1.onnx", "tpu_like_quad_core"),
    ("mlp_b4.onnx", "cortex_a_board"),  # paging genes
    ("../../../examples/models/resnet18_b1.onnx", "tpu_like_quad_core"),  # batch norm: its tiles wait for all rows
])
def test_reused_extraction_equals_the_general_path(model, target, monkeypatch):
    replayed = []
    add = _FusedRun.add
    monkeypatch.setattr(_FusedRun, "add", lambda self, *args: replayed.append(self) or add(self, *args))
    ev = Evaluator(StepConfig(str(DATA / "models" / model), target))
    fn = ir_graph.step_function(ev.module)
    rng = random.Random(11)
    checked = 0
    for c in candidates(ev, rng, 8):
        try:
            g = ev.graph(c)
        except Exception as e:  # a candidate the passes refuse is refused both ways
            pytest.fail(f"{c}: {e}")
        paged = stored = None
        if c.pages:
            from monet_ir.analysis.paging_plan import plan_paged

            program = ev.program(*c.graph_key[:3])
            chosen = plan_paged(ev.checkpoint_problem, c.paged)
            paged = [r for item in program if item.phase == "forward" for r in item.results if r in chosen]
            stored = (c.stored, None)
        general = extract(fn, bits=ev.bits, signatures=ev.base_signatures, program=ev.program(*c.graph_key[:3]),
                          cache=ExtractCache(reuse=False), paged=paged, stored=stored)
        assert dump(g) == dump(general), c
        checked += 1
    assert checked == 24
    assert ev._extract_cache.prefixes, "no prefix was saved: the test would not check restoring one"
    if ev.fusion_genes:
        assert ev._extract_cache.templates, "no tile template was used"
        assert replayed, "no recorded run of fused ops was added again"


def test_layout_reads_the_pieces_meeting_the_rows():
    layout = _Layout(2, ((0, 3), (3, 6), (6, 8), (8, 8), (8, 10)))
    assert layout.overlapping(None) == (0, 1, 2, 3, 4)
    assert layout.overlapping((2, (2, 7))) == (0, 1, 2)
    assert layout.overlapping((2, (8, 9))) == (4,)  # the empty piece [8, 8) meets nothing
    assert layout.overlapping((1, (0, 1))) == (0, 1, 2, 3, 4)  # another axis: every piece


def test_paged_values_in_program_order_as_the_report_reads_them():
    """A candidate paging several nodes gets its page tasks in program order, the order in
    which `monet report --checkpoint plan=FILE.json` reads the plan's marks (not a set's)."""
    from monet_ir.explore.evaluate import apply_plan

    ev = Evaluator(StepConfig(str(DATA / "models" / "mlp_b4.onnx"), "cortex_a_board"))
    c = Candidate(paged=("loss", "/Relu"))
    planned = ev.graph(c)
    module = ev.module.clone()
    apply_plan(module, c)
    reported = extract(ir_graph.step_function(module), bits=ev.bits)

    def shape(g):
        return ([(t.op, t.phase, t.reads, t.writes, sorted(t.preds), t.page) for t in g.tasks],
                [(x.name, x.bytes, x.kind, x.producer, x.consumers, x.root) for x in g.tensors])

    pages = [t for t in planned.tasks if t.page == "out"]
    assert len(pages) == 2 and pages[0].reads[0] < pages[1].reads[0]  # /Relu's result, then the loss's
    assert shape(planned) == shape(reported)
