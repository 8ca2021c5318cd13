"""Speed of `monet explore`'s fitness evaluation, and the time of a 64 x 50 search.

    python bench/bench_explore.py [--target tpu_like_quad_core] [--samples 12] [--search POP GENS]

For ResNet-18 b1 (examples/models) and the small GPT-2 at batch 8 (../shared/models, skipped when
absent), after the cost model has priced every op once (`Evaluator` warm-up):

- cold: a candidate whose recompute set has not been seen: the passes' plans (checkpoint
  rewrite, no IR cloned) + extract + schedule + report, with the time of each stage;
- warm: only the core allocation differs from a seen candidate: the task graph is cached, so
  schedule + report only;
- search: a real NSGA-II run (default 16 x 3) gives the mix of both in a search, in ms per
  evaluation, and the estimate of a 64 x 50 search (64 + 50 x 64 evaluations at most, fewer
  when offspring repeat a genome) on one and on two worker processes.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MODELS = {
    "resnet18_b1": REPO / "examples" / "models" / "resnet18_b1.onnx",
    "gpt2_small_b8": REPO.parent / "shared" / "models" / "gpt2_small_b8.onnx",
}


def random_candidate(ev, rng: random.Random, recompute: bool = True):
    from monet_ir.explore.evaluate import Candidate

    rec = tuple(g.node for g in ev.checkpoint_genes if recompute and rng.random() < 0.5)
    alloc = []
    for g in ev.allocation_genes:
        option = rng.choice(g.options)
        if option is not None:
            alloc.append((g.node, option))
    return Candidate(rec, tuple(alloc))


def bench_model(name: str, path: Path, target: str, samples: int, search: tuple[int, int]) -> None:
    from monet_ir import graph as ir_graph
    from monet_ir.emit.step_report import schedule_report
    from monet_ir.explore import ga
    from monet_ir.explore.evaluate import Candidate, Evaluator, StepConfig
    from monet_ir.schedule.taskgraph import extract

    t0 = time.perf_counter()
    ev = Evaluator(StepConfig(str(path), target))
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    ev.evaluate(Candidate())
    ev.evaluate(Candidate(tuple(g.node for g in ev.checkpoint_genes)))
    warmup = time.perf_counter() - t0
    print(f"{name}: {len(ev.graph(Candidate()).tasks)} tasks; genes {len(ev.checkpoint_genes)} checkpoint, "
          f"{len(ev.allocation_genes)} allocation, {len(ev.fusion_genes)} fusion; build {build:.2f} s, "
          f"first evaluations (cost model) {warmup:.2f} s")
    rng = random.Random(0)
    stages = {"plan": [], "extract": [], "schedule": [], "report": []}
    totals = []
    for _ in range(samples):
        c = random_candidate(ev, rng)
        # the evaluator's own path (what a search runs), then the same stages one by one
        t0 = time.perf_counter()
        ev.evaluate(c)
        totals.append((time.perf_counter() - t0) * 1e3)
        ev._graphs.pop(c.graph_key, None)
        t0 = time.perf_counter()
        program = ev.program(c.recompute)
        t1 = time.perf_counter()
        g = extract(ir_graph.step_function(ev.module), bits=ev.bits, signatures=ev.base_signatures,
                    program=program, cache=ev._extract_cache)
        t2 = time.perf_counter()
        ev._graphs[c.graph_key] = g
        s = ev.schedule(c)
        t3 = time.perf_counter()
        schedule_report(s)
        t4 = time.perf_counter()
        for key, dt in zip(stages, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            stages[key].append(dt * 1e3)
    parts = ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in stages.items())
    print(f"  cold evaluation (new recompute set): median {statistics.median(totals):.1f} ms, "
          f"min {min(totals):.1f} ms  [stages: {parts}]")
    warm = []
    base = random_candidate(ev, rng)
    ev.evaluate(base)
    for _ in range(samples):
        c = Candidate(base.recompute, random_candidate(ev, rng, recompute=False).allocation)
        t0 = time.perf_counter()
        ev.evaluate(c)
        warm.append((time.perf_counter() - t0) * 1e3)
    print(f"  warm evaluation (allocation only): median {statistics.median(warm):.1f} ms, min {min(warm):.1f} ms")
    pop, gens = search
    if pop and gens:
        result = ga.run_search(ev, population=pop, generations=gens, seed=0)
        per = result.eval_seconds / max(1, result.evaluations)
        offspring = result.evaluations / max(1, pop * (gens + 1))
        full = (64 + 50 * 64) * offspring * per
        print(f"  search {pop} x {gens}: {result.evaluations} evaluations in {result.seconds:.1f} s, "
              f"{per * 1e3:.1f} ms per evaluation, {len(result.front)} Pareto points")
        print(f"  estimate of a 64 x 50 search: {(64 + 50 * 64) * offspring:.0f} evaluations, "
              f"{full / 60:.1f} min on 1 job, ~{full / 120:.1f} min on 2 jobs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="tpu_like_quad_core")
    parser.add_argument("--samples", type=int, default=12)
    parser.add_argument("--search", type=int, nargs=2, default=(16, 3), metavar=("POP", "GENS"),
                        help="a real search to measure (0 0 to skip)")
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    args = parser.parse_args()
    for name in args.models:
        path = MODELS[name]
        if not path.is_file():
            print(f"{name}: {path} not found, skipped")
            continue
        bench_model(name, path, args.target, args.samples, tuple(args.search))


if __name__ == "__main__":
    main()
