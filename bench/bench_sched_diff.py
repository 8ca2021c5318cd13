"""Differential check of the list scheduler: this checkout's against an older one's, in-process.

    python bench/bench_sched_diff.py --old DIR [--count 40] [--models ...] [--targets ...]

`DIR` is an older checkout (e.g. `git archive main | tar -x -C DIR`); its
`monet_ir/schedule/scheduler.py` and `paging.py` are loaded under other module names and run on
the very task graphs this checkout's evaluator extracts, with the same prices. For each model,
target and seeded random candidate (`bench_explore.random_candidate`, fusion on and off; on a
target with a storage level also random paging decisions) it compares every scheduled task,
every transfer and every memory trace (capacity and sorted events) of the two schedules, the
objectives `Evaluator.evaluate` returns with those of the old schedule, and the error message
when a candidate fails. Prints the number of candidates compared and mismatches per case; exit
status 1 on any mismatch. The old scheduler reads this checkout's task graphs, so `DIR` must
share their meaning: before aabc3fc a barrier's waiters listed every backward sink in their
`preds`, which the old scheduler relies on, and every candidate mismatches against such a
checkout for that reason alone.

    python bench/bench_sched_diff.py --old DIR --time 8 [--count 12] [--models ...] [--targets ...]

times instead: per model, target and kind, CPU ms per schedule and objectives of the old
scheduler (`run()` and the objectives from its `Schedule`) and of this one (`run_summary()`, as
`Evaluator.evaluate` scores), on the same `--count` candidates' graphs (extracted beforehand,
per-graph tables rebuilt in every round as for the new graphs of a search), rounds interleaved,
the minimum over rounds; and the ratio.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import math
import os
import random
import sys
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
SHARED = Path(os.environ.get("MONET_SHARED", REPO.parent / "shared"))
MODELS = {
    "resnet18_b1": REPO / "examples" / "models" / "resnet18_b1.onnx",
    "gpt2_small_b8": SHARED / "models" / "gpt2_small_b8.onnx",
    "lenet5_b4": REPO / "tests" / "data" / "models" / "lenet5_b4.onnx",
    "mlp_b4": REPO / "tests" / "data" / "models" / "mlp_b4.onnx",
    "gpt2_small_b1": REPO / "tests" / "data" / "models" / "gpt2_small_b1.onnx",
}


def load_old(old: Path) -> types.ModuleType:
    """The old scheduler module, its paging hooks bound to the old paging module."""
    paging_src = (old / "monet_ir" / "schedule" / "paging.py").read_text()
    paging = types.ModuleType("old_paging")
    paging.__file__ = str(old / "monet_ir" / "schedule" / "paging.py")
    sys.modules["old_paging"] = paging
    exec(compile(paging_src, paging.__file__, "exec"), paging.__dict__)
    src = (old / "monet_ir" / "schedule" / "scheduler.py").read_text()
    src = src.replace("from monet_ir.schedule.paging import", "from old_paging import")
    module = types.ModuleType("old_scheduler")
    module.__file__ = str(old / "monet_ir" / "schedule" / "scheduler.py")
    sys.modules["old_scheduler"] = module
    exec(compile(src, module.__file__, "exec"), module.__dict__)
    return module


def old_objectives(s):
    """`evaluation_of_schedule` as main computed it before this work (field by field)."""
    from monet_ir.explore.evaluate import Evaluation

    latency = round(s.latency_cycles)
    energy = sum(s.energy_breakdown_pj().values())
    peaks = {name: trace.peak() for name, trace in s.memories.items()}
    fits = all(peaks[name] <= trace.capacity for name, trace in s.memories.items())
    storage = s.target.storage.name if s.target.storage is not None else None
    return Evaluation(latency, energy, sum(v for name, v in peaks.items() if name != storage), fits,
                      tuple(sorted(peaks.items())))


def rows(s):
    return ([dataclasses.astuple(t) for t in s.tasks], [dataclasses.astuple(t) for t in s.transfers],
            {name: (m.capacity, sorted(m.events)) for name, m in s.memories.items()})


def paging_candidate(ev, rng: random.Random, c):
    from monet_ir.explore.evaluate import paging_genes

    genes = paging_genes(ev)
    paged = tuple(g.name for g in genes if g.kind == "activation" and rng.random() < 0.3)
    stored: list[str] = []
    for g in genes:
        if g.kind == "tensor" and rng.random() < 0.3:
            stored.extend(g.values[rng.randrange(len(g.values))])
    return dataclasses.replace(c, paged=paged, stored=tuple(dict.fromkeys(stored)))


def compare(old, ev, c, old_memo) -> str:
    """'' when both schedulers agree on candidate `c`, else what differs."""
    from monet_ir.schedule.mapping import Allocation
    from monet_ir.schedule.scheduler import Scheduler, ScheduleMemo  # noqa: F401

    try:
        g = ev.graph(c)
    except Exception as e:  # noqa: BLE001  (the candidate cannot be built: nothing to schedule)
        return "" if ev.evaluate(c).error else f"graph failed ({e}) but evaluate did not"
    allocation = Allocation(dict(c.allocation), "explore") if c.allocation else None
    can_run, cost_of = ev.prices.functions(g.tasks)
    try:
        before = old.Scheduler(g, ev.target, allocation, cost_of=cost_of, can_run=can_run, memo=old_memo).run()
        before_error = ""
    except Exception as e:  # noqa: BLE001
        before, before_error = None, str(e).strip().splitlines()[0]
    try:
        after = ev.schedule(c)
        after_error = ""
    except Exception as e:  # noqa: BLE001
        after, after_error = None, str(e).strip().splitlines()[0]
    fast = ev.evaluate(c)
    if before is None or after is None:
        if before_error != after_error:
            return f"errors differ: old {before_error!r}, new {after_error!r}"
        if not fast.error or (before_error not in fast.error and not fast.error.startswith("internal")):
            return f"evaluate: {fast.error!r} vs {before_error!r}"
        return ""
    a, b = rows(before), rows(after)
    for what, x, y in zip(("tasks", "transfers", "memories"), a, b, strict=True):
        if x != y:
            if isinstance(x, list):
                i = next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
                return f"{what} differ at {i}: old {x[i] if i < len(x) else None}, new {y[i] if i < len(y) else None}"
            return f"{what} differ"
    want = old_objectives(before)
    if fast != want:
        return f"objectives differ: old {want}, new {fast}"
    return ""


def timing(old, ev, cands, rounds: int) -> tuple[float, float]:
    """(old, new) CPU ms per schedule + objectives, minimum over interleaved rounds."""
    from monet_ir.explore.evaluate import evaluation_of_schedule
    from monet_ir.schedule.mapping import Allocation
    from monet_ir.schedule.scheduler import Scheduler, ScheduleMemo

    jobs = []
    for c in cands:
        if ev.evaluate(c).error:
            continue
        g = ev.graph(c)
        allocation = Allocation(dict(c.allocation), "explore") if c.allocation else None
        jobs.append((g, allocation, *ev.prices.functions(g.tasks)))
    memos = {"old": old.ScheduleMemo(), "new": ScheduleMemo()}

    def run_old(g, allocation, can_run, cost_of):
        s = old.Scheduler(g, ev.target, allocation, cost_of=cost_of, can_run=can_run, memo=memos["old"]).run()
        old_objectives(s)

    def run_new(g, allocation, can_run, cost_of):
        evaluation_of_schedule(Scheduler(g, ev.target, allocation, cost_of=cost_of, can_run=can_run,
                                         memo=memos["new"]).run_summary())

    best = {"old": math.inf, "new": math.inf}
    for r in range(rounds + 1):  # round 0 warms the price memos
        for name, fn in (("old", run_old), ("new", run_new)) if r % 2 else (("new", run_new), ("old", run_old)):
            memos[name].graphs.clear()
            t0 = time.process_time()
            for job in jobs:
                fn(*job)
            if r:
                best[name] = min(best[name], (time.process_time() - t0) / max(1, len(jobs)) * 1e3)
    return best["old"], best["new"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, required=True, metavar="DIR")
    parser.add_argument("--count", type=int, default=40, help="candidates per model, target and kind")
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--targets", nargs="*", default=["tpu_like_quad_core", "hetero_chip", "cortex_a_board"])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--time", type=int, default=0, metavar="ROUNDS", help="time the schedulers instead")
    args = parser.parse_args()
    from bench_explore import random_candidate

    from monet_ir.explore.evaluate import Candidate, Evaluator, StepConfig, tuned_collection

    old = load_old(args.old.resolve())
    bad = 0
    with tuned_collection():
        for name in args.models:
            path = MODELS[name]
            if not path.is_file():
                print(f"{name}: {path} not found, skipped")
                continue
            for target in args.targets:
                t0 = time.perf_counter()
                try:
                    ev = Evaluator(StepConfig(str(path), target))
                except Exception as e:  # noqa: BLE001
                    print(f"{name} on {target}: no evaluator ({str(e).splitlines()[0]}), skipped")
                    continue
                old_memo = old.ScheduleMemo()
                rng = random.Random(args.seed)
                kinds = [("layer by layer", False), ("every gene", True)]
                if ev.target.storage is not None:
                    kinds.append(("paging", None))
                for kind, fusion in kinds:
                    n = mismatches = failed = 0
                    cands = [Candidate()] if fusion is False else []
                    for _ in range(args.count):
                        if fusion is None:
                            cands.append(paging_candidate(ev, rng, random_candidate(ev, rng, fusion=rng.random() < 0.5,
                                                                                     fuse=0.5)))
                        else:
                            cands.append(random_candidate(ev, rng, fusion=fusion, fuse=0.5))
                    if args.time:
                        was, now = timing(old, ev, cands, args.time)
                        tasks = sum(len(ev.graph(c).tasks) for c in cands) / len(cands)
                        print(f"{name} on {target}, {kind} ({tasks:.0f} tasks): old {was:.2f} ms, this {now:.2f} ms "
                              f"per schedule and objectives, ratio {was / now:.2f}x", flush=True)
                        continue
                    # the same graphs again under other allocations (warm tables)
                    cands += [dataclasses.replace(c, allocation=cands[-1].allocation) for c in cands[:3]]
                    for c in cands:
                        why = compare(old, ev, c, old_memo)
                        n += 1
                        failed += bool(ev.evaluate(c).error)
                        if why:
                            mismatches += 1
                            if mismatches <= 3:
                                print(f"  MISMATCH {name} {target} {kind}: {c}\n    {why}")
                    bad += mismatches
                    print(f"{name} on {target}, {kind}: {n} candidates ({failed} failing alike), "
                          f"{mismatches} mismatches  [{time.perf_counter() - t0:.0f} s]", flush=True)
    if not args.time:
        print("zero mismatches" if not bad else f"{bad} MISMATCHES")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
