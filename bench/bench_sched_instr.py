"""Instructions the list scheduler executes, an older checkout's against this one's, counted by
valgrind: on a VM whose CPU speed wanders 1.3-2x from minute to minute, timings of two versions
a few percent apart do not separate; instruction counts do (the same run twice agrees within
0.01%).

    python bench/bench_sched_instr.py --old DIR [--count 8] [--rounds 1] [--models ...] [--kinds ...]

For each model and kind (`layers`: layer by layer, `fused`: every gene), the parent extracts
`--count` seeded random candidates' task graphs on `tpu_like_quad_core` (as
`bench_sched_diff.py`) with each task's prices, and saves them to a temporary file. Then, once
for DIR's `monet_ir/schedule/scheduler.py` (and `paging.py`) and once for this checkout's, a
child process loads them and schedules every graph `--rounds` times (`run_summary`, what a
search scores; per-graph tables rebuilt in every round as for a search's new graphs; prices warm)
under `valgrind --tool=callgrind --collect-atstart=no --toggle-collect=starmap_next`: only those
rounds are counted (they run inside `itertools.starmap`, which nothing else here calls). Prints
instructions per schedule, old and new, and the ratio. Needs valgrind; about a minute per
model, kind and version.
"""

from __future__ import annotations

import argparse
import itertools
import os
import pickle
import random
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))


def load_scheduler(root: Path, tag: str) -> types.ModuleType:
    """`root`'s scheduler module, its paging hooks bound to `root`'s paging module."""
    paging = types.ModuleType(f"paging_{tag}")
    paging.__file__ = str(root / "monet_ir" / "schedule" / "paging.py")
    sys.modules[paging.__name__] = paging
    exec(compile(Path(paging.__file__).read_text(), paging.__file__, "exec"), paging.__dict__)
    module = types.ModuleType(f"scheduler_{tag}")
    module.__file__ = str(root / "monet_ir" / "schedule" / "scheduler.py")
    sys.modules[module.__name__] = module
    src = Path(module.__file__).read_text().replace("from monet_ir.schedule.paging import",
                                                    f"from {paging.__name__} import")
    exec(compile(src, module.__file__, "exec"), module.__dict__)
    return module


def dump(model: Path, fusion: bool, count: int, seed: int, path: Path) -> float:
    """Saves (target, [(graph, allocation, prices)]) for `count` candidates; returns their mean
    task count. Prices: per (signature, core id), whether the core can run it and its cost (or
    the error pricing raised)."""
    from bench_explore import random_candidate

    from monet_ir.cost.signature import Cost
    from monet_ir.explore.evaluate import Evaluator, StepConfig, tuned_collection

    jobs = []
    with tuned_collection():
        ev = Evaluator(StepConfig(str(model), "tpu_like_quad_core"))
        rng = random.Random(seed)
        for _ in range(count):
            c = random_candidate(ev, rng, fusion=fusion, fuse=0.5)
            if ev.evaluate(c).error:
                continue
            g = ev.graph(c)
            can_run, cost_of = ev.prices.functions(g.tasks)
            prices = []
            for sig in {id(t.sig): t.sig for t in g.tasks if t.sig is not None}.values():
                for core in ev.target.cores:
                    runs = can_run(sig, core)
                    cost = None
                    if runs:
                        try:
                            c0 = cost_of(sig, core)
                            # (a Cost's breakdown is a read-only view, which does not pickle)
                            cost = Cost(c0.latency_cycles, c0.energy_pj, dict(c0.breakdown_pj), c0.mem_bytes, c0.core,
                                        c0.utilization, c0.mapping, c0.dram_bytes)
                        except Exception as e:  # noqa: BLE001  (replayed as raised)
                            cost = e
                    prices.append((sig, core.id, runs, cost))
            jobs.append((g, dict(c.allocation) if c.allocation else None, prices))
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(100_000)  # (a task graph pickles deep)
        try:
            path.write_bytes(pickle.dumps((ev.target, jobs)))
        finally:
            sys.setrecursionlimit(limit)
    return sum(len(j[0].tasks) for j in jobs) / max(1, len(jobs))


def child(root: Path, path: Path, rounds: int) -> None:
    """Schedules the saved graphs: once to warm the price memo, then `rounds` times inside
    `itertools.starmap` (what valgrind counts)."""
    from monet_ir.explore.evaluate import tuned_collection
    from monet_ir.schedule.mapping import Allocation

    module = load_scheduler(root, "measured")
    sys.setrecursionlimit(100_000)
    target, jobs = pickle.loads(path.read_bytes())
    prepared = []
    for g, allocation, prices in jobs:
        table = {(id(sig), core): (runs, cost) for sig, core, runs, cost in prices}

        def can_run(sig, core, table=table):
            return table[(id(sig), core.id)][0]

        def cost_of(sig, core, table=table):
            cost = table[(id(sig), core.id)][1]
            if isinstance(cost, Exception):
                raise cost
            return cost

        prepared.append((g, Allocation(allocation, "explore") if allocation else None, can_run, cost_of))
    with tuned_collection():
        memo = module.ScheduleMemo()

        def one_round():
            memo.graphs.clear()
            for g, allocation, can_run, cost_of in prepared:
                module.Scheduler(g, target, allocation, cost_of=cost_of, can_run=can_run, memo=memo).run_summary()

        one_round()
        list(itertools.starmap(one_round, [()] * rounds))
    print(len(prepared))


def count(root: Path, path: Path, rounds: int) -> tuple[int, int]:
    """(instructions counted, graphs scheduled per round) for `root`'s scheduler."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        proc = subprocess.run(
            ["valgrind", "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=starmap_next",
             f"--callgrind-out-file={out}", sys.executable, __file__, "--child", str(root), str(path), str(rounds)],
            capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
        if proc.returncode:
            raise SystemExit(f"valgrind run failed for {root}:\n{proc.stderr[-2000:]}")
        collected = [line for line in proc.stderr.splitlines() if "Collected :" in line]
        if not collected:
            raise SystemExit(f"valgrind printed no count for {root}:\n{proc.stderr[-2000:]}")
        return int(collected[-1].split("Collected :")[1].replace(",", "")), int(proc.stdout.split()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]))
        return
    from bench_sched_diff import MODELS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, required=True, metavar="DIR")
    parser.add_argument("--count", type=int, default=8, help="candidates per model and kind")
    parser.add_argument("--rounds", type=int, default=1, help="counted rounds over the graphs")
    parser.add_argument("--models", nargs="*", default=["gpt2_small_b8", "resnet18_b1"])
    parser.add_argument("--kinds", nargs="*", default=["layers", "fused"], choices=["layers", "fused"])
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("bench_sched_instr: valgrind not found (apt-get install valgrind)")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            model = MODELS[name]
            if not model.is_file():
                print(f"{name}: {model} not found, skipped")
                continue
            for kind in args.kinds:
                path = Path(tmp) / f"{name}-{kind}.pkl"
                tasks = dump(model, kind == "fused", args.count, args.seed, path)
                (old, graphs), (new, _) = count(args.old.resolve(), path, args.rounds), count(REPO, path, args.rounds)
                per = max(1, graphs * args.rounds)
                print(f"{name}, {'every gene' if kind == 'fused' else 'layer by layer'} ({graphs} graphs, {tasks:.0f} tasks): "
                      f"old {old / per / 1e6:.2f}M, this {new / per / 1e6:.2f}M instructions per schedule, "
                      f"ratio {old / max(1, new):.3f}x", flush=True)


if __name__ == "__main__":
    main()
